#include "emulator/node/chip_node.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>

#include "emulator/common/deadline.hpp"
#include "emulator/common/futex.hpp"

namespace ttemu::node {

// A packet's buffer becomes a frame where it lies: its link room is the frame header.
static_assert(routing::Packet::kLinkRoom == link::kFrameRoom);
// The largest packet (header and payload) fits one TT-link frame.
static_assert(sizeof(routing::PacketHeader) + routing::kMaxPacketPayload <= link::kMaxPayload);

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
  // The EFC. The port's traffic travels wire `wire` (its own, or a parallel link's that
  // carries it); a port's wire carries its passengers' datagrams after its own.
  uint8_t wire = 0;
  uint8_t peer_port = 0;  // the far end's port
  routing::ChipId peer;   // the far end's chip
  std::unique_ptr<link::FaultInjector> faults;  // this port's own wire's
  link::PortEfc efc{link::EfcConfig{}};
  std::vector<Port*> passengers;
  // The far end sent this link's traffic over port lease_via's wire until lease_until: this
  // end's goes there too.
  std::optional<uint8_t> lease_via;
  Time lease_until{};
  Time returned_at{-std::chrono::hours(1)};  // when probes last brought it back
  bool peer_gone = false;  // the control plane said the far chip died: no carrier, no fallback
  bool admin_down = false;  // out of service (ttemu links down): its wire carries nothing
  bool touched = false;  // received on in the current batch
  bool open = false;     // in open_
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

ChipNode::PortView ChipNode::view(size_t i) const {
  const Port& p = *ports_.at(i);
  return {p.number, p.wire, p.admin_down, *p.link};
}

namespace {

std::vector<uint8_t> wired_ports(const ChipNodeConfig& c) {
  std::vector<uint8_t> v;
  for (const auto& p : c.ports) v.push_back(p.number);
  return v;
}

// Ports in ascending numbers, once: ports_, the router's and the rates' lists follow.
ChipNodeConfig sorted(ChipNodeConfig c) {
  std::sort(c.ports.begin(), c.ports.end(), [](const auto& a, const auto& b) { return a.number < b.number; });
  return c;
}

}  // namespace

ChipNode::ChipNode(ChipNodeConfig config, session::Center::Memory memory, chip::ChipControl& control,
                   wire::Transport& transport, NodeObserver& observer)
    : cfg_(sorted(std::move(config))),
      ctl_(control),
      transport_(transport),
      observer_(observer),
      fabric_(cfg_.self, cfg_.router, cfg_.tables, wired_ports(cfg_), memory, buffers_, std::span(control.sockets)),
      intake_(cfg_.self, control, memory),
      rates_(cfg_.rates, wired_ports(cfg_)),
      by_number_(routing::kMaxPorts, nullptr) {
  ctl_.data_fvcs = static_cast<uint32_t>(cfg_.router.data_fvcs);
  fabric_.center().set_noc_grid(cfg_.tensix_cores, cfg_.tensix_l1);
  fabric_.center().set_memory_windows(&control.windows, cfg_.memory);
  fabric_.set_delivery_tap(cfg_.delivered);
  for (const auto& pc : cfg_.ports) {
    if (pc.number >= routing::kMaxPorts) throw std::invalid_argument("port " + std::to_string(pc.number) + " does not exist");
    auto p = std::make_unique<Port>();
    p->number = pc.number;
    p->wire = pc.number;
    p->peer_port = pc.peer.port;
    p->peer = {pc.peer.mesh, pc.peer.device};
    p->efc = link::PortEfc(cfg_.efc);
    p->status = &ctl_.ports[pc.number];
    p->status->wire.store(pc.number, std::memory_order_relaxed);
    p->rb = pc.receive_buffer;
    const link::LinkIdentity self{cfg_.job, cfg_.self.mesh, cfg_.self.device, pc.number};
    link::LinkConfig lc = cfg_.link;
    lc.keepalive = pc.keepalive;
    lc.deliver_after_ack = true;  // on_datagram puts the acknowledgement on the wire first
    p->link = std::make_unique<link::TtLink>(lc, self, pc.peer, pc.nonce, p->status->counters);
    p->link->set_buffer_pool(buffers_);
    Port* raw = p.get();
    p->link->set_delivery([this, raw](uint32_t dest, std::span<const uint8_t> payload) { on_delivery(*raw, dest, payload); });
    p->link->set_held_delivery([this, raw](uint32_t dest, std::vector<uint8_t>&& framed) { on_held_delivery(*raw, dest, std::move(framed)); });
    p->link->set_peer_restart([this, raw](std::span<const LinkPayloadView> abandoned) { on_peer_restart(*raw, abandoned); });
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
  started_ = now;
  for (auto& p : ports_) {
    p->link->start(now);
    if (p->admin_down) p->link->peer_lost(now);  // taken out of service before it started (a restart)
    service(*p, now);
  }
  settle(now);
}

void ChipNode::on_datagram(uint8_t number, std::span<const uint8_t> datagram, Time now) {
  now_ = now;
  Port& arrived = port(number);
  if (arrived.admin_down) return;  // out of service: the wire carries nothing
  Port* target = &arrived;
  if (const auto h = link::decode_fallback(datagram)) {
    target = fallback_target(arrived, *h);
    if (!target) {
      arrived.status->counters.add(arrived.status->counters.malformed);
      return;
    }
    if (h->kind != link::FallbackKind::kData) {
      on_probe(*target, *h, now);
      return;
    }
    datagram = datagram.subspan(link::kFallbackHeaderBytes);
    if (target != &arrived) {
      target->status->counters.add(target->status->counters.fallback_rx);
      // The far end judged the link broken: this end's traffic for it takes the same way back
      // (unless this end has just seen its own wire answer probes: those are stragglers, sent
      // before the far end's own probes came back).
      if ((h->flags & link::kFallbackJudged) && now >= target->returned_at + 4 * cfg_.efc.probe_interval) {
        target->lease_via = number;
        target->lease_until = now + cfg_.efc.lease;
      }
    }
  }
  Port& p = *target;
  ++batch_datagrams_;
  batch_bytes_ += datagram.size();
  rates_.arm(now);  // frames (not the EFC's probes: a port on the channel probes for good)
  if (!p.touched) touched_.push_back(&p), p.touched = true;
  p.link->on_datagram(datagram, now);
  if (p.link->nack_pending()) service(p, now);  // a gap: send its NACK now
  if (p.link->released()) {
    // A resend filled a gap: its acknowledgement goes on the wire before the frames held
    // behind the gap are delivered, so that the sender, whose window they held full, refills
    // it on its CPU while this one delivers them.
    service(p, now);
    p.link->deliver_released();
  }
}

void ChipNode::end_of_batch(Time now, bool more_may_come) {
  if (touched_.empty()) return;
  now_ = now;
  // A lone small datagram is mostly a packet on a latency path: it goes on at once. A lone
  // full one is a stream's, as a busy chip over UDP mostly reads them (one per socket).
  const bool streams = batch_datagrams_ > 1 || batch_bytes_ > kStreamingBatchBytes;
  keep_open_ = more_may_come && streams && open_batches_ < kMaxOpenBatches;
  batch_datagrams_ = 0;
  batch_bytes_ = 0;
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
  keep_open_ = false;
  if (open_.empty()) {
    open_batches_ = 0;
  } else if (++open_batches_ >= kMaxOpenBatches) {
    send_open(now);
  }
}

bool ChipNode::has_open() const {
  return std::any_of(open_.begin(), open_.end(), [](const Port* p) { return p->link->datagram_open(); });
}

void ChipNode::send_open(Time now) {
  if (open_.empty()) return;
  now_ = now;
  open_batches_ = 0;
  // (Nothing below adds to open_: only a service inside end_of_batch keeps a datagram open.)
  for (Port* p : open_) {
    p->open = false;
    if (!p->link->datagram_open()) continue;  // sent since (a later pass, a NACK, a move)
    p->link->poll_transmit(now, p->outbox);
    flush(p->wire);
  }
  open_.clear();  // its storage stays: no allocation per wake-up
}

void ChipNode::on_timer(Time now) {
  send_open(now);
  now_ = now;
  for (auto& p : ports_) {
    p->link->on_timer(now);
    if (p->efc.round_due(now)) {
      for (int i = 0; i < cfg_.efc.probes; ++i) {
        send_control(*p, {p->number, p->peer_port, link::FallbackKind::kProbe, 0, p->efc.round() << 8 | static_cast<uint32_t>(i)}, now);
      }
    }
    service(*p, now);
  }
  pump(now);
  report_rates(now);
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
      if (took) rates_.arm(now);
      const bool moved = fabric_.poll(now, out_);
      if (!took && !(moved && intake_.waiting())) break;
    }
    for (const auto& ev : out_.events) {
      ctl_.router_events.fetch_add(1, std::memory_order_relaxed);
      observer_.router_event(ev);
      push_status({.kind = chip::StatusKind::kDropped, .reason = static_cast<uint8_t>(ev.kind), .fvc = ev.packet.fvc,
                   .ttl = ev.packet.ttl, .command = static_cast<uint8_t>(ev.packet.command),
                   .src_mesh = ev.packet.src().mesh, .src_device = ev.packet.src().device,
                   .dst_mesh = ev.packet.dst().mesh, .dst_device = ev.packet.dst().device,
                   .packet_id = ev.packet.packet_id});
    }
    ctl_.packets_delivered.fetch_add(out_.committed.size(), std::memory_order_relaxed);
    for (const auto& h : out_.committed) observer_.committed(h);
    for (auto& w : out_.for_workers) {
      intake_.answer(w);
      observer_.answer(w);
      buffers_.give(std::move(w.bytes));
    }
    // Published before anything leaves: an accept that follows a reservation finds it shown.
    if (fabric_.router().reservations_changed() != reservations_shown_) publish_reservations();
    for (auto& p : ports_) {
      if (!fabric_.backlog(p->number).empty()) service(*p, now);
    }
  } while (links_changed_);  // the router drops at once what waited for a link that went down
}

void ChipNode::publish_reservations() {
  reservations_shown_ = fabric_.router().reservations_changed();
  std::array<std::array<uint64_t, chip::kMaxReservableFvcs>, routing::kMaxPorts + 1> now{};  // the center last
  for (const auto& r : fabric_.router().reservations()) {
    if (r.fvc >= chip::kMaxReservableFvcs) continue;
    const size_t at = r.port == routing::FabricRouter::kCenter ? routing::kMaxPorts : r.port;
    if (at <= routing::kMaxPorts) now[at][r.fvc] = chip::pack_reservation(r.owner, r.endpoint);
  }
  for (size_t p = 0; p < routing::kMaxPorts; ++p) {
    for (int v = 0; v < chip::kMaxReservableFvcs; ++v) ctl_.ports[p].reserved[v].store(now[p][static_cast<size_t>(v)], std::memory_order_relaxed);
  }
  for (int v = 0; v < chip::kMaxReservableFvcs; ++v) {
    ctl_.center_reserved[v].store(now[routing::kMaxPorts][static_cast<size_t>(v)], std::memory_order_relaxed);
  }
}

void ChipNode::on_writable(uint8_t number, Time now) {
  now_ = now;
  Port& p = port(number);
  flush(number);
  service(p, now);
  service_passengers(p, now);
  settle(now);
}

void ChipNode::settle(Time now) {
  if (links_changed_) pump(now);
}

std::optional<Time> ChipNode::next_deadline() const {
  std::optional<Time> next = earlier(fabric_.next_deadline(), rates_.next_deadline());
  next = earlier(next, intake_.next_deadline());  // a head slot whose worker may be gone
  for (const auto& p : ports_) {
    next = earlier(next, p->link->next_deadline());
    next = earlier(next, p->efc.next_deadline());
    // A leased fallback ends when the far end stops using it: one look then, to return.
    if (p->wire != p->number && !p->efc.on_fallback()) next = earlier(next, p->lease_until);
  }
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
  p.peer_gone = true;
  p.link->peer_lost(now);
  service(p, now);
  settle(now);
}

void ChipNode::admin_down(uint8_t number, bool down, Time now) {
  now_ = now;
  Port& p = port(number);
  if (p.admin_down == down) return;
  p.admin_down = down;
  if (down) {
    p.link->peer_lost(now);
  } else if (p.wire == p.number) {
    p.link->rewire(now, true);  // hello at once; a port on a fallback channel returns by its probes
  }
  service(p, now);
  service_passengers(p, now);  // they leave a dead carrier
  settle(now);
}

void ChipNode::set_faults(uint8_t number, std::unique_ptr<link::FaultInjector> faults) {
  Port& w = port(number);
  w.faults = std::move(faults);
  if (w.wire == w.number) w.link->set_faults(w.faults.get());
  for (Port* q : w.passengers) q->link->set_faults(w.faults.get());
}

void ChipNode::stall(uint8_t fvc, bool stalled, Time now) {
  fabric_.router().stall_center(fvc, stalled);
  pump(now);
}

void ChipNode::load_tables(std::vector<routing::RouterTable> tables, uint32_t version, Time now) {
  now_ = now;
  fabric_.set_tables(std::move(tables));
  ctl_.tables_version.store(version, std::memory_order_release);
  futex_wake(ctl_.tables_version);  // clients waiting to retry NACKed writes
  pump(now);  // what waited (for a dead port, a missing route) is routed anew
}

void ChipNode::pause_injection(bool paused, Time now) {
  ctl_.injection_paused.store(paused ? 1 : 0, std::memory_order_relaxed);
  if (!paused) pump(now);  // what the workers queued meanwhile
}

void ChipNode::owner_gone(uint32_t owner, Time now) {
  now_ = now;
  if (intake_.owner_gone(owner, fabric_, now)) pump(now);
}

bool ChipNode::inject(routing::Packet packet, Time now) {
  now_ = now;
  rates_.arm(now);
  return fabric_.inject(std::move(packet), now);
}

void ChipNode::start_stream(uint8_t number, uint64_t id, uint64_t frames, uint32_t size, Time now) {
  now_ = now;
  rates_.arm(now);
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
  rates_.arm(now);
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

void ChipNode::on_held_delivery(Port& p, uint32_t dest, std::vector<uint8_t>&& framed) {
  if (dest == chip::kStreamAddr || dest == chip::kEchoAddr || dest == chip::kEchoReplyAddr) {
    on_delivery(p, dest, std::span<const uint8_t>(framed).subspan(link::kFrameRoom));
    buffers_.give(std::move(framed));
    return;
  }
  fabric_.on_link_buffer(p.number, dest, std::move(framed), now_);
  fabric_dirty_ = true;
}

void ChipNode::on_peer_restart(Port& p, std::span<const LinkPayloadView> abandoned) {
  fabric_.peer_restarted(p.number, abandoned);
  p.peer_gone = false;
  p.rx_stream = p.rx_expected = 0;
  // A ping or echo of the old session will never be answered.
  p.ping.waiting = false;
  for (; !p.echoes.empty(); p.echoes.pop_front()) buffers_.give(std::move(p.echoes.front()));
  fabric_dirty_ = true;  // the router reports and NACKs at its next pass
  push_status({.kind = chip::StatusKind::kPeerRestarted, .port = p.number, .figure = abandoned.size()});
}

void ChipNode::service(Port& p, Time now) {
  steer(p, now);
  // Credits owed to the far end ride on a datagram that goes there anyway (data, or an
  // acknowledgement that then rides on them): none needs a datagram and a wake-up of its own.
  // Not on a held acknowledgement that would reach the far end without waking it: credits
  // would make it wake.
  const bool ack_wakes = transport_.defers_lazy() ? p.link->ack_urgent_now() : p.link->ack_due(now);
  if (!fabric_.backlog(p.number).empty() || ack_wakes) fabric_.ride_credits(p.number);
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
    // Room is asked frame by frame: the window's bound in bytes may close it before its
    // frames run out.
    for (; p.tx.next < p.tx.total && p.link->send_room() > 0; ++p.tx.next) {
      p.link->send_framed(chip::kStreamAddr, test_frame(p, p.tx.id, p.tx.next, p.tx.size));
    }
  }
  // New datagrams queue behind what the transport has not taken yet. A port whose traffic
  // another port's wire carries, or that carries another's, keeps none open.
  p.link->poll_transmit(now, p.outbox, keep_open_ && p.wire == p.number && p.passengers.empty());
  if (p.link->datagram_open() && !p.open) {
    p.open = true;
    open_.push_back(&p);
  }
  flush(p.wire);
  report(p);
}

void ChipNode::service_passengers(Port& carrier, Time now) {
  // A copy: a passenger that moves on leaves the list.
  const std::vector<Port*> riders = carrier.passengers;
  for (Port* q : riders) service(*q, now);
}

std::vector<uint8_t> ChipNode::test_frame(Port& p, uint64_t id, uint64_t index, uint32_t size) {
  // Written straight into a frame buffer that goes into the window, as a sender's core would
  // write its ethernet core's buffer: no copy after the fill.
  std::vector<uint8_t> frame = buffers_.take();
  frame.resize(link::kFrameRoom);
  p.tx_pattern.append(frame, id, index, size);
  return frame;
}

void ChipNode::flush(uint8_t w) {
  Port& c = port(w);
  bool sent = false;
  // False when the wire took less than all: it calls on_writable(w) when it has room, and
  // nothing after may be sent first (a later full send would tell it not to wait).
  auto send = [&](Port& q) {
    if (c.admin_down) drop_unsent(q);  // out of service: nothing goes
    if (q.outbox_sent < q.outbox.size()) {
      sent = true;
      q.outbox_sent += transport_.send(w, std::span(q.outbox).subspan(q.outbox_sent));
      if (q.outbox_sent < q.outbox.size()) return false;
    }
    q.link->recycle(q.outbox);  // also when empty: acknowledged payloads go back to the pool
    q.outbox_sent = 0;
    return true;
  };
  if (c.wire == w && !send(c)) return;
  for (Port* q : c.passengers) {
    if (!send(*q)) return;
  }
  // Nothing was left: the transport learns that it need not wait for room.
  if (!sent) transport_.send(w, {});
}

bool ChipNode::wire_busy(uint8_t w) const {
  const Port& c = port(w);
  if (c.wire == w && c.outbox_sent < c.outbox.size()) return true;
  return std::any_of(c.passengers.begin(), c.passengers.end(), [](const Port* q) { return q->outbox_sent < q->outbox.size(); });
}

// The EFC (spec 2.2.5). A port leaves its own wire when its judgement says the link is broken
// and a parallel link to the same neighbour is up; while it is away it probes its own wire
// (on_timer) and returns when the probes come back. A port whose far end sends this link's
// traffic over a fallback channel sends its own there too, so both directions of the link
// travel the same live wire (a cut may take either direction).
void ChipNode::steer(Port& p, Time now) {
  if (!cfg_.efc.enabled) return;
  if (p.efc.on_fallback()) {
    const bool failing = p.efc.carrier_failing(p.link->wire_timeouts(), now);
    if (!failing && can_carry(port(p.wire), p)) return;
    // The carrier may carry nothing of its own to notice with: it proves its wire, or goes
    // down (and the control plane hears of it).
    if (failing) verify_wire(port(p.wire), now);
    if (Port* c = find_carrier(p, failing ? &port(p.wire) : nullptr)) {  // its carrier failed: another
      move_wire(p, c->number, true, p.efc.why(), now);
    } else if (!failing || port(p.wire).wire != p.wire) {
      return_home(p, link::EfcReason::kNoCarrier, now);
    }  // (a failing carrier, still a carrier, and no other: it stays, its go-back-N trying)
    return;
  }
  if (!p.peer_gone) {
    const link::EfcReason why =
        p.efc.judge(p.status->counters, p.link->wire_timeouts(), p.link->state() == link::LinkState::kDown, now);
    if (why != link::EfcReason::kNone) {
      if (Port* c = find_carrier(p)) {
        p.efc.fell_back(why, now);
        move_wire(p, c->number, true, why, now);
        return;
      }
    }
  }
  uint8_t target = p.number;
  if (p.lease_via && now < p.lease_until && can_carry(port(*p.lease_via), p)) target = *p.lease_via;
  if (target != p.wire) {
    if (target == p.number) p.lease_via.reset();
    move_wire(p, target, false, target == p.number ? link::EfcReason::kPeerReturned : link::EfcReason::kPeer, now);
  }
}

void ChipNode::verify_wire(Port& c, Time now) {
  if (!c.link->verify(now)) return;  // already proving it, or its own frames will tell
  c.link->poll_transmit(now, c.outbox);  // the hello that asks, now
  flush(c.wire);
}

bool ChipNode::can_carry(const Port& c, const Port& p) const {
  return &c != &p && c.peer == p.peer && c.wire == c.number && !c.efc.on_fallback() && !c.peer_gone && !c.admin_down &&
         c.link->up();
}

ChipNode::Port* ChipNode::find_carrier(const Port& p, const Port* failed) {
  // The wire it already travels, if it may; else the first parallel link in good standing
  // (not one in the middle of timeouts itself).
  if (&port(p.wire) != failed && can_carry(port(p.wire), p)) return &port(p.wire);  // (never p itself)
  for (auto& c : ports_) {
    if (c.get() != failed && can_carry(*c, p) && c->link->wire_timeouts() == 0) return c.get();
  }
  return nullptr;
}

void ChipNode::drop_unsent(Port& p) {
  if (p.outbox_sent == p.outbox.size()) return;
  p.status->counters.add(p.status->counters.wire_drops, p.outbox.size() - p.outbox_sent);
  p.link->recycle(p.outbox);
  p.outbox_sent = 0;
}

void ChipNode::move_wire(Port& p, uint8_t w, bool lost, link::EfcReason why, Time now) {
  // (A port that follows its far end onto a channel and then judges the link broken itself
  // stays on the same wire: only its header and its go-back change.)
  if (w != p.wire) {
    // What the old wire can still take goes (an open datagram too); the rest is lost with it
    // (go-back-N resends it).
    if (p.link->datagram_open()) p.link->poll_transmit(now, p.outbox);
    flush(p.wire);
    drop_unsent(p);
    if (p.wire != p.number) std::erase(port(p.wire).passengers, &p);
    p.wire = w;
    p.link->set_faults(port(w).faults.get());
    if (w != p.number) {
      port(w).passengers.push_back(&p);
      p.status->counters.add(p.status->counters.fallbacks);
    }
  }
  if (w == p.number) {
    p.link->set_prefix({});
  } else {
    std::array<uint8_t, link::kFallbackHeaderBytes> header;
    const uint8_t flags = p.efc.on_fallback() ? link::kFallbackJudged : 0;
    link::encode({p.number, p.peer_port, link::FallbackKind::kData, flags, 0}, header);
    p.link->set_prefix(header);
  }
  p.link->rewire(now, lost);
  // Back on its own wire while out of service: down, whether or not anything was in flight
  // to notice it.
  if (w == p.number && p.admin_down) p.link->peer_lost(now);
  p.status->wire.store(w, std::memory_order_relaxed);
  p.status->fallback_reason.store(w == p.number ? 0 : static_cast<uint32_t>(why), std::memory_order_relaxed);
  observer_.fallback(p.number, w, why);
  push_status({.kind = w == p.number ? chip::StatusKind::kReturned : chip::StatusKind::kFallback, .port = p.number,
               .reason = static_cast<uint8_t>(why), .via = w});
  // A port that leaves its own wire carries nobody any more: its passengers move on.
  if (w != p.number && !p.passengers.empty()) {
    const std::vector<Port*> moving = std::move(p.passengers);
    p.passengers.clear();
    for (Port* q : moving) service(*q, now);  // p cannot carry them: each finds another (steer)
  }
}

void ChipNode::return_home(Port& p, link::EfcReason why, Time now) {
  p.efc.returned(p.status->counters, now);
  p.returned_at = now;
  p.lease_via.reset();
  // Lost: the link starts afresh on its own wire (no timeouts counted on the channel, no
  // backoff; a handshake says hello at once).
  move_wire(p, p.number, true, why, now);
}

ChipNode::Port* ChipNode::fallback_target(const Port& arrived, const link::FallbackHeader& h) {
  Port* t = h.rx_port < by_number_.size() ? by_number_[h.rx_port] : nullptr;
  if (!t || t->peer_port != h.tx_port || t->peer != arrived.peer) return nullptr;
  // Probes test a port's own wire: they travel nowhere else.
  if (h.kind != link::FallbackKind::kData && t != &arrived) return nullptr;
  return t;
}

void ChipNode::on_probe(Port& p, const link::FallbackHeader& h, Time now) {
  switch (h.kind) {
    case link::FallbackKind::kProbe:
      send_control(p, {p.number, p.peer_port, link::FallbackKind::kProbeReply, 0, h.probe}, now);
      return;
    case link::FallbackKind::kProbeReply:
      if (!p.efc.on_reply(h.probe, now)) return;
      return_home(p, link::EfcReason::kProbed, now);
      // Tell the far end, which may follow this end on the channel: the wire works both ways.
      send_control(p, {p.number, p.peer_port, link::FallbackKind::kReturned, 0, 0}, now);
      break;
    case link::FallbackKind::kReturned:
      // The far end's probes came back, so the wire worked both ways; this notice came over
      // it too. Both ends return together.
      if (p.efc.on_fallback() && p.efc.why() != link::EfcReason::kErrorRate) {
        return_home(p, link::EfcReason::kPeerReturned, now);
        break;
      }
      if (!p.lease_via) return;
      p.lease_via.reset();
      p.returned_at = now;  // a straggler sent before the notice must not lease it again
      break;
    case link::FallbackKind::kData: return;
  }
  service(p, now);
  settle(now);
}

void ChipNode::send_control(Port& p, const link::FallbackHeader& h, Time now) {
  // Behind datagrams the wire has not taken, a probe would reorder the transport's waiting.
  if (wire_busy(p.number) || p.admin_down) return;
  if (p.faults) {
    const auto verdict = p.faults->on_frame(link::kFallbackHeaderBytes, now - started_);
    if (verdict.drop || verdict.corrupt) {
      p.status->counters.add(verdict.drop ? p.status->counters.injected_drop : p.status->counters.injected_corrupt);
      return;
    }
  }
  control_.clear();
  link::encode(h, control_.append_owned(link::kFallbackHeaderBytes).first<link::kFallbackHeaderBytes>());
  transport_.send(p.number, std::span(&control_, 1));
}

void ChipNode::push_status(chip::StatusEntry e) {
  e.time_ns = now_.count();
  ctl_.status.push(e);
  if (ctl_.status.drained_before()) observer_.status_pushed(ctl_.status.pushed());
}

void ChipNode::report_rates(Time now, bool early) {
  if (!rates_.due(now) && !early) return;
  std::vector<PortCounts> counts;
  counts.reserve(ports_.size());
  for (const auto& p : ports_) counts.push_back(PortCounts::of(p->status->counters));
  const RouterCounts router{ctl_.packets_injected.load(std::memory_order_relaxed),
                            ctl_.packets_delivered.load(std::memory_order_relaxed),
                            ctl_.router_events.load(std::memory_order_relaxed)};
  for (const auto& e : rates_.tick(now, counts, router, early)) push_status(e);
}

void ChipNode::report(Port& p) {
  const link::LinkState state = p.link->state();
  if (state != p.reported) {
    p.reported = state;
    if (state == link::LinkState::kUp) p.peer_gone = false;
    observer_.link_state(p.number, state);
    if (state != link::LinkState::kHandshake) {
      push_status({.kind = state == link::LinkState::kUp ? chip::StatusKind::kLinkUp : chip::StatusKind::kLinkDown,
                   .port = p.number});
    }
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
