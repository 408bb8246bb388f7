// Waiting on a condition with a deadline, for tests that watch another thread or process
// through shared memory (no descriptor to poll): never a bare sleep, never without a bound.
#pragma once

#include <chrono>
#include <thread>

namespace ttemu::test {

// True once pred() holds; false if it still does not when `limit` has passed.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return pred();
    std::this_thread::yield();
  }
  return true;
}

}  // namespace ttemu::test
