#include "emulator/node/chip_node.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>

#include "emulator/common/deadline.hpp"

namespace ttemu::node {

// A packet's buffer becomes a frame where it lies: its link room is the frame header.
static_assert(routing::Packet::kLinkRoom == link::kFrameRoom);

namespace {

// Test-stream payloads: a header (stream, index), then the stream's pattern (random bytes
// from the stream id). Checked on arrival: index in order, every byte as sent.
struct StreamHeader {
  uint64_t stream;
  uint64_t index;
};

class StreamPattern {
 public:
  // Payload `index` of the stream, appended to out (no zero fill first).
  void append(std::vector<uint8_t>& out, uint64_t stream, uint64_t index, size_t size) {
    prepare(stream, size);
    const StreamHeader h{stream, index};
    const size_t head = std::min(size, sizeof(h));
    const auto* hb = reinterpret_cast<const uint8_t*>(&h);
    out.insert(out.end(), hb, hb + head);
    out.insert(out.end(), base_.data() + head, base_.data() + size);
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

}  // namespace

struct ChipNode::Port {
  uint8_t number = 0;
  chip::PortStatus* status = nullptr;
  std::unique_ptr<link::TtLink> link;
  std::span<uint8_t> rb;  // where checked streams land
  std::vector<wire::Datagram> outbox;  // datagrams the transport has not taken yet
  size_t outbox_sent = 0;
  bool touched = false;  // received on in the current batch
  link::LinkState reported = link::LinkState::kHandshake;
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
  std::deque<std::vector<uint8_t>> echoes;  // frame buffers (link room, payload) to send back
  StreamPattern tx_pattern, rx_pattern;
};

namespace {

std::vector<uint8_t> wired_ports(const ChipNodeConfig& c) {
  std::vector<uint8_t> v;
  for (const auto& p : c.ports) v.push_back(p.number);
  return v;
}

}  // namespace

ChipNode::ChipNode(ChipNodeConfig config, session::Center::Memory memory, chip::ChipControl& control,
                   wire::Transport& transport, NodeObserver& observer)
    : cfg_(std::move(config)),
      ctl_(control),
      transport_(transport),
      observer_(observer),
      fabric_(cfg_.self, cfg_.router, cfg_.tables, wired_ports(cfg_), memory, buffers_),
      intake_(cfg_.self, control, memory),
      by_number_(routing::kMaxPorts, nullptr) {
  std::sort(cfg_.ports.begin(), cfg_.ports.end(), [](const auto& a, const auto& b) { return a.number < b.number; });
  for (const auto& pc : cfg_.ports) {
    if (pc.number >= routing::kMaxPorts) throw std::invalid_argument("port " + std::to_string(pc.number) + " does not exist");
    auto p = std::make_unique<Port>();
    p->number = pc.number;
    p->status = &ctl_.ports[pc.number];
    p->rb = pc.receive_buffer;
    const link::LinkIdentity self{cfg_.job, cfg_.self.mesh, cfg_.self.device, pc.number};
    p->link = std::make_unique<link::TtLink>(cfg_.link, self, pc.peer, pc.nonce, p->status->counters);
    p->link->set_buffer_pool(buffers_);
    Port* raw = p.get();
    p->link->set_delivery([this, raw](uint32_t dest, std::span<const uint8_t> payload) { on_delivery(*raw, dest, payload); });
    by_number_[pc.number] = raw;
    ports_.push_back(std::move(p));
  }
}

ChipNode::~ChipNode() = default;

ChipNode::Port& ChipNode::port(uint8_t number) {
  Port* p = number < by_number_.size() ? by_number_[number] : nullptr;
  if (!p) throw std::invalid_argument("port " + std::to_string(number) + " is not wired");
  return *p;
}

const ChipNode::Port& ChipNode::port(uint8_t number) const { return const_cast<ChipNode*>(this)->port(number); }

const link::LinkCounters& ChipNode::counters(uint8_t number) const { return port(number).status->counters; }
link::LinkState ChipNode::link_state(uint8_t number) const { return port(number).link->state(); }

void ChipNode::start(Time now) {
  now_ = now;
  for (auto& p : ports_) {
    p->link->start(now);
    service(*p, now);
  }
  settle(now);
}

void ChipNode::on_datagram(uint8_t number, std::span<const uint8_t> datagram, Time now) {
  now_ = now;
  Port& p = port(number);
  if (!p.touched) touched_.push_back(&p), p.touched = true;
  p.link->on_datagram(datagram, now);
  if (p.link->nack_pending()) service(p, now);  // a gap: send its NACK now
}

void ChipNode::end_of_batch(Time now) {
  if (touched_.empty()) return;
  now_ = now;
  if (fabric_dirty_) {
    fabric_dirty_ = false;
    pump(now);  // one router pass for everything that arrived, then the links it fed
  }
  for (Port* p : touched_) {
    p->touched = false;
    service(*p, now);  // acknowledgements, echoes, stream frames
  }
  touched_.clear();
  settle(now);
}

void ChipNode::on_timer(Time now) {
  now_ = now;
  for (auto& p : ports_) {
    p->link->on_timer(now);
    service(*p, now);
  }
  pump(now);
}

void ChipNode::pump(Time now) {
  now_ = now;
  do {
    links_changed_ = false;
    out_.clear();
    // Commands enter as the router makes room; the router makes room as it forwards. Another
    // round only if commands were taken, or some wait and the router moved.
    for (int round = 0; round < 64; ++round) {
      const bool took = intake_.drain(fabric_, now);
      const bool moved = fabric_.poll(now, out_);
      if (!took && !(moved && intake_.waiting())) break;
    }
    for (const auto& ev : out_.events) {
      ctl_.router_events.fetch_add(1, std::memory_order_relaxed);
      observer_.router_event(ev);
    }
    ctl_.packets_delivered.fetch_add(out_.committed.size(), std::memory_order_relaxed);
    for (const auto& h : out_.committed) observer_.committed(h);
    for (auto& w : out_.for_workers) {
      intake_.answer(w);
      observer_.answer(w);
      buffers_.give(std::move(w.bytes));
    }
    for (auto& p : ports_) {
      if (!fabric_.backlog(p->number).empty()) service(*p, now);
    }
  } while (links_changed_);  // the router drops at once what waited for a link that went down
}

void ChipNode::on_writable(uint8_t number, Time now) {
  now_ = now;
  Port& p = port(number);
  flush(p);
  service(p, now);
  settle(now);
}

void ChipNode::settle(Time now) {
  if (links_changed_) pump(now);
}

std::optional<Time> ChipNode::next_deadline() const {
  std::optional<Time> next = fabric_.next_deadline();
  for (const auto& p : ports_) next = earlier(next, p->link->next_deadline());
  return next;
}

bool ChipNode::idle() const {
  if (!fabric_.idle()) return false;
  for (const auto& p : ports_) {
    if (!p->link->drained() || p->outbox_sent < p->outbox.size()) return false;
  }
  return true;
}

void ChipNode::peer_down(uint8_t number, Time now) {
  now_ = now;
  Port& p = port(number);
  p.link->peer_lost(now);
  service(p, now);
  settle(now);
}

void ChipNode::set_faults(uint8_t number, std::unique_ptr<link::FaultInjector> faults) {
  port(number).link->set_faults(std::move(faults));
}

void ChipNode::stall(uint8_t fvc, bool stalled, Time now) {
  fabric_.router().stall_center(fvc, stalled);
  pump(now);
}

bool ChipNode::inject(routing::Packet packet, Time now) {
  now_ = now;
  return fabric_.inject(std::move(packet), now);
}

void ChipNode::start_stream(uint8_t number, uint64_t id, uint64_t frames, uint32_t size, Time now) {
  now_ = now;
  Port& p = port(number);
  p.tx.active = true;
  p.tx.id = id;
  p.tx.total = frames;
  p.tx.size = size;
  p.tx.next = 0;
  p.tx.start = now;
  service(p, now);
  settle(now);
}

void ChipNode::start_ping(uint8_t number, uint64_t id, int count, uint32_t size, Time now) {
  now_ = now;
  Port& p = port(number);
  p.ping.active = true;
  p.ping.waiting = false;
  p.ping.id = id;
  p.ping.count = count;
  p.ping.size = size;
  p.ping.done = 0;
  p.ping.rtt_us.clear();
  service(p, now);
  settle(now);
}

void ChipNode::on_delivery(Port& p, uint32_t dest, std::span<const uint8_t> payload) {
  if (dest == chip::kStreamAddr) {
    // Commit to the port's receive buffer in L1, then check what landed there.
    std::span<const uint8_t> landed = payload;
    if (!p.rb.empty()) {
      const size_t at = payload.size() < p.rb.size() ? (p.rx_expected * payload.size()) % (p.rb.size() - payload.size() + 1) : 0;
      const size_t n = std::min(payload.size(), p.rb.size());
      std::memcpy(p.rb.data() + at, payload.data(), n);
      landed = p.rb.subspan(at, n);
    }
    StreamHeader h{};
    std::memcpy(&h, landed.data(), std::min(landed.size(), sizeof(h)));
    if (h.stream != p.rx_stream) {
      p.rx_stream = h.stream;
      p.rx_expected = 0;
    }
    const bool ok = h.index == p.rx_expected && p.rx_pattern.check(landed, h.stream);
    ++p.rx_expected;
    p.status->counters.add(ok ? p.status->stream_verified : p.status->stream_errors);
  } else if (dest == chip::kEchoAddr) {
    std::vector<uint8_t> echo = buffers_.take();
    echo.resize(link::kFrameRoom);
    echo.insert(echo.end(), payload.begin(), payload.end());
    p.echoes.push_back(std::move(echo));
  } else if (dest == chip::kEchoReplyAddr && p.ping.waiting) {
    p.ping.waiting = false;
    p.ping.rtt_us.push_back(std::chrono::duration<double, std::micro>(now_ - p.ping.sent).count());
    ++p.ping.done;
  } else {
    fabric_.on_link_payload(p.number, dest, payload, now_);
    fabric_dirty_ = true;
  }
}

void ChipNode::service(Port& p, Time now) {
  // Packets move into the link's window without a copy (their buffers go with them).
  fabric_.pass_backlog(p.number, [&](uint32_t addr, std::vector<uint8_t>& bytes) {
    return p.link->send_room() > 0 && p.link->send_framed(addr, std::move(bytes));
  });
  while (!p.echoes.empty() && p.link->send_room() > 0) {
    p.link->send_framed(chip::kEchoReplyAddr, std::move(p.echoes.front()));
    p.echoes.pop_front();
  }
  if (p.ping.active && !p.ping.waiting && p.ping.done < p.ping.count && p.link->send_room() > 0) {
    p.ping.sent = now;
    p.ping.waiting = p.link->send_framed(chip::kEchoAddr, test_frame(p, p.ping.id, static_cast<uint64_t>(p.ping.done), p.ping.size));
  }
  if (p.tx.active) {
    size_t room = p.link->send_room();
    for (; room > 0 && p.tx.next < p.tx.total; --room, ++p.tx.next) {
      p.link->send_framed(chip::kStreamAddr, test_frame(p, p.tx.id, p.tx.next, p.tx.size));
    }
  }
  // New datagrams queue behind what the transport has not taken yet.
  p.link->poll_transmit(now, p.outbox);
  flush(p);
  report(p);
}

std::vector<uint8_t> ChipNode::test_frame(Port& p, uint64_t id, uint64_t index, uint32_t size) {
  // Written straight into a frame buffer that goes into the window, as a sender's core would
  // write its ethernet core's buffer: no copy after the fill.
  std::vector<uint8_t> frame = buffers_.take();
  frame.resize(link::kFrameRoom);
  p.tx_pattern.append(frame, id, index, size);
  return frame;
}

void ChipNode::flush(Port& p) {
  // Called even with nothing left: the transport learns that it need not wait for room.
  p.outbox_sent += transport_.send(p.number, std::span(p.outbox).subspan(p.outbox_sent));
  if (p.outbox_sent == p.outbox.size()) {
    p.link->recycle(p.outbox);
    p.outbox_sent = 0;
  }
}

void ChipNode::report(Port& p) {
  const link::LinkState state = p.link->state();
  if (state != p.reported) {
    p.reported = state;
    observer_.link_state(p.number, state);
    if (fabric_.set_link_down(p.number, state == link::LinkState::kDown)) {
      links_changed_ = true;  // pumped before the node's call returns
    }
  }
  if (p.tx.active && p.tx.next == p.tx.total && p.link->drained()) {
    p.tx.active = false;
    const double seconds = std::chrono::duration<double>(now_ - p.tx.start).count();
    observer_.stream_done(p.number, p.tx.id, p.tx.total, p.tx.total * p.tx.size, seconds);
  }
  if (p.ping.active && p.ping.done == p.ping.count) {
    p.ping.active = false;
    observer_.ping_done(p.number, p.ping.id, p.ping.rtt_us);
  }
}

}  // namespace ttemu::node
