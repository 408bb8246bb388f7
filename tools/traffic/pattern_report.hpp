// What `ttemu traffic` and `ttemu sim` both report of a pattern: latency percentiles and the
// mean route length of its pairs.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/control/table_check.hpp"

namespace ttemu::tools {

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

}  // namespace ttemu::tools
