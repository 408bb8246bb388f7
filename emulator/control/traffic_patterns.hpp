// The traffic patterns tt-metal's fabric tests name (unicast, all_to_all, one_to_all,
// all_to_one, neighbor_exchange, random_pairing): which chips write to which, and the bytes
// they write, so that every byte that lands can be checked. `ttemu traffic` (processes) and
// `ttemu sim` (the simulator) both use them.
#pragma once

#include <cstdint>
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
// matches). Whole blocks at a time, in loops the compiler vectorises (no early exit, nothing
// the stores could alias).
inline void fill_pattern(std::span<uint8_t> out, int s, int d, uint32_t k) {
  uint8_t* p = out.data();
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) p[i] = pattern_byte(s, d, k, i);
}
inline bool check_pattern(std::span<const uint8_t> in, int s, int d, uint32_t k) {
  const uint8_t* p = in.data();
  const size_t n = in.size();
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<uint8_t>(p[i] ^ pattern_byte(s, d, k, i));
  return diff == 0;
}

}  // namespace ttemu::control
