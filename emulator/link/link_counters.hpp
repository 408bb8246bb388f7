// Per-link, per-end counters. They live in the chip's shared memory so the control plane reads
// them without asking the chip (spec 1.1.2: observed rates, drops, link down); one writer (the
// chip), any number of readers, relaxed atomics (plain loads and stores: no locked instruction).
#pragma once

#include <atomic>
#include <cstdint>

namespace ttemu::link {

#define TTEMU_LINK_COUNTERS(X)                                                          \
  X(frames_tx, "data frames sent, first transmissions")                                \
  X(bytes_tx, "payload bytes sent, first transmissions")                               \
  X(frames_rx, "data frames delivered to the routing layer")                           \
  X(bytes_rx, "payload bytes delivered")                                               \
  X(datagrams_tx, "datagrams sent")                                                    \
  X(datagrams_rx, "datagrams received")                                                \
  X(frames_in, "frames that arrived, of every type, good or bad (what CRC errors are a share of)") \
  X(crc_errors, "frames that failed their CRC (dropped)")                              \
  X(malformed, "datagrams or frames that could not be parsed (dropped)")               \
  X(foreign, "frames from another job, chip, port or session (dropped)")               \
  X(stale, "frames of this session from an earlier sequence wrap (dropped)")           \
  X(retransmits, "data frames sent again (after a NACK or a timeout)")                 \
  X(duplicates, "data frames received twice (discarded)")                              \
  X(out_of_order, "data frames received after a gap (held until it is filled)")       \
  X(nacks_tx, "gaps reported to the sender")                                           \
  X(timeouts, "retransmission timer expiries")                                         \
  X(window_stalls, "frames that filled the window (in frames or bytes): the next waits")   \
  X(up_transitions, "times the link came up")                                          \
  X(down_transitions, "times the link was declared down")                              \
  X(injected_corrupt, "frames corrupted by fault injection")                           \
  X(injected_drop, "frames dropped by fault injection")                                \
  X(wire_drops, "datagrams the wire did not take (a full shared-memory ring or socket buffer, a link out of service)") \
  X(fallbacks, "times the port's traffic moved onto a parallel link's wire (the EFC)")       \
  X(fallback_rx, "datagrams for this port that arrived over a parallel link's wire")         \
  X(peer_restarts, "times the far end came back as a new process (a new link session)")     \
  X(abandoned, "payloads the old session never acknowledged, reported when the peer restarted")

struct LinkCounters {
#define TTEMU_DECLARE(name, help) std::atomic<uint64_t> name{0};
  TTEMU_LINK_COUNTERS(TTEMU_DECLARE)
#undef TTEMU_DECLARE
  std::atomic<uint32_t> state{0};  // LinkState

  // One writer (the chip's event loop), so a load and a store: a locked add is a full barrier
  // that waits for every store before it (a payload just written) to reach the cache.
  void add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters are shared between processes");

}  // namespace ttemu::link
