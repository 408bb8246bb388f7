#include "emulator/session/fabric_node.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "emulator/common/deadline.hpp"
#include "emulator/routing/multicast.hpp"

namespace ttemu::session {

using transport::kLinkCreditAddr;
using transport::kLinkPacketAddr;
using routing::Packet;

FabricNode::FabricNode(routing::ChipId self, const routing::RouterConfig& config,
                       std::vector<routing::RouterTable> tables, const std::vector<uint8_t>& ports,
                       Center::Memory memory, BufferPool& buffers, std::span<SocketEndpoint> sockets)
    : router_(self, config, std::move(tables), ports),
      center_(self, config.data_fvcs, memory, buffers),
      sockets_(self, config.data_fvcs, sockets, std::move(memory), buffers),
      config_(config),
      credits_owed_(router_.wired_ports() * static_cast<size_t>(router_.lanes()),
                    static_cast<uint32_t>(std::max(1, config.rb_packets / 2)), config.credit_delay),
      buffers_(buffers) {
  backlog_.resize(router_.wired_ports());
  replies_.resize(static_cast<size_t>(router_.fvcs()));
  copies_.resize(static_cast<size_t>(router_.fvcs()));
  router_.set_center_gate([this](const routing::PacketHeader& h) {
    if (h.command == routing::Command::kMcastWrite) return copies_.at(h.fvc).size() + std::min<size_t>(4, reply_bound()) <= reply_bound();
    return sockets_.accepts(h);
  });
}

void FabricNode::replicate(const routing::Packet& p) {
  for (const auto& c : routing::mcast_copies(self(), config_.mesh_rows, config_.mesh_cols,
                                             routing::McastDepths::unpack(p.header.arg))) {
    routing::Packet copy;
    copy.header = p.header;
    copy.header.dst_mesh = c.to.mesh;
    copy.header.dst_device = c.to.device;
    copy.header.arg = c.depths.pack();
    copy.header.return_addr = routing::mcast_devices(c.to, config_.mesh_rows, config_.mesh_cols, c.depths);
    copy.header.ttl = routing::kDefaultTtl;
    copy.bytes = buffers_.take();
    copy.set_payload(p.payload());
    copies_.at(copy.header.fvc).push_back(std::move(copy));
  }
}

void FabricNode::socket_open(uint16_t ep) {
  sockets_.open(ep, socket_out_);
  take_socket_out();
}

void FabricNode::set_tables(std::vector<routing::RouterTable> tables) {
  router_.set_tables(std::move(tables));
  sockets_.peers_unreachable([this](ChipId c) { return router_.reachable(c); });
}

void FabricNode::socket_close(uint16_t ep) {
  sockets_.close(ep, socket_out_);
  take_socket_out();
}

void FabricNode::take_socket_out() {
  for (auto& a : socket_out_.answers) {
    replies_.at(router_.control_fvc()).push_back(std::move(a));
    ++replies_waiting_;
  }
  for (auto& r : socket_out_.requests) socket_requests_.push_back(std::move(r));
  socket_out_.answers.clear();
  socket_out_.requests.clear();
}

size_t FabricNode::rank(uint8_t port) const {
  const int i = router_.port_index(port);
  if (i < 0) throw std::invalid_argument("port " + std::to_string(port) + " is not wired");
  return static_cast<size_t>(i);
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
    p.bytes = buffers_.take();
    if (Packet::decode(payload, p) && p.header.fvc == transport::fvc_of_lane(lane) &&
        routing::is_answer(p.header.command) == transport::answer_lane(lane)) {
      router_.on_arrival(port, lane, std::move(p), now);
    } else {
      // Not a packet we can forward; its buffer slot was never used: give the credit back.
      buffers_.give(std::move(p.bytes));
      owe_credit(rank(port), lane, 1);
    }
  }
}

void FabricNode::on_link_buffer(uint8_t port, uint32_t dest_addr, std::vector<uint8_t>&& framed, routing::Time now) {
  const auto lanes = static_cast<uint32_t>(router_.lanes());
  if (dest_addr >= kLinkPacketAddr && dest_addr < kLinkPacketAddr + lanes && framed.size() >= Packet::kLinkRoom) {
    const auto lane = static_cast<uint8_t>(dest_addr - kLinkPacketAddr);
    Packet p;
    if (Packet::adopt(std::move(framed), p) && p.header.fvc == transport::fvc_of_lane(lane) &&
        routing::is_answer(p.header.command) == transport::answer_lane(lane)) {
      router_.on_arrival(port, lane, std::move(p), now);
      return;
    }
    // Not a packet we can forward: on_link_payload refuses it too, and gives its credit back.
    if (!p.bytes.empty()) framed = std::move(p.bytes);
  }
  if (framed.size() >= Packet::kLinkRoom) on_link_payload(port, dest_addr, std::span<const uint8_t>(framed).subspan(Packet::kLinkRoom), now);
  buffers_.give(std::move(framed));
}

bool FabricNode::set_link_down(uint8_t port, bool down) {
  if (router_.port_down(port) == down) return false;
  router_.set_port_down(port, down);
  // Credits owed to the far end stay queued (they go when the link is back), and so do answers:
  // nobody could be told of their loss (only requests are NACKed), and the link's session goes
  // on when it is back or on a fallback channel. Requests go back to their senders.
  if (down) bounce_backlog(port, /*same_session=*/true);
  return true;
}

std::optional<FabricNode::LanePacket> FabricNode::packet_at(const LinkPayloadView& v) const {
  LanePacket p;
  const auto lanes = static_cast<uint32_t>(router_.lanes());
  if (v.dest_addr < kLinkPacketAddr || v.dest_addr >= kLinkPacketAddr + lanes || !Packet::peek(v.payload, p.header)) {
    return std::nullopt;
  }
  p.lane = static_cast<uint8_t>(v.dest_addr - kLinkPacketAddr);
  return p;
}

void FabricNode::bounce_backlog(uint8_t port, bool same_session) {
  auto& q = backlog(port);
  for (size_t n = q.size(); n > 0; --n) {
    LinkPayload entry = std::move(q.front());
    q.pop_front();
    const auto p = packet_at({entry.dest_addr, std::span(entry.bytes).subspan(Packet::kLinkRoom)});
    const bool keep = same_session && (!p || routing::is_answer(p->header.command));
    if (p && !keep) router_.bounce(port, p->lane, p->header);
    if (keep) {
      q.push_back(std::move(entry));  // behind the rest: the order of what stays is kept
    } else {
      buffers_.give(std::move(entry.bytes));
    }
  }
}

void FabricNode::peer_restarted(uint8_t port, std::span<const LinkPayloadView> abandoned) {
  for (const auto& a : abandoned) {
    if (const auto p = packet_at(a)) router_.bounce(port, p->lane, p->header);
  }
  // Whatever waits for the port belongs to the old session too: packets are reported the same
  // way, credits for the old incarnation are dropped.
  bounce_backlog(port, /*same_session=*/false);
  const auto lanes = static_cast<size_t>(router_.lanes());
  for (size_t l = 0; l < lanes; ++l) credits_owed_.forget(rank(port) * lanes + l);
  router_.peer_restarted(port);  // after the bounces: their credits are part of the fresh count
}

bool FabricNode::poll(routing::Time now, Output& out) {
  // Repeat while anything moves: forwarding frees room for waiting answers, answers and
  // deliveries make more to forward.
  bool any = false;
  while (true) {
    size_t injected = 0;
    if (sockets_.busy()) {  // DSCB data into L1CBs where consumers made room, credits
      sockets_.pump(socket_out_);
      take_socket_out();
    }
    while (!socket_requests_.empty() && router_.inject_room(router_.control_fvc()) > 0) {
      router_.inject(std::move(socket_requests_.front()), now);
      socket_requests_.pop_front();
      ++injected;
    }
    for (size_t v = 0; v < copies_.size(); ++v) {
      while (!copies_[v].empty() && router_.inject_room(static_cast<uint8_t>(v)) > 0) {
        router_.inject(std::move(copies_[v].front()), now);
        copies_[v].pop_front();
        ++injected;
      }
    }
    for (size_t v = 0; v < replies_.size() && replies_waiting_ > 0; ++v) {  // a full FVC holds back only its own answers
      auto& q = replies_[v];
      while (!q.empty() && router_.inject_room(static_cast<uint8_t>(v), true) > 0) {
        router_.inject(std::move(q.front()), now);  // moved, not copied: there is room
        q.pop_front();
        --replies_waiting_;
        ++injected;
      }
    }
    // Requests reach the center only while their answers have room to wait (bounded queues).
    for (size_t v = 0; v < replies_.size(); ++v) {
      router_.set_center_room(static_cast<uint8_t>(v), reply_bound() - std::min(reply_bound(), replies_[v].size()));
    }
    actions_.clear();
    router_.poll(now, actions_);
    for (auto& ev : actions_.events) out.events.push_back(ev);
    for (auto& s : actions_.sends) {
      s.packet.seal();  // the header into its room; the payload stays where it arrived
      backlog(s.port).push_back({kLinkPacketAddr + s.lane, std::move(s.packet.bytes)});
    }
    for (auto& c : actions_.credits) {
      credits_owed_.owe(rank(c.port) * static_cast<size_t>(router_.lanes()) + c.lane, c.n, now);
    }
    center_out_.replies.clear();
    center_out_.for_workers.clear();
    for (auto& p : actions_.delivered) {
      if (delivery_tap_) delivery_tap_(p);
      out.committed.push_back(p.header);
      const auto c = p.header.command;
      if (routing::is_socket(c) || (c == routing::Command::kNack && p.header.txn_id == routing::kSocketTxn)) {
        sockets_.on_packet(p, socket_out_);
      } else {
        if (c == routing::Command::kMcastWrite) replicate(p);  // before the commit: the center may take the packet
        center_.on_packet(p, center_out_);
      }
      buffers_.give(std::move(p.bytes));
    }
    take_socket_out();
    for (auto& reply : center_out_.replies) {
      replies_.at(reply.header.fvc).push_back(std::move(reply));
      ++replies_waiting_;
    }
    for (auto& w : center_out_.for_workers) out.for_workers.push_back(std::move(w));
    const bool moved = injected > 0 || !actions_.delivered.empty() || !actions_.sends.empty() ||
                       !actions_.events.empty();
    if (!moved) break;
    any = true;
  }
  flush_credits(now);
  return any;
}

void FabricNode::flush_credits(routing::Time now) {
  credits_owed_.flush(now, [this](size_t slot, uint32_t n) { owe_credit_slot(slot, n); });
}

void FabricNode::ride_credits(uint8_t port) {
  if (credits_owed_.empty()) return;
  const auto lanes = static_cast<size_t>(router_.lanes());
  credits_owed_.take(rank(port) * lanes, lanes, [this](size_t slot, uint32_t n) { owe_credit_slot(slot, n); });
}

void FabricNode::owe_credit_slot(size_t slot, uint32_t n) {
  const auto lanes = static_cast<size_t>(router_.lanes());
  owe_credit(slot / lanes, static_cast<uint32_t>(slot % lanes), n);
}

void FabricNode::owe_credit(size_t rank, uint32_t lane, uint32_t n) {
  std::vector<uint8_t> body = buffers_.take();
  body.resize(Packet::kLinkRoom + 4);
  std::memcpy(body.data() + Packet::kLinkRoom, &n, 4);
  backlog_[rank].push_back({kLinkCreditAddr + lane, std::move(body)});
}

std::optional<routing::Time> FabricNode::next_deadline() const {
  const auto t = router_.next_deadline();
  return earlier(t, credits_owed_.next_deadline());
}

bool FabricNode::idle() const {
  if (!router_.idle() || !credits_owed_.empty() || replies_waiting_ > 0) return false;
  if (sockets_.busy() || !socket_requests_.empty()) return false;
  for (const auto& q : copies_) {
    if (!q.empty()) return false;
  }
  for (const auto& q : backlog_) {
    if (!q.empty()) return false;
  }
  return true;
}

}  // namespace ttemu::session
