#include "emulator/process/shm_transport.hpp"

#include <atomic>
#include <stdexcept>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/link/frame.hpp"

namespace ttemu::process {

namespace {

// Each ring starts on its own 4 KiB page.
size_t ring_stride(size_t capacity) { return (wire::ShmRing::bytes_for(capacity) + 4095) & ~size_t{4095}; }

}  // namespace

size_t shm_ring_capacity(uint16_t window) {
  const size_t frame = link::kMaxPayload + link::kFrameOverhead + 64;  // a full frame and its record
  size_t capacity = size_t{1} << 20;
  while (capacity < 2 * size_t{window} * frame + (size_t{64} << 10)) capacity *= 2;
  return capacity;
}

size_t shm_link_bytes(size_t ring_capacity) { return 2 * ring_stride(ring_capacity); }

void create_shm_link(void* memory, size_t ring_capacity) {
  for (size_t r = 0; r < 2; ++r) {
    wire::ShmRing::create(static_cast<uint8_t*>(memory) + r * ring_stride(ring_capacity), ring_capacity);
  }
}

struct ShmTransport::Link {
  uint8_t port = 0;
  routing::PortId peer;
  chip::Segment segment;
  wire::ShmRing out, in;
  chip::Segment peer_control;  // for the peer's "asleep" flag
  std::unique_ptr<chip::DoorbellRinger> peer_doorbell;
  uint64_t corrupt_seen = 0;  // of in.corrupt(), counted as malformed
  Link(uint8_t p, routing::PortId pr, chip::Segment s, wire::ShmRing o, wire::ShmRing i)
      : port(p), peer(pr), segment(std::move(s)), out(o), in(i) {}
};

ShmTransport::ShmTransport(const chip::JobId& job, routing::ChipId self, chip::ChipControl& control)
    : job_(job), self_(self), ctl_(control), by_port_(routing::kMaxPorts, nullptr) {}

ShmTransport::~ShmTransport() = default;

void ShmTransport::add(uint8_t port, routing::PortId peer) {
  const routing::PortId me{self_, port};
  const bool lower = me < peer;  // the lower end writes the first ring
  chip::Segment seg = chip::Segment::open(chip::link_segment_name(job_, me, peer));
  try {
    // Two rings of equal size, the second on the page after the first.
    auto* base = seg.as<uint8_t>();
    const size_t half = seg.size() / 2;
    wire::ShmRing r0 = wire::ShmRing::attach(base, half);
    wire::ShmRing r1 = wire::ShmRing::attach(base + half, half);
    links_.push_back(std::make_unique<Link>(port, peer, std::move(seg), lower ? r0 : r1, lower ? r1 : r0));
  } catch (const std::runtime_error& e) {
    throw Error(fmt::format("shared memory {}: {}", seg.name(), e.what()));
  }
  by_port_.at(port) = links_.back().get();
}

void ShmTransport::connect() {
  for (auto& l : links_) {
    l->peer_control = chip::Segment::open(chip::segment_name(job_, l->peer.chip, chip::SegmentKind::kControl));
    l->peer_doorbell = std::make_unique<chip::DoorbellRinger>(job_, l->peer.chip);
  }
}

size_t ShmTransport::send(uint8_t port, std::span<const wire::Datagram> datagrams) {
  Link* l = port < by_port_.size() ? by_port_[port] : nullptr;
  if (!l) throw Error(fmt::format("shm transport: port {} is not wired", port));
  bool pushed = false;  // something that must wake the peer
  for (const auto& d : datagrams) {
    if (l->out.push(d)) {
      if (!d.lazy) pushed = true;
    } else {
      auto& c = ctl_.ports[port].counters;
      c.add(c.wire_drops);
    }
  }
  if (pushed && l->peer_doorbell) {
    // Published, then read the peer's flag (the peer says it sleeps, then looks once more):
    // with a full fence on each side, one of the two sees the other.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (chip::should_ring(l->peer_control.as<chip::ChipControl>()->commands.router_asleep)) l->peer_doorbell->ring();
  }
  return datagrams.size();
}

bool ShmTransport::has_incoming() const {
  for (const auto& l : links_) {
    if (!l->in.empty()) return true;
  }
  return false;
}

size_t ShmTransport::receive(const std::function<void(uint8_t, std::span<const uint8_t>)>& deliver, size_t batch) {
  size_t n = 0;
  for (auto& l : links_) {
    n += l->in.consume(batch, [&](std::span<const uint8_t> bytes) { deliver(l->port, bytes); });
    if (l->in.corrupt() != l->corrupt_seen) {  // records that could not be: dropped, counted
      auto& c = ctl_.ports[l->port].counters;
      c.add(c.malformed, l->in.corrupt() - l->corrupt_seen);
      l->corrupt_seen = l->in.corrupt();
    }
  }
  return n;
}

void ShmTransport::unlink_segments() {
  for (const auto& l : links_) chip::unlink_segment(l->segment.name());
}

}  // namespace ttemu::process
