// The system specification of spec section 7, resolved: every chip of every mesh with its
// coordinates and host, and every ethernet link (intra-mesh links implied by the boards,
// inter-mesh links from the Graph) with the routing plane it belongs to (2.2.4).
//
// Load one with load_system() (system_yaml.hpp); a System is immutable afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emulator/routing/address.hpp"
#include "emulator/routing/wiring.hpp"

namespace ttemu::control {

using routing::ChipId;
using routing::PortId;

// The sides of a chip (7.1): four in a 2-D mesh, plus Up and Down in a 3-D one.
enum class Side : uint8_t { N, E, S, W, U, D };
inline constexpr int kSides = 6;
char side_letter(Side side);
Side opposite(Side side);

// Rows x columns (x layers for 3-D): device ids are row-major, layer by layer.
struct Dims {
  int rows = 1, cols = 1, layers = 1;
  int size() const { return rows * cols * layers; }
  bool operator==(const Dims&) const = default;
};

struct Coord {
  int row = 0, col = 0, layer = 0;
  bool operator==(const Coord&) const = default;
};

struct ChipSpec {
  std::string name;
  std::string arch;
  // Port numbers on each side, in the order their links are made (the k-th belongs to
  // routing plane k on uniform boards).
  std::array<std::vector<uint8_t>, kSides> ports;
  std::optional<Side> side_of(uint8_t port) const;
};

struct Board {
  std::string name;
  int chip_spec = 0;  // index into System::chip_specs
  Dims topology;
};

struct Mesh {
  uint16_t id = 0;
  int board = 0;      // index into System::boards
  Dims boards;        // the mesh's grid of boards
  Dims chips;         // the resulting grid of chips
  int first_node = 0; // node index of device 0; the mesh's nodes are contiguous
  std::vector<std::string> host_of_board;  // row-major; empty string: no host (7.2 Galaxy)
  int line = 0;       // where the specification declares it
};

struct Chip {
  ChipId id;
  Coord coord;
  int chip_spec = 0;
  std::string host;
  std::array<int, routing::kMaxPorts> link_of_port;  // index into System::links, or -1
};

struct Link {
  PortId a, b;       // both directions: a->b and b->a
  int plane = 0;     // 2.2.4
  bool inter_mesh() const { return a.chip.mesh != b.chip.mesh; }
};

class System {
 public:
  std::string source;  // file name, for messages
  std::vector<ChipSpec> chip_specs;
  std::vector<Board> boards;
  std::vector<std::string> hosts;
  std::vector<Mesh> meshes;  // sorted by id
  std::vector<Chip> chips;   // indexed by node
  std::vector<Link> links;
  int planes = 1;

  int node_count() const { return static_cast<int>(chips.size()); }
  const Mesh* mesh(uint16_t id) const;
  const Mesh& mesh_of(int node) const { return *mesh(chips.at(static_cast<size_t>(node)).id.mesh); }
  std::optional<int> node(ChipId chip) const;
  int node_at(const Mesh& mesh, Coord c) const;
  const ChipSpec& spec_of(int node) const;
  // The link on a port, or -1 when the port is not wired.
  int link_at(int node, uint8_t port) const;
  // The node's ports that have a link, ascending.
  std::vector<uint8_t> wired_ports(int node) const;
  // The far end of a port's link, or nullopt.
  std::optional<PortId> peer(PortId port) const;
  // Both ends of each named port's link, each end once, in the order named; every link's ends
  // (a, then b, in link order) when none is named (captures: ttemu capture, ttemu sim
  // --capture-link). Throws Error "'NAME' is not a wired port of SOURCE".
  std::vector<PortId> link_ends(const std::vector<std::string>& ports) const;
  // Exit nodes: chips with at least one inter-mesh link.
  bool is_exit_node(int node) const;
  // Which port is linked to which, for link-level consumers (fault plans).
  routing::Wiring wiring() const;

  // Called once by the loader after chips and links are in place.
  void index();

 private:
  std::vector<int> mesh_index_;  // mesh id -> index into meshes, or -1
};

}  // namespace ttemu::control
