#include "emulator/control/plane_graph.hpp"

namespace ttemu::control {

PlaneGraph::PlaneGraph(const System& sys, int plane, const Failures& failures)
    : sys_(sys), plane_(plane), failures_(failures), adj_(sys.chips.size()) {
  for (size_t i = 0; i < sys.links.size(); ++i) {
    const Link& l = sys.links[i];
    if (l.plane != plane || !failures.link_ok(sys, static_cast<int>(i))) continue;
    int a = *sys.node(l.a.chip), b = *sys.node(l.b.chip);
    adj_[static_cast<size_t>(a)].push_back({l.a.port, b, static_cast<int>(i)});
    adj_[static_cast<size_t>(b)].push_back({l.b.port, a, static_cast<int>(i)});
  }
}

const Neighbour* PlaneGraph::on_port(int node, uint8_t port) const {
  for (const auto& n : adj_[static_cast<size_t>(node)]) {
    if (n.port == port) return &n;
  }
  return nullptr;
}

}  // namespace ttemu::control
