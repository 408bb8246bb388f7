#include "emulator/node/status_rates.hpp"

namespace ttemu::node {

PortCounts PortCounts::of(const link::LinkCounters& c) {
  PortCounts p;
#define TTEMU_READ(name) p.name = c.name.load(std::memory_order_relaxed);
  TTEMU_RATE_LINK_FIELDS(TTEMU_READ)
#undef TTEMU_READ
  return p;
}

StatusRates::StatusRates(const RatesConfig& config, std::span<const uint8_t> ports)
    : cfg_(config),
      ports_(ports.begin(), ports.end()),
      state_(ports.size()) {}

std::vector<chip::StatusEntry> StatusRates::tick(std::chrono::nanoseconds now, std::span<const PortCounts> ports,
                                                 const RouterCounts& router, bool early) {
  std::vector<chip::StatusEntry> out;
  if (!due(now) && !early) return out;
  const uint64_t interval = static_cast<uint64_t>((now - start_).count());
  chip::RateFigures sum{.interval_ns = interval};
  for (size_t i = 0; i < ports_.size() && i < ports.size(); ++i) {
    const PortCounts& c = ports[i];
    PortState& st = state_[i];
    const PortCounts& b = st.base;
    chip::RateFigures f{.interval_ns = interval};
#define TTEMU_DIFF(name) f.name = c.name - b.name;
    TTEMU_RATE_LINK_FIELDS(TTEMU_DIFF)
#undef TTEMU_DIFF
    st.base = c;
    if (f.frames_tx + f.frames_rx + f.crc_errors + f.retransmits == 0) continue;
    out.push_back({.kind = chip::StatusKind::kPortRates, .port = ports_[i], .rates = f});
#define TTEMU_ADD(name) sum.name += f.name;
    TTEMU_RATE_LINK_FIELDS(TTEMU_ADD)
#undef TTEMU_ADD
    // CRC errors are a share of every frame that arrived (acks and hellos fail theirs too); a
    // retransmission was sent too.
    alarm(out, i, st.crc_high, f.crc_errors, f.frames_in, cfg_.crc_alarm, chip::RateAlarm::kCrcHigh,
          chip::RateAlarm::kCrcNormal, f);
    alarm(out, i, st.retransmit_high, f.retransmits, f.frames_tx + f.retransmits, cfg_.retransmit_alarm,
          chip::RateAlarm::kRetransmitHigh, chip::RateAlarm::kRetransmitNormal, f);
  }
  sum.injected = router.injected - router_base_.injected;
  sum.delivered = router.delivered - router_base_.delivered;
  sum.dropped = router.dropped - router_base_.dropped;
  router_base_ = router;
  const bool moved = !out.empty() || sum.injected + sum.delivered + sum.dropped > 0;
  if (moved) {
    out.push_back({.kind = chip::StatusKind::kRouterRates, .port = 0xFF, .rates = sum});
    start_ = now;
    due_ = now + cfg_.interval;
  } else {
    due_.reset();  // idle: the clock stands until something moves
  }
  return out;
}

void StatusRates::alarm(std::vector<chip::StatusEntry>& out, size_t i, bool& high, uint64_t events, uint64_t frames,
                        double threshold, chip::RateAlarm up, chip::RateAlarm down, const chip::RateFigures& figures) {
  if (threshold <= 0 || frames < cfg_.min_frames) return;
  const double rate = static_cast<double>(events) / static_cast<double>(frames);
  const bool was = high;
  if (!high && rate > threshold) high = true;
  else if (high && rate <= threshold / 2) high = false;
  if (high == was) return;
  out.push_back({.kind = chip::StatusKind::kErrorRate, .port = ports_[i], .reason = static_cast<uint8_t>(high ? up : down),
                 .figure = static_cast<uint64_t>(threshold * 1e6 + 0.5), .rates = figures});
}

}  // namespace ttemu::node
