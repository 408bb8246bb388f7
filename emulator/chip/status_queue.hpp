// A fabric node status queue (spec 1.1.2.1): the chip's router pushes status and error
// messages into a ring the control plane has set up in the chip's memory (its control block,
// the part of DRAM the control plane reserves), and the control plane drains it. One
// producer (the chip), one consumer (the control plane), in shared memory across processes.
//
// What it promises: push never blocks and never fails. When the consumer falls a whole ring
// behind, the oldest entries are overwritten, and drain() counts them as lost instead of
// returning them; an entry overwritten while the consumer copies it is counted lost too (each
// slot carries a stamp written before and after its body, as a seqlock does). Entries come out
// in the order they were pushed, each at most once.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace ttemu::chip {

enum class StatusKind : uint16_t {
  kLinkUp = 1,
  kLinkDown = 2,
  kDropped = 3,  // a router dropped a packet: `reason` says why (RouterEvent::Kind)
  kFallback = 4,  // the port's traffic moved onto port `via`'s wire: `reason` (link::EfcReason)
  kReturned = 5,  // the port's traffic is back on its own wire: `reason` (link::EfcReason)
  kPeerRestarted = 6,  // the far end came back as a new process: `figure` payloads abandoned
  // While traffic flows, at a fixed interval (node/status_rates.hpp): what the port's link
  // moved and suffered over `rates.interval_ns` ...
  kPortRates = 7,
  // ... and what the router moved (port 0xFF): packets from workers, delivered here, dropped.
  kRouterRates = 8,
  // The port's CRC errors or retransmissions per frame crossed their alarm threshold, up or
  // back down: `reason` (RateAlarm), `figure` the threshold in parts per million, `rates` the
  // interval that crossed it.
  kErrorRate = 9,
};
inline const char* to_string(StatusKind k) {
  switch (k) {
    case StatusKind::kLinkUp: return "link_up";
    case StatusKind::kLinkDown: return "link_down";
    case StatusKind::kDropped: return "dropped";
    case StatusKind::kFallback: return "fallback";
    case StatusKind::kReturned: return "returned";
    case StatusKind::kPeerRestarted: return "peer_restarted";
    case StatusKind::kPortRates: return "rates";
    case StatusKind::kRouterRates: return "router_rates";
    case StatusKind::kErrorRate: return "error_rate";
  }
  return "?";
}

// kErrorRate's `reason`: which rate crossed its threshold, and which way.
enum class RateAlarm : uint8_t {
  kCrcHigh = 1,         // CRC errors per frame that arrived (any type) went above the threshold
  kCrcNormal = 2,       // ... and came back to half of it or less
  kRetransmitHigh = 3,  // retransmissions per data frame sent went above the threshold
  kRetransmitNormal = 4,
};

// The link counters (link/link_counters.hpp) the rates report, named once for every place that
// reads, subtracts or adds them (node/status_rates.cpp).
#define TTEMU_RATE_LINK_FIELDS(X) X(frames_tx) X(bytes_tx) X(frames_rx) X(bytes_rx) X(frames_in) X(crc_errors) X(retransmits)

// The figures of one interval (kPortRates, kRouterRates, kErrorRate): differences of the
// port's link counters (TTEMU_RATE_LINK_FIELDS), or for the router the sums over its ports.
struct RateFigures {
  uint64_t interval_ns = 0;
  uint64_t frames_tx = 0, bytes_tx = 0, frames_rx = 0, bytes_rx = 0;
  uint64_t frames_in = 0;  // frames that arrived, of every type, good or bad: what CRC errors are a share of
  uint64_t crc_errors = 0, retransmits = 0;
  uint64_t injected = 0, delivered = 0, dropped = 0;  // kRouterRates: the router's packets
};

struct StatusEntry {
  int64_t time_ns = 0;  // the chip's clock (steady, or the simulator's)
  StatusKind kind{};
  uint8_t port = 0xFF;  // 0xFF: not about a port
  uint8_t reason = 0;   // kDropped: routing::RouterEvent::Kind; kFallback, kReturned: link::EfcReason
  uint8_t fvc = 0, ttl = 0, command = 0;
  uint8_t via = 0xFF;   // kFallback: the port whose wire carries the traffic
  uint16_t src_mesh = 0, src_device = 0, dst_mesh = 0, dst_device = 0;
  uint64_t packet_id = 0;
  uint64_t figure = 0;  // kPeerRestarted: the old session's payloads reported (NACKed if packets)
  RateFigures rates{};  // kPortRates, kRouterRates, kErrorRate
};

class StatusQueue {
 public:
  static constexpr uint32_t kSlots = 1024;

  // Producer. Never blocks: a ring behind, the oldest entry goes.
  void push(const StatusEntry& e) {
    const uint64_t i = head_.load(std::memory_order_relaxed);
    Slot& s = slots_[i % kSlots];
    s.stamp.store(2 * i + 1, std::memory_order_relaxed);  // being written
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(&s.entry, &e, sizeof e);
    s.stamp.store(2 * i + 2, std::memory_order_release);
    // seq_cst, as the consumer's tail store and head load: of this store and drained_before's
    // load on one side, the consumer's store and load on the other, one side sees the other's
    // (no entry is left behind without a nudge).
    head_.store(i + 1, std::memory_order_seq_cst);
  }
  // Whether the consumer had taken everything before the last push: the producer's cue to
  // tell it (one nudge per drain, not one per entry).
  bool drained_before() const {
    return tail_.load(std::memory_order_seq_cst) + 1 >= head_.load(std::memory_order_relaxed);
  }
  uint64_t pushed() const { return head_.load(std::memory_order_acquire); }

  // Consumer. Hands each entry not yet taken to f, in order; returns how many were lost.
  // It looks again while the producer pushes, up to `rounds` times; if it is still behind then
  // (caught_up() is false), the producer will not say so: drain again soon.
  template <class F>
  uint64_t drain(F&& f, int rounds = 4) {
    uint64_t lost = 0;
    for (uint64_t head = head_.load(std::memory_order_seq_cst);
         rounds-- > 0 && head != tail_.load(std::memory_order_relaxed); head = head_.load(std::memory_order_seq_cst)) {
      lost += drain_to(head, f);
    }
    lost_.fetch_add(lost, std::memory_order_relaxed);
    return lost;
  }
  uint64_t lost() const { return lost_.load(std::memory_order_relaxed); }
  bool caught_up() const { return tail_.load(std::memory_order_seq_cst) == head_.load(std::memory_order_seq_cst); }

 private:
  template <class F>
  uint64_t drain_to(uint64_t head, F& f) {
    uint64_t tail = tail_.load(std::memory_order_relaxed), lost = 0;
    if (head - tail > kSlots) {
      lost += head - kSlots - tail;
      tail = head - kSlots;
    }
    for (; tail < head; ++tail) {
      const Slot& s = slots_[tail % kSlots];
      const uint64_t before = s.stamp.load(std::memory_order_acquire);
      StatusEntry copy;
      std::memcpy(&copy, &s.entry, sizeof copy);
      std::atomic_thread_fence(std::memory_order_acquire);
      const uint64_t after = s.stamp.load(std::memory_order_relaxed);
      if (before != 2 * tail + 2 || after != before) {
        ++lost;  // overwritten by a later lap while we read it
        continue;
      }
      f(copy);
    }
    tail_.store(tail, std::memory_order_seq_cst);
    return lost;
  }

  struct Slot {
    std::atomic<uint64_t> stamp{0};
    StatusEntry entry;
  };
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer
  std::atomic<uint64_t> lost_{0};
  Slot slots_[kSlots];
};

}  // namespace ttemu::chip
