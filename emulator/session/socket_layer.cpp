#include "emulator/session/socket_layer.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "emulator/common/futex.hpp"

namespace ttemu::session {

using routing::Command;
using routing::PacketHeader;
using routing::SocketTag;

static_assert(routing::kSocketTypeStreaming == kSSocket);

namespace {

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

void wake(SocketEndpoint& e, std::atomic<uint32_t>& word) {
  word.fetch_add(1, std::memory_order_seq_cst);
  if (e.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(word);
}

void set_state(SocketEndpoint& e, SocketState s) {
  e.state.store(s, std::memory_order_seq_cst);
  futex_wake(e.state);  // connect and close wait on it; rare, so always
}

uint64_t dscb_fill(const SocketEndpoint& e) { return e.dscb_head - e.dscb_tail; }
uint64_t l1_room(const SocketEndpoint& e) {
  return e.l1cb_size - (e.l1_head.load(std::memory_order_relaxed) - e.l1_tail.load(std::memory_order_acquire));
}

}  // namespace

const char* to_string(SocketState s) {
  switch (s) {
    case kSocketFree: return "free";
    case kSocketClaimed: return "claimed";
    case kSocketOpening: return "opening";
    case kSocketConnected: return "connected";
    case kSocketPeerClosed: return "peer_closed";
    case kSocketClosed: return "closed";
    case kSocketBroken: return "broken";
  }
  return "?";
}

SocketLayer::SocketLayer(ChipId self, int data_fvcs, std::span<SocketEndpoint> table, Center::Memory memory,
                         BufferPool& buffers)
    : self_(self),
      control_fvc_(static_cast<uint8_t>(data_fvcs)),
      table_(table),
      mem_(std::move(memory)),
      buffers_(buffers),
      reserved_(table.size(), 0),
      close_pending_(table.size(), 0),
      peers_(table.size()) {}

Packet SocketLayer::make(Command c, ChipId to, uint8_t fvc) const {
  Packet p;
  auto& h = p.header;
  h.src_mesh = self_.mesh;
  h.src_device = self_.device;
  h.dst_mesh = to.mesh;
  h.dst_device = to.device;
  h.command = c;
  h.fvc = fvc;
  h.txn_id = routing::kSocketTxn;
  p.bytes = buffers_.take();
  return p;
}

void SocketLayer::reply(const PacketHeader& h, Command c, uint64_t value, uint16_t receiver, Out& out) const {
  Packet p = make(c, h.src(), control_fvc_);
  SocketTag tag = SocketTag::unpack(h.return_addr);
  tag.receiver = receiver;
  p.header.arg = h.arg;
  p.header.return_addr = tag.pack();
  p.header.dst_addr = value;
  p.header.src_core = tag.sender;
  p.header.plane = h.plane;
  out.answers.push_back(std::move(p));
}

void SocketLayer::open(uint16_t ep, Out& out) {
  SocketEndpoint* e = endpoint(ep);
  if (!e || e->state.load(std::memory_order_acquire) != kSocketOpening) return;
  reserved_[ep] = 0;
  close_pending_[ep] = 0;
  if (e->direction == kSocketSend) {
    // An open to each receiver: one, or each device of a multicast group.
    auto& peers = peers_[ep];
    peers.clear();
    if (e->group_size == 0) peers.push_back({{e->remote_mesh, e->remote_device}});
    for (uint16_t k = 0; k < std::min<uint16_t>(e->group_size, kMaxGroup); ++k) peers.push_back({{e->remote_mesh, e->group[k]}});
    for (const Peer& peer : peers) {
      Packet p = make(Command::kSocketOpen, peer.chip, control_fvc_);
      p.header.arg = e->socket_id;
      p.header.return_addr = SocketTag{e->epoch, ep, 0}.pack();
      p.header.wrap = static_cast<uint8_t>(e->type | e->handshake << 4);
      // An SSocket's open reserves its FVC at every router on the way (FabricRouter).
      if (e->type == kSSocket) p.header.dst_addr = e->fvc;
      p.header.src_core = ep;
      p.header.plane = e->plane;
      out.requests.push_back(std::move(p));
    }
    return;
  }
  // A receiver: the first sender already waiting that it matches (its epoch, its socket id);
  // senders waiting for this socket id in other epochs hear that it is ready for another.
  bool connected = false;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    bool other_epoch = false;
    if (!connected && match(*it, other_epoch) == ep) {
      const PacketHeader h = *it;
      it = waiting_.erase(it);
      connect(ep, h, out);
      connected = true;
      continue;
    }
    if (it->arg == e->socket_id && SocketTag::unpack(it->return_addr).epoch != e->epoch) {
      reply(*it, Command::kSocketReject, static_cast<uint32_t>(kSocketEpochMismatch), 0, out);
    }
    ++it;
  }
}

int SocketLayer::match(const PacketHeader& h, bool& other_epoch) const {
  const SocketTag tag = SocketTag::unpack(h.return_addr);
  for (size_t i = 0; i < table_.size(); ++i) {
    const SocketEndpoint& e = table_[i];
    const auto state = e.state.load(std::memory_order_acquire);
    if (e.direction != kSocketReceive || e.socket_id != h.arg) continue;
    if (state != kSocketOpening && state != kSocketConnected) continue;
    if (e.epoch != tag.epoch) {
      other_epoch = true;
      continue;
    }
    const bool from_it = e.remote_mesh == kAnyDevice || (e.remote_mesh == h.src_mesh && e.remote_device == h.src_device);
    if (state == kSocketOpening && e.type == (h.wrap & 0xF) && from_it) return static_cast<int>(i);
  }
  return -1;
}

uint64_t SocketLayer::credit_limit(const SocketEndpoint& e) const {
  if (e.handshake != kEndToEnd) return kUnlimited;
  // Credits count DSCB space (2.4.4): what is in flight plus what the DSCB holds never exceeds
  // it, so an arrival always finds room. Without a DSCB, L1CB's space.
  if (e.dscb_size > 0) return e.received - dscb_fill(e) + e.dscb_size;
  return e.l1_tail.load(std::memory_order_acquire) + e.l1cb_size;
}

void SocketLayer::connect(uint16_t ep, const PacketHeader& open, Out& out) {
  SocketEndpoint& e = table_[ep];
  const SocketTag tag = SocketTag::unpack(open.return_addr);
  e.peer_endpoint = tag.sender;
  e.remote_mesh = open.src_mesh;
  e.remote_device = open.src_device;
  e.received = 0;
  e.dscb_head = e.dscb_tail = 0;
  e.credit_given = credit_limit(e);
  reserved_[ep] = 0;
  close_pending_[ep] = 0;
  // End-to-end without a DSCB, credits follow consumption: the owner pokes after each read.
  e.wants_poke.store(e.handshake == kEndToEnd && e.dscb_size == 0 ? 1 : 0, std::memory_order_relaxed);
  set_state(e, kSocketConnected);
  reply(open, Command::kSocketAccept, e.credit_given, ep, out);
}

SocketEndpoint* SocketLayer::receiver_of(const PacketHeader& h, int32_t& why) const {
  const SocketTag tag = SocketTag::unpack(h.return_addr);
  why = kSocketNoEndpoint;
  if (tag.receiver >= table_.size()) return nullptr;
  SocketEndpoint& e = table_[tag.receiver];
  const auto state = e.state.load(std::memory_order_acquire);
  if (e.direction != kSocketReceive || e.socket_id != h.arg || e.peer_endpoint != tag.sender ||
      e.remote_mesh != h.src_mesh || e.remote_device != h.src_device) {
    return nullptr;
  }
  if (state != kSocketConnected || close_pending_[tag.receiver]) {
    why = kSocketClosedStatus;
    return nullptr;
  }
  if (e.epoch != tag.epoch) {
    why = kSocketEpochMismatch;
    return nullptr;
  }
  return &e;
}

bool SocketLayer::accepts(const PacketHeader& h) {
  int32_t why = 0;
  SocketEndpoint* e = receiver_of(h, why);
  if (!e) return true;  // refused on delivery, with the reason
  const auto ep = SocketTag::unpack(h.return_addr).receiver;
  // Room for every admitted packet not yet placed, and this one (placed in order after them).
  const uint64_t need = reserved_[ep] + h.size;
  auto fits = [&] { return (dscb_fill(*e) == 0 && l1_room(*e) >= need) || (e->dscb_size - dscb_fill(*e) >= need); };
  if (!fits()) {
    // Ask to hear of room first, then look again: a worker that consumed in between either
    // sees the request (and pokes) or made the room this second look finds.
    e->wants_poke.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!fits()) {
      e->backed_up.store(1, std::memory_order_relaxed);
      return false;
    }
  }
  reserved_[ep] = need;
  return true;
}

bool SocketLayer::ring_put(uint64_t base, uint32_t size, uint64_t pos, std::span<const uint8_t> data) const {
  return ring_pieces(size, pos, data.size(), [&](uint32_t at, size_t k, size_t done) {
    auto dst = mem_(base + at, k);
    if (dst.size() != k) return false;
    std::memcpy(dst.data(), data.data() + done, k);
    return true;
  });
}

bool SocketLayer::ring_get(uint64_t base, uint32_t size, uint64_t pos, std::span<uint8_t> out) const {
  return ring_pieces(size, pos, out.size(), [&](uint32_t at, size_t k, size_t done) {
    auto src = mem_(base + at, k);
    if (src.size() != k) return false;
    std::memcpy(out.data() + done, src.data(), k);
    return true;
  });
}

void SocketLayer::arrived(SocketEndpoint& e) { wake(e, e.arrivals); }

void SocketLayer::break_endpoint(uint16_t ep, int32_t status) {
  SocketEndpoint* e = endpoint(ep);
  if (!e) return;
  e->status.store(status, std::memory_order_relaxed);
  set_state(*e, kSocketBroken);
  wake(*e, e->arrivals);
  wake(*e, e->sent_word);
}

void SocketLayer::peers_unreachable(const std::function<bool(ChipId)>& reachable) {
  std::erase_if(waiting_, [&](const PacketHeader& open) { return !reachable(open.src()); });
  for (uint16_t ep = 0; ep < table_.size(); ++ep) {
    const SocketEndpoint& e = table_[ep];
    const auto state = e.state.load(std::memory_order_acquire);
    if (state != kSocketOpening && state != kSocketConnected) continue;
    bool lost = false;
    if (e.direction == kSocketSend) {
      for (const Peer& p : peers_[ep]) lost = lost || !reachable(p.chip);
    } else if (state == kSocketConnected) {  // (an opening receiver has no sender yet)
      lost = !reachable(ChipId{e.remote_mesh, e.remote_device});
    }
    if (lost) break_endpoint(ep, kSocketDataLost);
  }
}

void SocketLayer::on_data(Packet& p, Out& out) {
  const PacketHeader& h = p.header;
  const auto ep = SocketTag::unpack(h.return_addr).receiver;
  int32_t why = 0;
  SocketEndpoint* e = receiver_of(h, why);
  if (!e) {
    reply(h, Command::kSocketReject, static_cast<uint32_t>(why), ep, out);
    return;
  }
  reserved_[ep] -= std::min<uint64_t>(reserved_[ep], h.size);
  e->backed_up.store(0, std::memory_order_relaxed);
  const auto payload = p.payload();
  bool placed = false;
  if (h.dst_addr == e->received) {
    if (dscb_fill(*e) == 0 && l1_room(*e) >= payload.size()) {
      placed = ring_put(e->l1cb_addr, e->l1cb_size, e->l1_head.load(std::memory_order_relaxed), payload);
      if (placed) e->l1_head.fetch_add(payload.size(), std::memory_order_release);
    } else if (e->dscb_size - dscb_fill(*e) >= payload.size()) {
      // L1CB is full (or the DSCB holds older data): this goes behind it, in DRAM.
      placed = ring_put(e->dscb_addr, e->dscb_size, e->dscb_head, payload);
      if (placed) {
        e->dscb_head += payload.size();
        e->spilled.fetch_add(payload.size(), std::memory_order_relaxed);
        e->wants_poke.store(1, std::memory_order_seq_cst);
        dirty_.set(ep);
      }
    }
  }
  if (!placed) {
    // A gap in the stream (the fabric dropped a packet) or no room where room was promised:
    // the stream is broken, and both ends hear it.
    break_endpoint(ep, kSocketDataLost);
    reply(h, Command::kSocketReject, static_cast<uint32_t>(kSocketDataLost), ep, out);
    return;
  }
  e->received += payload.size();
  arrived(*e);
  grant(ep, false, out);
}

void SocketLayer::on_close(const PacketHeader& h, Out& out) {
  uint16_t ep = SocketTag::unpack(h.return_addr).receiver;
  int32_t why = 0;
  SocketEndpoint* e = receiver_of(h, why);
  if (!e) {
    // A close sent before the sender heard the accept names no receiver endpoint: the one
    // connected with that sender (chip, endpoint, socket id, epoch) is closed all the same.
    const auto tag = SocketTag::unpack(h.return_addr);
    for (size_t i = 0; i < table_.size() && !e; ++i) {
      SocketEndpoint& r = table_[i];
      if (r.direction == kSocketReceive && r.state.load(std::memory_order_acquire) == kSocketConnected &&
          r.socket_id == h.arg && r.epoch == tag.epoch && r.peer_endpoint == tag.sender && r.remote_mesh == h.src_mesh &&
          r.remote_device == h.src_device && !close_pending_[i]) {
        e = &r;
        ep = static_cast<uint16_t>(i);
      }
    }
  }
  if (!e) {
    // A sender that closed before any receiver took it: its open waits here no more.
    const auto tag = SocketTag::unpack(h.return_addr);
    std::erase_if(waiting_, [&](const PacketHeader& o) {
      return o.src_mesh == h.src_mesh && o.src_device == h.src_device && o.arg == h.arg &&
             SocketTag::unpack(o.return_addr).sender == tag.sender;
    });
    return;  // otherwise closed here too, or never ours: nothing to tell
  }
  if (h.dst_addr != e->received) {
    break_endpoint(ep, kSocketDataLost);
    reply(h, Command::kSocketReject, static_cast<uint32_t>(kSocketDataLost), ep, out);
    return;
  }
  // Closed once the DSCB has gone into L1CB: until then the owner still has data coming.
  close_pending_[ep] = 1;
  dirty_.set(ep);
}

void SocketLayer::update_limit(SocketEndpoint& e, uint16_t ep) {
  uint64_t least = kUnlimited;
  for (const Peer& p : peers_[ep]) least = std::min(least, p.accepted ? p.limit : 0);
  e.credit_limit.store(least, std::memory_order_release);
}

void SocketLayer::on_answer(const PacketHeader& h) {
  const SocketTag tag = SocketTag::unpack(h.return_addr);
  SocketEndpoint* e = endpoint(tag.sender);
  if (!e || e->direction != kSocketSend || e->socket_id != h.arg || e->epoch != tag.epoch) {
    return;  // for an endpoint closed (and perhaps reused) meanwhile
  }
  auto& peers = peers_[tag.sender];
  const auto peer = std::find_if(peers.begin(), peers.end(), [&](const Peer& p) { return p.chip == h.src(); });
  if (peer == peers.end()) return;  // not one of its receivers
  const auto state = e->state.load(std::memory_order_acquire);
  switch (h.command) {
    case Command::kSocketAccept:
      if (state != kSocketOpening || peer->accepted) return;
      peer->accepted = true;
      peer->endpoint = tag.receiver;
      peer->limit = h.dst_addr;
      e->peer_endpoint = peers.front().endpoint;
      update_limit(*e, tag.sender);
      // Active once every receiver is ready (a multicast socket waits for its whole group).
      if (std::all_of(peers.begin(), peers.end(), [](const Peer& p) { return p.accepted; })) {
        e->status.store(kSocketOk, std::memory_order_relaxed);
        set_state(*e, kSocketConnected);
      }
      break;
    case Command::kSocketCredit:
      if (state != kSocketConnected || peer->endpoint != tag.receiver) return;
      if (h.dst_addr > peer->limit) {
        peer->limit = h.dst_addr;
        update_limit(*e, tag.sender);
      }
      break;
    case Command::kSocketReject: {
      const auto why = static_cast<int32_t>(static_cast<uint32_t>(h.dst_addr));
      if (state == kSocketOpening && why == kSocketEpochMismatch) {
        e->status.store(why, std::memory_order_relaxed);  // it waits on: the receiver may come to its epoch
      } else if (state == kSocketOpening || state == kSocketConnected) {
        break_endpoint(tag.sender, why);
      }
      break;
    }
    default: break;
  }
}

void SocketLayer::on_packet(Packet& p, Out& out) {
  const PacketHeader& h = p.header;
  switch (h.command) {
    case Command::kSocketOpen: {
      bool other_epoch = false;
      const int ep = match(h, other_epoch);
      if (ep >= 0) {
        connect(static_cast<uint16_t>(ep), h, out);
        return;
      }
      // No receiver ready for it yet: it waits here (bounded), and a receiver open for another
      // epoch of that socket says so.
      if (waiting_.size() >= 4 * table_.size()) {
        reply(h, Command::kSocketReject, static_cast<uint32_t>(kSocketOpenError), 0, out);
        return;
      }
      waiting_.push_back(h);
      if (other_epoch) reply(h, Command::kSocketReject, static_cast<uint32_t>(kSocketEpochMismatch), 0, out);
      return;
    }
    case Command::kSocketData: on_data(p, out); return;
    case Command::kSocketClose: on_close(h, out); return;
    case Command::kSocketAccept:
    case Command::kSocketCredit:
    case Command::kSocketReject: on_answer(h); return;
    case Command::kNack: {
      // The fabric dropped one of our socket packets: that stream is broken.
      SocketEndpoint* e = endpoint(h.src_core);
      const auto state = e ? e->state.load(std::memory_order_acquire) : kSocketFree;
      if (e && e->direction == kSocketSend && (state == kSocketOpening || state == kSocketConnected)) {
        break_endpoint(h.src_core, kSocketDataLost);
      }
      return;
    }
    default: return;
  }
}

void SocketLayer::grant(uint16_t ep, bool force, Out& out) {
  SocketEndpoint& e = table_[ep];
  if (e.handshake != kEndToEnd) return;
  const uint64_t limit = credit_limit(e);
  const uint64_t capacity = e.dscb_size > 0 ? e.dscb_size : e.l1cb_size;
  // Batched: a credit per quarter of the buffer, not per packet.
  if (limit <= e.credit_given || (!force && limit - e.credit_given < std::max<uint64_t>(1, capacity / 4))) return;
  e.credit_given = limit;
  tell_sender(ep, Command::kSocketCredit, limit, out);
}

void SocketLayer::tell_sender(uint16_t ep, Command c, uint64_t value, Out& out) const {
  const SocketEndpoint& e = table_[ep];
  PacketHeader h;  // as if from the sender: reply() addresses it back
  h.src_mesh = e.remote_mesh;
  h.src_device = e.remote_device;
  h.arg = e.socket_id;
  h.plane = e.plane;
  h.return_addr = SocketTag{e.epoch, e.peer_endpoint, ep}.pack();
  reply(h, c, value, ep, out);
}

void SocketLayer::pump(Out& out) {
  const EndpointSet todo = dirty_;
  for (uint16_t ep = 0; ep < todo.size() && ep < table_.size(); ++ep) {
    if (!todo.test(ep)) continue;
    SocketEndpoint& e = table_[ep];
    dirty_.reset(ep);
    const auto state = e.state.load(std::memory_order_acquire);
    if (e.direction != kSocketReceive || state != kSocketConnected) continue;
    // The DSCB drains into L1CB first (2.4.4): order holds, arrivals wait behind it.
    bool moved = false;
    while (dscb_fill(e) > 0 && l1_room(e) > 0) {
      const size_t n = static_cast<size_t>(std::min({dscb_fill(e), l1_room(e), uint64_t{routing::kMaxPacketPayload}}));
      scratch_.resize(n);
      if (!ring_get(e.dscb_addr, e.dscb_size, e.dscb_tail, scratch_) ||
          !ring_put(e.l1cb_addr, e.l1cb_size, e.l1_head.load(std::memory_order_relaxed), scratch_)) {
        break_endpoint(ep, kSocketDataLost);
        break;
      }
      e.dscb_tail += n;
      e.l1_head.fetch_add(n, std::memory_order_release);
      moved = true;
    }
    if (moved) arrived(e);
    if (e.state.load(std::memory_order_acquire) != kSocketConnected) continue;
    grant(ep, false, out);
    const bool waits = dscb_fill(e) > 0 || e.backed_up.load(std::memory_order_relaxed);
    e.wants_poke.store(waits || (e.handshake == kEndToEnd && e.dscb_size == 0) ? 1 : 0, std::memory_order_seq_cst);
    if (close_pending_[ep] && dscb_fill(e) == 0) {
      close_pending_[ep] = 0;
      set_state(e, kSocketPeerClosed);
      arrived(e);
    }
  }
}

uint64_t SocketLayer::may_send(uint16_t ep) const {
  const SocketEndpoint* e = ep < table_.size() ? &table_[ep] : nullptr;
  if (!e || e->direction != kSocketSend || e->state.load(std::memory_order_acquire) != kSocketConnected) return 0;
  const uint64_t limit = e->credit_limit.load(std::memory_order_acquire);
  if (limit == kUnlimited) return kUnlimited;
  const uint64_t sent = e->sent.load(std::memory_order_relaxed);
  return limit > sent ? limit - sent : 0;
}

PacketHeader SocketLayer::data_header(uint16_t ep, uint32_t size, size_t peer) const {
  const SocketEndpoint& e = table_[ep];
  const Peer& to = peers_[ep].at(peer);
  PacketHeader h;
  h.src_mesh = self_.mesh;
  h.src_device = self_.device;
  h.dst_mesh = to.chip.mesh;
  h.dst_device = to.chip.device;
  h.command = Command::kSocketData;
  h.fvc = e.fvc;
  h.plane = e.plane;
  h.txn_id = routing::kSocketTxn;
  h.src_core = ep;
  h.arg = e.socket_id;
  h.return_addr = SocketTag{e.epoch, ep, to.endpoint}.pack();
  h.dst_addr = e.sent.load(std::memory_order_relaxed);
  h.size = size;
  return h;
}

void SocketLayer::sent(uint16_t ep, uint32_t size) {
  SocketEndpoint& e = table_[ep];
  e.sent.fetch_add(size, std::memory_order_release);
  wake(e, e.sent_word);
}

void SocketLayer::close(uint16_t ep, Out& out) {
  SocketEndpoint* e = endpoint(ep);
  if (!e) return;
  if (e->direction == kSocketReceive && e->state.load(std::memory_order_acquire) == kSocketConnected) {
    tell_sender(ep, Command::kSocketReject, static_cast<uint32_t>(kSocketClosedStatus), out);
  }
  dirty_.reset(ep);
  close_pending_[ep] = 0;
  reserved_[ep] = 0;
  set_state(*e, kSocketClosed);
  wake(*e, e->arrivals);
  wake(*e, e->sent_word);
}

PacketHeader SocketLayer::close_header(uint16_t ep, size_t peer) const {
  PacketHeader h = data_header(ep, 0, peer);
  h.command = Command::kSocketClose;
  return h;
}

}  // namespace ttemu::session
