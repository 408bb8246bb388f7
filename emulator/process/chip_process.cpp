#include "emulator/process/chip_process.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/chip/arch.hpp"
#include "emulator/chip/address_space.hpp"
#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/doorbell.hpp"
#include "emulator/common/error.hpp"
#include "emulator/job/description.hpp"
#include "emulator/job/job.hpp"
#include "emulator/link/fault_plan.hpp"
#include "emulator/node/chip_node.hpp"
#include "emulator/process/chip_messages.hpp"
#include "emulator/process/cpu_binding.hpp"
#include "emulator/process/event_loop.hpp"
#include "emulator/process/owner_watch.hpp"
#include "emulator/process/shm_transport.hpp"
#include "emulator/process/uring_transport.hpp"
#include "emulator/session/deliveries.hpp"
#include "emulator/wire/capture_stream.hpp"
#include "emulator/wire/lazy_inbox.hpp"
#include "emulator/wire/udp_socket.hpp"

namespace ttemu::process {

using namespace chip;
using nlohmann::json;
using link::Time;

namespace {

// The chip's link endpoints on UDP: a socket per wired port. What a socket cannot take now
// waits in the node; the socket's writability brings it back (on_writable).
class UdpTransport final : public wire::Transport {
 public:
  struct Endpoint {
    uint8_t port = 0;
    std::unique_ptr<wire::UdpSocket> socket;
    bool write_waiting = false;
    EventLoop::Time last_read{};  // when on_readable last read it, and how many it got
    size_t last_got = 0;
  };

  explicit UdpTransport(EventLoop& loop) : loop_(loop), by_port_(routing::kMaxPorts, nullptr) {}

  Endpoint& add(uint8_t port, const std::string& bind) {
    auto e = std::make_unique<Endpoint>();
    e->port = port;
    e->socket = std::make_unique<wire::UdpSocket>(bind);
    by_port_[port] = e.get();
    endpoints_.push_back(std::move(e));
    return *endpoints_.back();
  }
  Endpoint& at(uint8_t port) { return *by_port_.at(port); }
  bool defers_lazy() const override { return true; }  // to the peer's lazy inbox
  std::vector<std::unique_ptr<Endpoint>>& endpoints() { return endpoints_; }

  size_t send(uint8_t port, std::span<const wire::Datagram> datagrams) override {
    Endpoint& e = at(port);
    const size_t sent = e.socket->send(datagrams);
    // The socket's send buffer is full: wait until it drains (level-triggered, so only while
    // something is left to send).
    const bool wait = sent < datagrams.size();
    if (wait != e.write_waiting) {
      e.write_waiting = wait;
      loop_.change(e.socket->fd(), wait ? EPOLLIN | EPOLLOUT : EPOLLIN);
    }
    return sent;
  }

 private:
  EventLoop& loop_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::vector<Endpoint*> by_port_;
};

class Chip final : public node::NodeObserver {
 public:
  Chip(const ChipOptions& o) : o_(o), udp_(loop_) { ppid_ = getppid(); }

  int run() {
    ctl_seg_ = Segment::open(segment_name(o_.job, o_.chip, SegmentKind::kControl));
    l1_seg_ = Segment::open(segment_name(o_.job, o_.chip, SegmentKind::kL1));
    dram_seg_ = Segment::open(segment_name(o_.job, o_.chip, SegmentKind::kDram));
    ctl_ = ctl_seg_.as<ChipControl>();
    if (ctl_->magic != kControlMagic) throw Error("control block not initialised by the launcher");
    ctl_->pid.store(static_cast<uint32_t>(getpid()));
    ctl_->pid_namespace.store(job::pid_namespace());
    // Termination arrives as a readable descriptor.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal_fd_ = signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) throw Error("signalfd failed");
    loop_.watch(signal_fd_, EPOLLIN, [this](uint32_t) { finish(); });
    loop_.watch(o_.control_fd, EPOLLIN, [this](uint32_t) { read_control(); });
    loop_.on_deadline([this](Time t) {
      // What the lazy inbox holds may make the deadline moot (an acknowledgement).
      take_lazy(t, /*at_once=*/true);
      if (node_) node_->on_timer(t);
      reschedule();
    });
    loop_.on_batch_end([this] {
      if (node_) {
        // What came is forwarded first; the lazy inbox (a system call) is read after.
        const Time t = now();
        node_->end_of_batch(t, /*more_may_come=*/!uring_ && !shm_);
        take_lazy(t);
      }
      reschedule();
    });
    // Over UDP, a link's part-filled datagram waits for the next batch while more input may
    // be there: the loop looks once more before it sleeps. Each datagram saved is a pass
    // through the kernel on both sides. Over io_uring and shm the look costs more than it
    // saves (docs/fabric.md#fuller-datagrams-over-udp).
    loop_.on_open_output([this] { return node_ && node_->has_open(); },
                         [this] {
                           node_->send_open(now());
                           reschedule();
                         });
    loop_.run();
    ctl_->running.store(0);
    cleanup();
    return exit_status_;
  }

 private:
  void stop() { loop_.stop(); }
  // Told to stop (Stop, SIGTERM): the last interval's rates first. A lost launcher or a chip
  // error stops without them.
  void finish() {
    if (node_) node_->final_rates(now());
    stop();
  }
  Time now() const { return loop_.time(); }

  // What hands a datagram that came on a port to the node, stamped `t`.
  auto to_node(Time t) {
    return [this, t](uint8_t port, std::span<const uint8_t> bytes) { node_->on_datagram(port, bytes, t); };
  }

  void cleanup() {
    for (auto& e : udp_.endpoints()) loop_.forget(e->socket->fd());
    for (const int fd : strays_watched_) loop_.forget(fd);
    node_.reset();
    tap_.reset();
    udp_.endpoints().clear();
    loop_.wait_in(nullptr);
    uring_.reset();
    inbox_.reset();
    ::close(signal_fd_);
    // The launcher removes every segment at teardown; a chip removes its own too, so that
    // nothing is left if the launcher is gone (killed, crashed).
    unlink_chip_segments(o_.job, o_.chip);
    if (getppid() != ppid_ || control_eof_) {  // the launcher is gone: what it published goes too
      if (shm_) shm_->unlink_segments();
      ::unlink(o_.control_socket.c_str());
      job::unpublish(o_.job);
    }
  }

  // Blocking: control messages are rare and short, and the launcher always reads.
  void send_control(const msg::FromChip& m) {
    const std::string line = msg::encode(m);
    for (size_t at = 0; at < line.size();) {
      const ssize_t n = ::send(o_.control_fd, line.data() + at, line.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the launcher is gone; reading will notice
      at += static_cast<size_t>(n);
    }
  }

  void read_control() {
    char buf[4096];
    const ssize_t n = ::recv(o_.control_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {  // the launcher is gone
      control_eof_ = true;
      stop();
      return;
    }
    inbuf_.append(buf, static_cast<size_t>(n));
    for (size_t end; (end = inbuf_.find('\n')) != std::string::npos;) {
      const std::string line = inbuf_.substr(0, end);
      inbuf_.erase(0, end + 1);
      try {
        on_control(msg::decode_to_chip(line));
      } catch (const std::exception& e) {
        send_control(msg::ChipError{e.what()});
        exit_status_ = 1;
        stop();
        return;
      }
    }
    reschedule();
  }

  void on_control(const msg::ToChip& m) {
    std::visit(msg::Overloaded{
                   [&](const msg::Config& c) { configure(c); },
                   [&](const msg::Peers& p) { connect(p); },
                   [&](const msg::Faults& f) {
                     seed_ = f.seed;
                     install_faults(f.port, f.faults, f.from_now);
                   },
                   [&](const msg::Stream& t) { node().start_stream(t.port, t.id, t.frames, t.size, now()); },
                   [&](const msg::Ping& p) { node().start_ping(p.port, p.id, p.count, p.size, now()); },
                   [&](const msg::PeerDown& d) {
                     // What the dead peer sent without waking us (the lazy inbox, a shm ring it
                     // wrote without ringing) is read first: read after its death, it would
                     // bring the link back up (a frame of its session).
                     take_unread(now());
                     node().peer_down(d.port, now());
                   },
                   [&](const msg::Stall& st) { node().stall(st.fvc, st.stalled, now()); },
                   [&](const msg::Tables& t) { node().load_tables(read_tables(), t.version, now()); },
                   [&](const msg::Injection& i) { node().pause_injection(i.paused, now()); },
                   [&](const msg::AdminDown& a) { node().admin_down(a.port, a.down, now()); },
                   [&](const msg::Snapshot& q) { send_control(msg::SnapshotTaken{q.id, node().snapshot(now())}); },
                   [&](const msg::Capture& c) { capture(c); },
                   [&](const msg::RecordDeliveries& r) { record_deliveries(r); },
                   [&](const msg::Stop&) { finish(); },
               },
               m);
  }

  node::ChipNode& node() {
    if (!node_) throw Error("the chip is not configured yet");
    return *node_;
  }

  // ttemu traffic --replay: what the router delivers, recorded afresh or no more; the answer is
  // what was recorded until now.
  void record_deliveries(const msg::RecordDeliveries& r) {
    send_control(msg::DeliveriesTaken{r.id, deliveries_.to_json()});
    deliveries_ = {};
    if (r.record) node().set_delivery_tap([this](const routing::Packet& p) { deliveries_.add(o_.chip, p); });
    else node().set_delivery_tap(nullptr);
  }

  // ttemu capture: start (or replace) or stop recording what the ports send; the answer says
  // what the capture that ended recorded and dropped.
  void capture(const msg::Capture& c) {
    node();
    msg::Captured done{.id = c.id, .recorded = tap_->recorded(), .dropped = tap_->dropped(), .sink_lost = tap_->sink_lost(), .error = ""};
    try {
      if (c.sink.empty()) tap_->stop();
      else tap_->start(c.sink, o_.chip.mesh, o_.chip.device, c.ports);
    } catch (const Error& e) {
      done.error = e.what();
    }
    send_control(done);
  }

  void configure(const msg::Config& m) {
    arch_ = arch_spec(m.arch);
    seed_ = m.seed;
    // --cpu-bind blocks: first, so the threads and rings made below start where they stay.
    if (m.cpu_ranks > 0) {
      const auto cpus = cpu_share(static_cast<size_t>(m.cpu_rank), static_cast<size_t>(m.cpu_ranks), allowed_cpus());
      if (const std::string why = bind_process(cpus); !why.empty()) {
        fmt::print(stderr, "ttemu chip {}: cannot bind to CPUs {} ({}): it runs where the kernel puts it\n",
                   routing::to_string(o_.chip), cpu_list_text(cpus), why);
      }
    }
    if (m.sched_batch) {
      if (const std::string why = schedule_as_batch(); !why.empty()) {
        fmt::print(stderr, "ttemu chip {}: cannot run under SCHED_BATCH ({}): it keeps its scheduling\n", routing::to_string(o_.chip), why);
      }
    }
    loop_.set_spin(std::chrono::microseconds(m.spin_us));
    loop_.set_timer_slack(std::chrono::microseconds(m.timer_slack_us));
    node::ChipNodeConfig nc;
    nc.self = o_.chip;
    nc.job = m.job_hash;
    nc.link.window = m.window;
    nc.link.window_bytes = static_cast<size_t>(m.window_kib) * 1024;
    nc.link.ack_delay = std::chrono::microseconds(m.ack_delay_us);
    // The far end runs with the same settings: it holds an acknowledgement this long at most.
    nc.link.peer_ack_delay = std::chrono::microseconds(m.ack_delay_us + m.timer_slack_us);
    nc.efc.enabled = m.efc;
    nc.efc.timeouts = m.efc_timeouts;
    nc.efc.error_rate = m.efc_error_rate;
    nc.efc.interval = std::chrono::milliseconds(m.efc_interval_ms);
    nc.rates.interval = std::chrono::milliseconds(m.status_interval_ms);
    nc.rates.crc_alarm = m.crc_alarm;
    nc.rates.retransmit_alarm = m.retransmit_alarm;
    nc.router.data_fvcs = m.data_fvcs;
    nc.router.rb_packets = m.rb_packets;
    nc.router.mesh_rows = m.mesh_rows;
    nc.router.mesh_cols = m.mesh_cols;
    nc.tensix_cores = arch_.tensix_cores;
    nc.tensix_l1 = arch_.tensix_l1;
    const auto mode = session::parse_memory_mode(m.memory);
    if (!mode) throw Error(fmt::format("unknown memory mode '{}'", m.memory));
    nc.memory = *mode;
    nc.router.timeout = std::chrono::milliseconds(m.timeout_ms);
    nc.router.credit_delay = std::chrono::microseconds(m.credit_delay_us);
    planes_ = m.planes;
    std::random_device rd;
    msg::Bound bound;
    if (m.transport == "shm") {
      shm_ = std::make_unique<ShmTransport>(o_.job, o_.chip, *ctl_);
      ctl_->transport_mode.store(kTransportShm);
    } else if (m.transport == "uring") {
      const char* single = std::getenv("TTEMU_URING_SINGLE_SHOT");  // tests of the fallback
      try {
        uring_ = std::make_unique<UringTransport>(!(single && *single == '1'));
        loop_.wait_in(uring_.get());  // the loop sleeps in the ring (uring_transport.hpp)
      } catch (const Error&) {
        // The default, where io_uring is refused, falls back to udp; anything else stands.
        if (!m.udp_if_no_uring || !UringTransport::refused()) throw;
        ctl_->transport_mode.store(kTransportUdpNoUring);
      }
    } else if (m.transport != "udp") {
      throw Error(fmt::format("unknown transport '{}'", m.transport));
    }
    wire::Transport& transport = shm_     ? static_cast<wire::Transport&>(*shm_)
                                 : uring_ ? static_cast<wire::Transport&>(*uring_)
                                          : udp_;
    // Over shm a lazy acknowledgement costs a few stores into a ring, so it goes at once
    // instead of arming a timer; through sockets it costs a system call and the kernel's
    // delivery, so it waits for data to ride on first (docs/fabric.md#defaults-from-measurements).
    nc.link.lazy_acks = shm_ != nullptr;
    if (!shm_) {
      inbox_ = std::make_unique<wire::LazyInbox>(m.bind);
      bound.lazy = inbox_->local_port();
      ctl_->inbox_udp.store(bound.lazy, std::memory_order_relaxed);
    }
    for (const auto& l : m.links) {
      node::PortConfig pc;
      pc.number = l.port;
      pc.peer = {nc.job, l.peer_mesh, l.peer_device, l.peer_port};
      pc.nonce = static_cast<uint32_t>(rd()) | 1u;
      pc.keepalive = std::chrono::milliseconds(l.keepalive_ms);
      uint8_t* core = l1_seg_.as<uint8_t>(arch_.eth_l1_offset(pc.number));
      pc.receive_buffer = {core + kRouterBufferOffset, arch_.eth_l1 - kRouterBufferOffset};
      if (shm_) {
        shm_->add(pc.number, {{l.peer_mesh, l.peer_device}, l.peer_port});
        bound.ports[std::to_string(pc.number)] = 0;  // no socket: the launcher wires nothing
      } else {
        const uint16_t udp = uring_ ? uring_->add(pc.number, m.bind) : udp_.add(pc.number, m.bind).socket->local_port();
        ctl_->ports[pc.number].udp_port.store(udp);
        bound.ports[std::to_string(pc.number)] = udp;
      }
      nc.ports.push_back(pc);
    }
    ctl_->l1_bytes = l1_seg_.size();
    ctl_->dram_bytes = dram_seg_.size();
    auto memory = [this](uint64_t addr, size_t size) {
      return chip::locate(addr, size, {l1_seg_.as<uint8_t>(), l1_seg_.size()}, {dram_seg_.as<uint8_t>(), dram_seg_.size()});
    };
    for (const auto& l : m.links) wired_.push_back(l.port);
    nc.tables = read_tables();
    tap_ = std::make_unique<wire::CaptureTap>(transport);  // records nothing until a capture starts
    node_ = std::make_unique<node::ChipNode>(std::move(nc), memory, *ctl_, *tap_, *this);
    // A worker that died while it wrote a command: its slot is voided (CommandIntake).
    node_->set_liveness([](uint32_t pid) { return job::process_running(static_cast<int>(pid)); });
    for (const auto& l : m.links) {
      if (!l.faults.is_null()) install_faults(l.port, l.faults);
    }
    // A worker that dies without closing its sockets: they close as its closes would.
    owners_ = std::make_unique<OwnerWatch>(
        loop_,
        [this](uint32_t pid) {
          node_->owner_gone(pid, now());
          reschedule();
        },
        [this](uint32_t pid, int error) {
          fmt::print(stderr, "ttemu chip {}: cannot watch worker process {} ({}): its sockets stay if it ends without closing them\n",
                     routing::to_string(o_.chip), pid, std::strerror(error));
        });
    // Workers' commands: looked for on every turn of the loop; a worker rings the doorbell
    // only when the loop has said it sleeps.
    doorbell_ = std::make_unique<DoorbellListener>(o_.job, o_.chip);
    loop_.on_bell(doorbell_->fd(), [this] { doorbell_->drain(); });
    // Shared memory brings workers' commands and, with --transport shm, datagrams: looked for
    // on every turn, and once more after the loop says it sleeps (router_asleep), which is
    // what workers and neighbours read before ringing the doorbell.
    loop_.on_shared_work(
        &ctl_->commands.router_asleep,
        [this] { return node_->has_work() || (shm_ && shm_->has_incoming()) || (uring_ && uring_->has_pending()); },
        [this] {
          const Time t = now();
          size_t got = 0;
          if (shm_) got += shm_->receive(to_node(t));
          if (uring_) got += poll_uring(t);
          if (got > 0) node_->end_of_batch(t);
          if (loop_.rang() || node_->has_work()) node_->pump(t);
          take_lazy(t);  // (after the forwards: a system call)
          reschedule();
        });
    ctl_->running.store(1);
    send_control(bound);
  }

  // Each plane's table from the L1 block of a router on that plane (the control plane writes
  // them there before the chip starts and before every reload).
  std::vector<routing::RouterTable> read_tables() const {
    std::vector<routing::RouterTable> tables(static_cast<size_t>(planes_));
    std::vector<bool> read(tables.size(), false);
    for (uint8_t port : wired_) {
      const auto* rcfg = l1_seg_.as<const RouterL1Block>(arch_.eth_l1_offset(port));
      if (rcfg->magic != kRouterMagic || rcfg->plane >= planes_ || read[rcfg->plane]) continue;
      tables[rcfg->plane] = routing::RouterTable::unpack(rcfg->table);  // one router per plane is enough
      read[rcfg->plane] = true;
    }
    return tables;
  }

  void install_faults(uint8_t port, const json& f, bool from_now = false) {
    link::DirectionFaults faults = link::faults_from_json(f);
    if (from_now) {
      const link::Duration age = node().link_age(now());
      for (auto& w : faults.down) w.from += age, w.to += age;
    }
    uint64_t seed = seed_ * 0x9E3779B97F4A7C15ull ^ (uint64_t{o_.chip.mesh} << 40) ^
                    (uint64_t{o_.chip.device} << 20) ^ port;
    node().set_faults(port, faults.any() ? std::make_unique<link::FaultInjector>(faults, seed) : nullptr);
  }

  // Completions of the chip's io_uring: datagrams for the node, sockets with room again.
  // Told to the control plane when it changes (a socket may fall back to single-shot receives).
  void publish_uring_mode() {
    const uint32_t mode = uring_->mode() == UringTransport::Mode::kMultishot ? kTransportUringMultishot
                                                                            : kTransportUringSingleShot;
    if (ctl_->transport_mode.load(std::memory_order_relaxed) != mode) ctl_->transport_mode.store(mode);
  }

  // Everything that came without waking the chip, read at once: the lazy inbox and, with
  // --transport shm, the rings (a held acknowledgement goes in without a ring of the doorbell).
  void take_unread(Time t) {
    if (!node_) return;
    if (shm_ && shm_->receive(to_node(t), std::numeric_limits<size_t>::max()) > 0) {
      node_->end_of_batch(t);
    }
    take_lazy(t, /*at_once=*/true);
  }

  // Reads the lazy inbox if a read is due (or at once, with `at_once`): what peers sent
  // without waking this chip; the node then answers what it brought.
  void take_lazy(Time t, bool at_once = false) {
    if (!inbox_ || !node_ || !(at_once || inbox_->ready(t))) return;
    const size_t n = inbox_->read(t, to_node(t));
    ctl_->inbox_foreign.store(inbox_->foreign(), std::memory_order_relaxed);
    if (n > 0) node_->end_of_batch(t);
  }

  size_t poll_uring(Time t) {
    const size_t n = uring_->poll({
        to_node(t),
        [&](uint8_t port) { node_->on_writable(port, t); },
        [&](uint8_t port) { count(port, &link::LinkCounters::foreign); },
        [&](uint8_t port) { count(port, &link::LinkCounters::wire_drops); },  // a staged or lone small send refused
    });
    publish_uring_mode();
    return n;
  }

  // One more on a port's counter (foreign: a datagram from anyone but the port's peer,
  // dropped).
  void count(uint8_t port, std::atomic<uint64_t> link::LinkCounters::*which) {
    auto& c = ctl_->ports[port].counters;
    c.add(c.*which);
  }

  void connect(const msg::Peers& m) {
    // Each wired port's socket takes its peer's address: at first every one, later (a far end
    // restarted with new sockets) the ones named. Entries for other ports are ignored.
    const bool first = !connected_;
    connected_ = true;
    for (uint8_t port : shm_ ? std::vector<uint8_t>{} : wired_) {  // (shm rings have no addresses)
      const auto peer = m.peers.find(std::to_string(port));
      if (peer == m.peers.end()) {
        if (first) throw Error(fmt::format("peers: no address for port {}", port));
        continue;
      }
      const wire::Address addr = wire::make_address(peer->second.addr, peer->second.udp);
      wire::UdpSocket& sock = uring_ ? uring_->udp(port) : *udp_.at(port).socket;
      sock.set_peer(addr);
      watch_strays(port, sock);
      // Lazy datagrams go to the peer chip's inbox, and ours come from the peer's socket.
      if (peer->second.lazy) {
        const wire::Address inbox = wire::make_address(peer->second.addr, peer->second.lazy);
        sock.set_inbox(inbox);
      }
      if (inbox_) inbox_->set_peer(port, addr);
    }
    if (!first) return;
    if (shm_) shm_->connect();
    if (uring_) {
      uring_->start();  // completions are the loop's shared work (uring_transport.hpp)
      publish_uring_mode();
    }
    for (auto& e : udp_.endpoints()) {
      auto* raw = e.get();
      loop_.watch(e->socket->fd(), EPOLLIN, [this, raw](uint32_t events) {
        if (events & EPOLLOUT) node_->on_writable(raw->port, now());
        if (events & (EPOLLIN | EPOLLERR)) on_readable(*raw);
      });
    }
    node().start(now());
  }

  // Takes what has arrived on a port, a bounded number of batches; the node answers once
  // every port that was ready has been read (the loop's batch end).
  //
  // A socket that was quiet a while and then had one datagram has mostly one again (a hop on a
  // latency path): it is read by recvmsg, which costs less than a recvmmsg that looks for a
  // second. If more were waiting, the loop comes straight back, and a socket read again so soon
  // is read in batches.
  void on_readable(UdpTransport::Endpoint& e) {
    static constexpr std::chrono::microseconds kQuiet{20};
    const Time t = now();
    const bool one = e.last_got <= 1 && t - e.last_read > kQuiet;
    e.last_read = t;
    e.last_got = 0;
    for (int round = 0; round < 16; ++round) {
      auto batch = e.socket->receive(one);
      e.last_got += batch.size();
      for (const auto& d : batch) {
        if (!e.socket->accepts(*d.from)) {
          count(e.port, &link::LinkCounters::foreign);
          continue;
        }
        node_->on_datagram(e.port, d.bytes, t);
      }
      if (one || batch.size() < 64) break;
    }
  }

  // A socket connected to its peer has a twin that takes anyone else's datagrams
  // (udp_socket.hpp); it is watched from when it exists, over either socket transport.
  void watch_strays(uint8_t port, wire::UdpSocket& sock) {
    const int fd = sock.strays_fd();
    if (fd < 0 || std::find(strays_watched_.begin(), strays_watched_.end(), fd) != strays_watched_.end()) return;
    strays_watched_.push_back(fd);
    loop_.watch(fd, EPOLLIN, [this, port, &sock](uint32_t) { take_strays(port, sock); });
  }

  // A stray is counted and dropped, as one on the link's own socket would be; the peer's own
  // datagram (it came while the socket was being connected to it) goes to the node.
  void take_strays(uint8_t port, wire::UdpSocket& sock) {
    const Time t = now();
    for (int i = 0; i < 64; ++i) {  // more waiting: the loop comes back (level-triggered)
      const auto d = sock.receive_stray();
      if (!d) return;
      if (sock.accepts(*d->from)) node_->on_datagram(port, d->bytes, t);
      else count(port, &link::LinkCounters::foreign);
    }
  }

  // --- what the node tells the launcher -------------------------------------------------

  void link_state(uint8_t port, link::LinkState state) override {
    send_control(msg::LinkState{port, link::to_string(state)});  // the launcher's readiness
  }

  // The node pushes into its status queue; the control plane hears of it only when it had
  // drained the queue.
  void status_pushed(uint64_t pushed) override { send_control(msg::StatusPushed{pushed}); }

  void stream_done(uint8_t port, uint64_t id, uint64_t frames, uint64_t bytes, double seconds) override {
    send_control(msg::StreamDone{port, id, frames, bytes, seconds});
  }

  void ping_done(uint8_t port, uint64_t id, const std::vector<double>& rtt_us) override {
    send_control(msg::PingDone{port, id, rtt_us});
  }

  // The loop sleeps until the node's earliest deadline; with none, until something arrives
  // (idle is free).
  void reschedule() {
    if (!node_) return loop_.set_deadline(std::nullopt);
    for (const uint32_t pid : node_->take_new_owners()) owners_->watch(pid);
    loop_.set_deadline(node_->next_deadline());
  }

  ChipOptions o_;
  EventLoop loop_;
  UdpTransport udp_;                  // --transport udp: a socket per port
  std::unique_ptr<ShmTransport> shm_;  // --transport shm: rings in shared memory
  std::unique_ptr<UringTransport> uring_;  // --transport uring: the sockets through one io_uring
  std::unique_ptr<wire::LazyInbox> inbox_;  // udp and uring: what peers send without waking us
  int signal_fd_ = -1;
  std::string inbuf_;
  Segment ctl_seg_, l1_seg_, dram_seg_;
  ChipControl* ctl_ = nullptr;
  uint64_t seed_ = 1;
  ArchSpec arch_{};
  int planes_ = 1;
  std::vector<uint8_t> wired_;  // the ports the configuration wired
  bool connected_ = false;      // the first Peers came
  std::vector<int> strays_watched_;  // the sockets' twins (watch_strays)
  session::Deliveries deliveries_;        // while ttemu traffic --replay records them
  std::unique_ptr<wire::CaptureTap> tap_;  // between the node and its transport (ttemu capture)
  std::unique_ptr<node::ChipNode> node_;
  std::unique_ptr<DoorbellListener> doorbell_;
  std::unique_ptr<OwnerWatch> owners_;  // workers that opened sockets here
  pid_t ppid_ = 0;
  bool control_eof_ = false;
  int exit_status_ = 0;
};

}  // namespace

int run_chip(const ChipOptions& options) {
  try {
    Chip chip(options);
    return chip.run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "ttemu chip {}: error: {}\n", routing::to_string(options.chip), e.what());
    chip::unlink_chip_segments(options.job, options.chip);
    return 1;
  }
}

}  // namespace ttemu::process
