// Multicast in the fabric (spec 3.2): the devices within e, w, n, s hops of an origin, covered
// by a tree of copies in dimension order. The origin (or any chip a copy reaches) keeps one for
// itself and sends one copy to each neighbour with depth left: east and west along its row,
// carrying the north and south depths, so that each chip of the row then covers its own column;
// north and south copies carry only their own direction. Every device in the rectangle gets
// exactly one copy, over one hop each: a rectangle of k devices costs k - 1 link crossings past
// the origin, where unicasts cost the sum of every destination's distance.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "emulator/routing/address.hpp"
#include "emulator/routing/packet.hpp"

namespace ttemu::routing {

struct McastCopy {
  ChipId to;
  McastDepths depths;  // what `to` still covers around itself
};

// The devices a copy for `at` with depths `d` covers, `at` included, clipped at the edges.
inline uint32_t mcast_devices(ChipId at, int rows, int cols, McastDepths d) {
  if (rows <= 0 || cols <= 0) return 1;
  const int per_layer = rows * cols, row = at.device % per_layer / cols, col = at.device % cols;
  const int wide = std::min<int>(d.e, cols - 1 - col) + std::min<int>(d.w, col) + 1;
  const int high = std::min<int>(d.n, row) + std::min<int>(d.s, rows - 1 - row) + 1;
  return static_cast<uint32_t>(wide * high);
}

// The copies `self` (in a mesh of rows x cols, devices row-major) sends on for depths `d`,
// clipped at the mesh's edges.
inline std::vector<McastCopy> mcast_copies(ChipId self, int rows, int cols, McastDepths d) {
  std::vector<McastCopy> out;
  if (rows <= 0 || cols <= 0) return out;
  const int per_layer = rows * cols;
  const int dev = self.device, layer = dev / per_layer, row = dev % per_layer / cols, col = dev % cols;
  auto at = [&](int r, int c) { return ChipId{self.mesh, static_cast<uint16_t>(layer * per_layer + r * cols + c)}; };
  if (d.e > 0 && col + 1 < cols) out.push_back({at(row, col + 1), {static_cast<uint8_t>(d.e - 1), 0, d.n, d.s}});
  if (d.w > 0 && col > 0) out.push_back({at(row, col - 1), {0, static_cast<uint8_t>(d.w - 1), d.n, d.s}});
  if (d.n > 0 && row > 0) out.push_back({at(row - 1, col), {0, 0, static_cast<uint8_t>(d.n - 1), 0}});
  if (d.s > 0 && row + 1 < rows) out.push_back({at(row + 1, col), {0, 0, 0, static_cast<uint8_t>(d.s - 1)}});
  return out;
}

}  // namespace ttemu::routing
