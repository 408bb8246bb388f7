#include "tools/campaign/shrink.hpp"

namespace ttemu::tools {

Shrunk shrink(std::vector<Fault> schedule, uint32_t count, const StillFails& fails, int max_tries) {
  Shrunk s{std::move(schedule), count, 0};
  auto attempt = [&](const std::vector<Fault>& candidate, uint32_t n) {
    if (s.tries >= max_tries) return false;
    ++s.tries;
    if (!fails(candidate, n)) return false;
    s.schedule = candidate;
    s.count = n;
    return true;
  };
  // Halves first: one run may rule out half the schedule.
  while (s.schedule.size() >= 4) {
    const auto mid = s.schedule.begin() + static_cast<std::ptrdiff_t>(s.schedule.size() / 2);
    if (!attempt({s.schedule.begin(), mid}, s.count) && !attempt({mid, s.schedule.end()}, s.count)) break;
  }
  // Then each fault on its own, until none can go.
  for (bool smaller = true; smaller && !s.schedule.empty();) {
    smaller = false;
    for (size_t i = 0; i < s.schedule.size() && !smaller; ++i) {
      std::vector<Fault> without = s.schedule;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
      smaller = attempt(without, s.count);
    }
  }
  while (s.count > 1 && attempt(s.schedule, s.count / 2)) {
  }
  // Simpler faults: shorter cuts, killed chips that stay dead.
  for (size_t i = 0; i < s.schedule.size(); ++i) {
    for (bool simpler = true; simpler;) {
      Fault f = s.schedule[i];
      if (f.kind == Fault::Kind::kCut && f.for_ms >= 2) f.for_ms = static_cast<double>(static_cast<int>(f.for_ms / 2 * 10)) / 10;
      else if (f.kind == Fault::Kind::kKill && f.for_ms > 0) f.for_ms = 0;
      else break;
      std::vector<Fault> candidate = s.schedule;
      candidate[i] = f;
      simpler = attempt(candidate, s.count);
    }
  }
  return s;
}

}  // namespace ttemu::tools
