// One port's EFC judgement (PortEfc) and the fallback header, as state machines without I/O.
// The channel itself, moving traffic between chips, is tested in the simulator
// (fabric_sim_test.cpp) and between chip processes (system_test.cpp).
#include "emulator/link/efc.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "emulator/link/frame.hpp"

namespace ttemu::link {
namespace {

using namespace std::chrono_literals;

TEST(FallbackHeader, RoundTripsAndIsNeverTakenForAFrame) {
  std::array<uint8_t, kFallbackHeaderBytes> bytes;
  encode({3, 12, FallbackKind::kProbeReply, kFallbackJudged, 0x1234'05}, bytes);
  const auto h = decode_fallback(bytes);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->tx_port, 3);
  EXPECT_EQ(h->rx_port, 12);
  EXPECT_EQ(h->kind, FallbackKind::kProbeReply);
  EXPECT_EQ(h->flags, kFallbackJudged);
  EXPECT_EQ(h->probe, 0x1234'05u);
  // Datagrams of frames of every type start with something else.
  for (auto type : {FrameType::kData, FrameType::kAck, FrameType::kHello}) {
    std::vector<uint8_t> frame;
    FrameHeader fh;
    fh.type = type;
    fh.dest_addr = kFallbackMagic;  // even a destination that spells the magic
    append_frame(frame, fh, std::vector<uint8_t>(24, 0xFB));
    EXPECT_FALSE(decode_fallback(frame)) << static_cast<int>(type);
  }
  EXPECT_FALSE(decode_fallback(std::span(bytes).first(15))) << "too short";
  bytes[6] = 9;
  EXPECT_FALSE(decode_fallback(bytes)) << "an unknown kind";
}

TEST(PortEfc, TimeoutsInARowOrADownLinkBreakAPort) {
  EfcConfig cfg;
  LinkCounters c;
  PortEfc efc(cfg);
  EXPECT_EQ(efc.judge(c, cfg.timeouts - 1, false, 1s), EfcReason::kNone);
  EXPECT_EQ(efc.judge(c, cfg.timeouts, false, 1s), EfcReason::kTimeouts);
  // Fewer, but spread over longer than `stall` (a timeout grown long): broken too.
  PortEfc slow(cfg);
  EXPECT_EQ(slow.judge(c, 1, false, 1s), EfcReason::kNone);
  EXPECT_EQ(slow.judge(c, 2, false, 1s + cfg.stall - 1ms), EfcReason::kNone);
  EXPECT_EQ(slow.judge(c, 2, false, 1s + cfg.stall), EfcReason::kTimeouts);
  EXPECT_EQ(slow.judge(c, 0, false, 2s), EfcReason::kNone) << "progress ends the run";
  EXPECT_EQ(slow.judge(c, 2, false, 2s + cfg.stall - 1ms), EfcReason::kNone) << "a new run starts its own clock";
  EXPECT_EQ(efc.judge(c, 0, true, 1s), EfcReason::kLinkDown);
  cfg.enabled = false;
  EXPECT_EQ(PortEfc(cfg).judge(c, 100, true, 1s), EfcReason::kNone) << "off is off";
}

TEST(PortEfc, AnErrorRateAboveTheThresholdOverAnIntervalBreaksAPort) {
  EfcConfig cfg;
  cfg.error_rate = 0.05;
  cfg.min_frames = 100;
  cfg.interval = 100ms;
  LinkCounters c;
  PortEfc efc(cfg);
  EXPECT_EQ(efc.judge(c, 0, false, 1s), EfcReason::kNone);  // the interval starts
  c.frames_rx = 990;
  c.crc_errors = 10;
  c.nacks_tx = 39;  // 49 in 1000: under 5 %
  c.retransmits = 900;  // a sender's resends are not the wire's errors (late acknowledgements)
  EXPECT_EQ(efc.judge(c, 0, false, 1s + 50ms), EfcReason::kNone) << "the interval is not over";
  EXPECT_EQ(efc.judge(c, 0, false, 1s + 100ms), EfcReason::kNone);
  c.crc_errors += 50;  // the next interval: 50 frames, all errors, but too few to judge
  EXPECT_EQ(efc.judge(c, 0, false, 1s + 200ms), EfcReason::kNone);
  c.frames_rx += 190;
  c.crc_errors += 10;
  c.nacks_tx += 1;  // 11 in 200
  EXPECT_EQ(efc.judge(c, 0, false, 1s + 300ms), EfcReason::kErrorRate);
}

// Answers every probe of the rounds it runs; returns how many rounds it took to return.
int rounds_until_return(PortEfc& efc, const EfcConfig& cfg, Time& now) {
  for (int round = 1; round <= 100; ++round) {
    while (!efc.round_due(now)) now += 1ms;
    for (int i = 0; i < cfg.probes; ++i) {
      if (efc.on_reply(efc.round() << 8 | static_cast<uint32_t>(i), now)) return round;
    }
  }
  return -1;
}

TEST(PortEfc, ItReturnsAfterRoundsWhoseEveryProbeWasAnswered) {
  EfcConfig cfg;
  LinkCounters c;
  PortEfc efc(cfg);
  Time now = 1s;
  efc.fell_back(EfcReason::kTimeouts, now);
  EXPECT_FALSE(efc.round_due(now)) << "the first round waits a probe interval";
  EXPECT_EQ(rounds_until_return(efc, cfg, now), cfg.rounds);
  // A round with one answer missing does not count, and the next must start over.
  efc.fell_back(EfcReason::kTimeouts, now);
  ASSERT_TRUE((void(now += cfg.probe_interval), efc.round_due(now)));
  EXPECT_FALSE(efc.on_reply(efc.round() << 8 | 0, now));
  EXPECT_FALSE(efc.on_reply(efc.round() << 8 | 0, now)) << "a duplicate answer counts once";
  EXPECT_FALSE(efc.on_reply((efc.round() - 1) << 8 | 1, now)) << "an earlier round's answer is late";
  EXPECT_EQ(rounds_until_return(efc, cfg, now), cfg.rounds);
  // After an error rate, a wire must prove itself over more rounds.
  efc.fell_back(EfcReason::kErrorRate, now);
  EXPECT_EQ(rounds_until_return(efc, cfg, now), cfg.rounds_after_errors);
}

TEST(PortEfc, UnansweredRoundsBackOffToTheLongestInterval) {
  EfcConfig cfg;
  PortEfc efc(cfg);
  Time now = 1s;
  efc.fell_back(EfcReason::kLinkDown, now);
  std::vector<Duration> gaps;
  Time last = now;
  for (int i = 0; i < 12; ++i) {
    while (!efc.round_due(now)) now = *efc.next_deadline();
    gaps.push_back(now - last);
    last = now;
  }
  EXPECT_EQ(gaps.front(), cfg.probe_interval);
  EXPECT_EQ(gaps.back(), cfg.max_probe_interval) << "idle probing stays cheap";
  for (size_t i = 1; i < gaps.size(); ++i) EXPECT_GE(gaps[i], gaps[i - 1]);
}

}  // namespace
}  // namespace ttemu::link
