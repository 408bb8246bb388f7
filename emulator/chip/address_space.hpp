// A chip's memory as packets and workers address it: bit 63 set selects DRAM, else L1; the
// rest is the offset. The router's center, the chip process, the simulator and the client
// library all resolve addresses here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ttemu::chip {

inline constexpr uint64_t kDramBit = 1ull << 63;

// Whether [addr, addr+size) lies in a chip with l1_bytes of L1 and dram_bytes of DRAM.
inline bool in_range(uint64_t addr, size_t size, uint64_t l1_bytes, uint64_t dram_bytes) {
  const uint64_t limit = addr & kDramBit ? dram_bytes : l1_bytes;
  const uint64_t off = addr & ~kDramBit;
  return off <= limit && size <= limit - off;
}

// The bytes [addr, addr+size) of a chip whose memory is l1 and dram; an empty span (no data)
// when the range is outside it.
inline std::span<uint8_t> locate(uint64_t addr, size_t size, std::span<uint8_t> l1, std::span<uint8_t> dram) {
  if (!in_range(addr, size, l1.size(), dram.size())) return {};
  return (addr & kDramBit ? dram : l1).subspan(addr & ~kDramBit, size);
}

}  // namespace ttemu::chip
