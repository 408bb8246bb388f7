// What a tt-metal mesh graph descriptor says, in our terms, and the system-specification YAML
// (docs/topology-format.md) that says the same. Shared by the two descriptor readers
// (mesh_graph_descriptor.cpp: textproto, mesh_graph_yaml.cpp: the older YAML); not an API.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emulator/control/system.hpp"

namespace ttemu::control::mgd {

struct ChipOut {
  std::string name, arch;
  std::array<int, kSides> ports{};  // ports per side, N E S W U D
};

struct BoardOut {
  std::string name, chip;
  Dims topology;
};

struct MeshOut {
  int id = 0;
  std::string board;
  Dims boards;                     // the mesh's grid of boards (one host each)
  Dims chips;                      // boards x board topology
  std::vector<std::string> hosts;  // per board, row-major
  int ports_per_side = 0;          // of its chip, for edge-port allocation
};

// A Graph endpoint, {mesh, <side><index>} (docs/topology-format.md#graph).
struct EdgeOut {
  int mesh = 0;
  Side side = Side::N;
  int index = 0;
};

struct SystemOut {
  std::string source, format;
  std::vector<ChipOut> chips;
  std::vector<BoardOut> boards;
  std::vector<std::string> hosts;
  std::vector<MeshOut> meshes;
  std::vector<std::pair<EdgeOut, EdgeOut>> graph;  // every link from both ends
};

// The chips of a mesh's edge in the order its edge ports count along them.
std::vector<Coord> edge_chips(const Dims& chips, Side side);

// Takes free edge ports of the meshes for inter-mesh links, never one twice.
class EdgePorts {
 public:
  explicit EdgePorts(const std::vector<MeshOut>& meshes) : meshes_(meshes) {}
  // The first free port of the mesh on the first side of `order` that has one; with `device`,
  // only that chip's ports. nullopt when there is none.
  std::optional<EdgeOut> take(int mesh, const std::vector<Side>& order, std::optional<int> device);

 private:
  const std::vector<MeshOut>& meshes_;
  std::vector<std::array<std::vector<bool>, kSides>> used_;
};

std::string to_yaml(const SystemOut& sys);

// Whether YAML text is tt-metal's older descriptor rather than our own format (mesh_graph_yaml.cpp).
bool looks_like_yaml_descriptor(std::string_view text);

}  // namespace ttemu::control::mgd
