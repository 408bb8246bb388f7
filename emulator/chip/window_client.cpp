#include "emulator/chip/window_client.hpp"

#include "emulator/chip/address_space.hpp"

namespace ttemu::chip {

using session::kMemoryWindows;
using session::kWindowIndexBits;
using session::MemoryWindow;

WindowRegistration register_window(ChipControl& control, uint16_t core, uint64_t addr, uint64_t size, uint32_t access,
                                   uint64_t l1_bytes, uint64_t dram_bytes, uint64_t random) {
  if (access == 0 || (access & ~session::kWindowAccessBits) != 0) return {kStatusBadArgument, 0};
  if (size == 0) return {kStatusBadSize, 0};
  if (!in_range(addr, size, l1_bytes, dram_bytes)) return {kStatusBadAddress, 0};
  // The search starts at a random entry: keys of one worker do not sit side by side.
  const auto start = static_cast<uint32_t>(random);
  for (uint32_t n = 0; n < kMemoryWindows; ++n) {
    const uint32_t i = (start + n) % kMemoryWindows;
    MemoryWindow& w = control.windows.entries[i];
    uint32_t free = 0;
    if (!w.claimed.compare_exchange_strong(free, 1, std::memory_order_acq_rel)) continue;
    // Whatever the center reads from here on is new: its second look at the key tells it.
    std::atomic_thread_fence(std::memory_order_release);
    w.addr.store(addr, std::memory_order_relaxed);
    w.size.store(size, std::memory_order_relaxed);
    w.access.store(access, std::memory_order_relaxed);
    w.core.store(core, std::memory_order_relaxed);
    uint64_t high = random >> kWindowIndexBits;
    if (high == 0) high = 1;  // a key is never 0 (0: no key)
    const uint64_t key = high << kWindowIndexBits | i;
    w.key.store(key, std::memory_order_release);  // visible last, fully written
    return {kStatusOk, key};
  }
  return {kStatusNoWindow, 0};
}

int32_t deregister_window(ChipControl& control, uint16_t core, uint64_t key) {
  if (key == 0) return kStatusBadArgument;
  MemoryWindow& w = control.windows.entries[key & session::kWindowIndexMask];
  if (w.key.load(std::memory_order_acquire) != key || w.core.load(std::memory_order_relaxed) != core) {
    return kStatusBadArgument;
  }
  uint64_t expected = key;
  if (!w.key.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return kStatusBadArgument;  // invisible first
  w.claimed.store(0, std::memory_order_release);
  return kStatusOk;
}

}  // namespace ttemu::chip
