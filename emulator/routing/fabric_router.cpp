#include "emulator/routing/fabric_router.hpp"

#include <stdexcept>

namespace ttemu::routing {

const char* RouterEvent::name() const {
  switch (kind) {
    case kTtlExpired: return "ttl_expired";
    case kTimeout: return "timeout";
    case kNoRoute: return "no_route";
  }
  return "?";
}

FabricRouter::FabricRouter(ChipId self, const RouterConfig& config, std::vector<RouterTable> tables,
                           const std::vector<uint8_t>& ports)
    : self_(self), cfg_(config), tables_(std::move(tables)),
      center_stalled_(static_cast<size_t>(config.data_fvcs + 1), false) {
  if (cfg_.data_fvcs < 1 || cfg_.rb_packets < 1) throw std::invalid_argument("router needs FVCs and buffers");
  for (int v = 0; v < fvcs(); ++v) {
    inputs_[{kCenter, lane(static_cast<uint8_t>(v), 0)}];  // local traffic starts in class 0
  }
  for (int l = 0; l < lanes(); ++l) {
    for (uint8_t p : ports) {
      inputs_[{p, static_cast<uint8_t>(l)}];
      credits_[{p, static_cast<uint8_t>(l)}] = static_cast<uint32_t>(cfg_.rb_packets);
    }
  }
}

void FabricRouter::on_arrival(uint8_t port, uint8_t in_lane, Packet packet, Time now) {
  auto it = inputs_.find({port, in_lane});
  if (it == inputs_.end() || in_lane / 2 != packet.header.fvc) {
    throw std::invalid_argument("packet on an unknown port or lane");
  }
  auto& q = it->second;
  q.push_back({std::move(packet), now});
}

void FabricRouter::on_credit(uint8_t port, uint8_t l, uint32_t n) { credits_[{port, l}] += n; }

size_t FabricRouter::inject_room(uint8_t fvc) const {
  auto it = inputs_.find({kCenter, lane(fvc, 0)});
  if (it == inputs_.end()) return 0;
  return it->second.size() >= static_cast<size_t>(cfg_.rb_packets) ? 0 : static_cast<size_t>(cfg_.rb_packets) - it->second.size();
}

bool FabricRouter::inject(Packet packet, Time now) {
  if (packet.header.fvc >= fvcs() || inject_room(packet.header.fvc) == 0) return false;
  inputs_[{kCenter, lane(packet.header.fvc, 0)}].push_back({std::move(packet), now});
  return true;
}

void FabricRouter::stall_center(uint8_t fvc, bool stalled) { center_stalled_.at(fvc) = stalled; }

void FabricRouter::nack(const PacketHeader& h) {
  if (h.command == Command::kNack) return;  // never NACK a NACK
  Packet n;
  n.header.src_mesh = self_.mesh;
  n.header.src_device = self_.device;
  n.header.dst_mesh = h.src_mesh;
  n.header.dst_device = h.src_device;
  n.header.command = Command::kNack;
  n.header.packet_id = h.packet_id;
  n.header.txn_id = h.txn_id;
  n.header.src_core = h.src_core;
  n.header.plane = h.plane;
  n.header.fvc = control_fvc();
  n.header.arg = h.fvc;
  pending_nacks_.push_back(std::move(n));
}

void FabricRouter::pop(Key in, Time now, Actions& out) {
  auto& q = inputs_[in];
  q.pop_front();
  if (!q.empty()) q.front().head_since = now;
  if (in.first != kCenter) out.credits.push_back({in.first, in.second, 1});
}

void FabricRouter::drop(Key in, RouterEvent::Kind why, Time now, Actions& out) {
  const PacketHeader h = inputs_[in].front().packet.header;
  out.events.push_back({why, self_, h});
  nack(h);
  pop(in, now, out);
}

void FabricRouter::poll(Time now, Actions& out) {
  bool progress = true;
  while (progress) {
    progress = false;
    // NACKs enter the control FVC at the center; they are few and are never refused.
    for (auto& n : pending_nacks_) inputs_[{kCenter, lane(control_fvc(), 0)}].push_back({std::move(n), now});
    pending_nacks_.clear();
    const size_t count = inputs_.size();
    auto start = inputs_.begin();
    std::advance(start, static_cast<long>(rr_ % count));
    auto it = start;
    for (size_t k = 0; k < count; ++k, ++it) {
      if (it == inputs_.end()) it = inputs_.begin();
      const Key in = it->first;
      auto& q = it->second;
      if (q.empty()) continue;
      Packet& p = q.front().packet;
      if (p.header.plane >= tables_.size()) {
        drop(in, RouterEvent::kNoRoute, now, out);
        progress = true;
        continue;
      }
      NextHop hop = next_hop(tables_[p.header.plane], self_, p.header.dst());
      if (hop.kind == NextHop::kDeliver) {
        if (center_stalled_[p.header.fvc]) {
          if (now - q.front().head_since >= cfg_.timeout) drop(in, RouterEvent::kTimeout, now, out), progress = true;
          continue;
        }
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
        const uint8_t out_lane = lane(p.header.fvc, self_.mesh == p.header.src_mesh ? 0 : 1);
        auto credit = credits_.find({hop.port, out_lane});
        if (credit == credits_.end()) {
          drop(in, RouterEvent::kNoRoute, now, out);  // the table names an unwired port
          progress = true;
        } else if (credit->second > 0) {
          --credit->second;
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
    ++rr_;
  }
}

std::optional<Time> FabricRouter::next_deadline() const {
  std::optional<Time> t;
  for (const auto& [key, q] : inputs_) {
    if (q.empty()) continue;
    Time d = q.front().head_since + cfg_.timeout;
    if (!t || d < *t) t = d;
  }
  return t;
}

bool FabricRouter::idle() const {
  for (const auto& [key, q] : inputs_) {
    if (!q.empty()) return false;
  }
  return pending_nacks_.empty();
}

}  // namespace ttemu::routing
