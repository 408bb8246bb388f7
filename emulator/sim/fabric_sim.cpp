#include "emulator/sim/fabric_sim.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "emulator/chip/address_space.hpp"
#include "emulator/common/deadline.hpp"
#include "emulator/common/error.hpp"

namespace ttemu::sim {

using routing::ChipId;
using routing::Packet;
using routing::PortId;
using routing::to_string;

namespace {
// A simulated worker's owner number in its chip's socket table (a worker process's is its pid).
uint32_t sim_worker_owner(uint16_t core) { return uint32_t{core} + 1; }
// The pid a simulated worker that dies mid-submission claims its slot with; every other pid
// (the simulator's own, which its live workers claim with) runs.
constexpr uint32_t kDeadWorkerPid = (1u << 22) - 1;
}  // namespace

// One end of a link: the wire from it toward its peer.
struct FabricSim::End {
  PortId self;
  End* peer = nullptr;
  Node* receiver = nullptr;  // the chip at the peer end: what lands on this wire is its
  std::deque<std::pair<link::Time, std::vector<uint8_t>>> wire;
  bool cut = false;  // the wire loses everything
  uint64_t fault_stream = 0;  // set_faults calls so far: each gets its own seed
  bool tapped = false;  // SimConfig::tap sees what this end sends
};

// A chip: its memory and control block, its ChipNode, and the seams the node sees (the wire
// as its transport, the trace as its observer).
struct FabricSim::Node final : node::NodeObserver, wire::Transport {
  FabricSim* sim = nullptr;
  ChipId id;
  std::vector<uint8_t> l1, dram;
  std::unique_ptr<chip::ChipControl> control;  // made by build()
  std::unique_ptr<node::ChipNode> chip;
  std::vector<Packet> inbox;
  bool dead = false;
  uint32_t incarnation = 0;  // restarts so far: new nonces each time
  // The doorbell protocol of a chip process's event loop: after each step the chip says it
  // sleeps (router_asleep), looks at its command buffer once more, and from then on sees
  // workers' commands only when a datagram, a deadline or its doorbell wakes it.
  bool rung = false;    // a worker rang the doorbell since the chip's last wake-up
  bool poked = false;   // a packet was injected past the command buffer (directed tests)
  uint64_t rings = 0;
  bool asleep() const { return control->commands.router_asleep.load(std::memory_order_seq_cst) != 0; }
  std::map<uint16_t, std::unique_ptr<chip::CommandBufferClient>> workers;
  std::map<uint16_t, std::unique_ptr<chip::SocketClient>> socket_clients;  // over `workers`
  std::array<End*, routing::kMaxPorts> ends{};  // this chip's link ends by port (set once)

  size_t send(uint8_t port, std::span<const wire::Datagram> datagrams) override {
    End& e = *ends[port];
    if (!e.cut) {
      for (const auto& d : datagrams) {
        // The wire keeps its own copy, as a socket's buffer does.
        auto& [when, bytes] = e.wire.emplace_back(sim->now_ + sim->cfg_.wire_latency, std::vector<uint8_t>{});
        d.copy_to(bytes);
        if (e.tapped) sim->cfg_.tap(e.self, sim->now_, bytes);
      }
    }
    return datagrams.size();
  }
  void link_state(uint8_t port, link::LinkState state) override {
    sim->log("link {} {}", to_string(PortId{id, port}), link::to_string(state));
  }
  void fallback(uint8_t port, uint8_t wire, link::EfcReason why) override {
    const PortId at{id, port};
    if (wire == port) sim->log("efc {} back on its own wire ({})", to_string(at), link::to_string(why));
    else sim->log("efc {} onto {}'s wire ({})", to_string(at), to_string(PortId{id, wire}), link::to_string(why));
    sim->efc_events_.push_back({sim->now_, at, wire, why});
  }
  void router_event(const routing::RouterEvent& ev) override {
    if (sim->tracing()) {  // the names are formatted only for a trace
      sim->log("{} at {} id {} {} -> {} fvc {} ttl {}", ev.name(), to_string(ev.at), ev.packet.packet_id,
               to_string(ev.packet.src()), to_string(ev.packet.dst()), ev.packet.fvc, ev.packet.ttl);
    }
    sim->events_.push_back(ev);
  }
  void committed(const routing::PacketHeader& h) override {
    if (sim->tracing()) {
      sim->log("deliver {} at {} id {} from {}", routing::to_string(h.command), to_string(id), h.packet_id,
               to_string(h.src()));
    }
  }
  void answer(const Packet& p) override { inbox.push_back(p); }
};

FabricSim::FabricSim(const control::System& sys, const control::TableSet& tables, SimConfig config)
    : sys_(sys), cfg_(std::move(config)), tables_(tables), window_keys_(cfg_.seed ^ 0x6b657973) {
  for (const auto& l : sys.links) {
    for (const auto& end : {l.a, l.b}) {
      auto e = std::make_unique<End>();
      e->self = end;
      ends_[end] = std::move(e);
    }
  }
  for (auto& [port, e] : ends_) {
    e->peer = ends_.at(*sys.peer(port)).get();
    end_list_.push_back(e.get());
  }
  if (cfg_.tap) {
    for (auto& [port, e] : ends_) e->tapped = cfg_.tap_ends.empty();
    for (const auto& port : cfg_.tap_ends) ends_.at(port)->tapped = true;
  }
  // Nonces and fault seeds by link, in the order the system lists them.
  uint64_t k = 0;
  for (const auto& l : sys.links) link_number_[l.a] = ++k, link_number_[l.b] = ++k;
  for (int v = 0; v < sys.node_count(); ++v) {
    auto n = std::make_unique<Node>();
    n->sim = this;
    n->id = sys.chips[static_cast<size_t>(v)].id;
    build(*n, v);
    nodes_.push_back(std::move(n));
  }
  for (auto& [port, e] : ends_) {
    node(port.chip).ends[port.port] = e.get();
    e->receiver = &node(e->peer->self.chip);
  }
  if (cfg_.control_plane) live_ = std::make_unique<control::LiveRoutes>(sys, tables, cfg_.efc.enabled);
  for (auto& n : nodes_) n->chip->start(now_);
}

// A chip's process starting: its memory, control block and node, new.
void FabricSim::build(Node& n, int v) {
  n.l1.assign(cfg_.l1_bytes, 0);
  n.dram.assign(cfg_.dram_bytes, 0);
  n.chip.reset();
  n.socket_clients.clear();
  n.workers.clear();
  n.control = std::make_unique<chip::ChipControl>();
  n.inbox.clear();
  node::ChipNodeConfig nc;
  nc.self = n.id;
  nc.job = cfg_.seed;
  nc.link = cfg_.link;
  nc.efc = cfg_.efc;
  nc.rates = cfg_.rates;
  nc.router = cfg_.router;
  nc.router.mesh_rows = sys_.mesh_of(v).chips.rows;
  nc.router.mesh_cols = sys_.mesh_of(v).chips.cols;
  nc.tensix_cores = cfg_.tensix_cores;
  nc.tensix_l1 = cfg_.tensix_cores > 0 ? cfg_.l1_bytes / static_cast<size_t>(cfg_.tensix_cores) : 0;
  nc.tables = tables().of_node(v);
  nc.memory = cfg_.memory;
  if (cfg_.delivered) nc.delivered = [this, at = n.id](const Packet& p) { cfg_.delivered(at, p); };
  for (uint8_t port : sys_.wired_ports(v)) {
    const PortId self{n.id, port};
    const PortId peer = *sys_.peer(self);
    const auto nonce = static_cast<uint32_t>(0x1000 + link_number_.at(self) + (uint64_t{n.incarnation} << 20));
    nc.ports.push_back({self.port, {cfg_.seed, peer.chip.mesh, peer.chip.device, peer.port}, nonce, {}});
  }
  Node* raw = &n;
  n.chip = std::make_unique<node::ChipNode>(
      std::move(nc), [raw](uint64_t addr, size_t size) { return chip::locate(addr, size, raw->l1, raw->dram); },
      *n.control, n, n);
  n.chip->set_liveness([](uint32_t pid) { return pid != kDeadWorkerPid; });
  for (const auto& pc : n.chip->ports()) {
    const PortId self{n.id, pc.number};
    auto named = cfg_.link_faults.find(self);
    const link::DirectionFaults& f = named != cfg_.link_faults.end() ? named->second : cfg_.faults;
    if (f.any()) n.chip->set_faults(pc.number, injector(f, self, uint64_t{n.incarnation} << 32));
  }
}

FabricSim::~FabricSim() = default;

bool FabricSim::inject(ChipId at, Packet packet) {
  Node& n = node(at);
  if (n.dead) return false;
  packet.header.src_mesh = at.mesh;
  packet.header.src_device = at.device;
  packet.header.packet_id = next_packet_id_;
  const routing::PacketHeader h = packet.header;  // logged once injected
  if (!n.chip->inject(std::move(packet), now_)) return false;
  n.poked = true;
  ++next_packet_id_;
  if (tracing()) {
    log("inject {} {} -> {} id {} fvc {}", routing::to_string(h.command), to_string(at), to_string(h.dst()),
        h.packet_id, h.fvc);
  }
  return true;
}

void FabricSim::stall_center(ChipId at, uint8_t fvc, bool stalled) { node(at).chip->stall(fvc, stalled, now_); }

void FabricSim::pause_injection(ChipId at, bool paused) { node(at).chip->pause_injection(paused, now_); }

void FabricSim::admin_down(PortId end, bool down) {
  Node& n = node(end.chip);
  if (!ends_.count(end)) throw std::invalid_argument(to_string(end) + " is not a wired port");
  if (down) {
    out_of_service_.insert(end);
  } else {
    out_of_service_.erase(end);
  }
  log("links {} {}", down ? "down" : "up", to_string(end));
  if (n.dead) return;  // it takes it at its restart
  n.chip->admin_down(end.port, down, now_);
}

std::vector<PortId> FabricSim::loop_ends(ChipId at, ChipId dest) const {
  const auto v = sys_.node(at);
  if (!v || !sys_.node(dest)) throw std::invalid_argument("no chip " + to_string(!v ? at : dest) + " in the system");
  std::vector<PortId> out;  // by plane
  for (int plane = 0; plane < tables().planes(); ++plane) {
    const routing::RouterTable& here = tables().at(plane, *v);
    const auto port = at.mesh == dest.mesh ? here.l0(dest.device) : here.l1(dest.mesh);
    const auto far = port ? sys_.peer(PortId{at, *port}) : std::nullopt;
    if (!far) throw std::invalid_argument(to_string(at) + " has no route to " + to_string(dest));
    if (far->chip == dest) throw std::invalid_argument(to_string(at) + " is next to " + to_string(dest) + "; a loop needs a chip two hops or more from it");
    out.push_back(*far);
  }
  return out;
}

void FabricSim::loop(ChipId at, ChipId dest, bool on) {
  // The next hop of `at` toward `dest`, on each plane, sends it back: the two bounce it.
  const std::vector<PortId> ends = loop_ends(at, dest);
  std::map<int, std::vector<routing::RouterTable>> changed;  // by node, every plane
  for (size_t plane = 0; plane < ends.size(); ++plane) {
    const PortId far = ends[plane];
    const int n = *sys_.node(far.chip);
    if (!changed.count(n)) changed[n] = tables().of_node(n);
    if (!on) continue;
    auto& t = changed[n][plane];
    if (far.chip.mesh == dest.mesh) t.set_l0(dest.device, far.port);
    else t.set_l1(dest.mesh, far.port);
  }
  for (auto& [n, t] : changed) {
    Node& next = *nodes_[static_cast<size_t>(n)];
    log("loop {} <-> {} for {} {}", to_string(at), to_string(next.id), to_string(dest), on ? "on" : "off");
    if (!next.dead) next.chip->load_tables(std::move(t), static_cast<uint32_t>(tables_version()), now_);
  }
}

void FabricSim::cut(PortId end, bool cut, Direction direction) {
  End& e = *ends_.at(end);
  for (End* w : {&e, e.peer}) {
    if (direction != Direction::kBoth && (w == &e) != (direction == Direction::kOut)) continue;
    w->cut = cut;
    if (cut) w->wire.clear();
    log("{} wire {} -> {}", cut ? "cut" : "restore", to_string(w->self), to_string(w->peer->self));
  }
}

// Each link end's faults draw from their own stream of the seed; `salt` tells a restarted chip's
// or a changed plan's stream from the first.
std::unique_ptr<link::FaultInjector> FabricSim::injector(const link::DirectionFaults& f, PortId end, uint64_t salt) const {
  return std::make_unique<link::FaultInjector>(f, cfg_.seed * 7919 + link_number_.at(end) + salt);
}

void FabricSim::set_faults(PortId end, const link::DirectionFaults& faults) {
  End& e = *ends_.at(end);
  Node& n = node(end.chip);
  ++e.fault_stream;
  n.chip->set_faults(end.port, faults.any() ? injector(faults, end, e.fault_stream << 40) : nullptr);
  log("faults on {} changed", to_string(end));
}

FabricSim::Node& FabricSim::node(ChipId chip) const {
  const auto v = sys_.node(chip);
  if (!v) throw std::invalid_argument("no chip " + to_string(chip) + " in the system");
  return *nodes_[static_cast<size_t>(*v)];
}

bool FabricSim::alive(ChipId chip) const { return !node(chip).dead; }

uint32_t FabricSim::incarnation(ChipId chip) const { return node(chip).incarnation; }

uint64_t FabricSim::doorbell_rings(ChipId chip) const { return node(chip).rings; }

chip::CommandBufferClient& FabricSim::worker(ChipId chip, uint16_t core) {
  Node& n = node(chip);
  auto& w = n.workers[core];
  // The doorbell, rung by the command buffer code only when the chip has said it sleeps.
  Node* raw = &n;
  if (!w) {
    w = std::make_unique<chip::CommandBufferClient>(*n.control, core, [this, raw] {
      raw->rung = true;
      ++raw->rings;
      if (tracing()) log("doorbell {}", to_string(raw->id));
    });
  }
  return *w;
}

chip::WindowRegistration FabricSim::register_window(ChipId chip, uint16_t core, uint64_t addr, uint64_t size,
                                                   uint32_t access) {
  Node& n = node(chip);
  return chip::register_window(*n.control, core, addr, size, access, n.l1.size(), n.dram.size(), window_keys_());
}

int32_t FabricSim::deregister_window(ChipId chip, uint16_t core, uint64_t key) {
  return chip::deregister_window(*node(chip).control, core, key);
}

const chip::ChipControl& FabricSim::control(ChipId chip) const { return *node(chip).control; }

chip::SocketClient& FabricSim::sockets(ChipId chip, uint16_t core) {
  Node& n = node(chip);
  auto& s = n.socket_clients[core];
  if (!s) {
    Node* raw = &n;
    s = std::make_unique<chip::SocketClient>(*n.control, worker(chip, core), core, [raw](uint64_t addr, size_t size) {
      return chip::locate(addr, size, raw->l1, raw->dram);
    }, sim_worker_owner(core));
  }
  return *s;
}

void FabricSim::worker_gone(ChipId chip, uint16_t core) {
  Node& n = node(chip);
  if (n.dead) return;  // (a dead chip serves nobody)
  n.socket_clients.erase(core);
  n.chip->owner_gone(sim_worker_owner(core), now_);
}

void FabricSim::worker_dies_submitting(ChipId chip, uint16_t core, DiedAt when) {
  auto& cb = node(chip).control->commands;
  const uint32_t ticket = cb.next_ticket.load();
  if (ticket - cb.served.load() >= chip::kCommandSlots) throw Error("worker_dies_submitting: every slot is taken");
  cb.next_ticket.store(ticket + 1);
  if (when == DiedAt::kBeforeClaim) return;
  chip::FabricCommand& slot = cb.slots[ticket % chip::kCommandSlots];
  slot.state.store(chip::slot_state(ticket, chip::kSlotFilling, kDeadWorkerPid));
  if (when == DiedAt::kWhileWriting) return;
  slot.core = core;  // a one-packet write in transaction 0, counted
  slot.txn_id = 0;
  slot.counted = 1;
  slot.counted_ticket = ticket;
  cb.workers[core % chip::kMaxWorkers].txn[0].fetch_add(1);
}

void FabricSim::final_rates() {
  for (auto& n : nodes_) {
    if (n->dead) continue;
    n->chip->final_rates(now_);
    if (live_) drain_status(*n);
  }
}

void FabricSim::kill(ChipId chip) {
  Node& n = node(chip);
  if (n.dead) return;
  if (live_) drain_status(n);  // its last words
  n.dead = true;
  log("kill {}", to_string(chip));
  if (live_) {
    control_log_.push_back({.at = now_, .kind = ControlRecord::Kind::kChipDied, .chip = chip});
    live_->chip_alive(*sys_.node(chip), false);
    schedule_reroute();
  }
  for (const auto& pc : n.chip->ports()) {
    const PortId far = ends_.at(PortId{chip, pc.number})->peer->self;
    if (!node(far.chip).dead) node(far.chip).chip->peer_down(far.port, now_);  // as the launcher tells
  }
}

void FabricSim::restart(ChipId chip) {
  Node& n = node(chip);
  if (!n.dead) return;
  ++n.incarnation;
  build(n, *sys_.node(chip));
  n.dead = false;
  log("restart {}", to_string(chip));
  if (live_) {
    // As the launcher does: the chip counts as alive, its links as down until they come up.
    n.control->tables_version.store(static_cast<uint32_t>(live_->version()), std::memory_order_relaxed);
    live_->chip_restarted(*sys_.node(chip));
    control_log_.push_back({.at = now_, .kind = ControlRecord::Kind::kChipRestarted, .chip = chip});
  }
  // As in processes, where the launcher's word reaches a restarted chip before its peers do.
  for (const PortId& end : out_of_service_) {
    if (end.chip == chip) n.chip->admin_down(end.port, true, now_);
  }
  n.chip->start(now_);
}

void FabricSim::drain_status(Node& n) {
  const uint64_t lost = n.control->status.drain([&](const chip::StatusEntry& e) {
    control_log_.push_back({.at = now_, .kind = ControlRecord::Kind::kStatus, .chip = n.id, .entry = e});
    if (e.kind == chip::StatusKind::kLinkUp || e.kind == chip::StatusKind::kLinkDown) {
      live_->link_up({n.id, e.port}, e.kind == chip::StatusKind::kLinkUp);
      schedule_reroute();
    }
  });
  if (lost) control_log_.push_back({.at = now_, .kind = ControlRecord::Kind::kStatusLost, .chip = n.id, .lost = lost});
}

// One reload per burst of news, LiveRoutes::kSettle after its first, as the launcher does.
void FabricSim::schedule_reroute() {
  if (!live_->news()) return;  // a reload is already due
  at(now_ + control::LiveRoutes::kSettle, [this] {
    auto r = live_->reload();
    if (!r) return;
    const auto version = static_cast<uint32_t>(r->version);
    for (size_t v = 0; v < nodes_.size(); ++v) {
      Node& n = *nodes_[v];
      if (n.dead) continue;
      n.chip->load_tables(r->tables.of_node(static_cast<int>(v)), version, now_);
    }
    log("tables v{} loaded: {}", version, r->summary(sys_));
    control_log_.push_back({.at = now_, .kind = ControlRecord::Kind::kTablesReloaded,
                            .reload = std::make_shared<const control::Reload>(std::move(*r))});
  });
}

void FabricSim::at(link::Time t, std::function<void()> action) { actions_.emplace(t, std::move(action)); }

std::span<uint8_t> FabricSim::memory(ChipId at, uint64_t addr, size_t size) {
  Node& n = node(at);
  auto bytes = chip::locate(addr, size, n.l1, n.dram);
  if (bytes.data() == nullptr) throw std::out_of_range("FabricSim::memory outside the chip");
  return bytes;
}

const std::vector<Packet>& FabricSim::worker_inbox(ChipId at) const { return node(at).inbox; }

const link::LinkCounters& FabricSim::counters(PortId end) const { return node(end.chip).chip->counters(end.port); }

bool FabricSim::step(link::Time limit) {
  std::optional<link::Time> t;
  for (const End* e : end_list_) {
    if (!e->wire.empty()) t = earlier(t, e->wire.front().first);
  }
  for (auto& n : nodes_) {
    if (n->dead) continue;
    t = earlier(t, n->chip->next_deadline());
    // Rung, poked, or awake with commands waiting: the chip runs now.
    if (n->rung || n->poked || (!n->asleep() && n->chip->has_work())) t = now_;
  }
  if (!actions_.empty()) t = earlier(t, actions_.begin()->first);
  if (!t) return false;
  if (*t > limit) {  // something waits beyond the limit: the time until then passes
    now_ = std::max(now_, limit);
    return false;
  }
  now_ = std::max(now_, *t);
  while (!actions_.empty() && actions_.begin()->first <= now_) {
    auto action = std::move(actions_.begin()->second);
    actions_.erase(actions_.begin());
    action();
  }
  // What landed, chip by chip as a process reads its sockets; then each chip's batch end. A
  // dead chip's sockets are gone: what arrives for it is lost.
  for (End* e : end_list_) {
    Node& to = *e->receiver;
    while (!e->wire.empty() && e->wire.front().first <= now_) {
      if (!to.dead) {
        to.control->commands.router_asleep.store(0, std::memory_order_relaxed);  // woken
        to.chip->on_datagram(e->peer->self.port, e->wire.front().second, now_);
      }
      e->wire.pop_front();
    }
  }
  for (auto& n : nodes_) {
    if (n->dead) continue;
    const auto due = n->chip->next_deadline();
    const bool timer = due && *due <= now_;
    if (n->rung || n->poked || timer) n->control->commands.router_asleep.store(0, std::memory_order_relaxed);
    if (!n->asleep() && (n->chip->has_work() || n->poked)) n->chip->pump(now_);
    n->rung = n->poked = false;
    n->chip->end_of_batch(now_, cfg_.look.count() > 0);  // nothing to do unless datagrams arrived
    if (timer) n->chip->on_timer(now_);
    // The chip's look before it sleeps: what is due for it within cfg_.look joins the open
    // datagrams at its step; if nothing is, they go now.
    if (n->chip->has_open() && !input_due(*n, now_ + cfg_.look)) n->chip->send_open(now_);
    // Back to sleep as the event loop goes: say so, then look once more (no lost wake-up).
    n->control->commands.router_asleep.store(1, std::memory_order_seq_cst);
    if (n->chip->has_work()) n->control->commands.router_asleep.store(0, std::memory_order_relaxed);
    if (live_) drain_status(*n);  // the control plane's part of the step
  }
  return true;
}

bool FabricSim::input_due(const Node& n, link::Time by) const {
  return std::any_of(end_list_.begin(), end_list_.end(), [&](const End* e) {
    return e->receiver == &n && !e->wire.empty() && e->wire.front().first <= by;
  });
}

bool FabricSim::run(link::Duration limit) {
  const link::Time end = now_ + limit;
  auto interrupted = [&] {
    if (interrupt_ && *interrupt_) throw Interrupted(fmt::format("interrupted at {:.3f} simulated ms", std::chrono::duration<double, std::milli>(now_).count()));
  };
  interrupted();  // (also a caller that calls run() again and again without the clock moving)
  while (step(end)) interrupted();
  bool idle = actions_.empty();
  for (auto& n : nodes_) idle = idle && (n->dead || n->chip->idle());
  for (const End* e : end_list_) idle = idle && e->wire.empty();
  return idle;
}

node::SystemSnapshot FabricSim::snapshot() const {
  node::SystemSnapshot s;
  s.sim_ns = now_.count();
  for (const auto& n : nodes_) {
    if (n->dead) {
      node::ChipSnapshot dead;
      dead.chip = to_string(n->id);
      dead.dead = true;
      s.chips.push_back(std::move(dead));
    } else {
      s.chips.push_back(n->chip->snapshot(now_));
    }
  }
  for (const End* e : end_list_) {
    if (!e->wire.empty()) s.on_the_wire[to_string(e->self)] = e->wire.size();
  }
  return s;
}

}  // namespace ttemu::sim
