#include "emulator/link/fault_injector.hpp"

#include <cmath>

namespace ttemu::link {

bool FaultInjector::wire_down(Duration elapsed) const {
  for (const auto& i : f_.down) {
    if (elapsed >= i.from && elapsed < i.to) return true;
  }
  return false;
}

FaultInjector::Verdict FaultInjector::on_frame(size_t bytes, Duration elapsed) {
  Verdict v;
  if (wire_down(elapsed) || chance(f_.drop)) {
    v.drop = true;
    return v;
  }
  if (f_.burst.enter_bad > 0) {
    bad_ = bad_ ? !chance(f_.burst.leave_bad) : chance(f_.burst.enter_bad);
    if (bad_ && chance(f_.burst.corrupt_in_bad)) v.corrupt = true;
  }
  if (!v.corrupt && chance(f_.corrupt)) v.corrupt = true;
  if (!v.corrupt && f_.ber > 0) {
    double p = -std::expm1(static_cast<double>(bytes) * 8.0 * std::log1p(-f_.ber));
    v.corrupt = chance(p);
  }
  return v;
}

void FaultInjector::corrupt(std::span<uint8_t> frame) {
  if (frame.empty()) return;
  int flips = 1 + static_cast<int>(rng_() % 3);
  for (int i = 0; i < flips; ++i) {
    size_t bit = rng_() % (frame.size() * 8);
    frame[bit / 8] = static_cast<uint8_t>(frame[bit / 8] ^ (1u << (bit % 8)));
  }
}

}  // namespace ttemu::link
