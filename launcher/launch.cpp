#include "launcher/launch.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/chip/arch.hpp"
#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/common/asio.hpp"
#include "emulator/common/error.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_json.hpp"
#include "emulator/job/description.hpp"
#include "emulator/link/fault_plan.hpp"
#include "emulator/link/tt_link.hpp"
#include "emulator/process/chip_messages.hpp"
#include "launcher/control_requests.hpp"

namespace ttemu::launcher {

namespace msg = process::msg;

namespace asio = boost::asio;
using nlohmann::json;
using routing::to_string;
using Clock = std::chrono::steady_clock;

namespace {

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the ttemu binary (/proc/self/exe)");
  return p.string();
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

class Launcher : public ControlTarget {
 public:
  explicit Launcher(const LaunchOptions& o)
      : o_(o), signals_(io_, SIGINT, SIGTERM), children_(io_, SIGCHLD), deadline_(io_), acceptor_(io_), accept_retry_(io_) {}

  ~Launcher() override { teardown_now(); }

  int run() {
    sys_ = control::load_system(o_.file);
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
    create_memory();
    publish_description();
    open_control_socket();
    signals_.async_wait([this](auto ec, int sig) {
      if (!ec) {
        fmt::print(stderr, "\nttemu: {} received, stopping {} chip(s)\n", strsignal(sig), sys_.chips.size());
        shutdown(0);
      }
    });
    watch_children();
    spawn_chips();
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
  struct ChipProc {
    int node = 0;
    pid_t pid = 0;
    bool alive = false;
    std::unique_ptr<asio::local::stream_protocol::socket> control;
    std::unique_ptr<asio::streambuf> inbuf;
    std::map<std::string, uint16_t> ports;  // port -> udp port, from Bound
    chip::Segment ctl;
  };

  // --- memory ---------------------------------------------------------------------------

  // What clients need to address the chips and read their memory, typed (job/description.hpp).
  void publish_description() {
    job::SystemDescription d;
    d.job = job_;
    d.system_path = std::filesystem::absolute(o_.file).string();
    d.planes = sys_.planes;
    d.data_fvcs = o_.data_fvcs;
    for (int v = 0; v < sys_.node_count(); ++v) {
      const auto& chip = sys_.chips[static_cast<size_t>(v)];
      const chip::ArchSpec arch = chip::arch_spec(sys_.spec_of(v).arch);
      const auto& mesh = sys_.mesh_of(v);
      d.chips.push_back({to_string(chip.id), chip.id.mesh, chip.id.device, arch.name, chip.coord.row, chip.coord.col,
                         mesh.chips.rows, mesh.chips.cols, arch.l1_total(), o_.dram_mib ? *o_.dram_mib << 20 : arch.dram,
                         arch.tensix_cores, arch.tensix_l1, chip.host});
    }
    for (const auto& l : sys_.links) d.links.push_back({to_string(l.a), to_string(l.b), l.plane});
    job::publish(d);
    published_ = true;
  }

  void create_memory() {
    chips_.resize(sys_.chips.size());
    for (int v = 0; v < sys_.node_count(); ++v) {
      const auto& chip = sys_.chips[static_cast<size_t>(v)];
      chip::ArchSpec arch = chip::arch_spec(sys_.spec_of(v).arch);
      size_t dram = o_.dram_mib ? *o_.dram_mib << 20 : arch.dram;
      auto& c = chips_[static_cast<size_t>(v)];
      c.node = v;
      segments_.push_back(chip::segment_name(job_, chip.id, chip::SegmentKind::kControl));
      c.ctl = chip::Segment::create(segments_.back(), sizeof(chip::ChipControl));
      auto* block = new (c.ctl.data()) chip::ChipControl();
      block->mesh = chip.id.mesh;
      block->device = chip.id.device;
      block->magic = chip::kControlMagic;
      segments_.push_back(chip::segment_name(job_, chip.id, chip::SegmentKind::kDram));
      chip::Segment::create(segments_.back(), dram);
      segments_.push_back(chip::segment_name(job_, chip.id, chip::SegmentKind::kL1));
      chip::Segment l1 = chip::Segment::create(segments_.back(), arch.l1_total());
      // The control plane writes each router's table into its ethernet core's L1.
      for (int port = 0; port < routing::kMaxPorts; ++port) {
        int link = sys_.link_at(v, static_cast<uint8_t>(port));
        if (link < 0) continue;
        if (port >= arch.eth_cores) {
          throw Error(fmt::format("{} port P{}: a {} chip has {} ethernet cores", to_string(chip.id), port, arch.name, arch.eth_cores));
        }
        auto* rc = l1.as<chip::RouterL1Block>(arch.eth_l1_offset(port));
        rc->plane = static_cast<uint16_t>(sys_.links[static_cast<size_t>(link)].plane);
        rc->port = static_cast<uint8_t>(port);
        rc->table = tables_.at(rc->plane, v).pack();
        rc->magic = chip::kRouterMagic;
      }
    }
  }

  // --- processes --------------------------------------------------------------------------

  void spawn_chips() {
    const std::string exe = self_exe();
    const pid_t self = getpid();
    for (auto& c : chips_) {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw Error("socketpair failed");
      const std::string name = to_string(sys_.chips[static_cast<size_t>(c.node)].id);
      pid_t pid = ::fork();
      if (pid < 0) throw Error("fork failed");
      if (pid == 0) {
        // The chip dies with its launcher, whatever kills the launcher.
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != self) _exit(1);
        ::dup2(fds[1], 3);
        ::close_range(4, ~0u, 0);
        signal(SIGINT, SIG_IGN);  // Ctrl-C goes to the launcher, which stops the chips
        const std::string job = job_.text();
        execl(exe.c_str(), "ttemu", "chip", "--job", job.c_str(), "--chip", name.c_str(),
              "--control-fd", "3", "--control-socket", socket_path_.c_str(), nullptr);
        _exit(127);
      }
      ::close(fds[1]);
      c.pid = pid;
      c.alive = true;
      pid_to_node_[pid] = c.node;
      c.control = std::make_unique<asio::local::stream_protocol::socket>(io_);
      c.control->assign(asio::local::stream_protocol(), fds[0]);
      c.inbuf = std::make_unique<asio::streambuf>();
      send(c, config_for(c.node));
      read_chip(c);
    }
  }

  msg::Config config_for(int v) {
    msg::Config m;
    const auto& chip = sys_.chips[static_cast<size_t>(v)];
    for (int port = 0; port < routing::kMaxPorts; ++port) {
      int l = sys_.link_at(v, static_cast<uint8_t>(port));
      if (l < 0) continue;
      routing::PortId self{chip.id, static_cast<uint8_t>(port)};
      routing::PortId peer = *sys_.peer(self);
      msg::LinkSetup entry{self.port, peer.chip.mesh, peer.chip.device, peer.port, {}};
      if (auto it = plan_.tx.find(self); it != plan_.tx.end()) entry.faults = link::to_json(it->second);
      m.links.push_back(entry);
      link_state_[{v, port}] = "handshake";
    }
    m.arch = sys_.spec_of(v).arch;
    m.job_hash = job_.hash();
    m.seed = seed_;
    m.window = static_cast<uint16_t>(o_.window);
    m.bind = o_.bind;
    m.planes = sys_.planes;
    m.data_fvcs = o_.data_fvcs;
    m.rb_packets = o_.rb_packets;
    m.timeout_ms = o_.timeout_ms;
    m.ack_delay_us = o_.ack_delay_us;
    m.credit_delay_us = o_.credit_delay_us;
    m.spin_us = o_.spin_us;
    return m;
  }

  void send(ChipProc& c, const msg::ToChip& m) {
    if (!c.alive) return;
    const std::string line = msg::encode(m);
    boost::system::error_code ec;
    asio::write(*c.control, asio::buffer(line), ec);
  }

  void read_chip(ChipProc& c) {
    asio::async_read_until(*c.control, *c.inbuf, '\n', [this, &c](auto ec, size_t n) {
      if (ec) return;  // the chip is gone; SIGCHLD tells how
      std::string line(asio::buffers_begin(c.inbuf->data()), asio::buffers_begin(c.inbuf->data()) + static_cast<long>(n));
      c.inbuf->consume(n);
      try {
        on_chip_message(c, msg::decode_from_chip(line));
      } catch (const Error& e) {
        fmt::print(stderr, "ttemu: chip {}: {}\n", to_string(sys_.chips[static_cast<size_t>(c.node)].id), e.what());
      }
      read_chip(c);
    });
  }

  template <class... F>
  struct Overloaded : F... {
    using F::operator()...;
  };

  void on_chip_message(ChipProc& c, const msg::FromChip& m) {
    const std::string name = to_string(sys_.chips[static_cast<size_t>(c.node)].id);
    auto finish = [&](uint64_t id) {
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      auto done = std::move(it->second);
      pending_.erase(it);
      done(msg::to_json_object(m));
    };
    std::visit(Overloaded{
                   [&](const msg::Bound& b) {
                     c.ports = b.ports;
                     if (++bound_ == static_cast<int>(chips_.size())) wire_links();
                   },
                   [&](const msg::LinkState& l) {
                     link_state_[{c.node, l.port}] = l.state;
                     if (ready_ && l.state != "up") fmt::print(stderr, "ttemu: link {}P{} is {}\n", name, l.port, l.state);
                     if (ready_ && l.state == "up") fmt::print(stderr, "ttemu: link {}P{} is up again\n", name, l.port);
                     check_ready();
                   },
                   [&](const msg::StreamDone& d) { finish(d.id); },
                   [&](const msg::PingDone& d) { finish(d.id); },
                   [&](const msg::Event& e) {
                     // 5.4 / 5.5: the control plane is told which router dropped what.
                     fmt::print(stderr, "ttemu: {} at {}: {} packet {} from {} to {} (ttl {})\n", e.kind, e.at,
                                e.command, e.packet_id, e.src, e.dst, e.ttl);
                     events_.push_back(msg::to_json_object(m));
                     if (events_.size() > 1000) events_.erase(events_.begin());
                   },
                   [&](const msg::ChipError& e) { fmt::print(stderr, "ttemu: chip {}: {}\n", name, e.message); },
               },
               m);
  }

  void wire_links() {
    for (auto& c : chips_) {
      msg::Peers peers;
      const auto& chip = sys_.chips[static_cast<size_t>(c.node)];
      for (auto& [port, udp] : c.ports) {
        routing::PortId peer = *sys_.peer({chip.id, static_cast<uint8_t>(std::stoi(port))});
        auto& pc = chips_[static_cast<size_t>(*sys_.node(peer.chip))];
        peers.peers[port] = {o_.bind, pc.ports.at(std::to_string(peer.port))};
      }
      send(c, peers);
    }
    check_ready();
  }

  void check_ready() {
    if (ready_ || bound_ < static_cast<int>(chips_.size())) return;
    for (const auto& [key, st] : link_state_) {
      if (st != "up") return;
    }
    ready_ = true;
    deadline_.cancel();
    double secs = std::chrono::duration<double>(Clock::now() - started_).count();
    fmt::print("ttemu: {}: {} chip(s), {} link(s) up, ready in {:.2f} s (job {})\n", o_.file,
               chips_.size(), sys_.links.size(), secs, job_.text());
    fmt::print("ttemu: control socket {}; 'ttemu status' shows the system, Ctrl-C stops it\n", socket_path_);
    std::fflush(stdout);
    if (!o_.command.empty()) spawn_client();
  }

  void spawn_client() {
    std::vector<char*> argv;
    for (auto& a : o_.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string job = job_.text();
    pid_t pid = ::fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0) {
      ::setenv("TTEMU_JOB", job.c_str(), 1);
      ::setenv("TTEMU_CONTROL", socket_path_.c_str(), 1);
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
    for (int port = 0; port < routing::kMaxPorts; ++port) {
      if (sys_.link_at(node, static_cast<uint8_t>(port)) < 0) continue;
      auto peer = sys_.peer({dead.id, static_cast<uint8_t>(port)});  // a wired port has one
      send(chips_[static_cast<size_t>(*sys_.node(peer->chip))], msg::PeerDown{peer->port});
    }
  }

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
        auto it = pid_to_node_.find(pid);
        if (it == pid_to_node_.end()) continue;
        auto& c = chips_[static_cast<size_t>(it->second)];
        c.alive = false;
        ++exited_;
        if (!stopping_) {
          fmt::print(stderr, "ttemu: chip {} (pid {}) {}\n", to_string(sys_.chips[static_cast<size_t>(c.node)].id), pid, describe_exit(status));
          if (!ready_) fail("a chip died while the system was coming up");
          tell_peers_of_death(c.node);
        }
        if (stopping_ && exited_ == static_cast<int>(chips_.size())) io_.stop();
      }
      watch_children();
    });
  }

  // --- control socket ------------------------------------------------------------------

  void open_control_socket() {
    socket_path_ = job::control_socket_path(job_);
    ::unlink(socket_path_.c_str());
    acceptor_.open(asio::local::stream_protocol());
    acceptor_.bind(asio::local::stream_protocol::endpoint(socket_path_));
    ::chmod(socket_path_.c_str(), 0600);
    acceptor_.listen();
    accept();
  }

  void accept() {
    acceptor_.async_accept([this](auto ec, asio::local::stream_protocol::socket s) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // Out of descriptors, say: try again shortly rather than stop serving for good.
        accept_retry_.expires_after(std::chrono::milliseconds(100));
        accept_retry_.async_wait([this](auto ec2) {
          if (!ec2) accept();
        });
        return;
      }
      serve(std::make_shared<asio::local::stream_protocol::socket>(std::move(s)));
      accept();
    });
  }

  // One request line per connection, at most kMaxRequestBytes. Replies are written
  // asynchronously: a client that does not read its reply cannot stall the launcher.
  void serve(std::shared_ptr<asio::local::stream_protocol::socket> conn) {
    auto buf = std::make_shared<asio::streambuf>(kMaxRequestBytes);
    asio::async_read_until(*conn, *buf, '\n', [this, conn, buf](auto ec, size_t n) {
      auto answer = [conn](const std::string& line) {
        auto out = std::make_shared<std::string>(line);
        asio::async_write(*conn, asio::buffer(*out), [conn, out](auto, size_t) {});
      };
      if (ec == asio::error::not_found) {  // the buffer filled up without a '\n'
        return answer(reply_line({{"error", fmt::format("request longer than {} bytes; the connection is closed", kMaxRequestBytes)}}));
      }
      if (ec) return;  // the client left
      std::string line(asio::buffers_begin(buf->data()), asio::buffers_begin(buf->data()) + static_cast<long>(n));
      handle_request(line, *this, answer);
    });
  }

  // --- requests (ControlTarget); control_requests.cpp has checked every field -----------

  bool ready() const override { return ready_; }
  int data_fvcs() const override { return o_.data_fvcs; }
  void stop() override { shutdown(0); }

  void stall(const std::string& name, int fvc, bool stalled) override {
    auto chip = routing::parse_chip(name);
    auto node = chip ? sys_.node(*chip) : std::nullopt;
    if (!node) throw Error(fmt::format("'{}' is not a chip of {}", printable(name), o_.file));
    send(chips_[static_cast<size_t>(*node)], msg::Stall{static_cast<uint8_t>(fvc), stalled});
  }

  json status() override {
    json chips = json::array(), links = json::array();
    for (auto& c : chips_) {
      const auto& chip = sys_.chips[static_cast<size_t>(c.node)];
      const auto* block = c.ctl.as<chip::ChipControl>();
      const auto& mesh = sys_.mesh_of(c.node);
      chips.push_back({{"name", to_string(chip.id)}, {"pid", c.pid}, {"alive", c.alive}, {"host", chip.host},
                       {"mesh", chip.id.mesh}, {"device", chip.id.device}, {"row", chip.coord.row},
                       {"col", chip.coord.col}, {"mesh_rows", mesh.chips.rows}, {"mesh_cols", mesh.chips.cols},
                       {"l1_bytes", block->l1_bytes}, {"dram_bytes", block->dram_bytes},
                       {"packets_injected", block->packets_injected.load()},
                       {"packets_delivered", block->packets_delivered.load()},
                       {"router_events", block->router_events.load()}});
    }
    for (const auto& l : sys_.links) {
      json ends = json::array();
      for (const auto& end : {l.a, l.b}) {
        auto& c = chips_[static_cast<size_t>(*sys_.node(end.chip))];
        const auto& ps = c.ctl.as<chip::ChipControl>()->ports[end.port];
        json counters = json::object();
#define TTEMU_JSON(name, help) counters[#name] = ps.counters.name.load(std::memory_order_relaxed);
        TTEMU_LINK_COUNTERS(TTEMU_JSON)
#undef TTEMU_JSON
        counters["stream_verified"] = ps.stream_verified.load();
        counters["stream_errors"] = ps.stream_errors.load();
        ends.push_back({{"port", to_string(end)}, {"udp", ps.udp_port.load()},
                        {"state", c.alive ? link::to_string(static_cast<link::LinkState>(ps.counters.state.load())) : "dead"},
                        {"counters", counters}});
      }
      links.push_back({{"a", to_string(l.a)}, {"b", to_string(l.b)}, {"plane", l.plane}, {"ends", ends}});
    }
    return {{"job", job_.text()}, {"system", o_.file}, {"system_path", std::filesystem::absolute(o_.file).string()},
            {"ready", ready_}, {"seed", seed_},
            {"planes", sys_.planes}, {"data_fvcs", o_.data_fvcs}, {"events", events_},
            {"uptime_s", std::chrono::duration<double>(Clock::now() - started_).count()},
            {"chips", chips}, {"links", links}};
  }

  json apply_faults(const std::string& text, const std::string& source) override {
    link::FaultPlan plan = link::parse_fault_plan(text, source, sys_.wiring());
    int changed = 0;
    for (auto& c : chips_) {
      const auto& chip = sys_.chips[static_cast<size_t>(c.node)];
      for (int port = 0; port < routing::kMaxPorts; ++port) {
        if (sys_.link_at(c.node, static_cast<uint8_t>(port)) < 0) continue;
        routing::PortId self{chip.id, static_cast<uint8_t>(port)};
        auto it = plan.tx.find(self);
        link::DirectionFaults f = it == plan.tx.end() ? link::DirectionFaults{} : it->second;
        changed += f.any();
        send(c, msg::Faults{static_cast<uint8_t>(port), link::to_json(f), plan.seed ? *plan.seed : seed_});
      }
    }
    plan_ = plan;
    return {{"ok", true}, {"directions_with_faults", changed}};
  }

  void link_test(const LinkTestRequest& t, Reply reply) override {
    auto port = routing::parse_port(t.link);
    auto node = port ? sys_.node(port->chip) : std::nullopt;
    if (!node || sys_.link_at(*node, port->port) < 0) {
      std::string wired;  // what the user could have meant: the chip's wired ports
      for (int p = 0; node && p < routing::kMaxPorts; ++p) {
        if (sys_.link_at(*node, static_cast<uint8_t>(p)) >= 0) wired += fmt::format("{}P{}", wired.empty() ? "" : ", ", p);
      }
      throw Error(fmt::format("'{}' is not a wired port of {}{}", printable(t.link), o_.file,
                              wired.empty() ? "" : fmt::format(" ({} has {})", to_string(port->chip), wired)));
    }
    auto& c = chips_[static_cast<size_t>(*node)];
    if (!c.alive) throw Error(fmt::format("chip {} is not running", to_string(port->chip)));
    routing::PortId peer = *sys_.peer(*port);
    auto& pc = chips_[static_cast<size_t>(*sys_.node(peer.chip))];
    if (!pc.alive) throw Error(fmt::format("the far end {} is not running", to_string(peer.chip)));
    if (!busy_.insert(*port).second) throw Error(fmt::format("a test is already running on {}", to_string(*port)));
    // From here on nothing throws: the port stays reserved until the test ends or times out.
    const uint64_t id = ++next_test_;
    // A test that cannot finish (its link went down for good) answers with an error in time.
    auto timer = std::make_shared<asio::steady_timer>(io_);
    timer->expires_after(std::chrono::seconds(t.timeout_s));
    timer->async_wait([this, id, reply, port = *port](auto ec) {
      if (ec || !pending_.count(id)) return;
      pending_.erase(id);
      busy_.erase(port);
      reply({{"error", fmt::format("the test on {} did not finish in time (is the link down?)", to_string(port))}});
    });
    auto snapshot = [&pc, peer] {
      const auto& ps = pc.ctl.as<chip::ChipControl>()->ports[peer.port];
      return std::make_pair(ps.stream_verified.load(), ps.stream_errors.load());
    };
    auto before = snapshot();
    const auto& tx = c.ctl.as<chip::ChipControl>()->ports[port->port].counters;
    const auto& rx = pc.ctl.as<chip::ChipControl>()->ports[peer.port].counters;
    auto base = std::make_tuple(tx.retransmits.load(), rx.crc_errors.load(), tx.timeouts.load());
    pending_[id] = [=, this, &tx, &rx](const json& done) {
      timer->cancel();
      busy_.erase(*port);
      json r = done;
      r.erase("type");
      r["link"] = to_string(*port);
      r["peer"] = to_string(peer);
      if (!t.ping) {
        auto after = snapshot();
        double secs = done.at("seconds");
        double bytes = done.at("bytes");
        r["gb_per_s"] = secs > 0 ? bytes / secs / 1e9 : 0.0;
        r["verified"] = after.first - before.first;
        r["errors"] = after.second - before.second;
        r["retransmits"] = tx.retransmits.load() - std::get<0>(base);
        r["crc_errors"] = rx.crc_errors.load() - std::get<1>(base);
        r["timeouts"] = tx.timeouts.load() - std::get<2>(base);
      }
      reply(r);
    };
    if (!t.ping) {
      send(c, msg::Stream{port->port, id, t.count, t.size});
    } else {
      send(c, msg::Ping{port->port, id, static_cast<int>(t.count), t.size});
    }
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
    for (auto& c : chips_) send(c, msg::Stop{});
    if (exited_ == static_cast<int>(chips_.size())) {
      io_.stop();
      return;
    }
    deadline_.cancel();
    deadline_.expires_after(std::chrono::seconds(5));
    deadline_.async_wait([this](auto ec) {
      if (ec) return;
      for (auto& c : chips_) {
        if (c.alive) ::kill(c.pid, SIGKILL);
      }
      io_.stop();
    });
  }

  void teardown_now() {
    if (torn_down_) return;
    torn_down_ = true;
    if (client_pid_ > 0) ::kill(client_pid_, SIGTERM);
    for (auto& c : chips_) {
      if (c.alive && c.pid > 0) ::kill(c.pid, SIGKILL);
    }
    for (auto& c : chips_) {
      if (c.pid > 0) ::waitpid(c.pid, nullptr, 0);
    }
    if (client_pid_ > 0) ::waitpid(client_pid_, nullptr, 0);
    for (const auto& s : segments_) chip::unlink_segment(s);
    if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
    if (published_) job::unpublish(job_);
  }

  LaunchOptions o_;
  asio::io_context io_;
  asio::signal_set signals_, children_;
  asio::steady_timer deadline_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  control::System sys_;
  control::TableSet tables_;
  link::FaultPlan plan_;
  uint64_t seed_ = 1;
  job::JobId job_;
  std::string socket_path_;
  bool published_ = false;
  std::vector<std::string> segments_;
  std::vector<ChipProc> chips_;
  std::map<pid_t, int> pid_to_node_;
  std::map<std::pair<int, int>, std::string> link_state_;
  std::map<uint64_t, std::function<void(const json&)>> pending_;
  std::set<routing::PortId> busy_;  // ports with a link test or ping running
  std::vector<json> events_;        // router events reported by the chips, newest last
  uint64_t next_test_ = 0;
  Clock::time_point started_;
  int bound_ = 0, exited_ = 0, exit_status_ = 0;
  pid_t client_pid_ = 0;
  bool ready_ = false, stopping_ = false, torn_down_ = false;
  std::string error_;
};

}  // namespace

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

int run_launch(const LaunchOptions& options) {
  Launcher launcher(options);
  return launcher.run();
}

}  // namespace ttemu::launcher
