#include "emulator/sim/fabric_sim.hpp"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "emulator/common/deadline.hpp"

namespace ttemu::sim {

using routing::ChipId;
using routing::FabricRouter;
using routing::Packet;
using routing::PortId;
using routing::to_string;

struct FabricSim::End {
  PortId self;
  int node;
  std::unique_ptr<link::LinkCounters> counters = std::make_unique<link::LinkCounters>();
  std::unique_ptr<link::TtLink> link;
  std::deque<std::pair<link::Time, std::vector<uint8_t>>> wire;  // toward the peer
  End* peer = nullptr;
  bool cut = false;  // the wire toward the peer loses everything
  bool down = false;  // as last told to the node
};

struct FabricSim::Node {
  ChipId id;
  std::unique_ptr<session::FabricNode> fabric;
  std::vector<uint8_t> l1, dram;
  std::vector<Packet> inbox;
};

FabricSim::FabricSim(const control::System& sys, const control::TableSet& tables, SimConfig config)
    : sys_(sys), cfg_(std::move(config)) {
  for (int v = 0; v < sys.node_count(); ++v) {
    auto n = std::make_unique<Node>();
    n->id = sys.chips[static_cast<size_t>(v)].id;
    std::vector<routing::RouterTable> per_plane;
    for (int p = 0; p < tables.planes(); ++p) per_plane.push_back(tables.at(p, v));
    std::vector<uint8_t> ports;
    for (int port = 0; port < routing::kMaxPorts; ++port) {
      if (sys.link_at(v, static_cast<uint8_t>(port)) >= 0) ports.push_back(static_cast<uint8_t>(port));
    }
    n->l1.assign(cfg_.l1_bytes, 0);
    n->dram.assign(cfg_.dram_bytes, 0);
    Node* raw = n.get();
    n->fabric = std::make_unique<session::FabricNode>(
        n->id, cfg_.router, std::move(per_plane), ports,
        [raw](uint64_t addr, size_t size) { return session::locate(addr, size, raw->l1, raw->dram); });
    nodes_.push_back(std::move(n));
  }
  uint64_t k = 0;
  for (const auto& l : sys.links) {
    for (const auto& [a, b] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
      auto e = std::make_unique<End>();
      e->self = a;
      e->node = *sys.node(a.chip);
      link::LinkIdentity self{cfg_.seed, a.chip.mesh, a.chip.device, a.port};
      link::LinkIdentity peer{cfg_.seed, b.chip.mesh, b.chip.device, b.port};
      e->link = std::make_unique<link::TtLink>(cfg_.link, self, peer, static_cast<uint32_t>(0x1000 + ++k), *e->counters);
      if (cfg_.faults.any()) {
        e->link->set_faults(std::make_unique<link::FaultInjector>(cfg_.faults, cfg_.seed * 7919 + k));
      }
      ends_[a] = std::move(e);
    }
  }
  for (auto& [port, e] : ends_) {
    End* self = e.get();
    e->peer = ends_.at(*sys.peer(port)).get();
    Node* node = nodes_[static_cast<size_t>(e->node)].get();
    e->link->set_delivery([this, self, node](uint32_t dest, std::span<const uint8_t> payload) {
      node->fabric->on_link_payload(self->self.port, dest, payload, now_);
    });
    e->link->start(now_);
  }
}

FabricSim::~FabricSim() = default;

void FabricSim::log(const std::string& line) { trace_.push_back(fmt::format("{:>12} {}", now_.count(), line)); }

bool FabricSim::inject(ChipId at, Packet packet) {
  Node& n = *nodes_.at(static_cast<size_t>(*sys_.node(at)));
  packet.header.src_mesh = at.mesh;
  packet.header.src_device = at.device;
  packet.header.packet_id = next_packet_id_;
  if (!n.fabric->inject(packet, now_)) return false;
  ++next_packet_id_;
  log(fmt::format("inject {} {} -> {} id {} fvc {}", routing::to_string(packet.header.command), to_string(at),
                  to_string(packet.header.dst()), packet.header.packet_id, packet.header.fvc));
  return true;
}

void FabricSim::stall_center(ChipId at, uint8_t fvc, bool stalled) {
  nodes_.at(static_cast<size_t>(*sys_.node(at)))->fabric->router().stall_center(fvc, stalled);
}

void FabricSim::cut(PortId end, bool cut) {
  End& e = *ends_.at(end);
  e.cut = e.peer->cut = cut;
  if (cut) e.wire.clear(), e.peer->wire.clear();
  log(fmt::format("{} link {} - {}", cut ? "cut" : "restore", to_string(e.self), to_string(e.peer->self)));
}

std::span<uint8_t> FabricSim::memory(ChipId at, uint64_t addr, size_t size) {
  Node& n = *nodes_.at(static_cast<size_t>(*sys_.node(at)));
  auto bytes = session::locate(addr, size, n.l1, n.dram);
  if (bytes.data() == nullptr) throw std::out_of_range("FabricSim::memory outside the chip");
  return bytes;
}

const std::vector<Packet>& FabricSim::worker_inbox(ChipId at) const {
  return nodes_.at(static_cast<size_t>(*sys_.node(at)))->inbox;
}

const link::LinkCounters& FabricSim::counters(PortId end) const { return *ends_.at(end)->counters; }

// As a chip process does: a link that went down (or came back) is told to its node.
void FabricSim::follow_link_states() {
  for (auto& [port, e] : ends_) {
    const bool down = e->link->state() == link::LinkState::kDown;
    if (down == e->down) continue;
    e->down = down;
    log(fmt::format("link {} {}", to_string(port), down ? "down" : "up"));
    nodes_[static_cast<size_t>(e->node)]->fabric->set_link_down(port.port, down);
  }
}

void FabricSim::poll_all() {
  // One pass: every node moves what it can, every link puts its datagrams on the wire. What
  // the datagrams cause happens when they land (step).
  follow_link_states();
  session::FabricNode::Output out;
  for (auto& n : nodes_) {
    out.clear();
    n->fabric->poll(now_, out);
    for (const auto& ev : out.events) {
      log(fmt::format("{} at {} id {} {} -> {} ttl {}", ev.name(), to_string(ev.at), ev.packet.packet_id,
                      to_string(ev.packet.src()), to_string(ev.packet.dst()), ev.packet.ttl));
      events_.push_back(ev);
    }
    for (const auto& h : out.committed) {
      log(fmt::format("deliver {} at {} id {} from {}", routing::to_string(h.command), to_string(n->id),
                      h.packet_id, to_string(h.src())));
    }
    for (auto& w : out.for_workers) n->inbox.push_back(std::move(w));
  }
  for (auto& [port, e] : ends_) {
    nodes_[static_cast<size_t>(e->node)]->fabric->pass_backlog(port.port, [&](uint32_t addr, std::span<const uint8_t> bytes) {
      return e->link->send_room() > 0 && e->link->send(addr, bytes);
    });
    std::vector<std::vector<uint8_t>> datagrams;
    e->link->poll_transmit(now_, datagrams);
    if (!e->cut) {
      for (auto& d : datagrams) e->wire.emplace_back(now_ + cfg_.wire_latency, std::move(d));
    }
  }
}

bool FabricSim::step(link::Time limit) {
  std::optional<link::Time> t;
  for (auto& [port, e] : ends_) {
    t = earlier(t, e->link->next_deadline());
    if (!e->wire.empty()) t = earlier(t, e->wire.front().first);
  }
  for (auto& n : nodes_) t = earlier(t, n->fabric->next_deadline());
  if (!t || *t > limit) return false;
  now_ = std::max(now_, *t);
  for (auto& [port, e] : ends_) {
    while (!e->wire.empty() && e->wire.front().first <= now_) {
      e->peer->link->on_datagram(e->wire.front().second, now_);
      e->wire.pop_front();
    }
    e->link->on_timer(now_);
  }
  poll_all();
  return true;
}

bool FabricSim::run(link::Duration limit) {
  const link::Time end = now_ + limit;
  poll_all();
  while (step(end)) {
  }
  bool idle = true;
  for (auto& n : nodes_) idle = idle && n->fabric->idle();
  for (auto& [port, e] : ends_) idle = idle && e->wire.empty() && e->link->drained();
  return idle;
}

}  // namespace ttemu::sim
