// The data-plane simulator of spec 6.2: a whole system inside one process, on a simulated
// clock, driven by one seed. Every chip is the same ChipNode a chip process runs (command
// intake, router, center, TT-links with their fault injection); only the wire (a delay queue
// behind the node's transport seam), the clock and memory (plain vectors) are simulated. The
// same seed, topology and faults give the same event trace, so a failing seed is a permanent
// reproduction.
#pragma once

#include <csignal>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>

#include "emulator/chip/command_buffer.hpp"
#include "emulator/chip/socket_client.hpp"
#include "emulator/chip/status_queue.hpp"
#include "emulator/chip/window_client.hpp"
#include "emulator/control/live_routes.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_set.hpp"
#include "emulator/link/fault_injector.hpp"
#include "emulator/link/tt_link.hpp"
#include "emulator/node/chip_node.hpp"
#include "emulator/routing/fabric_router.hpp"

namespace ttemu::sim {

struct SimConfig {
  uint64_t seed = 1;
  link::Duration wire_latency = std::chrono::microseconds(1);
  // How long a chip looks for more input before it sleeps, as a chip process over UDP does
  // (ChipNode::end_of_batch's more_may_come): after a batch of several datagrams its links keep
  // part-filled datagrams open, and they go once nothing for the chip is due within this long
  // (what is joins them at the next step). 0: nothing is kept open.
  link::Duration look{0};
  link::DirectionFaults faults;  // on every direction of every link ...
  std::map<routing::PortId, link::DirectionFaults> link_faults;  // ... unless named here (by sending port)
  routing::RouterConfig router;
  link::LinkConfig link;
  link::EfcConfig efc;  // the Ethernet Fallback Channel's thresholds (enabled by default)
  // The status queues' rate entries and alarms; off by default (ttemu sim turns them on with
  // the control plane, which drains them).
  node::RatesConfig rates{.interval = std::chrono::nanoseconds(0)};
  size_t l1_bytes = 1 << 20;   // simulated memory per chip
  size_t dram_bytes = 1 << 20;
  int tensix_cores = 8;  // the simulated L1 is this many Tensix cores' (NOC multicasts)
  // Open, or protected: every RDMA packet needs the key of a window (register_window()).
  session::MemoryMode memory = session::MemoryMode::kOpen;
  bool trace = true;  // keep the trace (a line per delivery, event, ring...); off, nothing is formatted
  // The live control plane (spec 1.1.2, 1.1.2.1), as the launcher runs it: it drains every
  // chip's status queue into control_log(), and reloads the routing tables around directions
  // with no live link left and around dead chips (control::LiveRoutes, LiveRoutes::kSettle
  // after the first news of a burst). Off: the tables never change and nothing drains.
  bool control_plane = false;
  // A tap on the wire (ttemu sim --capture): each datagram an end in tap_ends (every end when
  // empty) puts on its wire, with the simulated time it was sent. What a cut wire loses never
  // reaches it. Unset: nothing is tapped, nothing copied.
  std::function<void(routing::PortId from, link::Time at, std::span<const uint8_t> datagram)> tap;
  std::vector<routing::PortId> tap_ends;
  // A tap on deliveries (ttemu sim's record of them): each packet a chip's router delivers to
  // it (requests and answers alike), with its payload, as it is delivered. Unset: none.
  std::function<void(routing::ChipId at, const routing::Packet& packet)> delivered;
};

// What the simulated control plane heard and did, in order: the lines of its event log, not
// yet formatted (tools/traffic formats them as the launcher formats its own).
struct ControlRecord {
  enum class Kind {
    kStatus,          // an entry of `chip`'s status queue
    kStatusLost,      // `lost` entries a full queue overwrote
    kChipDied,        // `chip` was killed
    kChipRestarted,   // `chip` runs again, with fresh memory
    kTablesReloaded,  // `reload` is in force on every live chip
  };
  link::Time at{};
  Kind kind{};
  routing::ChipId chip{};
  chip::StatusEntry entry{};
  uint64_t lost = 0;
  std::shared_ptr<const control::Reload> reload{};
};

// A port's traffic moved onto another port's wire (the EFC), or back (wire == port.port).
struct EfcEvent {
  link::Time at;
  routing::PortId port;
  uint8_t wire;
  link::EfcReason why;
};

class FabricSim {
 public:
  FabricSim(const control::System& sys, const control::TableSet& tables, SimConfig config);
  ~FabricSim();

  // As if a worker on `at` issued the packet; fills in the source and a packet id.
  // False when the center's buffer for that FVC is full (try again after run()).
  bool inject(routing::ChipId at, routing::Packet packet);
  // A simulated worker on core `core` of `chip`: it submits through the chip's command buffer
  // and reads its completions with the same code as a worker process (chip/command_buffer);
  // the chip takes its commands during run(), as a chip process does when it wakes. Valid
  // until the chip is restarted.
  chip::CommandBufferClient& worker(routing::ChipId chip, uint16_t core);
  // The sockets of that worker (chip/socket_client.hpp), over its command buffer.
  chip::SocketClient& sockets(routing::ChipId chip, uint16_t core);
  // That worker is gone without closing its sockets, as a worker process that dies: its chip
  // closes them as its closes would, and frees them (ChipNode::owner_gone, which a chip process
  // calls when a worker's process ends). Its socket client is no longer valid.
  void worker_gone(routing::ChipId chip, uint16_t core);
  // A worker process on `chip` (core `core`) died in the middle of a submission, after it took
  // a ticket: before it claimed the ticket's slot, while it wrote its command there, or after
  // it counted the command's one packet in its transaction 0. The chip voids the slot once it
  // finds the worker gone (CommandIntake), taking the count back, so the slots behind it come
  // back to the other workers. Throws if every slot is taken.
  enum class DiedAt { kBeforeClaim, kWhileWriting, kAfterCounting };
  void worker_dies_submitting(routing::ChipId chip, uint16_t core, DiedAt when);
  // A window of `chip`'s memory registered by its worker on `core` (chip/window_client.hpp),
  // as tt_fabric_mr_register does; its key comes from the seed (the same run, the same keys).
  // A restarted chip has none.
  chip::WindowRegistration register_window(routing::ChipId chip, uint16_t core, uint64_t addr, uint64_t size,
                                           uint32_t access);
  // kStatusOk, or kStatusBadArgument when `core` holds no window under `key` there.
  int32_t deregister_window(routing::ChipId chip, uint16_t core, uint64_t key);
  // The chip's control block (its workers' counters, its windows), as the launcher reads it.
  const chip::ChipControl& control(routing::ChipId chip) const;
  // Times a worker rang the chip's doorbell (it rings only when the chip has said it sleeps;
  // a sleeping chip sees commands only when rung, woken by a datagram or by a deadline).
  uint64_t doorbell_rings(routing::ChipId chip) const;
  // Runs until nothing moves and nothing waits, or the simulated limit passes (then the clock
  // stands at the limit). True if idle.
  bool run(link::Duration limit = std::chrono::seconds(10));
  // Once *flag is set (by a signal handler: SIGTERM at a campaign's bound), run() throws
  // Interrupted instead of going on: a hung run stops where it hangs, its state intact.
  void interrupt_on(const volatile std::sig_atomic_t* flag) { interrupt_ = flag; }
  struct Interrupted : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  // Every chip's state now (ChipNode::snapshot; a dead chip says so), and the datagrams on
  // each wire (node/snapshot.hpp: the format `ttemu snapshot` gives for processes).
  node::SystemSnapshot snapshot() const;
  void stall_center(routing::ChipId at, uint8_t fvc, bool stalled);
  // The control plane holds (or lets go) the workers' commands at `at` (ttemu injection pause).
  void pause_injection(routing::ChipId at, bool paused);
  // Cuts (or restores) the link of `end`: everything on the wire in that direction (kOut: what
  // `end` sends, kIn: what it receives) is lost from now on. Its ends go down once their
  // retries run out, and come back when restored.
  enum class Direction { kOut, kIn, kBoth };
  void cut(routing::PortId end, bool cut, Direction direction = Direction::kBoth);
  // `ttemu links down|up END`: the operator takes the port out of service (or back), as the
  // launcher tells its chip in processes; the far end finds out over the wire. An end whose
  // chip is dead takes it when the chip restarts, as in processes.
  void admin_down(routing::PortId end, bool down);
  // A corrupted routing table (spec 5.4's forwarding loop): the next hop of `at` toward `dest`
  // sends packets for `dest` back to `at`, on every plane, until turned off (that chip gets the
  // tables in force again; a reload by the control plane repairs it too). Throws when `at` has
  // no route to `dest` or is its neighbour.
  void loop(routing::ChipId at, routing::ChipId dest, bool on);
  // The chip ports that would send packets for `dest` back to `at`, by plane (throws as loop()).
  std::vector<routing::PortId> loop_ends(routing::ChipId at, routing::ChipId dest) const;
  // The faults on what `end` sends, from now on (its own fault stream, seeded from the
  // simulation's seed).
  void set_faults(routing::PortId end, const link::DirectionFaults& faults);
  // The chip's process dies: its node stops and loses what it held; the far ends of its links
  // hear of it at once (peer_down), as the launcher tells them in processes, and the control
  // plane (if on) routes around it.
  void kill(routing::ChipId chip);
  // A new process for a killed chip: fresh memory, control block and nonces, the tables in
  // force; its links handshake again (and the control plane, if on, routes through it again).
  void restart(routing::ChipId chip);
  bool alive(routing::ChipId chip) const;
  // The end of the run: every live chip reports the rates of the interval under way (as a
  // chip process does when it stops), and the control plane drains them.
  void final_rates();
  // Times the chip was restarted: a chip whose count changed lost its memory meanwhile.
  uint32_t incarnation(routing::ChipId chip) const;
  // Runs `action` when the simulated clock reaches `at` (during run()); actions at the same
  // time run in the order they were given.
  void at(link::Time at, std::function<void()> action);

  std::span<uint8_t> memory(routing::ChipId at, uint64_t addr, size_t size);
  link::Time now() const { return now_; }
  const std::vector<std::string>& trace() const { return trace_; }
  const std::vector<routing::RouterEvent>& events() const { return events_; }
  const std::vector<EfcEvent>& efc_events() const { return efc_events_; }
  // Packets that reached a worker at their source chip (acks, NACKs, read responses).
  const std::vector<routing::Packet>& worker_inbox(routing::ChipId at) const;
  const link::LinkCounters& counters(routing::PortId end) const;
  // The control plane's record (empty with it off), and the tables in force.
  const std::vector<ControlRecord>& control_log() const { return control_log_; }
  const control::TableSet& tables() const { return live_ ? live_->tables() : tables_; }
  int tables_version() const { return live_ ? live_->version() : 1; }

 private:
  struct Node;
  struct End;
  bool step(link::Time limit);
  // Some datagram for `n` lands on its wire by then.
  bool input_due(const Node& n, link::Time by) const;
  // The control plane's part of a step: each chip's status queue, in chip order.
  void drain_status(Node& n);
  void schedule_reroute();
  Node& node(routing::ChipId chip) const;
  void build(Node& n, int index);
  std::unique_ptr<link::FaultInjector> injector(const link::DirectionFaults& f, routing::PortId end, uint64_t salt) const;
  // Per-packet lines check tracing() first: their arguments are formatted before log() runs.
  bool tracing() const { return cfg_.trace; }
  template <class... Args>
  void log(fmt::format_string<Args...> format, Args&&... args) {
    if (cfg_.trace) trace_.push_back(fmt::format("{:>12} {}", now_.count(), fmt::format(format, std::forward<Args>(args)...)));
  }

  const control::System& sys_;
  SimConfig cfg_;
  link::Time now_{0};
  const volatile std::sig_atomic_t* interrupt_ = nullptr;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<routing::PortId, std::unique_ptr<End>> ends_;
  std::vector<End*> end_list_;  // ends_ in its order, for the per-step scans
  std::vector<std::string> trace_;
  std::vector<routing::RouterEvent> events_;
  std::vector<EfcEvent> efc_events_;
  std::multimap<link::Time, std::function<void()>> actions_;
  std::map<routing::PortId, uint64_t> link_number_;  // nonces and fault seeds
  std::set<routing::PortId> out_of_service_;         // ends the operator took down (admin_down)
  const control::TableSet& tables_;
  uint64_t next_packet_id_ = 1;
  std::mt19937_64 window_keys_;  // the upper bits of memory windows' keys, from the seed
  std::unique_ptr<control::LiveRoutes> live_;  // the control plane, when on
  std::vector<ControlRecord> control_log_;
};

}  // namespace ttemu::sim
