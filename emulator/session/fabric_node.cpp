#include "emulator/session/fabric_node.hpp"

#include <algorithm>
#include <cstring>

namespace ttemu::session {

using routing::kLinkCreditAddr;
using routing::kLinkPacketAddr;
using routing::Packet;

FabricNode::FabricNode(routing::ChipId self, const routing::RouterConfig& config,
                       std::vector<routing::RouterTable> tables, const std::vector<uint8_t>& ports,
                       Center::Memory memory)
    : router_(self, config, std::move(tables), ports),
      center_(self, config.data_fvcs, std::move(memory)),
      config_(config) {
  for (uint8_t p : ports) backlog_[p];
}

void FabricNode::on_link_payload(uint8_t port, uint32_t dest_addr, std::span<const uint8_t> payload,
                                 routing::Time now) {
  const auto lanes = static_cast<uint32_t>(router_.lanes());
  if (dest_addr >= kLinkCreditAddr && dest_addr < kLinkCreditAddr + lanes && payload.size() == 4) {
    uint32_t n = 0;
    std::memcpy(&n, payload.data(), 4);
    router_.on_credit(port, static_cast<uint8_t>(dest_addr - kLinkCreditAddr), n);
  } else if (dest_addr >= kLinkPacketAddr && dest_addr < kLinkPacketAddr + lanes) {
    const auto lane = static_cast<uint8_t>(dest_addr - kLinkPacketAddr);
    Packet p;
    if (Packet::decode(payload, p) && p.header.fvc == lane / 2) {
      router_.on_arrival(port, lane, std::move(p), now);
    } else {
      // Not a packet we can forward; its buffer slot was never used: give the credit back.
      std::vector<uint8_t> body(4);
      const uint32_t one = 1;
      std::memcpy(body.data(), &one, 4);
      backlog_[port].push_back({kLinkCreditAddr + lane, std::move(body)});
    }
  }
}

void FabricNode::poll(routing::Time now, Output& out) {
  // Repeat while anything moves: forwarding frees room for waiting answers, answers and
  // deliveries make more to forward.
  while (true) {
    size_t injected = 0;
    for (auto& [fvc, q] : replies_) {  // a full FVC holds back only its own answers
      while (!q.empty() && router_.inject(q.front(), now)) {
        q.pop_front();
        ++injected;
      }
    }
    actions_.clear();
    router_.poll(now, actions_);
    for (auto& ev : actions_.events) out.events.push_back(ev);
    for (auto& s : actions_.sends) {
      backlog_[s.port].push_back({kLinkPacketAddr + s.lane, s.packet.encode()});
    }
    for (auto& c : actions_.credits) {
      auto& o = owed_[{c.port, c.lane}];
      if (o.n == 0) o.since = now;
      o.n += c.n;
    }
    for (auto& p : actions_.delivered) {
      out.committed.push_back(p.header);
      auto r = center_.on_packet(std::move(p));
      for (auto& reply : r.replies) replies_[reply.header.fvc].push_back(std::move(reply));
      for (auto& w : r.for_workers) out.for_workers.push_back(std::move(w));
    }
    const bool moved = injected > 0 || !actions_.delivered.empty() || !actions_.sends.empty() ||
                       !actions_.events.empty();
    if (!moved) break;
  }
  flush_credits(now, false);
}

void FabricNode::flush_credits(routing::Time now, bool all) {
  const uint32_t half = static_cast<uint32_t>(std::max(1, config_.rb_packets / 2));
  for (auto& [key, o] : owed_) {
    if (o.n == 0) continue;
    if (!all && o.n < half && now < o.since + config_.credit_delay) continue;
    std::vector<uint8_t> body(4);
    std::memcpy(body.data(), &o.n, 4);
    backlog_[key.first].push_back({kLinkCreditAddr + key.second, std::move(body)});
    o.n = 0;
  }
}

std::optional<routing::Time> FabricNode::next_deadline() const {
  auto t = router_.next_deadline();
  for (const auto& [key, o] : owed_) {
    if (o.n == 0) continue;
    routing::Time d = o.since + config_.credit_delay;
    if (!t || d < *t) t = d;
  }
  return t;
}

bool FabricNode::idle() const {
  if (!router_.idle()) return false;
  for (const auto& [key, o] : owed_) {
    if (o.n) return false;
  }
  for (const auto& [fvc, q] : replies_) {
    if (!q.empty()) return false;
  }
  for (const auto& [port, q] : backlog_) {
    if (!q.empty()) return false;
  }
  return true;
}

}  // namespace ttemu::session
