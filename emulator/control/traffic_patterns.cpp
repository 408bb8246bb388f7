#include "emulator/control/traffic_patterns.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::control {

namespace {

const std::vector<std::string> kPatterns = {"unicast", "all_to_all", "one_to_all", "all_to_one",
                                            "neighbor_exchange", "random_pairing"};

}  // namespace

std::vector<std::pair<int, int>> pattern_pairs(const std::string& pattern, const std::vector<PatternChip>& chips,
                                               int src, int dst, uint64_t seed) {
  std::vector<std::pair<int, int>> out;
  const int n = static_cast<int>(chips.size());
  if (pattern == "unicast") {
    out.push_back({src, dst});
  } else if (pattern == "all_to_all") {
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d)
        if (s != d) out.push_back({s, d});
  } else if (pattern == "one_to_all") {
    for (int d = 0; d < n; ++d)
      if (d != src) out.push_back({src, d});
  } else if (pattern == "all_to_one") {
    for (int s = 0; s < n; ++s)
      if (s != dst) out.push_back({s, dst});
  } else if (pattern == "neighbor_exchange") {
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d)
        if (chips[static_cast<size_t>(s)].mesh == chips[static_cast<size_t>(d)].mesh &&
            std::abs(chips[static_cast<size_t>(s)].row - chips[static_cast<size_t>(d)].row) +
                    std::abs(chips[static_cast<size_t>(s)].col - chips[static_cast<size_t>(d)].col) == 1)
          out.push_back({s, d});
  } else if (pattern == "random_pairing") {
    std::vector<int> order(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    std::mt19937_64 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i = 0; i + 1 < n; i += 2) {  // each chip paired with one other, both ways
      out.push_back({order[static_cast<size_t>(i)], order[static_cast<size_t>(i) + 1]});
      out.push_back({order[static_cast<size_t>(i) + 1], order[static_cast<size_t>(i)]});
    }
  } else {
    throw Error(fmt::format("unknown pattern '{}' (unicast, all_to_all, one_to_all, all_to_one, "
                            "neighbor_exchange, random_pairing)", pattern));
  }
  return out;
}

const std::vector<std::string>& traffic_patterns() { return kPatterns; }

std::vector<std::string> expand_patterns(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& name : names) {
    // tt-metal's names for the same patterns (its fabric tests' high-level pattern types).
    const std::string p = name == "all_to_all_unicast" ? "all_to_all" : name == "one_to_all_unicast" ? "one_to_all" : name;
    if (p == "all") {
      out.insert(out.end(), kPatterns.begin(), kPatterns.end());
    } else if (std::find(kPatterns.begin(), kPatterns.end(), p) != kPatterns.end()) {
      out.push_back(p);
    } else {
      throw Error(fmt::format("unknown pattern '{}' (unicast, all_to_all, one_to_all, all_to_one, "
                              "neighbor_exchange, random_pairing, or all; tt-metal's all_to_all_unicast and "
                              "one_to_all_unicast)", p));
    }
  }
  return out;
}

}  // namespace ttemu::control
