// The routing tables of a whole system: one RouterTable per chip per routing plane.
// All routers of one chip on one plane share a table: next hops depend only on destination.
#pragma once

#include <vector>

#include "emulator/control/system.hpp"
#include "emulator/routing/routing_table.hpp"

namespace ttemu::control {

class TableSet {
 public:
  TableSet() = default;
  TableSet(int planes, int nodes)
      : tables_(static_cast<size_t>(planes), std::vector<routing::RouterTable>(static_cast<size_t>(nodes))) {}

  int planes() const { return static_cast<int>(tables_.size()); }
  routing::RouterTable& at(int plane, int node) {
    return tables_.at(static_cast<size_t>(plane)).at(static_cast<size_t>(node));
  }
  const routing::RouterTable& at(int plane, int node) const {
    return tables_.at(static_cast<size_t>(plane)).at(static_cast<size_t>(node));
  }
  // One chip's tables, one per plane (what its router loads).
  std::vector<routing::RouterTable> of_node(int node) const {
    std::vector<routing::RouterTable> out;
    for (const auto& plane : tables_) out.push_back(plane.at(static_cast<size_t>(node)));
    return out;
  }

 private:
  std::vector<std::vector<routing::RouterTable>> tables_;
};

}  // namespace ttemu::control
