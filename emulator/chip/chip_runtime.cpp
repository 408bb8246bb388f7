#include "emulator/chip/chip_runtime.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/chip/arch.hpp"
#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/command_intake.hpp"
#include "emulator/chip/doorbell.hpp"
#include "emulator/chip/event_loop.hpp"
#include "emulator/common/deadline.hpp"
#include "emulator/common/error.hpp"
#include "emulator/session/fabric_node.hpp"
#include "emulator/link/fault_plan.hpp"
#include "emulator/link/tt_link.hpp"
#include "emulator/link/udp_port.hpp"

namespace ttemu::chip {

using nlohmann::json;
using link::Time;

namespace {


// Test-stream payloads: a header (stream, index), then the stream's pattern (random bytes
// from the stream id). Checked on arrival: index in order, every byte as sent.
struct StreamHeader {
  uint64_t stream;
  uint64_t index;
};

class StreamPattern {
 public:
  void fill(std::span<uint8_t> out, uint64_t stream, uint64_t index) {
    prepare(stream, out.size());
    StreamHeader h{stream, index};
    const size_t head = std::min(out.size(), sizeof(h));
    std::memcpy(out.data(), &h, head);
    std::memcpy(out.data() + head, base_.data() + head, out.size() - head);
  }

  bool check(std::span<const uint8_t> in, uint64_t stream) {
    prepare(stream, in.size());
    const size_t head = std::min(in.size(), sizeof(StreamHeader));
    return std::memcmp(in.data() + head, base_.data() + head, in.size() - head) == 0;
  }

 private:
  void prepare(uint64_t stream, size_t size) {
    if (stream == stream_ && base_.size() >= size) return;
    stream_ = stream;
    base_.resize(std::max(size, base_.size()));
    std::mt19937_64 rng(stream);
    for (auto& b : base_) b = static_cast<uint8_t>(rng());
  }
  uint64_t stream_ = ~0ull;
  std::vector<uint8_t> base_;
};

struct Port {
  uint8_t number = 0;
  std::unique_ptr<link::UdpPort> udp;
  std::unique_ptr<link::TtLink> link;
  PortStatus* status = nullptr;
  sockaddr_in peer{};
  uint8_t* rb = nullptr;
  size_t rb_size = 0;
  std::vector<std::vector<uint8_t>> outbox;
  size_t outbox_sent = 0;
  bool write_waiting = false;
  bool touched = false;  // read in the current batch of events
  link::LinkState reported = link::LinkState::kHandshake;
  bool reported_once = false;
  // Stream sender (ttemu link test).
  struct {
    bool active = false;
    uint64_t id = 0, total = 0, next = 0;
    uint32_t size = 0;
    Time start{};
  } tx;
  // Stream receiver.
  uint64_t rx_stream = 0, rx_expected = 0;
  // Ping (round trips through the peer's echo).
  struct {
    bool active = false, waiting = false;
    uint64_t id = 0;
    int count = 0, done = 0;
    uint32_t size = 0;
    Time sent{};
    std::vector<double> rtt_us;
  } ping;
  std::deque<std::vector<uint8_t>> echoes;
  std::vector<uint8_t> scratch;
  StreamPattern tx_pattern, rx_pattern;
};

class Chip {
 public:
  Chip(const ChipOptions& o) : o_(o) { ppid_ = getppid(); }

  int run() {
    ctl_seg_ = Segment::open(segment_name(o_.job, o_.chip, SegmentKind::kControl));
    l1_seg_ = Segment::open(segment_name(o_.job, o_.chip, SegmentKind::kL1));
    dram_seg_ = Segment::open(segment_name(o_.job, o_.chip, SegmentKind::kDram));
    ctl_ = ctl_seg_.as<ChipControl>();
    if (ctl_->magic != kControlMagic) throw Error("control block not initialised by the launcher");
    ctl_->pid.store(static_cast<uint32_t>(getpid()));
    // Termination arrives as a readable descriptor.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal_fd_ = signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) throw Error("signalfd failed");
    loop_.watch(signal_fd_, EPOLLIN, [this](uint32_t) { stop(); });
    loop_.watch(o_.control_fd, EPOLLIN, [this](uint32_t) { read_control(); });
    loop_.on_deadline([this](Time t) { on_timer(t); });
    loop_.on_batch_end([this] { end_of_batch(); });
    loop_.run();
    ctl_->running.store(0);
    cleanup();
    return exit_status_;
  }

 private:
  void stop() { loop_.stop(); }
  Time now() const { return loop_.time(); }

  void cleanup() {
    for (auto& p : ports_) loop_.forget(p->udp->fd());
    ports_.clear();
    ::close(signal_fd_);
    // The launcher removes every segment at teardown; a chip removes its own too, so that
    // nothing is left if the launcher is gone (killed, crashed).
    unlink_chip_segments(o_.job, o_.chip);
    if (getppid() != ppid_ || control_eof_) ::unlink(o_.control_socket.c_str());
  }

  // Blocking: control messages are rare and short, and the launcher always reads.
  void send_control(const json& msg) {
    const std::string line = msg.dump() + "\n";
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
        on_control(json::parse(line));
      } catch (const std::exception& e) {
        send_control({{"type", "error"}, {"message", e.what()}});
        exit_status_ = 1;
        stop();
        return;
      }
    }
  }

  void on_control(const json& m) {
    const std::string type = m.at("type");
    if (type == "config") configure(m);
    else if (type == "peers") connect(m);
    else if (type == "faults") set_faults(m);
    else if (type == "stream") start_stream(m);
    else if (type == "ping") start_ping(m);
    else if (type == "peer_down") {
      Port& p = port(m);
      p.link->peer_lost(now());
      service(p, now());
      reschedule();
    }
    else if (type == "stall") {
      if (node_) node_->router().stall_center(m.at("fvc").get<uint8_t>(), m.at("stalled").get<bool>());
      pump(now());
      reschedule();
    } else if (type == "stop") stop();
    else throw Error("unknown control message '" + type + "'");
  }

  void configure(const json& m) {
    ArchSpec arch = arch_spec(m.at("arch"));
    job_hash_ = m.at("job_hash");
    seed_ = m.value("seed", uint64_t{1});
    link_cfg_.window = m.value("window", link_cfg_.window);
    link_cfg_.ack_delay = std::chrono::microseconds(m.value("ack_delay_us", 0));
    loop_.set_spin(std::chrono::microseconds(m.value("spin_us", 0)));
    std::random_device rd;
    json bound = json::object();
    for (const auto& l : m.at("links")) {
      auto p = std::make_unique<Port>();
      p->number = l.at("port");
      p->status = &ctl_->ports[p->number];
      p->udp = std::make_unique<link::UdpPort>(m.value("bind", std::string("127.0.0.1")));
      p->status->udp_port.store(p->udp->local_port());
      uint8_t* core = l1_seg_.as<uint8_t>(arch.eth_l1_offset(p->number));
      p->rb = core + kRouterBufferOffset;
      p->rb_size = arch.eth_l1 - kRouterBufferOffset;
      link::LinkIdentity self{job_hash_, o_.chip.mesh, o_.chip.device, p->number};
      link::LinkIdentity peer{job_hash_, l.at("peer_mesh"), l.at("peer_device"), l.at("peer_port")};
      p->link = std::make_unique<link::TtLink>(link_cfg_, self, peer, static_cast<uint32_t>(rd()) | 1u,
                                               p->status->counters);
      if (l.contains("faults")) install_faults(*p, l["faults"]);
      Port* raw = p.get();
      p->link->set_delivery([this, raw](uint32_t dest, std::span<const uint8_t> payload) {
        on_delivery(*raw, dest, payload);
      });
      bound[std::to_string(p->number)] = p->udp->local_port();
      ports_.push_back(std::move(p));
    }
    std::sort(ports_.begin(), ports_.end(), [](const auto& a, const auto& b) { return a->number < b->number; });
    make_fabric_node(m, arch);
    ctl_->running.store(1);
    send_control({{"type", "bound"}, {"ports", bound}});
  }

  // --- the fabric node: router and center, fed by links and by workers --------------------

  void make_fabric_node(const json& m, const ArchSpec& arch) {
    routing::RouterConfig rc;
    rc.data_fvcs = m.value("data_fvcs", rc.data_fvcs);
    rc.rb_packets = m.value("rb_packets", rc.rb_packets);
    rc.timeout = std::chrono::milliseconds(m.value("timeout_ms", 3000));
    rc.credit_delay = std::chrono::microseconds(m.value("credit_delay_us", 0));
    const int planes = m.value("planes", 1);
    std::vector<routing::RouterTable> tables(static_cast<size_t>(planes));
    std::vector<uint8_t> wired;
    for (auto& p : ports_) {
      wired.push_back(p->number);
      const auto* rcfg = l1_seg_.as<RouterConfig>(arch.eth_l1_offset(p->number));
      if (rcfg->magic == kRouterMagic && rcfg->plane < planes) {
        tables[rcfg->plane] = routing::RouterTable::unpack(rcfg->table);  // from router L1
      }
    }
    ctl_->l1_bytes = l1_seg_.size();
    ctl_->dram_bytes = dram_seg_.size();
    auto memory = [this](uint64_t addr, size_t size) { return local(addr, size); };
    node_ = std::make_unique<session::FabricNode>(o_.chip, rc, std::move(tables), wired, memory);
    intake_ = std::make_unique<CommandIntake>(o_.chip, *ctl_, memory);
    // Workers' commands: looked for on every turn of the loop; a worker rings the doorbell
    // only when the loop has said it sleeps.
    doorbell_ = std::make_unique<DoorbellListener>(o_.job, o_.chip);
    loop_.watch(doorbell_->fd(), EPOLLIN, [this](uint32_t) {
      doorbell_->drain();
      pump(now());
      reschedule();
    });
    loop_.on_shared_work(&ctl_->commands.router_asleep, [this] { return intake_->has_work(); }, [this] {
      pump(now());
      reschedule();
    });
  }

  std::span<uint8_t> local(uint64_t addr, size_t size) {
    return session::locate(addr, size, {l1_seg_.as<uint8_t>(), l1_seg_.size()}, {dram_seg_.as<uint8_t>(), dram_seg_.size()});
  }

  // Moves the fabric: commands into the router, router traffic onto links, answers to workers.
  void pump(Time t) {
    if (!node_) return;
    out_.clear();
    // Commands enter as the router makes room; the router makes room as it forwards.
    for (int round = 0; round < 64; ++round) {
      const bool took = intake_->drain(*node_, t);
      const bool moved = node_->poll(t, out_);
      if (!took && !moved) break;
    }
    for (const auto& ev : out_.events) {
      ctl_->router_events.fetch_add(1, std::memory_order_relaxed);
      send_control({{"type", "event"}, {"kind", ev.name()}, {"at", routing::to_string(ev.at)},
                    {"src", routing::to_string(ev.packet.src())}, {"dst", routing::to_string(ev.packet.dst())},
                    {"packet_id", ev.packet.packet_id}, {"ttl", ev.packet.ttl},
                    {"command", routing::to_string(ev.packet.command)}});
    }
    ctl_->packets_delivered.fetch_add(out_.committed.size(), std::memory_order_relaxed);
    for (const auto& w : out_.for_workers) intake_->answer(w);
    for (auto& p : ports_) {
      if (node_->backlog(p->number).empty()) continue;
      service(*p, t);
    }
  }

  void install_faults(Port& p, const json& f) {
    link::DirectionFaults faults = link::faults_from_json(f);
    uint64_t seed = seed_ * 0x9E3779B97F4A7C15ull ^ (uint64_t{o_.chip.mesh} << 40) ^
                    (uint64_t{o_.chip.device} << 20) ^ p.number;
    p.link->set_faults(faults.any() ? std::make_unique<link::FaultInjector>(faults, seed) : nullptr);
  }

  void connect(const json& m) {
    Time t = now();
    for (auto& p : ports_) {
      const auto& peer = m.at("peers").at(std::to_string(p->number));
      p->peer = link::make_address(peer.at("addr"), peer.at("udp"));
      p->udp->set_peer(p->peer);
      p->link->start(t);
      Port* raw = p.get();
      loop_.watch(p->udp->fd(), EPOLLIN, [this, raw](uint32_t events) {
        if (events & EPOLLOUT) flush(*raw);
        if (events & (EPOLLIN | EPOLLERR)) on_readable(*raw);
      });
      service(*p, t);
    }
    reschedule();
  }

  void set_faults(const json& m) {
    Port& p = port(m);
    seed_ = m.value("seed", seed_);
    install_faults(p, m.at("faults"));
  }

  void start_stream(const json& m) {
    Port& p = port(m);
    p.tx.active = true;
    p.tx.id = m.at("id");
    p.tx.total = m.at("frames");
    p.tx.size = m.at("size");
    p.tx.next = 0;
    p.tx.start = now();
    service(p, p.tx.start);
    reschedule();
  }

  void start_ping(const json& m) {
    Port& p = port(m);
    p.ping.active = true;
    p.ping.waiting = false;
    p.ping.id = m.at("id");
    p.ping.count = m.at("count");
    p.ping.size = m.at("size");
    p.ping.done = 0;
    p.ping.rtt_us.clear();
    service(p, now());
    reschedule();
  }

  Port& port(const json& m) {
    const int number = m.at("port");
    for (auto& p : ports_) {
      if (p->number == number) return *p;
    }
    throw Error("port " + std::to_string(number) + " is not wired");
  }

  void on_delivery(Port& p, uint32_t dest, std::span<const uint8_t> payload) {
    if (dest == kStreamAddr) {
      // Commit to the router's receive buffer in L1, then check what landed there.
      size_t at = payload.size() < p.rb_size ? (p.rx_expected * payload.size()) % (p.rb_size - payload.size() + 1) : 0;
      size_t n = std::min(payload.size(), p.rb_size);
      std::memcpy(p.rb + at, payload.data(), n);
      StreamHeader h{};
      std::memcpy(&h, p.rb + at, std::min(n, sizeof(h)));
      if (h.stream != p.rx_stream) {
        p.rx_stream = h.stream;
        p.rx_expected = 0;
      }
      bool ok = h.index == p.rx_expected && p.rx_pattern.check({p.rb + at, n}, h.stream);
      ++p.rx_expected;
      p.status->counters.add(ok ? p.status->stream_verified : p.status->stream_errors);
    } else if (dest == kEchoAddr) {
      p.echoes.emplace_back(payload.begin(), payload.end());
    } else if (dest == kEchoReplyAddr && p.ping.waiting) {
      p.ping.waiting = false;
      p.ping.rtt_us.push_back(std::chrono::duration<double, std::micro>(now() - p.ping.sent).count());
      ++p.ping.done;
    } else if (node_) {
      node_->on_link_payload(p.number, dest, payload, now());
      fabric_dirty_ = true;
    }
  }

  // Takes what has arrived on a port, a bounded number of batches; the answers go out once
  // every port that was ready has been read (end_of_batch).
  void on_readable(Port& p) {
    Time t = now();
    if (!p.touched) touched_.push_back(&p), p.touched = true;
    for (int round = 0; round < 16; ++round) {
      auto batch = p.udp->receive();
      for (const auto& d : batch) {
        if (!link::same_address(d.from, p.peer)) {
          p.status->counters.add(p.status->counters.foreign);
          continue;
        }
        p.link->on_datagram(d.bytes, t);
      }
      if (p.link->nack_pending()) service(p, t);  // a gap: ask for the go-back now
      if (batch.size() < 64) break;
    }
  }

  void end_of_batch() {
    if (touched_.empty()) return;
    const Time t = now();
    if (fabric_dirty_) {
      fabric_dirty_ = false;
      pump(t);  // one router pass for everything that arrived, then the links it fed
    }
    for (Port* p : touched_) {
      p->touched = false;
      service(*p, t);  // acknowledgements, echoes, stream frames
    }
    touched_.clear();
    reschedule();
  }

  void service(Port& p, Time t) {
    if (node_) {
      node_->pass_backlog(p.number, [&](uint32_t addr, std::span<const uint8_t> bytes) {
        return p.link->send_room() > 0 && p.link->send(addr, bytes);
      });
    }
    while (!p.echoes.empty() && p.link->send_room() > 0) {
      p.link->send(kEchoReplyAddr, p.echoes.front());
      p.echoes.pop_front();
    }
    if (p.ping.active && !p.ping.waiting && p.ping.done < p.ping.count && p.link->send_room() > 0) {
      p.scratch.assign(p.ping.size, 0);
      p.tx_pattern.fill(p.scratch, p.ping.id, static_cast<uint64_t>(p.ping.done));
      p.ping.sent = now();
      p.ping.waiting = p.link->send(kEchoAddr, p.scratch);
    }
    if (p.tx.active) {
      size_t room = p.link->send_room();
      p.scratch.resize(p.tx.size);
      for (; room > 0 && p.tx.next < p.tx.total; --room, ++p.tx.next) {
        p.tx_pattern.fill(p.scratch, p.tx.id, p.tx.next);
        p.link->send(kStreamAddr, p.scratch);
      }
    }
    p.link->poll_transmit(t, p.outbox);
    flush(p);
    report(p);
  }

  void flush(Port& p) {
    if (p.outbox_sent < p.outbox.size()) p.outbox_sent += p.udp->send(p.outbox, p.outbox_sent);
    if (p.outbox_sent == p.outbox.size()) {
      p.link->recycle(p.outbox);
      p.outbox_sent = 0;
    }
    // The socket's send buffer is full: wait until it drains (level-triggered, so only while
    // something is left to send).
    const bool wait = p.outbox_sent < p.outbox.size();
    if (wait != p.write_waiting) {
      p.write_waiting = wait;
      loop_.change(p.udp->fd(), wait ? EPOLLIN | EPOLLOUT : EPOLLIN);
    }
  }

  void report(Port& p) {
    if (!p.reported_once || p.link->state() != p.reported) {
      if (p.reported_once || p.link->state() != link::LinkState::kHandshake) {
        send_control({{"type", "link"}, {"port", p.number}, {"state", link::to_string(p.link->state())}});
      }
      const bool down = p.link->state() == link::LinkState::kDown;
      if (node_ && down != node_->router().port_down(p.number)) {
        node_->set_link_down(p.number, down);
        links_changed_ = true;  // the router drops what waits for it: pumped before sleeping
      }
      p.reported_once = true;
      p.reported = p.link->state();
    }
    if (p.tx.active && p.tx.next == p.tx.total && p.link->drained()) {
      p.tx.active = false;
      double seconds = std::chrono::duration<double>(now() - p.tx.start).count();
      send_control({{"type", "stream_done"}, {"port", p.number}, {"id", p.tx.id},
                    {"frames", p.tx.total}, {"bytes", p.tx.total * p.tx.size}, {"seconds", seconds}});
    }
    if (p.ping.active && p.ping.done == p.ping.count) {
      p.ping.active = false;
      send_control({{"type", "ping_done"}, {"port", p.number}, {"id", p.ping.id}, {"rtt_us", p.ping.rtt_us}});
    }
  }

  // The loop sleeps until the earliest deadline of any link or the router; with none, until
  // something arrives (idle is free).
  void reschedule() {
    while (links_changed_) {
      links_changed_ = false;
      pump(now());
    }
    std::optional<Time> next;
    for (auto& p : ports_) next = earlier(next, p->link->next_deadline());
    if (node_) next = earlier(next, node_->next_deadline());
    loop_.set_deadline(next);
  }

  void on_timer(Time t) {
    for (auto& p : ports_) {
      p->link->on_timer(t);
      service(*p, t);
    }
    pump(t);
    reschedule();
  }

  ChipOptions o_;
  EventLoop loop_;
  int signal_fd_ = -1;
  std::string inbuf_;
  Segment ctl_seg_, l1_seg_, dram_seg_;
  ChipControl* ctl_ = nullptr;
  std::vector<std::unique_ptr<Port>> ports_;  // by port number
  std::vector<Port*> touched_;                 // read in this batch of events
  link::LinkConfig link_cfg_;
  uint64_t job_hash_ = 0, seed_ = 1;
  std::unique_ptr<session::FabricNode> node_;
  session::FabricNode::Output out_;
  std::unique_ptr<DoorbellListener> doorbell_;
  bool fabric_dirty_ = false;
  bool links_changed_ = false;  // a link went down or up since the last pump
  std::unique_ptr<CommandIntake> intake_;
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
    unlink_chip_segments(options.job, options.chip);
    return 1;
  }
}

}  // namespace ttemu::chip
