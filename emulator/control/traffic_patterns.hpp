// The traffic patterns tt-metal's fabric tests name (unicast, all_to_all, one_to_all,
// all_to_one, neighbor_exchange, random_pairing): which chips write to which, and the bytes
// they write, so that every byte that lands can be checked. `ttemu traffic` (processes) and
// `ttemu sim` (the simulator) both use them.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ttemu::control {

struct PatternChip {
  uint16_t mesh = 0, device = 0;
  int row = 0, col = 0;
};

// The patterns by name, in the order "all" runs them.
const std::vector<std::string>& traffic_patterns();
// Names with "all" replaced by every pattern; throws Error for an unknown name.
std::vector<std::string> expand_patterns(const std::vector<std::string>& names);
// (source, destination) index pairs of a pattern over chips; src and dst are the chips that
// unicast, one_to_all and all_to_one use; seed shuffles random_pairing. Throws Error for an
// unknown pattern.
std::vector<std::pair<int, int>> pattern_pairs(const std::string& pattern, const std::vector<PatternChip>& chips,
                                               int src, int dst, uint64_t seed);
// Byte i of the k-th write from source s to destination d.
inline uint8_t pattern_byte(int s, int d, uint32_t k, size_t i) {
  return static_cast<uint8_t>((static_cast<uint32_t>(s) * 131u) ^ (static_cast<uint32_t>(d) * 31u) ^ (k * 7u) ^
                              static_cast<uint32_t>(i * 13));
}
// Write k of pair (s, d), pattern_byte for every byte: filled, or checked (true if every byte
// matches). Byte i depends on i only through its low byte, so a write is one 256-byte block
// over and over: copied and compared a block at a time (a byte loop took a fifth of the CPU
// of a Galaxy all_to_all's run, chips included).
inline std::array<uint8_t, 256> pattern_block(int s, int d, uint32_t k) {
  std::array<uint8_t, 256> b{};
  for (size_t i = 0; i < b.size(); ++i) b[i] = pattern_byte(s, d, k, i);
  return b;
}
inline void fill_pattern(std::span<uint8_t> out, int s, int d, uint32_t k) {
  const auto b = pattern_block(s, d, k);
  for (size_t at = 0; at < out.size(); at += b.size()) std::memcpy(out.data() + at, b.data(), std::min(b.size(), out.size() - at));
}
inline bool check_pattern(std::span<const uint8_t> in, int s, int d, uint32_t k) {
  const auto b = pattern_block(s, d, k);
  for (size_t at = 0; at < in.size(); at += b.size()) {
    if (std::memcmp(in.data() + at, b.data(), std::min(b.size(), in.size() - at)) != 0) return false;
  }
  return true;
}

}  // namespace ttemu::control
