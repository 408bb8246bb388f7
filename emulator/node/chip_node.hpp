// One chip's data path, as a state machine without I/O: everything a chip does per packet and
// per frame. It owns the command intake (the router's side of the command buffer; the doorbell
// and the "asleep" flag belong to its driver's loop), the fabric node (router and center), one TT-link per wired
// port, the links' test traffic (checked streams, pings) and the link-state bookkeeping that
// tells the router which ports are down. It is given the chip's memory, its control block
// (command buffer, counters), a transport for its links' datagrams and the time.
//
// Two drivers run it: a chip process (emulator/process/chip_process.cpp: epoll, UDP sockets,
// shared memory, a wall clock) and the simulator (emulator/sim/fabric_sim.cpp: a simulated
// wire and clock, plain memory). The hop benchmark runs it too. Nothing else knows both a node
// and its links.
//
// Driving it: hand in what arrives (on_datagram, one call per datagram, read in place), then
// end_of_batch() once everything that arrived together is in (one router pass for it all);
// call on_timer() at next_deadline(), pump() when a worker may have submitted (has_work()),
// on_writable() when the transport can take more for a port. A driver that can look for more
// input before it sleeps may let the links keep part-filled datagrams open over a batch
// (end_of_batch(now, true)); it then calls send_open() before it sleeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "emulator/chip/chip_control.hpp"
#include "emulator/link/efc.hpp"
#include "emulator/link/fault_injector.hpp"
#include "emulator/link/tt_link.hpp"
#include "emulator/node/command_intake.hpp"
#include "emulator/node/snapshot.hpp"
#include "emulator/node/status_rates.hpp"
#include "emulator/routing/fabric_router.hpp"
#include "emulator/session/fabric_node.hpp"
#include "emulator/wire/transport.hpp"

namespace ttemu::node {

using Time = link::Time;

struct PortConfig {
  uint8_t number = 0;
  link::LinkIdentity peer;  // the far end: job, chip and port its hellos must name
  uint32_t nonce = 1;       // this end's, non-zero, new at every start
  // The ethernet core's receive buffer in L1, where a checked stream lands; empty: checked
  // in place.
  std::span<uint8_t> receive_buffer;
  link::Duration keepalive{0};  // this port's link::LinkConfig::keepalive (its wire crosses hosts)
};

struct ChipNodeConfig {
  routing::ChipId self;
  uint64_t job = 0;  // the job identity the links' hellos carry
  link::LinkConfig link;
  link::EfcConfig efc;
  RatesConfig rates;  // the status queue's rate entries and error-rate alarms
  routing::RouterConfig router;
  std::vector<PortConfig> ports;
  std::vector<routing::RouterTable> tables;  // this chip's table on each plane
  int tensix_cores = 0;     // for NOC multicasts (Center::set_noc_grid); 0: unknown
  uint64_t tensix_l1 = 0;   // bytes of L1 per Tensix core
  // Open, or protected: every RDMA packet needs a key of the chip's memory windows.
  session::MemoryMode memory = session::MemoryMode::kOpen;
  session::FabricNode::DeliveryTap delivered;  // unset: none (FabricNode::set_delivery_tap)
};

// What a node tells its driver. Every call happens inside one of the node's own calls.
class NodeObserver {
 public:
  virtual ~NodeObserver() = default;
  virtual void link_state(uint8_t /*port*/, link::LinkState /*state*/) {}
  // The port's traffic moved onto port `wire`'s wire (the fallback channel), or back onto its
  // own (wire == port), for `why`.
  virtual void fallback(uint8_t /*port*/, uint8_t /*wire*/, link::EfcReason /*why*/) {}
  virtual void router_event(const routing::RouterEvent& /*event*/) {}
  // The node pushed into its status queue (link up or down, fallback and return, a restarted
  // peer, a dropped packet, rates and error-rate alarms) after the control plane had drained all of it: the cue to tell
  // the control plane (one nudge per drain, not one per entry).
  virtual void status_pushed(uint64_t /*pushed*/) {}
  virtual void committed(const routing::PacketHeader& /*packet*/) {}
  // An answer (ack, NACK, read response) for a local worker; the command buffer has counted it.
  virtual void answer(const routing::Packet& /*packet*/) {}
  virtual void stream_done(uint8_t /*port*/, uint64_t /*id*/, uint64_t /*frames*/, uint64_t /*bytes*/,
                           double /*seconds*/) {}
  virtual void ping_done(uint8_t /*port*/, uint64_t /*id*/, const std::vector<double>& /*rtt_us*/) {}
};

class ChipNode {
 public:
  ChipNode(ChipNodeConfig config, session::Center::Memory memory, chip::ChipControl& control,
           wire::Transport& transport, NodeObserver& observer);
  ~ChipNode();
  ChipNode(const ChipNode&) = delete;
  ChipNode& operator=(const ChipNode&) = delete;

  routing::ChipId self() const { return cfg_.self; }
  std::span<const PortConfig> ports() const { return cfg_.ports; }

  // The links start their handshakes.
  void start(Time now);
  // A datagram arrived for the link on `port` (its bytes are read in place, not kept).
  void on_datagram(uint8_t port, std::span<const uint8_t> datagram, Time now);
  // Everything that arrived together has been handed in: one router pass for all of it, then
  // the links answer (acknowledgements, echoes, forwarded packets).
  //
  // more_may_come: the driver will look for more input before it sleeps. After a batch of
  // several datagrams, or of more than kStreamingBatchBytes (traffic that streams, not a lone
  // packet on a latency path), a link's last datagram, if it is part-filled with data frames,
  // is then kept open for the frames of the next batch (TtLink::poll_transmit's keep_open),
  // for at most kMaxOpenBatches batches: fewer, fuller datagrams, each costing the kernel,
  // the wire and the far end a pass less.
  void end_of_batch(Time now, bool more_may_come = false);
  // Some link keeps a datagram open (end_of_batch(now, true)).
  bool has_open() const;
  // Sends the datagrams kept open; a driver calls it before it sleeps (when it looked and
  // nothing more had come).
  void send_open(Time now);
  void on_timer(Time now);
  // Workers' commands into the router, the router's traffic onto the links, answers back.
  void pump(Time now);
  void on_writable(uint8_t port, Time now);
  // A ready command waits in the command buffer that the router has not found blocked.
  bool has_work() const { return intake_.has_work(); }
  std::optional<Time> next_deadline() const;
  // Nothing waits in the router, the links, or the transport.
  bool idle() const;

  // The control plane's requests.
  void peer_down(uint8_t port, Time now);  // the far end's chip died
  // The operator takes the link on `port` out of service (or back): its wire carries nothing
  // either way, and the link goes down at once (the EFC moves its traffic onto a parallel
  // link if one lives; otherwise the control plane routes around it). Both ends are told.
  void admin_down(uint8_t port, bool down, Time now);
  // The faults of the wire `port` transmits into (whatever link's traffic travels it).
  void set_faults(uint8_t port, std::unique_ptr<link::FaultInjector> faults);
  // Since the links started: the clock of their fault plans' down intervals.
  link::Duration link_age(Time now) const { return now - started_; }
  void stall(uint8_t fvc, bool stalled, Time now);  // a stalled consumer (ttemu fabric stall)
  // New routing tables (one per plane), from the next packet on; `version` goes to the control
  // block for clients that wait for a table change.
  void load_tables(std::vector<routing::RouterTable> tables, uint32_t version, Time now);
  // Holds (or lets go) the workers' commands: while paused the router takes none, and what is
  // already in the fabric moves on (ttemu injection pause|resume).
  void pause_injection(bool paused, Time now);
  // The owners of sockets opened here since the last call (worker processes' pids), each
  // once: the chip's process watches each, and calls owner_gone() when one is gone.
  std::vector<uint32_t> take_new_owners() { return intake_.take_new_owners(); }
  // How to tell that a worker process is gone (CommandIntake::set_liveness).
  void set_liveness(std::function<bool(uint32_t pid)> alive) { intake_.set_liveness(std::move(alive)); }
  // `owner` is gone without closing (a worker process died): its sockets close as its own
  // closes would, and their endpoints are freed (CommandIntake::owner_gone).
  void owner_gone(uint32_t owner, Time now);
  // The chip stops: the rates of the interval under way go into the status queue now.
  void final_rates(Time now) {
    now_ = now;
    report_rates(now, true);
  }
  void start_stream(uint8_t port, uint64_t id, uint64_t frames, uint32_t size, Time now);
  void start_ping(uint8_t port, uint64_t id, int count, uint32_t size, Time now);
  // A packet as if from a local worker, past the command buffer (the simulator's directed
  // tests); false when its FVC's buffer is full.
  bool inject(routing::Packet packet, Time now);

  // What the chip holds now (chip_snapshot.cpp; ttemu snapshot, a campaign's hung run):
  // every routing buffer with packets (its lane, its head packet and how long it has waited),
  // and per port the link's state, its backlog, its window room, the lanes with no credit left
  // toward the far end, and the fallback wire it travels; stalled FVCs; sockets and
  // reservations (snapshot.hpp).
  ChipSnapshot snapshot(Time now) const;

  // Sees every request the router delivers to this chip from now on (unset: none); the chip
  // process sets it while `ttemu traffic --replay` records deliveries.
  void set_delivery_tap(session::FabricNode::DeliveryTap tap) { fabric_.set_delivery_tap(std::move(tap)); }

  const link::LinkCounters& counters(uint8_t port) const;
  link::LinkState link_state(uint8_t port) const;

 private:
  struct Port;
  // What snapshot() shows of the i-th port (chip_snapshot.cpp does not see Port).
  struct PortView {
    uint8_t number, wire;
    bool admin_down;
    const link::TtLink& link;
  };
  PortView view(size_t i) const;
  Port& port(uint8_t number);
  const Port& port(uint8_t number) const;
  void on_delivery(Port& p, uint32_t dest, std::span<const uint8_t> payload);
  // A frame the link held behind a gap, in its own buffer (TtLink::set_held_delivery).
  void on_held_delivery(Port& p, uint32_t dest, std::vector<uint8_t>&& framed);
  void on_peer_restart(Port& p, std::span<const LinkPayloadView> abandoned);
  void service(Port& p, Time now);
  void service_passengers(Port& carrier, Time now);
  // Sends what waits for wire `w`: its own port's datagrams, then its passengers'.
  void flush(uint8_t w);
  // The port's datagrams its wire has not taken are lost (counted as wire drops), go-back-N
  // sends them again.
  void drop_unsent(Port& p);
  bool wire_busy(uint8_t w) const;
  // The EFC: moves the port's traffic onto a fallback channel or back, as its judgement says.
  void steer(Port& p, Time now);
  Port* find_carrier(const Port& p, const Port* failed = nullptr);
  bool can_carry(const Port& carrier, const Port& p) const;
  void move_wire(Port& p, uint8_t wire, bool lost, link::EfcReason why, Time now);
  // Off the fallback channel and back on its own wire, starting afresh there.
  void return_home(Port& p, link::EfcReason why, Time now);
  // A fallback header arrived on `arrived`'s wire: the port it is for, if it names a link to
  // the same neighbour.
  Port* fallback_target(const Port& arrived, const link::FallbackHeader& h);
  void on_probe(Port& p, const link::FallbackHeader& h, Time now);
  // A probe or probe reply on the port's own wire, through its faults; best effort.
  void send_control(Port& p, const link::FallbackHeader& h, Time now);
  // Payload `index` of test stream (or ping) `id`, in a frame buffer for TtLink::send_framed.
  std::vector<uint8_t> test_frame(Port& p, uint64_t id, uint64_t index, uint32_t size);
  void report(Port& p);
  // A carrier whose passenger's traffic failed proves its own wire (TtLink::verify).
  void verify_wire(Port& c, Time now);
  // Into the chip's status queue (spec 1.1.2.1), stamped with the node's time.
  void push_status(chip::StatusEntry e);
  // The interval's rate entries and alarms, if one is due (status_rates.hpp).
  void report_rates(Time now, bool early = false);
  // A link went down or came back during the call: the router drops what waited for it now.
  void settle(Time now);

  ChipNodeConfig cfg_;
  chip::ChipControl& ctl_;
  wire::Transport& transport_;
  NodeObserver& observer_;
  BufferPool buffers_;  // packet buffers: the router's, the links' windows (before both)
  session::FabricNode fabric_;
  CommandIntake intake_;
  uint64_t reservations_shown_ = 0;  // the router's reservations_changed() last published
  void publish_reservations();
  StatusRates rates_;
  std::vector<std::unique_ptr<Port>> ports_;  // ascending port numbers
  std::vector<Port*> by_number_;              // port number -> its Port, nullptr if not wired
  std::vector<Port*> touched_;                // received on in the current batch
  // Part-filled datagrams kept open over batches (end_of_batch(now, true)): at most this many.
  static constexpr int kMaxOpenBatches = 4;
  // A batch of more than two full frames' payload streams, even as one datagram: a Galaxy's
  // chips over UDP mostly read one datagram per socket read, and kept open after those too they
  // send 10 % fewer datagrams (docs/fabric.md, "Fuller datagrams over UDP").
  static constexpr size_t kStreamingBatchBytes = 8192;
  std::vector<Port*> open_;  // ports whose link may keep a datagram open
  bool keep_open_ = false;   // services now may keep one open (inside end_of_batch)
  int open_batches_ = 0;     // batches since open_ was last empty
  size_t batch_datagrams_ = 0;  // datagrams handed in since the last end_of_batch
  size_t batch_bytes_ = 0;      // and their bytes
  session::FabricNode::Output out_;
  wire::Datagram control_;     // a probe or probe reply being sent
  Time started_{};             // when the links started (the origin of their fault plans)
  Time now_{};                 // the time of the call in progress (deliveries happen inside)
  bool fabric_dirty_ = false;  // packets arrived for the router since its last pass
  bool links_changed_ = false; // a link went down or came back since the last pump
};

}  // namespace ttemu::node
