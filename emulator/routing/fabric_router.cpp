#include "emulator/routing/fabric_router.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "emulator/common/deadline.hpp"

namespace ttemu::routing {

using transport::answer_lane;
using transport::fvc_of_lane;
using transport::lane;

const char* RouterEvent::name() const { return to_string(kind); }

const char* to_string(RouterEvent::Kind kind) {
  switch (kind) {
    case RouterEvent::kTtlExpired: return "ttl_expired";
    case RouterEvent::kTimeout: return "timeout";
    case RouterEvent::kNoRoute: return "no_route";
    case RouterEvent::kLinkDown: return "link_down";
  }
  return "?";
}

FabricRouter::FabricRouter(ChipId self, const RouterConfig& config, std::vector<RouterTable> tables,
                           const std::vector<uint8_t>& ports)
    : self_(self), cfg_(config), tables_(std::move(tables)), port_rank_(256, -1),
      center_stalled_(static_cast<size_t>(config.data_fvcs + 1), false),
      center_room_(static_cast<size_t>(config.data_fvcs + 1), SIZE_MAX) {
  if (cfg_.data_fvcs < 1 || cfg_.rb_packets < 1) throw std::invalid_argument("router needs FVCs and buffers");
  std::vector<uint8_t> sorted = ports;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (!sorted.empty() && sorted.back() == kCenter) throw std::invalid_argument("port 255 is the center");
  for (size_t r = 0; r < sorted.size(); ++r) port_rank_[sorted[r]] = static_cast<int16_t>(r);
  port_rank_[kCenter] = static_cast<int16_t>(sorted.size());
  const auto lanes_n = static_cast<size_t>(lanes());
  input_of_.assign((sorted.size() + 1) * lanes_n, -1);
  credits_.assign(sorted.size() * lanes_n, static_cast<uint32_t>(cfg_.rb_packets));
  inputs_.reserve(sorted.size() * lanes_n + static_cast<size_t>(fvcs()));
  for (uint8_t p : sorted) {
    for (size_t l = 0; l < lanes_n; ++l) {
      input_of_[static_cast<size_t>(port_rank_[p]) * lanes_n + l] = static_cast<int16_t>(inputs_.size());
      inputs_.push_back({p, static_cast<uint8_t>(l), {}});
    }
  }
  for (int v = 0; v < fvcs(); ++v) {  // local traffic starts in class 0
    for (bool answer : {false, true}) {
      const uint8_t l = lane(static_cast<uint8_t>(v), 0, answer);
      input_of_[sorted.size() * lanes_n + l] = static_cast<int16_t>(inputs_.size());
      inputs_.push_back({kCenter, l, {}});
    }
  }
  busy_.assign((inputs_.size() + 63) / 64, 0);
  port_down_.assign(sorted.size(), false);
  reserved_.resize((sorted.size() + 1) * static_cast<size_t>(fvcs()));
}

bool FabricRouter::reservation_allows(const Input& in, const Packet& p, size_t out) {
  const PacketHeader& h = p.header;
  const auto n = static_cast<size_t>(fvcs());
  if (h.command == Command::kSocketOpen && (h.wrap & 0xF) == kSocketTypeStreaming) {
    if (h.dst_addr >= static_cast<uint64_t>(cfg_.data_fvcs)) return true;  // nothing to reserve: refused at the receiver
    Reservation& r = reserved_[out * n + h.dst_addr];
    const bool mine = r.active && r.owner == h.src() && r.endpoint == h.src_core;
    if (r.active && !mine) return false;  // another socket holds it: the open waits
    if (!mine) {
      r = {true, h.src(), h.src_core, in.port, h.dst()};
      ++reservations_changed_;
    }
    return true;
  }
  if (is_answer(h.command) || h.fvc >= n) return true;
  if (h.command == Command::kSocketClose && h.txn_id == kSocketTxn) {
    // The owner's close frees what it holds here, whichever FVC it travels on (a socket closed
    // before it connected sends its close behind its open, on the control FVC).
    for (size_t v = 0; v < n; ++v) {
      Reservation& held = reserved_[out * n + v];
      if (held.active && held.owner == h.src() && held.endpoint == h.src_core) {
        held.active = false;
        ++reservations_changed_;
      }
    }
  }
  Reservation& r = reserved_[out * n + h.fvc];
  if (!r.active) return true;
  const bool owner = h.txn_id == kSocketTxn && h.src() == r.owner && h.src_core == r.endpoint;
  return owner || in.port == r.in_port;
}

void FabricRouter::set_tables(std::vector<RouterTable> tables) {
  tables_ = std::move(tables);
  for (Reservation& r : reserved_) {
    if (!r.active || (reachable(r.owner) && reachable(r.to))) continue;
    r.active = false;
    ++reservations_changed_;
  }
}

bool FabricRouter::reachable(ChipId chip) const {
  return chip == self_ || std::any_of(tables_.begin(), tables_.end(), [&](const RouterTable& t) {
           return next_hop(t, self_, chip).kind != NextHop::kNoRoute;
         });
}

std::vector<FabricRouter::ReservationState> FabricRouter::reservations() const {
  std::vector<ReservationState> out;
  const auto n = static_cast<size_t>(fvcs());
  for (size_t i = 0; i < reserved_.size(); ++i) {
    const Reservation& r = reserved_[i];
    if (!r.active) continue;
    const size_t rank = i / n;
    uint8_t port = kCenter;
    for (size_t p = 0; p < kCenter; ++p) {
      if (port_rank_[p] == static_cast<int16_t>(rank)) port = static_cast<uint8_t>(p);
    }
    out.push_back({port, static_cast<uint8_t>(i % n), r.owner, r.endpoint});
  }
  return out;
}

size_t FabricRouter::next_busy(size_t from) const {
  for (size_t w = from / 64; w < busy_.size(); ++w) {
    uint64_t bits = busy_[w];
    if (w == from / 64) bits &= ~uint64_t{0} << (from % 64);
    if (bits) return w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
  }
  return inputs_.size();
}

int FabricRouter::slot(uint8_t port, uint8_t l) const {
  const int rank = port_rank_[port];
  if (rank < 0 || l >= lanes()) return -1;
  return rank * lanes() + l;
}

void FabricRouter::push(Input& in, Waiting w) {
  in.q.push_back(std::move(w));
  ++queued_;
  const auto i = static_cast<size_t>(&in - inputs_.data());
  busy_[i / 64] |= uint64_t{1} << (i % 64);
}

void FabricRouter::on_arrival(uint8_t port, uint8_t in_lane, Packet packet, Time now) {
  const int s = slot(port, in_lane);
  const int i = s < 0 ? -1 : input_of_[static_cast<size_t>(s)];
  if (i < 0 || fvc_of_lane(in_lane) != packet.header.fvc || answer_lane(in_lane) != is_answer(packet.header.command)) {
    throw std::invalid_argument("packet on an unknown port or lane");
  }
  push(inputs_[static_cast<size_t>(i)], {std::move(packet), now});
}

void FabricRouter::on_credit(uint8_t port, uint8_t l, uint32_t n) {
  const int s = port == kCenter ? -1 : slot(port, l);
  if (s >= 0) credits_[static_cast<size_t>(s)] += n;
}

size_t FabricRouter::inject_room(uint8_t fvc, bool answer) const {
  if (fvc >= fvcs()) return 0;
  const auto& q = inputs_[static_cast<size_t>(input_of_[static_cast<size_t>(slot(kCenter, lane(fvc, 0, answer)))])].q;
  return q.size() >= static_cast<size_t>(cfg_.rb_packets) ? 0 : static_cast<size_t>(cfg_.rb_packets) - q.size();
}

bool FabricRouter::inject(Packet packet, Time now) {
  const bool answer = is_answer(packet.header.command);
  if (packet.header.fvc >= fvcs() || inject_room(packet.header.fvc, answer) == 0) return false;
  const int s = slot(kCenter, lane(packet.header.fvc, 0, answer));
  push(inputs_[static_cast<size_t>(input_of_[static_cast<size_t>(s)])], {std::move(packet), now});
  return true;
}

void FabricRouter::stall_center(uint8_t fvc, bool stalled) { center_stalled_.at(fvc) = stalled; }

std::vector<FabricRouter::BufferState> FabricRouter::buffers() const {
  std::vector<BufferState> out;
  for (const Input& in : inputs_) {
    if (!in.q.empty()) out.push_back({in.port, in.lane, in.q.size(), in.q.front().packet.header, in.q.front().head_since});
  }
  return out;
}

uint32_t FabricRouter::credits(uint8_t port, uint8_t l) const {
  const int i = slot(port, l);
  if (i < 0) throw std::invalid_argument("credits: port " + std::to_string(port) + " lane " + std::to_string(l) + " is not wired");
  return credits_[static_cast<size_t>(i)];
}

void FabricRouter::set_port_down(uint8_t port, bool down) {
  const int rank = port_index(port);
  if (rank < 0) throw std::invalid_argument("set_port_down: port " + std::to_string(port) + " is not wired");
  port_down_[static_cast<size_t>(rank)] = down;
}

bool FabricRouter::port_down(uint8_t port) const {
  const int rank = port_index(port);
  return rank >= 0 && port_down_[static_cast<size_t>(rank)];
}

void FabricRouter::bounce(uint8_t port, uint8_t l, const PacketHeader& h) {
  pending_events_.push_back({RouterEvent::kLinkDown, self_, h});
  nack(h);
  on_credit(port, l, 1);
}

void FabricRouter::nack(const PacketHeader& h) {
  // Only requests are NACKed. An answer (ack, NACK, read response) goes back to the chip that
  // answered, whose workers never asked: its loss is reported as an event, and the requester's
  // barrier times out.
  if (is_answer(h.command)) return;
  Packet n;
  n.header = answer_to(self_, h, Command::kNack, control_fvc());
  n.header.arg = h.fvc;
  // A multicast's NACK answers for every device its packet was still to reach (return_addr).
  if (h.command == Command::kMcastWrite) n.header.return_addr = std::max<uint64_t>(1, h.return_addr);
  pending_nacks_.push_back(std::move(n));
}

void FabricRouter::pop(Input& in, Time now, Actions& out) {
  in.q.pop_front();
  in.answer_waits = false;
  --queued_;
  if (!in.q.empty()) {
    in.q.front().head_since = now;
  } else {
    const auto i = static_cast<size_t>(&in - inputs_.data());
    busy_[i / 64] &= ~(uint64_t{1} << (i % 64));
  }
  if (in.port == kCenter) return;
  if (in.unowed > 0) {
    --in.unowed;
    return;
  }
  out.credits.push_back({in.port, in.lane, 1});
}

void FabricRouter::peer_restarted(uint8_t port) {
  const int rank = port_index(port);
  if (rank < 0) throw std::invalid_argument("peer_restarted: port " + std::to_string(port) + " is not wired");
  for (int l = 0; l < lanes(); ++l) {
    const auto s = static_cast<size_t>(slot(port, static_cast<uint8_t>(l)));
    credits_[s] = static_cast<uint32_t>(cfg_.rb_packets);
    Input& in = inputs_[static_cast<size_t>(input_of_[s])];
    in.unowed = static_cast<uint32_t>(in.q.size());
  }
}

void FabricRouter::drop(Input& in, RouterEvent::Kind why, Time now, Actions& out) {
  const PacketHeader h = in.q.front().packet.header;
  out.events.push_back({why, self_, h});
  nack(h);
  pop(in, now, out);
}

void FabricRouter::poll(Time now, Actions& out) {
  for (auto& ev : pending_events_) out.events.push_back(ev);
  pending_events_.clear();
  bool progress = queued_ > 0 || !pending_nacks_.empty();
  while (progress) {
    progress = false;
    // NACKs enter the control FVC at the center; they are few and are never refused.
    if (!pending_nacks_.empty()) {
      Input& ctl = inputs_[static_cast<size_t>(input_of_[static_cast<size_t>(slot(kCenter, lane(control_fvc(), 0, true)))])];
      for (auto& n : pending_nacks_) push(ctl, {std::move(n), now});
      pending_nacks_.clear();
    }
    const size_t count = inputs_.size();
    // Each busy input once, round-robin from rr_: rr_..end, then 0..rr_-1.
    const size_t start = rr_;
    bool wrapped = false;
    for (size_t i = next_busy(start); queued_ > 0;) {
      if (!wrapped && i >= count) {
        wrapped = true;
        i = next_busy(0);
      }
      if (wrapped && i >= start) break;
      Input& in = inputs_[i];
      i = next_busy(i + 1);
      auto& q = in.q;
      Packet& p = q.front().packet;
      in.answer_waits = false;  // (as this look at its head finds: next_deadline)
      if (p.header.plane >= tables_.size()) {
        drop(in, RouterEvent::kNoRoute, now, out);
        progress = true;
        continue;
      }
      NextHop hop = next_hop(tables_[p.header.plane], self_, p.header.dst());
      if (hop.kind == NextHop::kDeliver) {
        // A stalled consumer, or a request whose answer has no room yet: it waits.
        const bool answer = is_answer(p.header.command);
        size_t* room = answer ? nullptr : &center_room_[answer_fvc(p.header, control_fvc())];
        if (!reservation_allows(in, p, wired_ports())) {
          q.front().head_since = now;  // waiting for a socket's close is not a stall
          continue;
        }
        // The gate last: admitting a packet reserves its room at the consumer, so it is asked
        // only about a packet that is then delivered.
        const bool gated_kind = p.header.command == Command::kSocketData || p.header.command == Command::kMcastWrite;
        if (center_stalled_[p.header.fvc] || (room && *room == 0) || (gated_kind && center_gate_ && !center_gate_(p.header))) {
          if (now - q.front().head_since >= cfg_.timeout) drop(in, RouterEvent::kTimeout, now, out), progress = true;
          continue;
        }
        if (room && *room != SIZE_MAX) --*room;
        out.delivered.push_back(std::move(p));
        pop(in, now, out);
        progress = true;
      } else if (hop.kind == NextHop::kNoRoute) {
        drop(in, RouterEvent::kNoRoute, now, out);
        progress = true;
      } else if (p.header.ttl == 0) {
        drop(in, RouterEvent::kTtlExpired, now, out);  // expired short of its destination
        progress = true;
      } else {
        const uint8_t out_lane = lane(p.header.fvc, self_.mesh == p.header.src_mesh ? 0 : 1, is_answer(p.header.command));
        const int credit = hop.port == kCenter ? -1 : slot(hop.port, out_lane);
        if (credit < 0) {
          drop(in, RouterEvent::kNoRoute, now, out);  // the table names an unwired port
          progress = true;
        } else if (const bool down = port_down_[static_cast<size_t>(port_rank_[hop.port])]; down && !is_answer(p.header.command)) {
          // No waiting for a link that is down: the sender hears at once (the fallback channel
          // and rerouting will carry such traffic where another path exists).
          drop(in, RouterEvent::kLinkDown, now, out);
          progress = true;
        } else if (down) {
          // An answer waits a little: nobody could be told of its loss, and the link's session
          // may come back in a moment (over a fallback channel), or new tables route it
          // another way.
          in.answer_waits = true;
          if (now - q.front().head_since >= answer_wait()) {
            drop(in, RouterEvent::kLinkDown, now, out);
            progress = true;
          }
        } else if (!reservation_allows(in, p, static_cast<size_t>(port_rank_[hop.port]))) {
          q.front().head_since = now;  // waiting for a socket's close is not a stall
        } else if (credits_[static_cast<size_t>(credit)] > 0) {
          --credits_[static_cast<size_t>(credit)];
          --p.header.ttl;
          out.sends.push_back({hop.port, out_lane, std::move(p)});
          pop(in, now, out);
          progress = true;
        } else if (now - q.front().head_since >= cfg_.timeout) {
          drop(in, RouterEvent::kTimeout, now, out);
          progress = true;
        }
      }
    }
    rr_ = rr_ + 1 == count ? 0 : rr_ + 1;
    if (!pending_nacks_.empty()) progress = true;
  }
}

std::optional<Time> FabricRouter::next_deadline() const {
  std::optional<Time> t;
  if (queued_ == 0) return t;
  for (const auto& in : inputs_) {
    if (!in.q.empty()) t = earlier(t, in.q.front().head_since + (in.answer_waits ? answer_wait() : cfg_.timeout));
  }
  return t;
}

bool FabricRouter::idle() const { return queued_ == 0 && pending_nacks_.empty() && pending_events_.empty(); }

}  // namespace ttemu::routing
