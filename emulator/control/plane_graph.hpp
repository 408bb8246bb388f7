// The live links of one routing plane (2.2.4), as adjacency lists: what the table builder
// routes over and what the checks walk. Failed links and chips are left out.
#pragma once

#include <cstdint>
#include <vector>

#include "emulator/control/failures.hpp"
#include "emulator/control/system.hpp"

namespace ttemu::control {

struct Neighbour {
  uint8_t port;   // our port
  int peer;       // node on the far end
  int link;       // index into System::links
};

class PlaneGraph {
 public:
  PlaneGraph(const System& sys, int plane, const Failures& failures);

  const System& system() const { return sys_; }
  int plane() const { return plane_; }
  const std::vector<Neighbour>& neighbours(int node) const {
    return adj_[static_cast<size_t>(node)];
  }
  bool alive(int node) const { return failures_.chip_ok(node); }
  // The live link of this plane on a port, or nullptr.
  const Neighbour* on_port(int node, uint8_t port) const;

 private:
  const System& sys_;
  int plane_;
  const Failures& failures_;
  std::vector<std::vector<Neighbour>> adj_;
};

}  // namespace ttemu::control
