// What `ttemu traffic` and `ttemu sim` both report of a pattern: latency percentiles, the mean
// route length of its pairs, and which pairs a chip's death took out of the verification.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/control/table_check.hpp"

namespace ttemu::tools {

// A result's "error_writes": the acknowledged writes not found bit-exact, the first few named
// "SRC->DST #k" (the k-th write of the pair).
inline void name_error_write(nlohmann::json& error_writes, const std::string& src, const std::string& dst, uint32_t k) {
  constexpr size_t kShown = 8;
  if (error_writes.size() < kShown) error_writes.push_back(fmt::format("{}->{} #{}", src, dst, k));
}

struct Percentiles {
  double min = 0, avg = 0, p50 = 0, p99 = 0;
  nlohmann::json to_json() const { return {{"min", min}, {"avg", avg}, {"p50", p50}, {"p99", p99}}; }
};

inline Percentiles percentiles(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return {v.front(), sum / static_cast<double>(v.size()), v[v.size() / 2], v[v.size() * 99 / 100]};
}

// Mean hops of the pairs (node indices) that have a route on the plane; 0 when none has.
inline double mean_hops(const control::System& sys, const control::TableSet& tables, int plane,
                        const std::vector<std::pair<int, int>>& pairs) {
  double sum = 0;
  size_t routed = 0;
  for (auto [s, d] : pairs) {
    auto walk = control::walk_route(sys, tables, plane, s, d);
    if (walk.arrived()) sum += static_cast<double>(walk.hops.size()), ++routed;
  }
  return routed ? sum / static_cast<double>(routed) : 0.0;
}

// A pattern's pairs after the writes, split by the chips that died meanwhile: a pair from a
// dead chip went with it (from_dead, whatever its destination), a pair to one was NACKed or
// lost (to_dead); the rest are live, and verified.
struct PairSplit {
  nlohmann::json dead_chips = nlohmann::json::array();  // their names
  size_t to_dead = 0, from_dead = 0;
  std::vector<std::pair<int, int>> live;
};

inline PairSplit split_dead(int chips, const std::vector<std::pair<int, int>>& pairs, const std::function<bool(int)>& died,
                            const std::function<std::string(int)>& name) {
  PairSplit out;
  for (int i = 0; i < chips; ++i) {
    if (died(i)) out.dead_chips.push_back(name(i));
  }
  for (auto [s, d] : pairs) {
    if (died(s)) ++out.from_dead;
    else if (died(d)) ++out.to_dead;
    else out.live.emplace_back(s, d);
  }
  return out;
}

// The pairs a pattern times single writes on: `samples` of the live ones, spread over them.
inline std::vector<std::pair<int, int>> latency_pairs(const std::vector<std::pair<int, int>>& live, int samples) {
  std::vector<std::pair<int, int>> out;
  const size_t n = live.empty() ? 0 : static_cast<size_t>(std::max(1, samples));
  for (size_t i = 0; i < n; ++i) out.push_back(live[(i * live.size() / n) % live.size()]);
  return out;
}

}  // namespace ttemu::tools
