// The socket API of spec section 4 (tt_fabric.h): checks a call, then drives the worker's
// side of sockets (chip/socket_client.hpp) and waits, where the call blocks, on the endpoint's
// futex words, which the chip's session layer bumps (it wakes only sleepers that said so).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "emulator/chip/address_space.hpp"
#include "emulator/common/futex.hpp"
#include "libfabric_tt/tt_fabric.h"
#include "libfabric_tt/tt_fabric_internal.hpp"

using namespace ttemu;
using ttemu::client::chip_alive;
using ttemu::client::lookup;

static_assert(int{TT_FABRIC_EEPOCH} == int{session::kSocketEpochMismatch} &&
              int{TT_FABRIC_ENOENDPOINT} == int{session::kSocketNoEndpoint} &&
              int{TT_FABRIC_ENOCREDITS} == int{session::kSocketNoCredits} &&
              int{TT_FABRIC_ECLOSED} == int{session::kSocketClosedStatus} &&
              int{TT_FABRIC_ELOST} == int{session::kSocketDataLost} &&
              int{TT_FABRIC_ESOCKETOPEN} == int{session::kSocketOpenError});
static_assert(int{TT_FABRIC_ENOPERM} < int{session::kSocketOpenError});  // (a library-only code)
static_assert(int{TT_FABRIC_SOCKET_CONNECTED} == int{session::kSocketConnected} &&
              int{TT_FABRIC_SOCKET_BROKEN} == int{session::kSocketBroken});

namespace {

constexpr uint32_t kDefaultL1cb = 64 << 10;  // per slot, at the top of the worker's core L1
constexpr int kDefaultL1cbSlots = 8;
constexpr uint32_t kDefaultDscb = 256 << 10;  // per endpoint, at the top of DRAM

// Waits until done() holds, sleeping on `word` between looks; false when the limit passed or
// the chip died first.
template <class Done>
bool wait_on(tt_fabric* f, session::SocketEndpoint& e, std::atomic<uint32_t>& word, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + f->limit;
  for (int spin = 0;; ++spin) {
    if (done()) return true;
    if (spin < 2000) continue;  // a short, bounded spin while data flows
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline || !chip_alive(f)) return false;
    e.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = word.load(std::memory_order_seq_cst);
    if (!done()) futex_wait(word, v, std::min<std::chrono::nanoseconds>(deadline - now, std::chrono::milliseconds(100)));
    e.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

// Sleeps until the router serves a command (a slot may be free), at most 100 ms; false when
// the chip died.
bool wait_for_slot(tt_fabric* f) {
  if (!chip_alive(f)) return false;
  f->commands->wait_for_slot(std::chrono::milliseconds(100));
  return true;
}

// The worker's endpoint for `socket`, or null with *why: TT_FABRIC_ENOPERM when another worker
// of this chip holds it, TT_FABRIC_ENOENDPOINT when nobody does (or it is not a handle).
session::SocketEndpoint* own(tt_fabric* f, int socket, int* why) {
  session::SocketEndpoint* e = f->sockets->endpoint(socket);
  if (e) return e;
  const bool held = socket >= 0 && socket < session::kSocketEndpoints &&
                    f->block->sockets[socket].state.load(std::memory_order_acquire) != session::kSocketFree;
  *why = held ? TT_FABRIC_ENOPERM : TT_FABRIC_ENOENDPOINT;
  return nullptr;
}

bool ended(uint32_t state) { return state != session::kSocketOpening && state != session::kSocketConnected; }

int error_of(const session::SocketEndpoint& e) {
  const int32_t s = e.status.load(std::memory_order_acquire);
  const auto state = e.state.load(std::memory_order_acquire);
  if (state == session::kSocketBroken) return s != 0 ? s : TT_FABRIC_ELOST;
  if (state == session::kSocketClosed || state == session::kSocketPeerClosed) return TT_FABRIC_ECLOSED;
  return TT_FABRIC_OK;
}

}  // namespace

extern "C" {

int fabric_socket_open_with(tt_fabric* handle, uint8_t plane, uint32_t epoch, uint32_t socket_id, int type,
                            int direction, tt_fabric_device remote, int fvc, const tt_fabric_socket_options* options) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  const bool multicast = type == (TT_FABRIC_SSOCKET | TT_FABRIC_MULTICAST);
  if (multicast) type = TT_FABRIC_SSOCKET;
  if (type != TT_FABRIC_DSOCKET && type != TT_FABRIC_SSOCKET) return TT_FABRIC_EARG;
  if (direction != TT_FABRIC_SEND && direction != TT_FABRIC_RECEIVE) return TT_FABRIC_EARG;
  if (plane >= f->planes) return TT_FABRIC_EPLANE;
  if (fvc < -1 || fvc >= f->data_fvcs) return TT_FABRIC_EFVC;
  // An SSocket binds a reservable FVC (1 .. data FVCs - 1): FVC 0 stays shared.
  if (type == TT_FABRIC_SSOCKET && direction == TT_FABRIC_SEND && fvc == 0) return TT_FABRIC_EFVC;
  const bool any = direction == TT_FABRIC_RECEIVE && remote.mesh == TT_FABRIC_ANY && remote.device == TT_FABRIC_ANY;
  if (!any && !f->targets.contains({remote.mesh, remote.device})) return TT_FABRIC_EDEVICE;
  const tt_fabric_socket_options defaults{TT_FABRIC_END_TO_END, 0, 0, 0, 0, {}};
  const tt_fabric_socket_options& o = options ? *options : defaults;
  if (o.handshake != TT_FABRIC_END_TO_END && o.handshake != TT_FABRIC_LOCAL_HANDSHAKE) return TT_FABRIC_EARG;

  chip::SocketClient::Options so;
  so.socket_id = socket_id;
  so.epoch = epoch;
  so.type = type == TT_FABRIC_SSOCKET ? session::kSSocket : session::kDSocket;
  so.direction = static_cast<uint8_t>(direction);
  so.handshake = static_cast<uint8_t>(o.handshake);
  so.fvc = fvc < 0 ? chip::SocketClient::kAutoFvc : static_cast<uint8_t>(fvc);
  so.plane = plane;
  so.remote_mesh = any ? session::kAnyDevice : remote.mesh;
  so.remote_device = any ? session::kAnyDevice : remote.device;
  if (multicast) {
    if (direction != TT_FABRIC_SEND) return TT_FABRIC_EARG;  // receivers open plain SSockets from the sender
    // The group: the devices of the origin's mesh within the depths (fabric_async_write_multicast's).
    const auto& origin = f->targets.at({remote.mesh, remote.device});
    const auto* d = o.mcast_depth;
    for (const auto& [key, t] : f->targets) {
      const int dr = t.row - origin.row, dc = t.col - origin.col;
      if (key.first != remote.mesh || dr < -d[2] || dr > d[3] || dc < -d[1] || dc > d[0]) continue;
      if (so.group_size == session::kMaxGroup) return TT_FABRIC_EARG;  // more receivers than a socket serves
      so.group[so.group_size++] = key.second;
    }
  }
  int slot = -1;
  if (direction == TT_FABRIC_RECEIVE) {
    so.l1cb_addr = o.l1cb_addr;
    so.l1cb_size = o.l1cb_size;
    if (o.l1cb_size == 0) {  // a default slot at the top of this worker's core L1
      for (int k = 0; k < kDefaultL1cbSlots && slot < 0; ++k) {
        if (std::find(f->l1cb_slot.begin(), f->l1cb_slot.end(), k) == f->l1cb_slot.end()) slot = k;
      }
      if (slot < 0 || f->tensix_l1 < (kDefaultL1cbSlots + 1) * uint64_t{kDefaultL1cb}) return TT_FABRIC_ESOCKETOPEN;
      so.l1cb_addr = uint64_t{f->core} * f->tensix_l1 + f->tensix_l1 - static_cast<uint64_t>(slot + 1) * kDefaultL1cb;
      so.l1cb_size = kDefaultL1cb;
    }
    so.dscb_addr = o.dscb_addr;
    so.dscb_size = o.dscb_size;
  }
  if (direction == TT_FABRIC_RECEIVE && o.handshake == TT_FABRIC_END_TO_END && o.dscb_size == 0) {
    // The default DSCB: one per endpoint of the chip, at the top of DRAM, filled in with the
    // rest before the endpoint shows as opening.
    so.dscb_top = f->dram.size();
    so.dscb_each = kDefaultDscb;
  }
  const int ep = f->sockets->open(so);
  if (ep >= 0 && slot >= 0) f->l1cb_slot[static_cast<size_t>(ep)] = static_cast<int8_t>(slot);
  if (ep == session::kSocketNoCredits) return f->nonblocking ? TT_FABRIC_EAGAIN : TT_FABRIC_ETIMEDOUT;
  return ep;
}

int fabric_socket_open(tt_fabric* handle, uint8_t plane, uint32_t epoch, uint32_t socket_id, int type, int direction,
                       tt_fabric_device remote, int fvc) {
  return fabric_socket_open_with(handle, plane, epoch, socket_id, type, direction, remote, fvc, nullptr);
}

int fabric_socket_connect(tt_fabric* handle, int socket) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  int why = 0;
  session::SocketEndpoint* e = own(f, socket, &why);
  if (!e) return why;
  auto connected = [e] { return e->state.load(std::memory_order_acquire) != session::kSocketOpening; };
  if (f->nonblocking ? !connected() : !wait_on(f, *e, e->state, connected)) {
    if (!chip_alive(f)) return TT_FABRIC_ECHIPDOWN;
    const int hint = e->status.load(std::memory_order_acquire);
    return f->nonblocking ? TT_FABRIC_EAGAIN : hint == TT_FABRIC_EEPOCH ? TT_FABRIC_EEPOCH : TT_FABRIC_ETIMEDOUT;
  }
  return error_of(*e);
}

int fabric_socket_send(tt_fabric* handle, int socket, uint64_t src_addr, uint32_t size) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  int why = 0;
  session::SocketEndpoint* e = own(f, socket, &why);
  if (!e) return why;
  if (e->direction != session::kSocketSend) return TT_FABRIC_ENOENDPOINT;
  if (size == 0 || size > TT_FABRIC_MAX_SIZE) return TT_FABRIC_ESIZE;
  if (client::memory(f, src_addr, size).size() != size) return TT_FABRIC_EADDR;
  const auto state = e->state.load(std::memory_order_acquire);
  if (state == session::kSocketOpening) return TT_FABRIC_EARG;  // connect first
  if (state != session::kSocketConnected) return error_of(*e);
  const uint64_t queued = e->queued.load(std::memory_order_relaxed);
  // Non-blocking, end to end: nothing more is queued while every byte the consumer has room
  // for already is (the DTU's NO_CREDITS); local handshake has no credits to run out of.
  if (f->nonblocking && queued >= e->credit_limit.load(std::memory_order_acquire)) return TT_FABRIC_ENOCREDITS;
  const uint64_t target = queued + size;
  while (!f->sockets->try_send(socket, src_addr, size)) {
    if (f->nonblocking) return TT_FABRIC_EAGAIN;
    if (!wait_for_slot(f)) return TT_FABRIC_ECHIPDOWN;
  }
  if (f->nonblocking) return TT_FABRIC_OK;
  // Blocking: until the fabric has taken every byte (end-to-end: as credits come).
  const bool done = wait_on(f, *e, e->sent_word, [e, target] {
    return e->sent.load(std::memory_order_acquire) >= target || ended(e->state.load(std::memory_order_acquire));
  });
  if (e->sent.load(std::memory_order_acquire) >= target) return TT_FABRIC_OK;
  if (!done) return chip_alive(f) ? TT_FABRIC_ETIMEDOUT : TT_FABRIC_ECHIPDOWN;
  return error_of(*e);
}

int64_t fabric_socket_recv(tt_fabric* handle, int socket, void* out, size_t max) {
  tt_fabric* f = lookup(handle);
  if (!f || (!out && max > 0)) return TT_FABRIC_EARG;
  int why = 0;
  session::SocketEndpoint* e = own(f, socket, &why);
  if (!e) return why;
  if (e->direction != session::kSocketReceive) return TT_FABRIC_ENOENDPOINT;
  auto some = [f, socket, e] {
    return f->sockets->readable(socket) > 0 || ended(e->state.load(std::memory_order_acquire));
  };
  if (f->nonblocking ? !some() : !wait_on(f, *e, e->arrivals, some)) {
    if (!chip_alive(f)) return TT_FABRIC_ECHIPDOWN;
    return f->nonblocking ? TT_FABRIC_EAGAIN : TT_FABRIC_ETIMEDOUT;
  }
  const size_t n = f->sockets->recv(socket, {static_cast<uint8_t*>(out), max});
  if (n > 0 || max == 0) return static_cast<int64_t>(n);
  const auto state = e->state.load(std::memory_order_acquire);
  if (state == session::kSocketPeerClosed) return 0;  // the end of the stream: everything was read
  return error_of(*e);
}

int fabric_socket_info(tt_fabric* handle, int socket, tt_fabric_socket_info* info) {
  tt_fabric* f = lookup(handle);
  if (!f || !info) return TT_FABRIC_EARG;
  int why = 0;
  session::SocketEndpoint* e = own(f, socket, &why);
  if (!e) return why;
  *info = {};
  info->state = static_cast<int32_t>(e->state.load(std::memory_order_acquire));
  info->status = e->status.load(std::memory_order_acquire);
  info->readable = f->sockets->readable(socket);
  info->spilled = e->spilled.load(std::memory_order_relaxed);
  info->backed_up = e->backed_up.load(std::memory_order_relaxed);
  info->queued = e->queued.load(std::memory_order_relaxed);
  info->sent = e->sent.load(std::memory_order_acquire);
  return TT_FABRIC_OK;
}

int fabric_socket_close(tt_fabric* handle, int socket, tt_fabric_status* status) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  int why = 0;
  session::SocketEndpoint* e = own(f, socket, &why);
  if (!e) return why;
  const int fvc = e->fvc;
  // The chip closes it (behind a sender's data); the wait is short but bounded, blocking or not.
  int rc = TT_FABRIC_OK;
  while (!f->sockets->try_close(socket, 0)) {
    if (!wait_for_slot(f)) {
      rc = TT_FABRIC_ECHIPDOWN;
      break;
    }
  }
  if (rc == TT_FABRIC_OK &&
      !wait_on(f, *e, e->state, [e] { return e->state.load(std::memory_order_acquire) == session::kSocketClosed; })) {
    rc = chip_alive(f) ? TT_FABRIC_ETIMEDOUT : TT_FABRIC_ECHIPDOWN;
  }
  f->sockets->release(socket);
  f->l1cb_slot[static_cast<size_t>(socket)] = -1;
  if (status) *status = {rc, rc == TT_FABRIC_OK ? fvc : -1};
  return rc;
}

}  // extern "C"
