// A chip's memory as packets and workers address it: bit 63 set selects DRAM, else L1; the
// rest is the offset. The router's center, the chip process, the simulator and the client
// library all resolve addresses here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ttemu::chip {

inline constexpr uint64_t kDramBit = 1ull << 63;

// The bytes [addr, addr+size) of a chip whose memory is l1 and dram; an empty span (no data)
// when the range is outside it.
inline std::span<uint8_t> locate(uint64_t addr, size_t size, std::span<uint8_t> l1, std::span<uint8_t> dram) {
  const std::span<uint8_t> mem = addr & kDramBit ? dram : l1;
  const uint64_t off = addr & ~kDramBit;
  if (off > mem.size() || size > mem.size() - off) return {};
  return mem.subspan(off, size);
}

}  // namespace ttemu::chip
