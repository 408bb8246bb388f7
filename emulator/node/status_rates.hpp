// The chip's figures over time for its status queue (spec 1.1.2.1): data rates per router and
// per port at a fixed interval, and CRC error and retransmission rates crossing a threshold.
// A state machine without I/O: the chip node hands it its counters when an interval is due
// and pushes the entries it returns.
//
// What it promises:
// - Idle is free: intervals run only while traffic flows. The node arms the clock when
//   something arrives or a worker submits; an interval in which nothing moved disarms it. What
//   moved while it was disarmed counts in the next interval (the baseline stays where the last
//   interval ended), so the rate entries add up to the counters.
// - A port's entry comes only for an interval in which it moved or suffered something; the
//   router's only when anything on the chip did.
// - An alarm goes up when a rate over an interval with at least min_frames frames is above its
//   threshold, and down when such an interval's rate is half the threshold or less (a rate that
//   hovers at the threshold does not flood the queue).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "emulator/chip/status_queue.hpp"
#include "emulator/link/link_counters.hpp"

namespace ttemu::node {

struct RatesConfig {
  std::chrono::nanoseconds interval = std::chrono::seconds(1);  // 0: no rates, no alarms
  double crc_alarm = 0.01;        // CRC errors per frame that arrived (any type, good or bad); 0: no alarm
  double retransmit_alarm = 0.1;  // retransmissions per data frame sent (first or again); 0: no alarm
  uint64_t min_frames = 32;       // fewer frames in an interval say nothing about a rate
};

// A port's counters, as the interval starts or ends.
struct PortCounts {
#define TTEMU_DECLARE(name) uint64_t name = 0;
  TTEMU_RATE_LINK_FIELDS(TTEMU_DECLARE)
#undef TTEMU_DECLARE
  static PortCounts of(const link::LinkCounters& c);
};
// The router's: packets from workers, delivered here, dropped (router events).
struct RouterCounts {
  uint64_t injected = 0, delivered = 0, dropped = 0;
};

class StatusRates {
 public:
  StatusRates(const RatesConfig& config, std::span<const uint8_t> ports);

  // Something moved: the interval clock runs from now if it stood.
  void arm(std::chrono::nanoseconds now) {
    if (!due_ && cfg_.interval.count() > 0) start_ = now, due_ = now + cfg_.interval;
  }
  std::optional<std::chrono::nanoseconds> next_deadline() const { return due_; }
  bool due(std::chrono::nanoseconds now) const { return due_ && *due_ <= now; }

  // The interval ends (if due, or `early`: the chip stops): the entries to push (time
  // unstamped), in port order, the router's last. `ports` in the order the ports were given.
  std::vector<chip::StatusEntry> tick(std::chrono::nanoseconds now, std::span<const PortCounts> ports,
                                      const RouterCounts& router, bool early = false);

 private:
  void alarm(std::vector<chip::StatusEntry>& out, size_t i, bool& high, uint64_t events, uint64_t frames,
             double threshold, chip::RateAlarm up, chip::RateAlarm down, const chip::RateFigures& figures);

  RatesConfig cfg_;
  std::vector<uint8_t> ports_;
  struct PortState {
    PortCounts base;  // where the interval started
    bool crc_high = false, retransmit_high = false;
  };
  std::vector<PortState> state_;
  RouterCounts router_base_;
  std::chrono::nanoseconds start_{};
  std::optional<std::chrono::nanoseconds> due_;
};

}  // namespace ttemu::node
