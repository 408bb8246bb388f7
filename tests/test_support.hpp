// Helpers shared by the unit tests: shipped topologies by name, and routes as text.
#pragma once

#include <string>
#include <vector>

#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_check.hpp"

namespace ttemu::test {

inline std::string topology(const std::string& name) {
  return std::string(TTEMU_TOPOLOGIES) + "/" + name;
}

inline control::System load(const std::string& name) {
  return control::load_system(topology(name));
}

inline int node(const control::System& sys, const std::string& name) {
  return *sys.node(*routing::parse_chip(name));
}

// "M0D0P2>M0D1P4 M0D1P2>M0D2P4 ..." for compact expectations.
inline std::string hops_text(const std::vector<control::Hop>& hops) {
  std::string out;
  for (const auto& h : hops) {
    out += (out.empty() ? "" : " ") + routing::to_string(h.from) + ">" + routing::to_string(h.to);
  }
  return out;
}

inline control::Walk route(const control::System& sys, const control::TableSet& tables,
                           const std::string& src, const std::string& dst, int plane = 0,
                           const control::Failures& failures = {}) {
  return control::walk_route(sys, tables, plane, node(sys, src), node(sys, dst), failures);
}

// Calls f(plane, src, dst, walk) for every ordered pair of chips on every plane.
template <class F>
void for_each_route(const control::System& sys, const control::TableSet& tables, F f) {
  for (int plane = 0; plane < sys.planes; ++plane) {
    for (int src = 0; src < sys.node_count(); ++src) {
      for (int dst = 0; dst < sys.node_count(); ++dst) {
        if (src != dst) f(plane, src, dst, control::walk_route(sys, tables, plane, src, dst));
      }
    }
  }
}

}  // namespace ttemu::test
