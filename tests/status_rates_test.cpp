// The status queue's periodic figures (node/status_rates.hpp): an interval clock that runs only
// while traffic flows, entries that add up to the counters, and alarms with hysteresis.
#include "emulator/node/status_rates.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ttemu::node {
namespace {

using std::chrono::milliseconds;
using chip::StatusKind;

std::vector<chip::StatusEntry> of_kind(const std::vector<chip::StatusEntry>& v, StatusKind k) {
  std::vector<chip::StatusEntry> out;
  for (const auto& e : v) {
    if (e.kind == k) out.push_back(e);
  }
  return out;
}

TEST(StatusRates, TheClockRunsOnlyWhileSomethingMovesAndNothingIsLostMeanwhile) {
  const std::vector<uint8_t> ports{2, 5};
  StatusRates r(RatesConfig{.interval = milliseconds(100)}, ports);
  EXPECT_FALSE(r.next_deadline()) << "idle: no timer";
  std::vector<PortCounts> c(2);
  r.arm(milliseconds(10));
  ASSERT_EQ(r.next_deadline(), milliseconds(110));
  EXPECT_TRUE(r.tick(milliseconds(50), c, {}).empty()) << "not due";
  c[1].frames_tx = 40, c[1].bytes_tx = 4000, c[1].frames_rx = 7;
  auto out = r.tick(milliseconds(110), c, {.injected = 40});
  ASSERT_EQ(out.size(), 2u) << "port 5 and the router; port 2 moved nothing";
  EXPECT_EQ(out[0].kind, StatusKind::kPortRates);
  EXPECT_EQ(out[0].port, 5);
  EXPECT_EQ(out[0].rates.frames_tx, 40u);
  EXPECT_EQ(out[0].rates.bytes_tx, 4000u);
  EXPECT_EQ(out[0].rates.interval_ns, 100'000'000u);
  EXPECT_EQ(out[1].kind, StatusKind::kRouterRates);
  EXPECT_EQ(out[1].port, 0xFF);
  EXPECT_EQ(out[1].rates.injected, 40u);
  EXPECT_EQ(out[1].rates.frames_tx, 40u);
  ASSERT_EQ(r.next_deadline(), milliseconds(210)) << "traffic flows: the next interval";
  EXPECT_TRUE(r.tick(milliseconds(210), c, {.injected = 40}).empty()) << "nothing moved";
  EXPECT_FALSE(r.next_deadline()) << "idle again: the clock stands";
  // What moves before the next arm counts in the next interval, from where the last one ended.
  c[0].frames_rx = 3;
  r.arm(milliseconds(500));
  c[0].frames_rx = 9;
  out = r.tick(milliseconds(600), c, {.injected = 40, .delivered = 9});
  ASSERT_EQ(of_kind(out, StatusKind::kPortRates).size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_EQ(out[0].rates.frames_rx, 9u);
  EXPECT_EQ(of_kind(out, StatusKind::kRouterRates)[0].rates.delivered, 9u);
}

TEST(StatusRates, AnAlarmGoesUpAboveItsThresholdAndDownAtHalfOfIt) {
  const std::vector<uint8_t> ports{3};
  StatusRates r(RatesConfig{.interval = milliseconds(10), .crc_alarm = 0.01, .retransmit_alarm = 0.1, .min_frames = 100}, ports);
  std::vector<PortCounts> c(1);
  milliseconds t{0};
  // One interval: `frames` good frames received and `crc` bad ones; the alarms it raised.
  auto interval = [&](uint64_t frames, uint64_t crc) {
    c[0].frames_rx += frames;
    c[0].frames_in += frames + crc;  // every frame arrived; `crc` of them failed their CRC
    c[0].crc_errors += crc;
    r.arm(t);
    t += milliseconds(10);
    return of_kind(r.tick(t, c, {}), StatusKind::kErrorRate);
  };
  EXPECT_TRUE(interval(50, 5).empty()) << "too few frames to judge";
  auto up = interval(980, 20);  // 2%
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(static_cast<chip::RateAlarm>(up[0].reason), chip::RateAlarm::kCrcHigh);
  EXPECT_EQ(up[0].port, 3);
  EXPECT_EQ(up[0].figure, 10'000u) << "the threshold in parts per million";
  EXPECT_EQ(up[0].rates.crc_errors, 20u);
  EXPECT_TRUE(interval(980, 20).empty()) << "still above: said once";
  EXPECT_TRUE(interval(992, 8).empty()) << "0.8%: below the threshold, not yet at half of it";
  auto down = interval(996, 4);  // 0.4%
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(static_cast<chip::RateAlarm>(down[0].reason), chip::RateAlarm::kCrcNormal);
  // Retransmissions per data frame sent (first or again).
  c[0].frames_tx += 800;
  c[0].retransmits += 200;
  auto re = interval(1000, 0);
  ASSERT_EQ(re.size(), 1u);
  EXPECT_EQ(static_cast<chip::RateAlarm>(re[0].reason), chip::RateAlarm::kRetransmitHigh);
}

}  // namespace
}  // namespace ttemu::node
