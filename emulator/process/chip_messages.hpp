// The control messages between the launcher and its chip processes, typed: one JSON line each
// over the socketpair, with "type" naming the message and the fields below (the same names in
// the JSON). Both ends include this header and nothing else decides what a message holds.
//
// Launcher -> chip: Config (once, first), Peers (after every chip is Bound; again for a port
// whose far end restarted), Faults, Stream and Ping (link tests), Stall, PeerDown, Tables
// (reload them from L1), Injection (pause or resume), AdminDown, Snapshot, Capture,
// RecordDeliveries, Stop.
// Chip -> launcher: Bound, LinkState, StreamDone, PingDone, StatusPushed (drain my status queue),
// SnapshotTaken, Captured, DeliveriesTaken, ChipError (the chip stops after it).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/link/efc.hpp"
#include "emulator/node/status_rates.hpp"

namespace ttemu::process::msg {

// --- launcher -> chip -----------------------------------------------------------------------

struct LinkSetup {
  uint8_t port = 0;
  uint16_t peer_mesh = 0, peer_device = 0;
  uint8_t peer_port = 0;
  nlohmann::json faults;  // link::to_json(DirectionFaults), or null for none
  int keepalive_ms = 0;   // link::LinkConfig::keepalive; 0 (absent): none
};

struct Config {
  static constexpr const char* kType = "config";
  std::string arch;
  uint64_t job_hash = 0, seed = 1;
  uint16_t window = 0;
  int window_kib = 0;  // TT-link payload in flight at most (0: no bound)
  std::string bind;
  std::vector<LinkSetup> links;  // the wired ports; each plane's table is in the routers' L1
  int planes = 1, data_fvcs = 0, rb_packets = 0, timeout_ms = 0;
  int mesh_rows = 0, mesh_cols = 0;  // the chip's mesh, for multicast copies
  int ack_delay_us = 0, credit_delay_us = 0, spin_us = 0;
  int timer_slack_us = 0;  // how late a sleeping chip may wake for a deadline (EventLoop)
  // --cpu-bind blocks: the chip's rank in its host's locality order, of cpu_ranks chips; it
  // binds itself to its share of the CPUs it started with (cpu_binding.hpp). 0 ranks: unbound.
  int cpu_rank = 0, cpu_ranks = 0;
  bool sched_batch = false;  // --sched batch: the chip runs under SCHED_BATCH (cpu_binding.hpp)
  std::string transport = "udp";  // udp | uring | shm
  bool udp_if_no_uring = false;    // uring by default, not by choice: a chip refused io_uring uses udp
  std::string memory = "open";    // open | protected (session::MemoryMode): keys the center demands
  // The Ethernet Fallback Channel (link::EfcConfig).
  bool efc = link::EfcConfig{}.enabled;
  int efc_timeouts = link::EfcConfig{}.timeouts;
  int efc_interval_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(link::EfcConfig{}.interval).count());
  double efc_error_rate = link::EfcConfig{}.error_rate;
  // The status queue's rate entries and alarms (node::RatesConfig).
  int status_interval_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(node::RatesConfig{}.interval).count());
  double crc_alarm = node::RatesConfig{}.crc_alarm, retransmit_alarm = node::RatesConfig{}.retransmit_alarm;
};

struct PeerAddress {
  std::string addr;
  uint16_t udp = 0;
  uint16_t lazy = 0;  // the peer chip's lazy inbox (wire::LazyInbox) on addr; 0: none
};

struct Peers {
  static constexpr const char* kType = "peers";
  std::map<std::string, PeerAddress> peers;  // by port number
};

struct Faults {
  static constexpr const char* kType = "faults";
  uint8_t port = 0;
  nlohmann::json faults;  // link::to_json(DirectionFaults)
  uint64_t seed = 1;
  bool from_now = false;  // its down intervals count from now, not from when the links started
};

struct Stream {
  static constexpr const char* kType = "stream";
  uint8_t port = 0;
  uint64_t id = 0, frames = 0;
  uint32_t size = 0;
};

struct Ping {
  static constexpr const char* kType = "ping";
  uint8_t port = 0;
  uint64_t id = 0;
  int count = 0;
  uint32_t size = 0;
};

struct Stall {
  static constexpr const char* kType = "stall";
  uint8_t fvc = 0;
  bool stalled = true;
};

struct PeerDown {
  static constexpr const char* kType = "peer_down";
  uint8_t port = 0;
};

// New routing tables are in the routers' L1 blocks (version `version`): load them.
struct Tables {
  static constexpr const char* kType = "tables";
  uint32_t version = 0;
};

struct Injection {
  static constexpr const char* kType = "injection";
  bool paused = false;
};

// The operator takes a link out of service (or back): its wire carries nothing either way.
struct AdminDown {
  static constexpr const char* kType = "admin_down";
  uint8_t port = 0;
  bool down = true;
};

// What the chip holds now (ttemu snapshot): answered with SnapshotTaken.
struct Snapshot {
  static constexpr const char* kType = "snapshot";
  uint64_t id = 0;
};

// Record what `ports` send to the capture sink `sink` (wire/capture_stream.hpp), replacing a
// capture running; an empty sink stops it. Answered with Captured.
struct Capture {
  static constexpr const char* kType = "capture";
  uint64_t id = 0;
  std::string sink;
  std::vector<uint8_t> ports;
};

// Record what the router delivers (session::Deliveries) from now on, afresh, or stop; either
// way answered with DeliveriesTaken: what was recorded until now.
struct RecordDeliveries {
  static constexpr const char* kType = "record_deliveries";
  uint64_t id = 0;
  bool record = true;
};

struct Stop {
  static constexpr const char* kType = "stop";
};

using ToChip = std::variant<Config, Peers, Faults, Stream, Ping, Stall, PeerDown, Tables, Injection, AdminDown, Snapshot, Capture, RecordDeliveries, Stop>;

// --- chip -> launcher -----------------------------------------------------------------------

struct Bound {
  static constexpr const char* kType = "bound";
  std::map<std::string, uint16_t> ports;  // port number -> bound UDP port
  uint16_t lazy = 0;                       // the chip's lazy inbox (wire::LazyInbox); 0: none
};

struct LinkState {
  static constexpr const char* kType = "link";
  uint8_t port = 0;
  std::string state;  // link::to_string(LinkState)
};

struct StreamDone {
  static constexpr const char* kType = "stream_done";
  uint8_t port = 0;
  uint64_t id = 0, frames = 0, bytes = 0;
  double seconds = 0;
};

struct PingDone {
  static constexpr const char* kType = "ping_done";
  uint8_t port = 0;
  uint64_t id = 0;
  std::vector<double> rtt_us;
};

// The chip pushed into its status queue after the control plane had drained it: drain again.
// (One message per drain, not per entry: the entries themselves stay in the queue.)
struct StatusPushed {
  static constexpr const char* kType = "status";
  uint64_t pushed = 0;  // entries pushed so far
};

struct SnapshotTaken {
  static constexpr const char* kType = "snapshot_taken";
  uint64_t id = 0;
  nlohmann::json state;  // node::ChipNode::snapshot
};

// A Capture done: what the chip recorded and dropped in the capture it ended (a start reports
// the one it replaced, if any); error: why it could not start.
struct Captured {
  static constexpr const char* kType = "captured";
  uint64_t id = 0, recorded = 0, dropped = 0;
  bool sink_lost = false;  // the sink went away during the capture
  std::string error;
};

struct DeliveriesTaken {
  static constexpr const char* kType = "deliveries_taken";
  uint64_t id = 0;
  nlohmann::json deliveries;  // session::Deliveries::to_json
};

struct ChipError {
  static constexpr const char* kType = "error";
  std::string message;
};

using FromChip = std::variant<Bound, LinkState, StreamDone, PingDone, StatusPushed, SnapshotTaken, Captured, DeliveriesTaken, ChipError>;

// One handler per message type, for std::visit: std::visit(Overloaded{[](const Config&) {...}, ...}, m).
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

// One JSON line (with its newline). The JSON object alone, for replies that pass fields on.
std::string encode(const ToChip& m);
std::string encode(const FromChip& m);
nlohmann::json to_json_object(const FromChip& m);
// Throws Error naming the message type and what is wrong with it.
ToChip decode_to_chip(std::string_view line);
FromChip decode_from_chip(std::string_view line);

}  // namespace ttemu::process::msg
