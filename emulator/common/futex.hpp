// Waiting on a 32-bit word in shared memory across processes (Linux futex): how workers,
// routers and the launcher sleep instead of spinning. Spin only with a bound, while traffic
// flows, then sleep here.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace ttemu {

// Sleeps while *word == expected, at most `timeout` (nanoseconds::max(): no limit). Returns at
// once if it already differs.
inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected,
                       std::chrono::nanoseconds timeout = std::chrono::seconds(1)) {
  timespec ts{static_cast<time_t>(timeout.count() / 1'000'000'000),
              static_cast<long>(timeout.count() % 1'000'000'000)};
  const bool forever = timeout == std::chrono::nanoseconds::max();
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, forever ? nullptr : &ts, nullptr, 0);
}

inline void futex_wake(std::atomic<uint32_t>& word, int waiters = INT_MAX) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, waiters, nullptr, nullptr, 0);
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);

}  // namespace ttemu
