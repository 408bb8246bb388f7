// Memory protection with keys (the UET seed's memory regions; libfabric's FI_MR_OFFSET): a
// chip's table of memory windows, in its control block (chip/chip_control.hpp), so that the
// chip's workers register windows (chip/window_client.hpp) and its center checks every keyed
// RDMA packet against them (center.hpp), across processes as in the simulator.
//
// A window is a range of the chip's memory, the rights a remote issuer has there, and the core
// that owns it. Its key is the entry's index in the low bits and random above them: a lookup
// is one entry, and a key cannot be guessed from another. A keyed packet's dst_addr is an
// offset into the window.
//
// Publication across processes: a registration claims a free entry, writes it, and makes its
// key visible last (release); a deregistration makes the key invisible first. The center reads
// the key, the fields, and the key again (a seqlock): an entry that changed meanwhile no longer
// holds the key it read.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ttemu::session {

inline constexpr uint32_t kWindowIndexBits = 10;
inline constexpr uint32_t kMemoryWindows = 1u << kWindowIndexBits;  // per chip
inline constexpr uint64_t kWindowIndexMask = kMemoryWindows - 1;

// What a remote issuer may do in a window (tt_fabric.h mirrors them). An atomic needs write.
enum WindowAccess : uint32_t { kRemoteRead = 1, kRemoteWrite = 2 };
inline constexpr uint32_t kWindowAccessBits = kRemoteRead | kRemoteWrite;

// Open: a packet without a key goes anywhere in the chip's memory, as before keys. Protected:
// every RDMA packet needs a valid key (the job-wide switch, ttemu launch --memory).
enum class MemoryMode : uint8_t { kOpen = 0, kProtected = 1 };
inline const char* to_string(MemoryMode m) { return m == MemoryMode::kProtected ? "protected" : "open"; }
inline std::optional<MemoryMode> parse_memory_mode(std::string_view s) {
  if (s == "open") return MemoryMode::kOpen;
  if (s == "protected") return MemoryMode::kProtected;
  return std::nullopt;
}

struct MemoryWindow {
  std::atomic<uint64_t> key{0};      // 0: no window is visible here
  std::atomic<uint32_t> claimed{0};  // 1 from a registration's claim until its deregistration
  std::atomic<uint32_t> access{0};   // WindowAccess bits
  std::atomic<uint64_t> addr{0};     // a chip address (L1 offset, or kDramBit | DRAM offset)
  std::atomic<uint64_t> size{0};
  std::atomic<uint32_t> core{0};     // the owning worker
  uint32_t reserved = 0;
};

struct MemoryWindows {
  std::atomic<uint64_t> refused{0};  // packets the center refused for their key (or lack of one)
  MemoryWindow entries[kMemoryWindows];
};

// The chip address of [offset, offset + span) in the window under `key`, when a window holds
// that key, grants every right in `need` and contains the whole range; nullopt otherwise.
inline std::optional<uint64_t> resolve(const MemoryWindows& t, uint64_t key, uint64_t offset, uint64_t span,
                                       uint32_t need) {
  const MemoryWindow& w = t.entries[key & kWindowIndexMask];
  if (key == 0 || w.key.load(std::memory_order_acquire) != key) return std::nullopt;  // wrong key
  const uint64_t addr = w.addr.load(std::memory_order_relaxed);
  const uint64_t size = w.size.load(std::memory_order_relaxed);
  const uint32_t access = w.access.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (w.key.load(std::memory_order_relaxed) != key) return std::nullopt;  // deregistered while read
  if ((access & need) != need) return std::nullopt;
  if (offset > size || span > size - offset) return std::nullopt;
  return addr + offset;
}

}  // namespace ttemu::session
