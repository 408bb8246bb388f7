// Deadlines that may be absent: state machines report "nothing to wait for" as nullopt, and
// whoever drives several of them sleeps until the earliest.
#pragma once

#include <chrono>
#include <optional>

namespace ttemu {

// The earlier of two deadlines; nullopt only when neither is set.
inline std::optional<std::chrono::nanoseconds> earlier(std::optional<std::chrono::nanoseconds> a,
                                                       std::optional<std::chrono::nanoseconds> b) {
  if (!a) return b;
  if (!b) return a;
  return *a < *b ? a : b;
}

}  // namespace ttemu
