// `ttemu launch`: the launcher and control plane of a running system. It computes the routing
// tables, creates every chip's shared memory and writes the tables into it, starts one process
// per chip, wires the links, waits until every link is up, then serves `ttemu status`, fault
// changes and link tests on a private UNIX socket until Ctrl-C / SIGTERM (or until the client
// command given after `--` exits), and tears everything down: no process, segment or socket
// is left. If the launcher itself is killed, its chips exit by themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <memory>

#include "emulator/process/chip_messages.hpp"
#include "launcher/mpi_bootstrap.hpp"
#include "launcher/spin_choice.hpp"
#include "emulator/wire/transport.hpp"

namespace ttemu::launcher {

// The largest `--dram-mib`: 64 GiB per chip, twice a Blackhole's (segments are sparse).
inline constexpr uint64_t kMaxDramMib = 65536;

struct LaunchOptions {
  std::string file;                   // system specification
  std::string faults;                 // fault plan, optional
  std::string tables;                 // routing tables (JSON) instead of computed ones, optional
  std::optional<uint64_t> seed;
  std::vector<std::string> command;   // client to run against the live system
  uint16_t window = 256;              // TT-link frames in flight (docs/fabric.md#defaults-from-measurements)
  int window_kib = 1024;              // ... and KiB of payload in flight (0: no bound; the same section)
  std::optional<uint64_t> dram_mib;   // override the architecture's DRAM size
  std::string bind = "127.0.0.1";
  double ready_timeout = 120;         // seconds for every link to come up
  int data_fvcs = 2;                  // plus the control FVC
  int rb_packets = 128;               // routing buffer depth per input per lane (docs/fabric.md#defaults-from-measurements)
  int timeout_ms = 3000;              // a buffer head stuck this long is dropped (5.5)
  int ack_delay_us = 1000;            // TT-link pure acknowledgements wait this long for data
  int credit_delay_us = 10000;        // freed buffer slots are returned after this long
  // Chips poll this long after traffic before sleeping; kSpinAuto: resolve_spin_us() decides.
  int spin_us = kSpinAuto;
  std::string cpu_bind = "none";      // none | blocks (docs/fabric.md#cpu-binding)
  std::string sched = "normal";       // normal | batch (docs/fabric.md#scheduling)
  int timer_slack_us = 1000;          // a sleeping chip wakes at most this late for a deadline (docs/fabric.md#defaults-from-measurements)
  std::string transport;              // udp | uring | shm; empty: $TTEMU_TRANSPORT, else uring
  std::string memory = "open";        // open | protected: every RDMA packet needs a memory key
  std::string events_dir;             // the event log's directory; empty: default_events_dir()
  // The Ethernet Fallback Channel (docs/efc.md); defaults as the chips' (process::msg::Config).
  bool efc = process::msg::Config{}.efc;
  int efc_timeouts = process::msg::Config{}.efc_timeouts;          // retransmission timeouts in a row that break a port
  double efc_error_rate = process::msg::Config{}.efc_error_rate;   // receive errors per frame over an interval that break it; 0: off
  int efc_interval_ms = process::msg::Config{}.efc_interval_ms;
  // The status queues' rates and alarms (node/status_rates.hpp).
  int status_interval_ms = process::msg::Config{}.status_interval_ms;  // while traffic flows; 0: none
  double crc_alarm = process::msg::Config{}.crc_alarm;                 // CRC errors per frame that arrived; 0: never
  double retransmit_alarm = process::msg::Config{}.retransmit_alarm;   // retransmissions per data frame sent; 0: never
};

using wire::kTransports;

// The transport a launch uses: the option, else $TTEMU_TRANSPORT, else uring (the faster here,
// docs/fabric.md#transports); throws Error naming a value that is none of kTransports, or a
// uring chosen where io_uring is refused. The default is uring even where io_uring is
// refused: each chip falls back to udp where its host refuses it (a host of a multi-host
// launch may differ from the launcher's), and says so in `ttemu status`.
struct ChosenTransport {
  std::string name;
  bool by_default = false;  // neither the option nor $TTEMU_TRANSPORT named it
  std::string note;         // why this host's chips will not use the default's io_uring (empty: they will)
};
ChosenTransport resolve_transport(const std::string& option);

// Returns the exit status: the client's when a command runs, else 0 after a clean stop.
int run_launch(const LaunchOptions& options);

// Where each chip of a multi-host launch runs (control/host_placement.hpp), and which host is
// this one.
struct MultiHost {
  std::vector<int> host_of_node;  // index into the system's hosts
  int self = 0;
  bool here(int node) const { return host_of_node.at(static_cast<size_t>(node)) == self; }
  // here(), by node.
  std::vector<bool> here_by_node() const {
    std::vector<bool> out;
    for (int h : host_of_node) out.push_back(h == self);
    return out;
  }
};

namespace detail {
class Launcher;
}

// The control plane of a multi-host launch: rank 0 of the host agents (host_agent.hpp). It
// is `ttemu launch` with the other hosts' chips reached through their agents.
class ClusterLauncher {
 public:
  ClusterLauncher(const LaunchOptions& options, MultiHost multi);
  ~ClusterLauncher();
  // Everything up to starting the chips; returns the TCP port the agents connect to (on
  // options.bind, this host's address).
  uint16_t prepare();
  // Starts every host's chips (`hosts` by rank) and serves until the system stops; returns
  // the exit status.
  int run(std::vector<HostEntry> hosts);

 private:
  std::unique_ptr<detail::Launcher> impl_;
};

// The default system: the Galaxy 4x8 from the source tree's topologies/.
std::string default_system_file();

// The ttemu binary this process runs (for chip processes and campaign runs); throws Error.
std::string self_exe();

// This process's command line, for commands that relaunch themselves under `ttemu launch`.
void set_command_line(int argc, char** argv);
const std::vector<std::string>& command_line();

}  // namespace ttemu::launcher
