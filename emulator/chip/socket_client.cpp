#include "emulator/chip/socket_client.hpp"

#include <algorithm>
#include <cstring>

#include "emulator/chip/address_space.hpp"

namespace ttemu::chip {

using session::SocketEndpoint;

namespace {
CommandRequest socket_command(routing::Command c, const SocketEndpoint& e, int ep) {
  CommandRequest r;
  r.command = c;
  // Sends and closes keep their order in the socket's FVC; opens and pokes have none.
  r.fvc = c == routing::Command::kSocketData || c == routing::Command::kSocketClose ? static_cast<int8_t>(e.fvc) : -1;
  r.plane = e.plane;
  r.dst_addr = static_cast<uint64_t>(ep);
  r.arg = e.generation.load(std::memory_order_relaxed);  // which claim of the endpoint the command is for
  return r;
}
}  // namespace

SocketEndpoint* SocketClient::endpoint(int ep) const {
  if (ep < 0 || ep >= session::kSocketEndpoints) return nullptr;
  SocketEndpoint& e = ctl_.sockets[ep];
  const auto state = e.state.load(std::memory_order_acquire);
  return state != session::kSocketFree && e.core == core_ ? &e : nullptr;
}

int SocketClient::streaming_fvc(const Options& o, int self) const {
  // Reservable: data FVCs 1 .. data_fvcs-1 (FVC 0 stays shared, so RDMA and DSockets always
  // have a way); each carries one of this chip's outgoing SSockets at a time (spec 2.4.2).
  const int n = std::min<int>(static_cast<int>(ctl_.data_fvcs), kMaxReservableFvcs);
  uint32_t held = 0;
  for (int i = 0; i < session::kSocketEndpoints; ++i) {
    const SocketEndpoint& e = ctl_.sockets[i];
    const auto state = e.state.load(std::memory_order_acquire);
    if (i != self && e.type == session::kSSocket && e.direction == session::kSocketSend && state >= session::kSocketOpening &&
        state <= session::kSocketConnected && e.fvc < 32) {
      held |= 1u << e.fvc;
    }
  }
  if (o.fvc != kAutoFvc) return o.fvc >= 1 && o.fvc < n && !(held >> o.fvc & 1u) ? o.fvc : -1;
  for (int v = 1; v < n; ++v) {
    if (!(held >> v & 1u)) return v;
  }
  return -1;
}

int SocketClient::open(const Options& o) {
  if (o.type != session::kDSocket && o.type != session::kSSocket) return session::kSocketOpenError;
  if (o.direction == session::kSocketReceive) {
    if (o.l1cb_size < routing::kMaxPacketPayload) return kStatusBadSize;  // a packet must fit
    if (mem_(o.l1cb_addr, o.l1cb_size).size() != o.l1cb_size) return kStatusBadAddress;
    if (o.dscb_size > 0 && o.dscb_size < routing::kMaxPacketPayload) return kStatusBadSize;
    if (o.dscb_size > 0 && mem_(o.dscb_addr, o.dscb_size).size() != o.dscb_size) return kStatusBadAddress;
  }
  for (int i = 0; i < session::kSocketEndpoints; ++i) {
    SocketEndpoint& e = ctl_.sockets[i];
    uint32_t free = session::kSocketFree;
    if (!e.state.compare_exchange_strong(free, session::kSocketClaimed, std::memory_order_acq_rel)) continue;
    e.status.store(session::kSocketOk, std::memory_order_relaxed);
    e.generation.fetch_add(1, std::memory_order_relaxed);
    e.socket_id = o.socket_id;
    e.epoch = o.epoch;
    e.type = o.type;
    e.direction = o.direction;
    e.handshake = o.handshake;
    e.fvc = o.fvc;
    e.plane = o.plane;
    e.core = core_;
    e.owner.store(owner_, std::memory_order_relaxed);
    e.remote_mesh = o.remote_mesh;
    e.remote_device = o.remote_device;
    e.peer_endpoint = 0;
    e.group_size = o.direction == session::kSocketSend ? std::min<uint16_t>(o.group_size, session::kMaxGroup) : 0;
    std::copy(std::begin(o.group), std::end(o.group), std::begin(e.group));
    e.l1cb_addr = o.l1cb_addr;
    e.l1cb_size = o.l1cb_size;
    e.dscb_addr = o.dscb_addr;
    e.dscb_size = o.dscb_size;
    if (o.direction == session::kSocketReceive && o.dscb_each > 0 && o.dscb_size == 0 &&
        o.dscb_top >= static_cast<uint64_t>(i + 1) * o.dscb_each) {
      e.dscb_addr = kDramBit | (o.dscb_top - static_cast<uint64_t>(i + 1) * o.dscb_each);
      e.dscb_size = o.dscb_each;
    }
    e.l1_head.store(0, std::memory_order_relaxed);
    e.l1_tail.store(0, std::memory_order_relaxed);
    e.dscb_head = e.dscb_tail = e.received = e.credit_given = 0;
    e.wants_poke.store(0, std::memory_order_relaxed);
    e.spilled.store(0, std::memory_order_relaxed);
    e.backed_up.store(0, std::memory_order_relaxed);
    e.queued.store(0, std::memory_order_relaxed);
    e.sent.store(0, std::memory_order_relaxed);
    e.credit_limit.store(0, std::memory_order_relaxed);
    if (o.type == session::kSSocket && o.direction == session::kSocketSend) {
      // Its FVC, once claimed: two workers opening at once see each other's claims.
      e.state.store(session::kSocketOpening, std::memory_order_seq_cst);
      const int fvc = streaming_fvc(o, i);
      if (fvc < 0) {
        session::free_endpoint(e);
        return session::kSocketOpenError;  // every reservable FVC is bound
      }
      e.fvc = static_cast<uint8_t>(fvc);
    } else if (o.fvc == kAutoFvc) {
      e.fvc = 0;
    }
    e.state.store(session::kSocketOpening, std::memory_order_release);
    if (!commands_.try_submit(socket_command(routing::Command::kSocketOpen, e, i))) {
      // Nothing queued; but a sender's open arriving meanwhile may have connected it already.
      uint32_t opening = session::kSocketOpening;
      e.owner.store(0, std::memory_order_relaxed);  // (as free_endpoint does)
      if (e.state.compare_exchange_strong(opening, session::kSocketFree, std::memory_order_acq_rel)) return session::kSocketNoCredits;
      e.owner.store(owner_, std::memory_order_relaxed);
    }
    return i;
  }
  return session::kSocketOpenError;
}

bool SocketClient::try_send(int ep, uint64_t src_addr, uint32_t size) {
  SocketEndpoint* e = endpoint(ep);
  if (!e) return false;
  CommandRequest r = socket_command(routing::Command::kSocketData, *e, ep);
  r.src_addr = src_addr;
  r.size = size;
  if (!commands_.try_submit(r)) return false;
  e->queued.fetch_add(size, std::memory_order_relaxed);
  return true;
}

uint64_t SocketClient::sent(int ep) const {
  const SocketEndpoint* e = endpoint(ep);
  return e ? e->sent.load(std::memory_order_acquire) : 0;
}

uint64_t SocketClient::queued(int ep) const {
  const SocketEndpoint* e = endpoint(ep);
  return e ? e->queued.load(std::memory_order_relaxed) : 0;
}

uint64_t SocketClient::readable(int ep) const {
  const SocketEndpoint* e = endpoint(ep);
  return e ? e->l1_head.load(std::memory_order_acquire) - e->l1_tail.load(std::memory_order_relaxed) : 0;
}

size_t SocketClient::recv(int ep, std::span<uint8_t> out) {
  SocketEndpoint* e = endpoint(ep);
  if (!e || e->direction != session::kSocketReceive) return 0;
  uint64_t tail = e->l1_tail.load(std::memory_order_relaxed);
  const uint64_t head = e->l1_head.load(std::memory_order_acquire);
  const size_t n = static_cast<size_t>(std::min<uint64_t>(head - tail, out.size()));
  session::ring_pieces(e->l1cb_size, tail, n, [&](uint32_t at, size_t k, size_t done) {
    std::memcpy(out.data() + done, mem_(e->l1cb_addr + at, k).data(), k);
    return true;
  });
  if (n > 0) {
    e->l1_tail.store(tail + n, std::memory_order_seq_cst);
    // The chip asked to hear when room is made (its DSCB or the fabric holds more, or its
    // credits follow reads): a flag on the endpoint and a count it watches, and its doorbell
    // if it sleeps; never a command slot, which could wait behind other commands.
    if (e->wants_poke.load(std::memory_order_seq_cst)) {
      e->poked.store(1, std::memory_order_seq_cst);
      ctl_.commands.socket_pokes.fetch_add(1, std::memory_order_seq_cst);
      commands_.notify();
    }
  }
  return n;
}

bool SocketClient::try_close(int ep, uint64_t status_addr) {
  SocketEndpoint* e = endpoint(ep);
  if (!e) return false;
  CommandRequest r = socket_command(routing::Command::kSocketClose, *e, ep);
  r.status_addr = status_addr;
  return commands_.try_submit(r);
}

void SocketClient::release(int ep) {
  SocketEndpoint* e = endpoint(ep);
  if (!e) return;
  session::free_endpoint(*e);
}

}  // namespace ttemu::chip
