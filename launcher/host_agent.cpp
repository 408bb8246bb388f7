#include "launcher/host_agent.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/asio.hpp"
#include "emulator/common/error.hpp"
#include "emulator/control/host_placement.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_json.hpp"
#include "emulator/job/description.hpp"
#include "emulator/job/job.hpp"
#include "emulator/process/cpu_binding.hpp"
#include "launcher/chip_memory.hpp"
#include "launcher/control_server.hpp"
#include "launcher/host_channel.hpp"
#include "launcher/host_wire.hpp"
#include "launcher/local_chips.hpp"
#include "launcher/mpi_bootstrap.hpp"
#include "launcher/system_report.hpp"

namespace ttemu::launcher {

namespace asio = boost::asio;
namespace msg = process::msg;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// A host agent of rank 1 and up: this host's chips, for the control plane (host_agents.cpp
// has the protocol).
class HostAgent {
 public:
  HostAgent(const HostAgentOptions& o, const control::System& sys, MultiHost multi, HostEntry plane)
      : o_(o), sys_(sys), multi_(std::move(multi)), plane_(std::move(plane)),
        signals_(io_, SIGINT, SIGTERM), children_(io_, SIGCHLD), connect_timer_(io_) {}

  ~HostAgent() { teardown(); }

  int run() {
    signals_.async_wait([this](auto ec, int sig) {
      if (ec) return;
      fmt::print(stderr, "ttemu: host {}: {} received, stopping its chips\n", host(), strsignal(sig));
      stop(0);
    });
    watch_children();
    connect();
    io_.run();
    teardown();
    if (!error_.empty()) throw Error(error_);
    return status_;
  }

 private:
  const std::string& host() const { return sys_.hosts[static_cast<size_t>(multi_.self)]; }
  bool here(int v) const { return multi_.here(v); }

  void connect() {
    auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
    boost::system::error_code ec;
    const asio::ip::tcp::endpoint at(asio::ip::make_address(plane_.address, ec), plane_.control_port);
    if (ec) return fail(fmt::format("the control plane's address '{}' is not an IP address", plane_.address));
    connect_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.connect_timeout)));
    connect_timer_.async_wait([this, socket](auto e) {
      if (!e) socket->close();
    });
    socket->async_connect(at, [this, socket, at](auto e) {
      connect_timer_.cancel();
      if (e) return fail(fmt::format("cannot reach the control plane at {}:{}: {}", plane_.address, plane_.control_port, e.message()));
      channel_ = std::make_shared<HostChannel>(std::move(*socket));
      channel_->start({[this](const json& m) { on_message(m); }, [this](const std::string& why) { plane_lost(why); }});
      channel_->send({{"hello", multi_.self}, {"version", host_wire_version()}, {"pid", ::getpid()}});
    });
  }

  void on_message(const json& m) {
    try {
      if (m.contains("setup")) return setup(m["setup"]);
      if (m.contains("start")) return start(m["start"].get<int>(), m.at("config").get<std::string>(), m.value("renew", json()));
      if (m.contains("to")) {
        const int v = m.at("node").get<int>();
        if (here(v) && chips_) chips_->send(v, msg::decode_to_chip(m["to"].get<std::string>()));
        return;
      }
      if (m.contains("kill")) {
        const int v = m["kill"].get<int>();
        if (here(v) && chips_) chips_->kill(v);
        return;
      }
      if (m.contains("tables")) return reload(m["tables"], m.at("version").get<uint32_t>());
      if (m.contains("status")) return report(m["status"].get<uint64_t>());
      if (m.contains("answer")) {
        auto it = requests_.find(m["answer"].get<uint64_t>());
        if (it == requests_.end()) return;
        auto answer = std::move(it->second);
        requests_.erase(it);
        answer(m.at("line").get<std::string>());
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "ttemu: host {}: a message from the control plane is not understood: {}\n", host(), e.what());
    }
  }

  void setup(const json& s) {
    if (memory_) return;
    cluster_job_ = s.at("job").get<std::string>();
    const control::TableSet tables = control::tables_from_json(sys_, s.at("tables"), "the control plane's tables");
    std::ignore = job::clean_stale();
    job_ = job::JobId::create();
    const std::vector<bool> here_nodes = multi_.here_by_node();
    const LaunchOptions& lo = o_.launch;
    memory_ = std::make_unique<ChipMemory>(job_, sys_, tables, lo.dram_mib ? std::optional<size_t>(*lo.dram_mib << 20) : std::nullopt,
                                           0, here_nodes);
    job::publish(describe_system(sys_, job_, describe_options(lo, sys_, &multi_)));
    published_ = true;
    server_ = std::make_unique<ControlServer>(io_, job::control_socket_path(job_),
                                              [this](const std::string& line, const std::function<void(const std::string&)>& answer) {
                                                const uint64_t id = ++next_request_;
                                                requests_[id] = answer;
                                                channel_->send({{"request", id}, {"line", line}});
                                              });
    chips_ = std::make_unique<LocalChips>(
        io_, sys_, job_, server_->path(),
        ChipSupervisor::Events{[this](int v, const msg::FromChip& fm) { from_chip(v, fm); },
                               [this](int v, int pid, const std::string& how) { died(v, pid, how); }});
    fmt::print(stderr, "ttemu: host {}: {} chip(s) of job {} here (local job {})\n", host(),
               std::count(here_nodes.begin(), here_nodes.end(), true), cluster_job_, job_.text());
  }

  // `renew` (a restart, `ttemu chip restart`): the tables in force and their version, which the
  // chip's memory is made anew with first, as the launcher does for a chip of its own host.
  void start(int v, const std::string& config_line, const json& renew) {
    if (!here(v) || !chips_) throw Error(fmt::format("node {} is not a chip of host {}", v, host()));
    const msg::ToChip m = msg::decode_to_chip(config_line);
    const auto* config = std::get_if<msg::Config>(&m);
    if (!config) throw Error("a start without a configuration");
    if (!renew.is_null()) {
      memory_->renew(v, control::tables_from_json(sys_, renew.at("tables"), "the control plane's tables"), renew.at("version").get<uint32_t>());
    }
    chips_->start(v, *config);
    channel_->send({{"started", v}, {"pid", chips_->pid(v)}});
  }

  void from_chip(int v, const msg::FromChip& m) {
    if (std::holds_alternative<msg::StatusPushed>(m)) return drain(v);
    channel_->send({{"node", v}, {"from", msg::encode(m)}});
  }

  void drain(int v) {
    if (!memory_) return;
    json list = json::array();
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    chip::StatusQueue& q = memory_->control(v).status;
    q.drain([&](const chip::StatusEntry& e) { list.push_back({{"hex", status_entry_hex(e)}, {"age_ns", now - e.time_ns}}); });
    if (!list.empty()) channel_->send({{"entries", v}, {"list", list}});
    if (!q.caught_up()) asio::post(io_, [this, v] { drain(v); });
  }

  void died(int v, int pid, const std::string& how) {
    drain(v);
    if (channel_) channel_->send({{"died", v}, {"pid", pid}, {"how", how}});
    if (stopping_ && chips_->running() == 0) io_.stop();
  }

  void reload(const json& tables_json, uint32_t version) {
    const control::TableSet tables = control::tables_from_json(sys_, tables_json, "the control plane's tables");
    for (int v = 0; v < sys_.node_count(); ++v) {
      if (!here(v) || !chips_->alive(v)) continue;
      memory_->write_tables(v, tables);
      chips_->send(v, msg::Tables{version});
    }
  }

  void report(uint64_t id) {
    json chips = json::object(), ends = json::object();
    for (int v = 0; memory_ && v < sys_.node_count(); ++v) {
      if (!here(v)) continue;
      drain(v);
      const auto& block = memory_->control(v);
      json& c = chips[routing::to_string(sys_.chips[static_cast<size_t>(v)].id)] = chip_report(sys_, v, block);
      if (chips_->alive(v)) {  // on this host
        c["cpus"] = process::cpus_allowed_of(chips_->pid(v));
        c["sched"] = process::scheduling_of(chips_->pid(v));
      }
      for (uint8_t port : sys_.wired_ports(v)) {
        const routing::PortId end{sys_.chips[static_cast<size_t>(v)].id, port};
        ends[routing::to_string(end)] = link_end_report(block, end, chips_->alive(v));
      }
    }
    channel_->send({{"status_reply", id}, {"chips", chips}, {"ends", ends}});
  }

  void watch_children() {
    children_.async_wait([this](auto ec, int) {
      if (ec) return;
      int st = 0;
      pid_t pid;
      while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
        if (chips_) chips_->child_exited(pid, st);
      }
      watch_children();
    });
  }

  void plane_lost(const std::string& why) {
    if (stopping_) return;
    const int running = chips_ ? chips_->running() : 0;
    if (running > 0) {
      // The control plane is gone with chips still running: its host died, or the network to it.
      fmt::print(stderr, "ttemu: host {}: the control plane is gone ({}); stopping {} chip(s)\n", host(), why, running);
      status_ = 1;
    }
    stop(status_);
  }

  void stop(int status) {
    if (stopping_) return;
    stopping_ = true;
    status_ = status_ ? status_ : status;
    if (channel_) channel_->close();
    const int running = chips_ ? chips_->running() : 0;
    for (int v = 0; running && v < sys_.node_count(); ++v) {
      if (here(v)) chips_->send(v, msg::Stop{});
    }
    if (running == 0) return io_.stop();
    connect_timer_.expires_after(std::chrono::seconds(5));
    connect_timer_.async_wait([this](auto ec) {
      if (!ec) io_.stop();  // what still runs is killed at teardown
    });
  }

  void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    stop(1);
  }

  void teardown() {
    if (torn_down_) return;
    torn_down_ = true;
    if (chips_) chips_->kill_all();
    if (memory_) memory_->remove();
    if (server_) server_->close();
    if (published_) job::unpublish(job_);
  }

  HostAgentOptions o_;
  const control::System& sys_;
  MultiHost multi_;
  HostEntry plane_;
  asio::io_context io_;
  asio::signal_set signals_, children_;
  asio::steady_timer connect_timer_;
  std::shared_ptr<HostChannel> channel_;
  std::string cluster_job_;
  job::JobId job_;
  std::unique_ptr<ChipMemory> memory_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<LocalChips> chips_;
  std::map<uint64_t, std::function<void(const std::string&)>> requests_;
  uint64_t next_request_ = 0;
  bool published_ = false, stopping_ = false, torn_down_ = false;
  int status_ = 0;
  std::string error_;
};

}  // namespace

int run_host_agent(const HostAgentOptions& options) {
  if (!started_by_mpi()) {
    throw Error("ttemu host-agent is started by mpirun or srun, one per host (ttemu mpirun builds the line); "
                "for one host, use ttemu launch");
  }
  HostAgentOptions o = options;
  std::optional<control::System> sys;
  std::vector<int> host_of_node;
  std::unique_ptr<ClusterLauncher> plane;
  // Every rank reaches the exchange, whatever fails before it: a failure travels in the entry
  // and every rank reports it.
  const MpiWorld world = exchange_through_mpi([&](int rank, int size) {
    sys = control::load_system(o.launch.file);
    host_of_node = control::place_chips(*sys);
    if (size != static_cast<int>(sys->hosts.size())) {
      throw Error(fmt::format("{} declares {} host(s) but {} agent(s) were started (mpirun -np {})", o.launch.file,
                              sys->hosts.size(), size, sys->hosts.size()));
    }
    HostEntry mine{rank, local_address(o.network), 0, host_wire_version()};
    o.launch.bind = mine.address;
    if (rank == 0) {
      plane = std::make_unique<ClusterLauncher>(o.launch, MultiHost{host_of_node, 0});
      mine.control_port = plane->prepare();
    }
    return mine;
  });
  for (const auto& h : world.hosts) {
    if (h.version != host_wire_version()) {
      throw Error(fmt::format("host {} (rank {}) runs {}, this one {}: every host must run the same ttemu",
                              sys->hosts[static_cast<size_t>(h.rank)], h.rank, h.version, host_wire_version()));
    }
  }
  if (world.rank == 0) return plane->run(world.hosts);
  HostAgent agent(o, *sys, MultiHost{host_of_node, world.rank}, world.hosts[0]);
  return agent.run();
}

}  // namespace ttemu::launcher
