// Fault injection on one direction of one link (the wire, not the endpoints): corrupted frames
// (a probability, or a bit-error rate), Gilbert-Elliott burst errors, drops, added delay and
// down intervals. Seeded: the same seed and the same traffic give the same faults.
// The plan format is in docs/fault-plan.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace ttemu::link {

using Duration = std::chrono::nanoseconds;

struct DirectionFaults {
  double corrupt = 0;  // probability that a frame is corrupted
  double ber = 0;      // bit error rate: a frame of b bits is corrupted with 1-(1-ber)^b
  struct Burst {       // Gilbert-Elliott: a good and a bad state
    double enter_bad = 0;        // per frame, good -> bad
    double leave_bad = 0.2;      // per frame, bad -> good
    double corrupt_in_bad = 0.5; // frame corruption probability while bad
  } burst;
  double drop = 0;  // probability that a frame is lost
  Duration delay{0};
  struct Interval {
    Duration from, to;  // since the link started
  };
  std::vector<Interval> down;

  bool any() const {
    return corrupt > 0 || ber > 0 || burst.enter_bad > 0 || drop > 0 || delay.count() > 0 ||
           !down.empty();
  }
};

class FaultInjector {
 public:
  FaultInjector(DirectionFaults faults, uint64_t seed) : f_(std::move(faults)), rng_(seed) {}

  struct Verdict {
    bool drop = false;
    bool corrupt = false;
  };
  // Decides the fate of one frame of `bytes` bytes sent `elapsed` after the link started.
  Verdict on_frame(size_t bytes, Duration elapsed);
  // Flips one to three random bits of an encoded frame.
  void corrupt(std::span<uint8_t> frame);
  Duration delay() const { return f_.delay; }
  bool wire_down(Duration elapsed) const;

 private:
  bool chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  DirectionFaults f_;
  std::mt19937_64 rng_;
  bool bad_ = false;
};

}  // namespace ttemu::link
