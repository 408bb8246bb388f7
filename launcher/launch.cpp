#include "launcher/launch.hpp"
#include "launcher/run_command.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/chip/chip_control.hpp"
#include "emulator/common/asio.hpp"
#include "emulator/common/error.hpp"
#include "emulator/control/cpu_blocks.hpp"
#include "emulator/control/live_routes.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_json.hpp"
#include "emulator/job/description.hpp"
#include "emulator/link/fault_plan.hpp"
#include "emulator/process/chip_messages.hpp"
#include "emulator/process/cpu_binding.hpp"
#include "emulator/process/shm_transport.hpp"
#include "emulator/process/uring_transport.hpp"
#include "emulator/session/deliveries.hpp"
#include "emulator/wire/capture_stream.hpp"
#include "launcher/chip_memory.hpp"
#include "launcher/control_requests.hpp"
#include "launcher/control_server.hpp"
#include "launcher/event_log.hpp"
#include "launcher/host_agents.hpp"
#include "launcher/local_chips.hpp"
#include "launcher/system_report.hpp"
#include "emulator/control/host_placement.hpp"

namespace ttemu::launcher {

namespace msg = process::msg;

namespace asio = boost::asio;
using nlohmann::json;
using routing::to_string;
using Clock = std::chrono::steady_clock;

namespace detail {

class Launcher : public ControlTarget {
 public:
  Launcher(const LaunchOptions& o, std::optional<MultiHost> multi)
      : o_(o), multi_(std::move(multi)), signals_(io_, SIGINT, SIGTERM), children_(io_, SIGCHLD), deadline_(io_), reroute_timer_(io_) {}

  ~Launcher() override { teardown_now(); }

  int run() {
    prepare();
    return go();
  }

  // Everything up to starting the chips. In a multi-host launch, returns the port the host
  // agents connect to.
  uint16_t prepare() {
    const ChosenTransport transport = resolve_transport(o_.transport);
    o_.transport = transport.name;
    uring_by_default_ = transport.by_default;
    if (!transport.note.empty()) fmt::print(stderr, "ttemu: {}\n", transport.note);
    sys_ = control::load_system(o_.file);
    o_.spin_us = resolve_spin_us(o_.spin_us, static_cast<size_t>(sys_.node_count()), process::allowed_cpus().size());
    tables_ = control::compute_tables(sys_);
    if (!o_.tables.empty()) {
      // Deliberately chosen (or broken) tables, as `ttemu topo tables --json` writes them.
      tables_ = control::load_tables_json(sys_, o_.tables);
    }
    if (!o_.faults.empty()) plan_ = link::load_fault_plan(o_.faults, sys_.wiring());
    seed_ = o_.seed ? *o_.seed : plan_.seed ? *plan_.seed : 1;
    auto stale = job::clean_stale();
    if (!stale.empty()) fmt::print(stderr, "ttemu: removed {} leftover(s) of dead jobs\n", stale.size());
    job_ = job::JobId::create();
    started_ = Clock::now();
    log_ = std::make_unique<EventLog>(o_.events_dir.empty() ? default_events_dir() : o_.events_dir, job_.text());
    json begun = job_started_event(sys_, std::filesystem::absolute(o_.file).string());
    begun["job"] = job_.text();
    begun["transport"] = o_.transport;
    begun["spin_us"] = o_.spin_us;
    record(stamp(begun, uptime()));
    std::vector<bool> here;
    if (multi_) {
      if (o_.transport == "shm") throw Error("--transport shm joins chips of one host; a multi-host launch uses udp or uring");
      here = multi_->here_by_node();
    }
    if (o_.cpu_bind == "blocks") rank_for_cpus();
    memory_ = std::make_unique<ChipMemory>(job_, sys_, tables_,
                                           o_.dram_mib ? std::optional<size_t>(*o_.dram_mib << 20) : std::nullopt,
                                           o_.transport == "shm" ? process::shm_ring_capacity(o_.window) : 0, here);
    publish_description();
    server_ = std::make_unique<ControlServer>(io_, job::control_socket_path(job_), *this);
    socket_path_ = server_->path();
    signals_.async_wait([this](auto ec, int sig) {
      if (!ec) {
        fmt::print(stderr, "\nttemu: {} received, stopping {} chip(s)\n", strsignal(sig), chips_ ? chips_->running() : 0);
        shutdown(0);
      }
    });
    watch_children();
    for (int v = 0; v < sys_.node_count(); ++v) {
      for (uint8_t port : sys_.wired_ports(v)) link_state_[{v, port}] = "handshake";
    }
    bound_ports_.resize(sys_.chips.size());
    bound_lazy_.resize(sys_.chips.size());
    ChipSupervisor::Events events{[this](int node, const msg::FromChip& m) { on_chip_message(node, m); },
                                  [this](int node, int pid, const std::string& how) { on_chip_death(node, pid, how); }};
    auto local = std::make_unique<LocalChips>(io_, sys_, job_, socket_path_, events);
    if (!multi_) {
      chips_ = std::move(local);
      return 0;
    }
    auto agents = std::make_unique<HostAgents>(io_, sys_, *multi_, std::move(local), events, agent_hooks());
    agents_ = agents.get();
    chips_ = std::move(agents);
    return agents_->listen(o_.bind);
  }

  // Starts the chips (of every host: `hosts`, by rank, in a multi-host launch) and runs until
  // the system stops.
  int go(std::vector<HostEntry> hosts = {}) {
    if (agents_) agents_->set_hosts(std::move(hosts));
    chips_->start_all([this](int v) { return config_for(v); });
    deadline_.expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.ready_timeout)));
    deadline_.async_wait([this](auto ec) {
      if (ec || ready_) return;
      std::string missing;
      int n = 0;
      for (const auto& [key, st] : link_state_) {
        if (st != "up" && n++ < 5) missing += " " + to_string(sys_.chips[static_cast<size_t>(key.first)].id) + "P" + std::to_string(key.second);
      }
      fail(fmt::format("the system did not come up within {} s ({} of {} chip(s) bound; waiting for:{})",
                       o_.ready_timeout, bound_, sys_.chips.size(), missing.empty() ? " chip start-up" : missing));
    });
    io_.run();
    teardown_now();
    if (!error_.empty()) throw Error(error_);
    return exit_status_;
  }

 private:
  // --- what clients read ------------------------------------------------------------------

  // What clients need to address the chips and read their memory, typed (job/description.hpp).
  void publish_description() {
    job::publish(describe_system(sys_, job_, describe_options(o_, sys_, multi_ ? &*multi_ : nullptr)));
    published_ = true;
  }

  // What the control plane does for the host agents of a multi-host launch.
  HostAgents::Hooks agent_hooks() {
    HostAgents::Hooks h;
    h.setup = [this] {
      return json{{"job", job_.text()}, {"tables", control::tables_to_json(sys_, live_ ? live_->tables() : tables_)},
                  {"version", live_ ? live_->version() : 1}, {"transport", o_.transport}};
    };
    h.status_entry = [this](int node, const chip::StatusEntry& e, int64_t age_ns) {
      const auto now = Clock::now();
      on_status_entry(node, e, std::chrono::duration<double>(now - started_).count() - static_cast<double>(age_ns) / 1e9,
                      std::chrono::nanoseconds(age_ns));
    };
    h.request = [this](const std::string& line, const std::function<void(const std::string&)>& answer) {
      handle_request(line, *this, answer);
    };
    h.host_lost = [this](const std::string& host, const std::string& why) {
      if (stopping_) return;
      fmt::print(stderr, "ttemu: host {} is gone: {}\n", host, why);
      json e = system_event("host_lost", uptime());
      e["host"] = host;
      e["why"] = why;
      record(e);
      if (!ready_) fail(fmt::format("host {} was lost while the system was coming up", host));
    };
    return h;
  }

  bool here(int v) const { return !agents_ || agents_->here(v); }
  // Whether `ttemu chip restart` can bring the chip back (chip_action says why not).
  bool can_restart(int) const { return o_.transport != "shm"; }
  const std::string& address_of(int v) const { return agents_ ? agents_->address_of(v) : o_.bind; }

  // --- the chips: configuration, wiring, readiness, deaths ---------------------------------

  msg::Config config_for(int v) {
    msg::Config m;
    const auto& chip = sys_.chips[static_cast<size_t>(v)];
    for (uint8_t port : sys_.wired_ports(v)) {
      routing::PortId self{chip.id, port};
      routing::PortId peer = *sys_.peer(self);
      msg::LinkSetup entry{self.port, peer.chip.mesh, peer.chip.device, peer.port, {}, 0};
      // A wire between hosts can be cut with nothing flowing: its ends probe it when idle.
      if (agents_ && agents_->host_name(v) != agents_->host_name(*sys_.node(peer.chip))) entry.keepalive_ms = kCrossHostKeepaliveMs;
      if (auto it = plan_.tx.find(self); it != plan_.tx.end()) entry.faults = link::to_json(it->second);
      m.links.push_back(entry);
    }
    m.arch = sys_.spec_of(v).arch;
    m.job_hash = job_.hash();
    m.seed = seed_;
    m.window = static_cast<uint16_t>(o_.window);
    m.window_kib = o_.window_kib;
    m.bind = address_of(v);
    m.planes = sys_.planes;
    m.data_fvcs = o_.data_fvcs;
    m.rb_packets = o_.rb_packets;
    m.mesh_rows = sys_.mesh_of(v).chips.rows;
    m.mesh_cols = sys_.mesh_of(v).chips.cols;
    m.timeout_ms = o_.timeout_ms;
    m.ack_delay_us = o_.ack_delay_us;
    m.credit_delay_us = o_.credit_delay_us;
    m.spin_us = o_.spin_us;
    m.timer_slack_us = o_.timer_slack_us;
    m.sched_batch = o_.sched == "batch";
    if (!cpu_rank_.empty()) m.cpu_rank = cpu_rank_[static_cast<size_t>(v)].first, m.cpu_ranks = cpu_rank_[static_cast<size_t>(v)].second;
    m.transport = o_.transport;
    m.udp_if_no_uring = uring_by_default_;
    m.memory = o_.memory;
    m.efc = o_.efc;
    m.efc_timeouts = o_.efc_timeouts;
    m.efc_error_rate = o_.efc_error_rate;
    m.efc_interval_ms = o_.efc_interval_ms;
    m.status_interval_ms = o_.status_interval_ms;
    m.crc_alarm = o_.crc_alarm;
    m.retransmit_alarm = o_.retransmit_alarm;
    return m;
  }

  void send(int node, const msg::ToChip& m) { chips_->send(node, m); }

  void on_chip_message(int node, const msg::FromChip& m) {
    const std::string name = chip_name(node);
    auto finish = [&](uint64_t id) {
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      auto done = std::move(it->second);
      pending_.erase(it);
      done(msg::to_json_object(m));
    };
    std::visit(msg::Overloaded{
                   [&](const msg::Bound& b) {
                     bound_ports_[static_cast<size_t>(node)] = b.ports;
                     bound_lazy_[static_cast<size_t>(node)] = b.lazy;
                     if (ready_) return rewire_restarted(node);
                     if (++bound_ == sys_.node_count()) wire_links();
                   },
                   [&](const msg::LinkState& l) {
                     link_state_[{node, l.port}] = l.state;
                     if (ready_ && l.state != "up") fmt::print(stderr, "ttemu: link {}P{} is {}\n", name, l.port, l.state);
                     if (ready_ && l.state == "up") fmt::print(stderr, "ttemu: link {}P{} is up again\n", name, l.port);
                     check_ready();  // (the control plane hears link states from the status queues)
                   },
                   [&](const msg::StreamDone& d) { finish(d.id); },
                   [&](const msg::PingDone& d) { finish(d.id); },
                   [&](const msg::SnapshotTaken& t) { finish(t.id); },
                   [&](const msg::Captured& c) { finish(c.id); },
                   [&](const msg::DeliveriesTaken& d) { finish(d.id); },
                   [&](const msg::StatusPushed&) { drain_status(node); },
                   [&](const msg::ChipError& e) { fmt::print(stderr, "ttemu: chip {}: {}\n", name, e.message); },
               },
               m);
  }

  // The far end of chip v's port (as its Bound message names it): the peer's port, and the
  // address its socket is bound to.
  std::pair<routing::PortId, msg::PeerAddress> far_end(int v, const std::string& port) const {
    const routing::PortId peer = *sys_.peer({sys_.chips[static_cast<size_t>(v)].id, static_cast<uint8_t>(std::stoi(port))});
    const int peer_node = *sys_.node(peer.chip);
    return {peer, {address_of(peer_node), bound_ports_[static_cast<size_t>(peer_node)].at(std::to_string(peer.port)),
                   bound_lazy_[static_cast<size_t>(peer_node)]}};
  }

  void wire_links() {
    for (int v = 0; v < sys_.node_count(); ++v) {
      msg::Peers peers;
      for (auto& [port, udp] : bound_ports_[static_cast<size_t>(v)]) peers.peers[port] = far_end(v, port).second;
      send(v, peers);
    }
    check_ready();
  }

  void check_ready() {
    if (ready_ || bound_ < sys_.node_count()) return;
    for (const auto& [key, st] : link_state_) {
      if (st != "up") return;
    }
    ready_ = true;
    deadline_.cancel();
    live_ = std::make_unique<control::LiveRoutes>(sys_, tables_, o_.efc);
    double secs = std::chrono::duration<double>(Clock::now() - started_).count();
    fmt::print("ttemu: {}: {} chip(s), {} link(s) up, ready in {:.2f} s (job {})\n", o_.file,
               sys_.chips.size(), sys_.links.size(), secs, job_.text());
    fmt::print("ttemu: control socket {}; 'ttemu status' shows the system, Ctrl-C stops it\n", socket_path_);
    fmt::print("ttemu: event log {}\n", log_->path());
    std::fflush(stdout);
    if (!o_.command.empty()) spawn_client();
  }

  void spawn_client() {
    std::vector<char*> argv;
    for (auto& a : o_.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string job = job_.text();
    const std::string fi_path = provider_path_with_ours();  // libfabric clients find the tt provider
    pid_t pid = ::fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0) {
      ::setenv("TTEMU_JOB", job.c_str(), 1);
      ::setenv("TTEMU_CONTROL", socket_path_.c_str(), 1);
      if (!fi_path.empty()) ::setenv("FI_PROVIDER_PATH", fi_path.c_str(), 1);
      ::execvp(argv[0], argv.data());
      fmt::print(stderr, "ttemu: cannot run '{}': {}\n", o_.command[0], std::strerror(errno));
      _exit(127);
    }
    client_pid_ = pid;
  }

  // The control plane knows at once when a chip process dies; its neighbours' links would only
  // notice when they next had something to send. They are told, and go down now.
  void tell_peers_of_death(int node) {
    const auto& dead = sys_.chips[static_cast<size_t>(node)];
    for (uint8_t port : sys_.wired_ports(node)) {
      auto peer = sys_.peer({dead.id, port});  // a wired port has one
      send(*sys_.node(peer->chip), msg::PeerDown{peer->port});
    }
  }

  // Every child of the launcher: its chips (the supervisor tells of their deaths) and the client.
  void watch_children() {
    children_.async_wait([this](auto ec, int) {
      if (ec) return;
      int status = 0;
      pid_t pid;
      while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == client_pid_) {
          client_pid_ = 0;
          exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          shutdown(exit_status_);
          continue;
        }
        if (chips_) chips_->child_exited(pid, status);
      }
      watch_children();
    });
  }

  void on_chip_death(int node, int pid, const std::string& how) {
    drain_status(node);  // what it pushed before it died
    if (!stopping_) {
      fmt::print(stderr, "ttemu: chip {} (pid {}) {}\n", chip_name(node), pid, how);
      json died = launcher_event(sys_.chips[static_cast<size_t>(node)].id, "chip_died", uptime());
      died["pid"] = pid;
      died["how"] = how;
      record(died);
      if (!ready_) fail("a chip died while the system was coming up");
      tell_peers_of_death(node);
      if (live_) {
        live_->chip_alive(node, false);
        schedule_reroute();
      }
    }
    if (stopping_ && chips_->running() == 0) io_.stop();  // (a restarted chip died twice)
  }

  // --- the live control plane (spec 1.1.2): routes around what failed, operator actions --

  // One reroute per burst of news, LiveRoutes::kSettle after its first.
  void schedule_reroute() {
    if (!live_->news()) return;  // a reload is already due
    reroute_timer_.expires_after(control::LiveRoutes::kSettle);
    reroute_timer_.async_wait([this](auto ec) {
      if (ec || stopping_) return;
      if (auto r = live_->reload()) apply_reload(*r, "the fabric");
    });
  }

  // New tables into every live router's L1, then each chip loads them (between packets).
  json apply_reload(const control::Reload& r, const char* cause) {
    for (int v = 0; v < sys_.node_count(); ++v) {
      if (!chips_->alive(v) || !here(v)) continue;
      memory_->write_tables(v, r.tables);
      send(v, msg::Tables{static_cast<uint32_t>(r.version)});
    }
    if (agents_) agents_->reload_tables(control::tables_to_json(sys_, r.tables), static_cast<uint32_t>(r.version));
    json e = tables_reloaded_event(sys_, r, cause);
    record(stamp(e, uptime()));
    fmt::print(stderr, "ttemu: {}\n", reload_summary(e));
    if (agents_) report_cuts(r.failures);
    return e;
  }

  // Hosts whose every link between them is down: the network between them is cut (a lost host
  // is reported as such, not here). Said once when it happens and once when it heals.
  void report_cuts(const control::Failures& failures) {
    std::set<std::pair<int, int>> now;
    for (const auto& p : control::host_pairs(sys_, agents_->host_of_node(), failures)) {
      const std::string& a = sys_.hosts[static_cast<size_t>(p.a)];
      const std::string& b = sys_.hosts[static_cast<size_t>(p.b)];
      const bool was = cut_.count({p.a, p.b}) > 0;
      if (p.cut()) now.insert({p.a, p.b});
      if (p.cut() == was) continue;
      if (p.cut()) {
        fmt::print(stderr, "ttemu: hosts {} and {} are cut apart: all {} link(s) between them are down; routed around\n", a, b, p.links);
      } else {
        fmt::print(stderr, "ttemu: hosts {} and {} are linked again: {} of {} link(s) up\n", a, b, p.links - p.down, p.links);
      }
      json e = system_event(p.cut() ? "hosts_cut" : "hosts_linked", uptime());
      e["hosts"] = {a, b};
      e["links"] = p.links;
      e["up"] = p.links - p.down;
      record(e);
    }
    cut_ = std::move(now);
  }

  control::LiveRoutes& live() {
    if (!live_) throw Error("the system is still coming up");
    return *live_;
  }

  int chip_node(const std::string& name) const {
    auto chip = routing::parse_chip(name);
    auto node = chip ? sys_.node(*chip) : std::nullopt;
    if (!node) throw Error(fmt::format("'{}' is not a chip of {}", printable(name), o_.file));
    return *node;
  }

  json reload_tables(const std::vector<std::string>& fail) override {
    live().set_operator_failures(control::parse_failures(sys_, fail));
    const json e = apply_reload(*live().reload(/*force=*/true), "operator");
    return {{"version", e["version"]}, {"failed", e["failed"]}, {"unreachable_pairs", e["unreachable_pairs"]},
            {"switch", e["switch"]}};
  }

  // The operator's word holds for both ends whether or not their chips run: an end whose chip
  // is dead takes it when the chip restarts (a cut that ends while its far end is dead would
  // otherwise leave the near end out of service for good).
  json admin_link(const std::string& name, bool down) override {
    const LiveLink l = wired_link(name);
    json later = json::array();  // ends that take it at their chip's restart
    for (const auto& [node, end] : {std::pair{l.node, l.port}, std::pair{l.peer_node, l.peer}}) {
      if (down) {
        out_of_service_.insert(end);
      } else {
        out_of_service_.erase(end);
      }
      if (chips_->alive(node)) {
        send(node, msg::AdminDown{end.port, down});
      } else if (can_restart(node)) {
        later.push_back(to_string(end));
      }
    }
    json e = launcher_event(l.port.chip, "link_admin", uptime());
    e["port"] = to_string(l.port);
    e["peer"] = to_string(l.peer);
    e["down"] = down;
    if (!later.empty()) e["at_restart"] = later;
    record(e);
    return {{"ok", true}, {"link", to_string(l.port)}, {"peer", to_string(l.peer)}, {"down", down}, {"at_restart", later}};
  }

  json chip_action(const std::string& name, bool restart) override {
    const int v = chip_node(name);
    const routing::ChipId id = sys_.chips[static_cast<size_t>(v)].id;
    if (!restart) {
      if (!chips_->alive(v)) throw Error(fmt::format("chip {} is not running", to_string(id)));
      const int pid = chips_->pid(v);
      record(launcher_event(id, "chip_killed", uptime()));
      chips_->kill(v);  // its death is seen as any other (SIGCHLD)
      return {{"ok", true}, {"chip", to_string(id)}, {"pid", pid}};
    }
    if (chips_->alive(v)) throw Error(fmt::format("chip {} is running: kill it first", to_string(id)));
    if (o_.transport == "shm") throw Error("a chip cannot restart over --transport shm (its rings stay with the old process); use udp or uring");
    // A new process: empty memory, the tables in force, new sockets; its links handshake
    // anew, and the tables are computed again to include it once they are up. A chip of
    // another host is started by its agent, which renews its memory first.
    const auto version = static_cast<uint32_t>(live().version());
    if (here(v)) memory_->renew(v, live().tables(), version);
    live().chip_restarted(v);
    for (uint8_t port : sys_.wired_ports(v)) link_state_[{v, port}] = "handshake";
    if (here(v)) {
      chips_->start(v, config_for(v));
    } else {
      agents_->restart(v, config_for(v), control::tables_to_json(sys_, live().tables()), version);
    }
    if (injection_paused_) send(v, msg::Injection{true});
    // The operator's word on its ports reaches it before its peers' addresses, which start it:
    // it never handshakes a link out of service.
    for (uint8_t port : sys_.wired_ports(v)) {
      if (out_of_service_.count({id, port})) send(v, msg::AdminDown{port, true});
    }
    json e = launcher_event(id, "chip_restarted", uptime());
    e["pid"] = chips_->pid(v);
    record(e);
    return {{"ok", true}, {"chip", to_string(id)}, {"pid", chips_->pid(v)}};
  }

  // A restarted chip bound its sockets: it learns its peers' addresses, and they learn its.
  void rewire_restarted(int v) {
    msg::Peers own;
    for (auto& [port, udp] : bound_ports_[static_cast<size_t>(v)]) {
      const auto [peer, address] = far_end(v, port);
      own.peers[port] = address;
      msg::Peers theirs;
      theirs.peers[std::to_string(peer.port)] = {address_of(v), udp, bound_lazy_[static_cast<size_t>(v)]};
      send(*sys_.node(peer.chip), theirs);
    }
    send(v, own);
  }

  json pause_injection(bool paused) override {
    injection_paused_ = paused;
    int chips = 0;
    for (int v = 0; v < sys_.node_count(); ++v) {
      if (!chips_->alive(v)) continue;
      send(v, msg::Injection{paused});
      ++chips;
    }
    json e = system_event("injection", uptime());
    e["paused"] = paused;
    record(e);
    return {{"paused", paused}, {"chips", chips}};
  }

  // --- requests (ControlTarget); control_requests.cpp has checked every field -----------

  bool ready() const override { return ready_; }

  json event_log() override {
    const std::string path = log_ ? log_->path() : "";
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return {{"path", path}, {"host", multi_ ? sys_.hosts[static_cast<size_t>(multi_->self)] : ""}, {"text", text.str()}};
  }
  int data_fvcs() const override { return o_.data_fvcs; }
  void stop() override { shutdown(0); }

  void stall(const std::string& name, int fvc, bool stalled) override {
    send(chip_node(name), msg::Stall{static_cast<uint8_t>(fvc), stalled});
  }

  void status(Reply reply) override {
    for (int v = 0; v < sys_.node_count(); ++v) drain_status(v);
    auto assemble = [this, reply](const json& remote_chips, const json& remote_ends) {
      json chips = json::array(), links = json::array();
      for (int v = 0; v < sys_.node_count(); ++v) {
        const std::string name = chip_name(v);
        json c = here(v) ? chip_report(sys_, v, memory_->control(v))
                         : remote_chips.contains(name) ? remote_chips[name] : json{{"name", name}, {"unreachable", true}};
        c["pid"] = chips_->pid(v);
        c["alive"] = chips_->alive(v);
        if (here(v) && chips_->alive(v)) {
          c["cpus"] = process::cpus_allowed_of(chips_->pid(v));
          c["sched"] = process::scheduling_of(chips_->pid(v));
        }
        c["host"] = agents_ ? agents_->host_name(v) : sys_.chips[static_cast<size_t>(v)].host;
        chips.push_back(std::move(c));
      }
      for (const auto& l : sys_.links) {
        json ends = json::array();
        for (const auto& end : {l.a, l.b}) {
          const int node = *sys_.node(end.chip);
          const std::string port = to_string(end);
          ends.push_back(here(node) ? link_end_report(memory_->control(node), end, chips_->alive(node))
                         : remote_ends.contains(port) ? remote_ends[port]
                                                      : json{{"port", port}, {"state", chips_->alive(node) ? "unknown" : "dead"}});
          if (out_of_service_.count(end)) ends.back()["out_of_service"] = true;
        }
        links.push_back({{"a", to_string(l.a)}, {"b", to_string(l.b)}, {"plane", l.plane}, {"ends", ends}});
      }
      json hosts = json::array();
      for (int h = 0; agents_ && h < static_cast<int>(sys_.hosts.size()); ++h) hosts.push_back(sys_.hosts[static_cast<size_t>(h)]);
      reply({{"job", job_.text()}, {"system", o_.file}, {"system_path", std::filesystem::absolute(o_.file).string()},
             {"ready", ready_}, {"seed", seed_},
             {"planes", sys_.planes}, {"data_fvcs", o_.data_fvcs}, {"transport", o_.transport}, {"spin_us", o_.spin_us}, {"memory", o_.memory}, {"cpu_bind", o_.cpu_bind}, {"sched", o_.sched}, {"events", events_},
             {"tables_version", live_ ? live_->version() : 1}, {"injection_paused", injection_paused_},
             {"event_log", log_ ? log_->path() : ""}, {"hosts", hosts},
             {"uptime_s", uptime()},
             {"chips", chips}, {"links", links}});
    };
    if (agents_) return agents_->gather_status(assemble, kSnapshotWait);
    assemble(json::object(), json::object());
  }

  // Asks each chip of `nodes` (live ones) the message make(id) and gathers their answers by
  // node, each the chip's reply message as JSON; done(answers) once every one has answered, or
  // after kSnapshotWait with the chips that had not (their event loops are stuck) left out.
  void ask_chips(const std::vector<int>& nodes, const std::function<msg::ToChip(int node, uint64_t id)>& make,
                 std::function<void(const std::map<int, json>&)> done) {
    struct Gather {
      std::map<int, json> answers;
      int waiting = 0;
      bool replied = false;
      std::vector<uint64_t> ids;
    };
    auto g = std::make_shared<Gather>();
    auto timer = std::make_shared<asio::steady_timer>(io_);
    auto answer = [this, g, timer, done = std::move(done)] {
      if (g->replied) return;
      g->replied = true;
      timer->cancel();
      for (uint64_t id : g->ids) pending_.erase(id);
      done(g->answers);
    };
    for (int v : nodes) {
      if (!chips_->alive(v)) continue;
      const uint64_t id = ++next_test_;
      g->ids.push_back(id);
      ++g->waiting;
      pending_[id] = [g, v, answer](const json& taken) {
        g->answers[v] = taken;
        if (--g->waiting == 0) answer();
      };
      send(v, make(v, id));
    }
    if (g->waiting == 0) return answer();
    timer->expires_after(kSnapshotWait);
    timer->async_wait([answer](auto ec) {
      if (!ec) answer();
    });
  }

  std::string chip_name(int node) const { return to_string(sys_.chips[static_cast<size_t>(node)].id); }

  std::vector<int> every_node() const {
    std::vector<int> v(static_cast<size_t>(sys_.node_count()));
    std::iota(v.begin(), v.end(), 0);
    return v;
  }

  // Every live chip's state (ttemu snapshot); a chip that does not answer is named as silent.
  void snapshot(Reply reply) override {
    ask_chips(every_node(), [](int, uint64_t id) { return msg::Snapshot{id}; }, [this, reply](const std::map<int, json>& answers) {
      json chips = json::array();
      for (int v = 0; v < sys_.node_count(); ++v) {
        const std::string name = chip_name(v);
        chips.push_back(answers.count(v) ? answers.at(v).at("state")
                        : chips_->alive(v) ? json{{"chip", name}, {"answered", false}}
                                           : json{{"chip", name}, {"dead", true}});
      }
      reply({{"job", job_.text()}, {"uptime_s", uptime()}, {"tables_version", live_ ? live_->version() : 1}, {"chips", chips}});
    });
  }

  // ttemu capture (docs/capture.md): the chips with a captured link end record what those ends
  // send to the client's sink. One capture at a time; one whose client is gone is taken over.
  void capture(const CaptureRequest& c, Reply reply) override {
    if (agents_) throw Error("ttemu capture does not reach the chips of other hosts yet: it runs on single-host launches");
    if (c.stop) {
      if (c.sink != capture_sink_) throw Error(fmt::format("no capture to '{}' is running", printable(c.sink)));
      return stop_capture([this, reply](const std::vector<int>& nodes, const std::map<int, json>& answers) {
        reply(capture_report(nodes, answers));
      });
    }
    if (!capture_sink_.empty() && capture_sink_ != c.sink && wire::capture_sink_exists(capture_sink_)) {
      throw Error("another ttemu capture is running; stop it first");
    }
    std::map<int, std::vector<uint8_t>> ports;  // by node: the ends it records
    for (const routing::PortId end : sys_.link_ends(c.links)) ports[*sys_.node(end.chip)].push_back(end.port);
    // Chips of a capture taken over that record nothing now stop.
    for (int v : capture_nodes_) ports.try_emplace(v);
    std::vector<int> nodes;
    capture_nodes_.clear();
    for (const auto& [v, p] : ports) {
      nodes.push_back(v);
      if (!p.empty()) capture_nodes_.push_back(v);
    }
    capture_sink_ = c.sink;
    ask_chips(nodes, [ports, sink = c.sink](int v, uint64_t id) {
                return ports.at(v).empty() ? msg::Capture{id, "", {}} : msg::Capture{id, sink, ports.at(v)};
              },
              [this, nodes, reply](const std::map<int, json>& answers) {
                json r = capture_report(nodes, answers);
                if (r.contains("error")) stop_capture([](const std::vector<int>&, const std::map<int, json>&) {});  // none records
                reply(r);
              });
  }

  // Every chip recording for the capture stops; done(the chips asked, their answers).
  void stop_capture(std::function<void(const std::vector<int>&, const std::map<int, json>&)> done) {
    capture_sink_.clear();
    const std::vector<int> nodes = std::exchange(capture_nodes_, {});
    ask_chips(nodes, [](int, uint64_t id) { return msg::Capture{id, "", {}}; },
              [nodes, done = std::move(done)](const std::map<int, json>& answers) { done(nodes, answers); });
  }

  // ttemu traffic --replay: every live chip records what its router delivers, afresh (record)
  // or no more; the reply is the system's record until now, and the chips that did not answer.
  void deliveries(bool record, Reply reply) override {
    if (agents_) throw Error("recording deliveries does not reach the chips of other hosts yet: it runs on single-host launches");
    ask_chips(every_node(), [record](int, uint64_t id) { return msg::RecordDeliveries{id, record}; },
              [this, reply](const std::map<int, json>& answers) {
                session::Deliveries all;
                json silent = json::array();
                for (int v = 0; v < sys_.node_count(); ++v) {
                  if (answers.count(v)) all.add(session::Deliveries::from_json(answers.at(v).at("deliveries")));
                  else if (chips_->alive(v)) silent.push_back(chip_name(v));
                }
                reply({{"deliveries", all.to_json()}, {"silent", silent}});
              });
  }

  // The chips' answers to a Capture: what the capture that ended recorded and dropped, the
  // chips that are recording, and those that did not answer; an error if a chip could not start.
  json capture_report(const std::vector<int>& asked, const std::map<int, json>& answers) const {
    uint64_t recorded = 0, dropped = 0;
    json silent = json::array(), lost = json::array();
    for (int v : asked) {
      const std::string name = chip_name(v);
      if (!answers.count(v)) {
        silent.push_back(name);
        continue;
      }
      const json& a = answers.at(v);
      if (!a.at("error").get<std::string>().empty()) {
        return {{"error", fmt::format("chip {}: {}", name, a.at("error").get<std::string>())}};
      }
      recorded += a.at("recorded").get<uint64_t>();
      dropped += a.at("dropped").get<uint64_t>();
      if (a.at("sink_lost").get<bool>()) lost.push_back(name);
    }
    json chips = json::array();
    for (int v : capture_nodes_) chips.push_back(chip_name(v));
    return {{"ok", true}, {"sink", capture_sink_}, {"recording", chips}, {"recorded", recorded}, {"dropped", dropped},
            {"silent", silent}, {"sink_lost", lost}};
  }

  json apply_faults(const std::string& text, const std::string& source, bool from_now) override {
    link::FaultPlan plan = link::parse_fault_plan(text, source, sys_.wiring());
    int changed = 0;
    for (int v = 0; v < sys_.node_count(); ++v) {
      const auto& chip = sys_.chips[static_cast<size_t>(v)];
      for (uint8_t port : sys_.wired_ports(v)) {
        routing::PortId self{chip.id, port};
        auto it = plan.tx.find(self);
        link::DirectionFaults f = it == plan.tx.end() ? link::DirectionFaults{} : it->second;
        changed += f.any();
        send(v, msg::Faults{port, link::to_json(f), plan.seed ? *plan.seed : seed_, from_now});
      }
    }
    plan_ = plan;
    return {{"ok", true}, {"directions_with_faults", changed}};
  }

  // A wired port the client named, with its far end, both chips running; else an Error that
  // names what the user could have meant.
  struct LiveLink {
    routing::PortId port, peer;
    int node = 0, peer_node = 0;
  };
  LiveLink live_link(const std::string& name) const {
    const LiveLink l = wired_link(name);
    if (!chips_->alive(l.node)) throw Error(fmt::format("chip {} is not running", to_string(l.port.chip)));
    if (!chips_->alive(l.peer_node)) throw Error(fmt::format("the far end {} is not running", to_string(l.peer.chip)));
    return l;
  }
  // The same, whether or not its chips run.
  LiveLink wired_link(const std::string& name) const {
    auto port = routing::parse_port(name);
    auto node = port ? sys_.node(port->chip) : std::nullopt;
    if (!node || sys_.link_at(*node, port->port) < 0) {
      std::string wired;  // the chip's wired ports
      for (uint8_t p : node ? sys_.wired_ports(*node) : std::vector<uint8_t>{}) {
        wired += fmt::format("{}P{}", wired.empty() ? "" : ", ", p);
      }
      throw Error(fmt::format("'{}' is not a wired port of {}{}", printable(name), o_.file,
                              wired.empty() ? "" : fmt::format(" ({} has {})", to_string(port->chip), wired)));
    }
    const routing::PortId peer = *sys_.peer(*port);
    return {*port, peer, *node, *sys_.node(peer.chip)};
  }

  // The counters of a link's two ends (link_end_report's), read here or, for an end on another
  // host, asked of its agent; an end whose host does not answer in time is null. A ping reads
  // none (both null at once).
  void link_counters(const LiveLink& link, bool ping, std::function<void(const json& tx, const json& rx)> done) {
    if (ping) return done(json(), json());
    auto pick = [this](int node, routing::PortId end, const json& remote) {
      if (here(node)) return link_end_report(memory_->control(node), end, true)["counters"];
      const std::string name = to_string(end);
      return remote.contains(name) ? remote[name]["counters"] : json();
    };
    auto both = [=, this, done = std::move(done)](const json&, const json& remote) {
      done(pick(link.node, link.port, remote), pick(link.peer_node, link.peer, remote));
    };
    if (here(link.node) && here(link.peer_node)) return both(json::object(), json::object());
    agents_->gather_status(both, kSnapshotWait);
  }

  // The counters once the receiving end has counted every frame of a stream, for up to
  // `until`. The sending chip is done when every frame is acknowledged, and the receiving
  // chip delivers frames it held behind a gap just after acknowledging them (they are
  // checked as they are delivered), so its counts may trail by a moment.
  void counted_counters(const LinkTestRequest& t, const LiveLink& link, const json& rx0, Clock::time_point until,
                        std::function<void(const json& tx, const json& rx)> done) {
    link_counters(link, t.ping, [=, this](const json& tx, const json& rx) {
      const auto delta = [&](const char* name) { return rx.value(name, uint64_t{0}) - rx0.value(name, uint64_t{0}); };
      if (t.ping || tx.is_null() || rx.is_null() || delta("stream_verified") + delta("stream_errors") >= t.count ||
          Clock::now() >= until) {
        return done(tx, rx);
      }
      auto again = std::make_shared<asio::steady_timer>(io_);
      again->expires_after(std::chrono::milliseconds(1));
      again->async_wait([=, this](auto ec) {
        if (!ec) counted_counters(t, link, rx0, until, done);
        (void)again;  // alive until it fires
      });
    });
  }

  void link_test(const LinkTestRequest& t, Reply reply) override {
    const LiveLink link = live_link(t.link);
    if (!busy_.insert(link.port).second) throw Error(fmt::format("a test is already running on {}", to_string(link.port)));
    // From here on nothing throws: the port stays reserved until the test ends or times out.
    link_counters(link, t.ping, [=, this](const json& tx0, const json& rx0) { start_link_test(t, link, tx0, rx0, reply); });
  }

  // The test's stream or pings go out, with the counters they started from (null for a ping);
  // when the sending chip is done, the counters are read again and the test answered.
  void start_link_test(const LinkTestRequest& t, const LiveLink& link, const json& tx0, const json& rx0, Reply reply) {
    const routing::PortId port = link.port;
    if (!t.ping && (tx0.is_null() || rx0.is_null())) {
      busy_.erase(port);
      return reply({{"error", fmt::format("the hosts of {} did not answer", to_string(port))}});
    }
    const uint64_t id = ++next_test_;
    // A test that cannot finish (its link went down for good) answers with an error in time.
    auto timer = std::make_shared<asio::steady_timer>(io_);
    timer->expires_after(std::chrono::seconds(t.timeout_s));
    timer->async_wait([this, id, reply, port](auto ec) {
      if (ec || !pending_.count(id)) return;
      pending_.erase(id);
      busy_.erase(port);
      reply({{"error", fmt::format("the test on {} did not finish in time (is the link down?)", to_string(port))}});
    });
    pending_[id] = [=, this](const json& done) {
      timer->cancel();
      counted_counters(t, link, rx0, Clock::now() + std::chrono::seconds(1), [=, this](const json& tx1, const json& rx1) {
        busy_.erase(port);
        if (!t.ping && (tx1.is_null() || rx1.is_null())) {
          return reply({{"error", fmt::format("the test on {} ended, but the hosts of its ends did not answer", to_string(port))}});
        }
        reply(link_test_result(t, link, done, {tx0, rx0}, {tx1, rx1}));
      });
    };
    if (!t.ping) {
      send(link.node, msg::Stream{port.port, id, t.count, t.size});
    } else {
      send(link.node, msg::Ping{port.port, id, static_cast<int>(t.count), t.size});
    }
  }

  // The answer to a link test: the chip's report, and for a stream what the two ends counted
  // meanwhile (before and after: the sending end's counters, then the receiving end's).
  static json link_test_result(const LinkTestRequest& t, const LiveLink& link, const json& done, const std::pair<json, json>& before,
                               const std::pair<json, json>& after) {
    json r = done;
    r.erase("type");
    r["link"] = to_string(link.port);
    r["peer"] = to_string(link.peer);
    if (t.ping) return r;
    auto delta = [](const json& a, const json& b, const char* name) { return a.value(name, uint64_t{0}) - b.value(name, uint64_t{0}); };
    const double secs = done.at("seconds"), bytes = done.at("bytes");
    r["gb_per_s"] = secs > 0 ? bytes / secs / 1e9 : 0.0;
    r["verified"] = delta(after.second, before.second, "stream_verified");
    r["errors"] = delta(after.second, before.second, "stream_errors");
    r["retransmits"] = delta(after.first, before.first, "retransmits");
    r["crc_errors"] = delta(after.second, before.second, "crc_errors");
    r["timeouts"] = delta(after.first, before.first, "timeouts");
    return r;
  }

  // --- the status queues and the event log (spec 1.1.2.1) ---------------------------------

  // Takes what a chip of this host pushed into its status queue into the event log (the other
  // hosts' agents drain theirs and send the entries: on_status_entry).
  void drain_status(int node) {
    if (!memory_ || !here(node)) return;
    const routing::ChipId chip = sys_.chips[static_cast<size_t>(node)].id;
    const int64_t now = steady_ns(Clock::now()), launched = steady_ns(started_);
    chip::StatusQueue& q = memory_->control(node).status;
    const uint64_t lost = q.drain([&](const chip::StatusEntry& e) {
      on_status_entry(node, e, static_cast<double>(e.time_ns - launched) / 1e9, std::chrono::nanoseconds(now - e.time_ns));
    });
    if (lost) {
      json e = launcher_event(chip, "status_lost", uptime());
      e["lost"] = lost;
      record(e);
    }
    if (!q.caught_up()) asio::post(io_, [this, node] { drain_status(node); });  // it pushes on: come back
  }

  // One status entry of a chip, `at` seconds after launch, `delay` after it was pushed.
  void on_status_entry(int node, const chip::StatusEntry& e, double at, std::chrono::nanoseconds delay) {
    const routing::ChipId chip = sys_.chips[static_cast<size_t>(node)].id;
    // The live control plane hears link states here, as the simulator's does.
    if (live_ && (e.kind == chip::StatusKind::kLinkUp || e.kind == chip::StatusKind::kLinkDown)) {
      live_->link_up({chip, e.port}, e.kind == chip::StatusKind::kLinkUp);
      schedule_reroute();
    }
    json j = status_event(e, chip, sys_);
    record(stamp(j, at, delay));
  }

  void record(const json& event) {
    if (event["kind"] == "dropped") {
      // 5.4 / 5.5: the control plane is told which router dropped what; a failure that drops
      // thousands prints ten a second and a count (the event log has every one).
      const auto now = Clock::now();
      if (now - drops_shown_since_ >= std::chrono::seconds(1)) {
        if (drops_hidden_ > 0) fmt::print(stderr, "ttemu: ... and {} more dropped packet(s) (the event log lists them)\n", drops_hidden_);
        drops_shown_since_ = now;
        drops_shown_ = 0;
        drops_hidden_ = 0;
      }
      if (drops_shown_++ < 10) {
        fmt::print(stderr, "ttemu: {} on FVC {} (ttl {})\n", drop_summary(event), event.value("fvc", 0), event.value("ttl", 0));
      } else {
        ++drops_hidden_;
      }
    }
    if (log_) log_->append(event);
    if (is_rates(event)) return;  // in the file only: ttemu status shows events
    events_.push_back(event);
    if (events_.size() > 1000) events_.pop_front();
  }

  double uptime() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }
  // The chips' clock: the host's CLOCK_MONOTONIC, as steady_clock reads it.
  static int64_t steady_ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }

  // --- ending ------------------------------------------------------------------------------

  void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    shutdown(1);
  }

  void shutdown(int status) {
    if (stopping_) return;
    stopping_ = true;
    exit_status_ = exit_status_ ? exit_status_ : status;
    for (int v = 0; chips_ && v < sys_.node_count(); ++v) send(v, msg::Stop{});
    if (!chips_ || chips_->running() == 0) {
      io_.stop();
      return;
    }
    deadline_.cancel();
    deadline_.expires_after(std::chrono::seconds(5));
    deadline_.async_wait([this](auto ec) {
      if (ec) return;
      io_.stop();  // what still runs is killed at teardown
    });
  }

  void teardown_now() {
    if (torn_down_) return;
    torn_down_ = true;
    if (client_pid_ > 0) ::kill(client_pid_, SIGTERM);
    if (chips_) chips_->kill_all();
    if (client_pid_ > 0) ::waitpid(client_pid_, nullptr, 0);
    for (int v = 0; v < sys_.node_count(); ++v) drain_status(v);  // the last words
    if (memory_) memory_->remove();
    if (server_) server_->close();
    if (published_) job::unpublish(job_);
  }

  LaunchOptions o_;
  // --cpu-bind blocks: each chip's rank in its host's locality order, and its host's chip count.
  std::vector<std::pair<int, int>> cpu_rank_;
  void rank_for_cpus() {
    std::map<int, std::vector<int>> by_host;
    for (int v = 0; v < sys_.node_count(); ++v) by_host[multi_ ? multi_->host_of_node.at(static_cast<size_t>(v)) : 0].push_back(v);
    cpu_rank_.assign(static_cast<size_t>(sys_.node_count()), {0, 0});
    for (const auto& [host, nodes] : by_host) {
      const auto order = control::locality_order(sys_, nodes);
      for (size_t i = 0; i < order.size(); ++i) cpu_rank_[static_cast<size_t>(order[i])] = {static_cast<int>(i), static_cast<int>(order.size())};
    }
  }
  bool uring_by_default_ = false;  // o_.transport is the default, not a choice: chips may fall back
  std::optional<MultiHost> multi_;
  asio::io_context io_;
  asio::signal_set signals_, children_;
  asio::steady_timer deadline_;
  asio::steady_timer reroute_timer_;
  control::System sys_;
  control::TableSet tables_;
  link::FaultPlan plan_;
  uint64_t seed_ = 1;
  job::JobId job_;
  std::string socket_path_;
  bool published_ = false;
  std::unique_ptr<ChipMemory> memory_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<ChipSupervisor> chips_;  // chip processes: LocalChips, or HostAgents over several hosts
  HostAgents* agents_ = nullptr;           // chips_, in a multi-host launch
  std::vector<std::map<std::string, uint16_t>> bound_ports_;  // by node: port -> UDP port
  std::vector<uint16_t> bound_lazy_;  // by node: its lazy inbox's UDP port (0: none)
  std::map<std::pair<int, int>, std::string> link_state_;
  std::unique_ptr<control::LiveRoutes> live_;  // from the moment the system is up
  bool injection_paused_ = false;
  std::set<routing::PortId> out_of_service_;  // link ends the operator took down (ttemu links down)
  Clock::time_point drops_shown_since_{};  // the second whose drops stderr shows
  int drops_shown_ = 0;
  uint64_t drops_hidden_ = 0;
  std::map<uint64_t, std::function<void(const json&)>> pending_;
  std::set<routing::PortId> busy_;  // ports with a link test or ping running
  std::unique_ptr<EventLog> log_;
  std::deque<json> events_;         // the event log's last 1000 entries, newest last
  uint64_t next_test_ = 0;  // ids of link tests and of questions to chips (ask_chips)
  std::string capture_sink_;        // the capture running (ttemu capture), if any ...
  std::vector<int> capture_nodes_;  // ... and the chips recording for it
  std::set<std::pair<int, int>> cut_;  // pairs of hosts cut apart (report_cuts)
  static constexpr std::chrono::seconds kSnapshotWait{2};
  // How long an idle link between hosts goes unheard before it proves its wire: a cut is found
  // within this and the link's retries (about 4 s more), at one probe a second per link.
  static constexpr int kCrossHostKeepaliveMs = 1000;
  Clock::time_point started_;
  int bound_ = 0, exit_status_ = 0;
  pid_t client_pid_ = 0;
  bool ready_ = false, stopping_ = false, torn_down_ = false;
  std::string error_;
};

}  // namespace detail

ClusterLauncher::ClusterLauncher(const LaunchOptions& o, MultiHost multi)
    : impl_(std::make_unique<detail::Launcher>(o, std::move(multi))) {}
ClusterLauncher::~ClusterLauncher() = default;
uint16_t ClusterLauncher::prepare() { return impl_->prepare(); }
int ClusterLauncher::run(std::vector<HostEntry> hosts) { return impl_->go(std::move(hosts)); }

namespace {
std::vector<std::string> g_command_line;
}

void set_command_line(int argc, char** argv) { g_command_line.assign(argv, argv + argc); }
const std::vector<std::string>& command_line() { return g_command_line; }

std::string default_system_file() {
  for (const char* candidate : {"topologies/galaxy.yaml", TTEMU_SOURCE_DIR "/topologies/galaxy.yaml"}) {
    if (std::ifstream(candidate)) return candidate;
  }
  return "topologies/galaxy.yaml";
}

ChosenTransport resolve_transport(const std::string& option) {
  ChosenTransport t{option, false, ""};
  const char* env = std::getenv("TTEMU_TRANSPORT");
  if (t.name.empty() && env && *env) t.name = env;
  if (t.name.empty()) t = {"uring", true, ""};
  if (std::find(kTransports.begin(), kTransports.end(), t.name) == kTransports.end()) {
    throw Error(fmt::format("{}'{}' is not a transport (udp, uring or shm)", option.empty() ? "TTEMU_TRANSPORT: " : "",
                            printable(t.name)));
  }
  if (t.name == "uring") {
    if (const auto why = process::UringTransport::refused()) {
      if (!t.by_default) {
        throw Error(fmt::format("{}: io_uring is refused here ({})", option.empty() ? "TTEMU_TRANSPORT=uring" : "--transport uring", *why));
      }
      t.note = fmt::format("io_uring is refused here ({}): the chips' links use udp", *why);
    }
  }
  return t;
}

int run_launch(const LaunchOptions& options) {
  detail::Launcher launcher(options, std::nullopt);
  return launcher.run();
}

}  // namespace ttemu::launcher
