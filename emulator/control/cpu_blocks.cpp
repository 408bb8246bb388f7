#include "emulator/control/cpu_blocks.hpp"

#include <algorithm>
#include <span>

namespace ttemu::control {

namespace {

int coordinate(const Coord& c, int axis) { return axis == 0 ? c.col : axis == 1 ? c.row : c.layer; }

// Halves `nodes` (chips of one mesh) along the longest side of their bounding box, recursively.
void halve(const System& sys, std::span<int> nodes) {
  if (nodes.size() < 2) return;
  auto coord = [&](int v) { return sys.chips[static_cast<size_t>(v)].coord; };
  int axis = 0, longest = -1;
  for (int a = 0; a < 3; ++a) {
    const auto [lo, hi] = std::minmax_element(nodes.begin(), nodes.end(), [&](int x, int y) {
      return coordinate(coord(x), a) < coordinate(coord(y), a);
    });
    const int extent = coordinate(coord(*hi), a) - coordinate(coord(*lo), a);
    if (extent > longest) axis = a, longest = extent;
  }
  // Ties along the axis keep a fixed order (node index), so the result is the same for any input order.
  std::sort(nodes.begin(), nodes.end(), [&](int x, int y) {
    const int cx = coordinate(coord(x), axis), cy = coordinate(coord(y), axis);
    return cx != cy ? cx < cy : x < y;
  });
  const size_t half = nodes.size() / 2;
  halve(sys, nodes.first(half));
  halve(sys, nodes.subspan(half));
}

}  // namespace

std::vector<int> locality_order(const System& sys, std::vector<int> nodes) {
  auto mesh_of = [&](int v) { return sys.chips.at(static_cast<size_t>(v)).id.mesh; };
  std::sort(nodes.begin(), nodes.end(), [&](int x, int y) { return mesh_of(x) != mesh_of(y) ? mesh_of(x) < mesh_of(y) : x < y; });
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  for (size_t begin = 0; begin < nodes.size();) {
    size_t end = begin;
    while (end < nodes.size() && mesh_of(nodes[end]) == mesh_of(nodes[begin])) ++end;
    halve(sys, std::span(nodes).subspan(begin, end - begin));
    begin = end;
  }
  return nodes;
}

}  // namespace ttemu::control
