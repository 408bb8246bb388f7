#include "emulator/sim/fabric_sim.hpp"

#include <cstring>

#include <fmt/format.h>

namespace ttemu::sim {

using routing::ChipId;
using routing::FabricRouter;
using routing::Packet;
using routing::PortId;
using routing::to_string;

namespace {

// What a TT-link frame carries between routers, told apart by its destination address in
// the receiving router (as TT-link mode writes to an address in TT-routing, 2.1).
constexpr uint32_t kPacketAddr = 0x1000;  // + FVC: the routing buffer of that FVC
constexpr uint32_t kCreditAddr = 0x2000;  // + FVC: freed slots, payload u32

}  // namespace

struct FabricSim::End {
  PortId self;
  int node;
  std::unique_ptr<link::LinkCounters> counters = std::make_unique<link::LinkCounters>();
  std::unique_ptr<link::TtLink> link;
  std::deque<std::pair<link::Time, std::vector<uint8_t>>> wire;  // toward the peer
  End* peer = nullptr;
  std::deque<std::pair<uint32_t, std::vector<uint8_t>>> backlog;  // waiting for link window
};

struct FabricSim::Node {
  ChipId id;
  std::unique_ptr<FabricRouter> router;
  std::unique_ptr<session::Center> center;
  std::vector<uint8_t> l1, dram;
  std::vector<Packet> inbox;
  std::deque<Packet> replies;  // center answers waiting for router room
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
    n->router = std::make_unique<FabricRouter>(n->id, cfg_.router, std::move(per_plane), ports);
    n->l1.assign(cfg_.l1_bytes, 0);
    n->dram.assign(cfg_.dram_bytes, 0);
    Node* raw = n.get();
    n->center = std::make_unique<session::Center>(n->id, cfg_.router.data_fvcs, [raw](uint64_t addr, size_t size) {
      auto& mem = addr & session::kDramBit ? raw->dram : raw->l1;
      uint64_t off = addr & ~session::kDramBit;
      if (off > mem.size() || size > mem.size() - off) return std::span<uint8_t>();
      return std::span<uint8_t>(mem.data() + off, size);
    });
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
      if (dest >= kCreditAddr) {
        uint32_t n = 0;
        std::memcpy(&n, payload.data(), std::min<size_t>(4, payload.size()));
        node->router->on_credit(self->self.port, static_cast<uint8_t>(dest - kCreditAddr), n);
      } else {
        Packet p;
        if (Packet::decode(payload, p)) node->router->on_arrival(self->self.port, std::move(p), now_);
      }
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
  if (!n.router->inject(packet, now_)) return false;
  ++next_packet_id_;
  log(fmt::format("inject {} {} -> {} id {} fvc {}", routing::to_string(packet.header.command), to_string(at),
                  to_string(packet.header.dst()), packet.header.packet_id, packet.header.fvc));
  return true;
}

void FabricSim::stall_center(ChipId at, uint8_t fvc, bool stalled) {
  nodes_.at(static_cast<size_t>(*sys_.node(at)))->router->stall_center(fvc, stalled);
}

std::span<uint8_t> FabricSim::memory(ChipId at, uint64_t addr, size_t size) {
  Node& n = *nodes_.at(static_cast<size_t>(*sys_.node(at)));
  auto& mem = addr & session::kDramBit ? n.dram : n.l1;
  uint64_t off = addr & ~session::kDramBit;
  return {mem.data() + off, size};
}

const std::vector<Packet>& FabricSim::worker_inbox(ChipId at) const {
  return nodes_.at(static_cast<size_t>(*sys_.node(at)))->inbox;
}

const link::LinkCounters& FabricSim::counters(PortId end) const { return *ends_.at(end)->counters; }

void FabricSim::route(Node& n, FabricRouter::Actions& a) {
  for (auto& ev : a.events) {
    log(fmt::format("{} at {} id {} {} -> {} ttl {}", ev.name(), to_string(ev.at), ev.packet.packet_id,
                    to_string(ev.packet.src()), to_string(ev.packet.dst()), ev.packet.ttl));
    events_.push_back(ev);
  }
  for (auto& s : a.sends) {
    End& e = *ends_.at(PortId{n.id, s.port});
    e.backlog.emplace_back(kPacketAddr + s.packet.header.fvc, s.packet.encode());
  }
  for (auto& c : a.credits) {
    End& e = *ends_.at(PortId{n.id, c.port});
    std::vector<uint8_t> body(4);
    std::memcpy(body.data(), &c.n, 4);
    e.backlog.emplace_back(kCreditAddr + c.fvc, std::move(body));
  }
  for (auto& p : a.delivered) {
    log(fmt::format("deliver {} at {} id {} from {}", routing::to_string(p.header.command), to_string(n.id),
                    p.header.packet_id, to_string(p.header.src())));
    auto r = n.center->on_packet(std::move(p));
    for (auto& reply : r.replies) n.replies.push_back(std::move(reply));
    for (auto& w : r.for_workers) n.inbox.push_back(std::move(w));
  }
}

void FabricSim::poll_all() {
  bool again = true;
  FabricRouter::Actions a;
  while (again) {
    again = false;
    for (auto& n : nodes_) {
      while (!n->replies.empty() && n->router->inject(n->replies.front(), now_)) n->replies.pop_front();
      a.clear();
      n->router->poll(now_, a);
      again = again || !a.delivered.empty();
      route(*n, a);
    }
    for (auto& [port, e] : ends_) {
      while (!e->backlog.empty() && e->link->send_room() > 0) {
        e->link->send(e->backlog.front().first, e->backlog.front().second);
        e->backlog.pop_front();
      }
      std::vector<std::vector<uint8_t>> out;
      e->link->poll_transmit(now_, out);
      for (auto& d : out) e->wire.emplace_back(now_ + cfg_.wire_latency, std::move(d));
    }
  }
}

bool FabricSim::step(link::Time limit) {
  std::optional<link::Time> t;
  auto consider = [&](std::optional<link::Time> x) {
    if (x && (!t || *x < *t)) t = x;
  };
  for (auto& [port, e] : ends_) {
    consider(e->link->next_deadline());
    if (!e->wire.empty()) consider(e->wire.front().first);
  }
  for (auto& n : nodes_) consider(n->router->next_deadline());
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
  for (auto& n : nodes_) idle = idle && n->router->idle() && n->replies.empty();
  for (auto& [port, e] : ends_) idle = idle && e->wire.empty() && e->backlog.empty() && e->link->drained();
  return idle;
}

}  // namespace ttemu::sim
