#include "emulator/control/mesh_graph_import.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::control::mgd {

namespace {

// Names come from the descriptor: always quoted, so no name can break the YAML.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string dims(const Dims& d) {
  return d.layers > 1 ? fmt::format("{}x{}x{}", d.rows, d.cols, d.layers) : fmt::format("{}x{}", d.rows, d.cols);
}

std::string endpoint(const EdgeOut& e) { return fmt::format("{{{}, {}{}}}", e.mesh, side_letter(e.side), e.index); }

}  // namespace

std::vector<Coord> edge_chips(const Dims& c, Side side) {
  std::vector<Coord> edge;
  for (int l = 0; l < c.layers; ++l) {
    for (int r = 0; r < c.rows; ++r) {
      for (int col = 0; col < c.cols; ++col) {
        bool on = (side == Side::N && r == 0) || (side == Side::S && r == c.rows - 1) ||
                  (side == Side::W && col == 0) || (side == Side::E && col == c.cols - 1) ||
                  (side == Side::D && l == 0) || (side == Side::U && l == c.layers - 1);
        if (on) edge.push_back(Coord{r, col, l});
      }
    }
  }
  if (side == Side::W || side == Side::E) {
    std::stable_sort(edge.begin(), edge.end(), [](const Coord& a, const Coord& b) {
      return std::tie(a.layer, a.row) < std::tie(b.layer, b.row);
    });
  }
  return edge;
}

std::optional<EdgeOut> EdgePorts::take(int mesh, const std::vector<Side>& order, std::optional<int> device) {
  used_.resize(meshes_.size());
  const MeshOut& m = meshes_.at(static_cast<size_t>(mesh));
  const int per_side = m.ports_per_side;
  for (Side side : order) {
    std::vector<Coord> edge = edge_chips(m.chips, side);
    auto& used = used_[static_cast<size_t>(mesh)][static_cast<size_t>(side)];
    used.resize(edge.size() * static_cast<size_t>(per_side));
    for (size_t i = 0; i < used.size(); ++i) {
      const Coord& c = edge[i / static_cast<size_t>(per_side)];
      int id = (c.layer * m.chips.rows + c.row) * m.chips.cols + c.col;
      if (used[i] || (device && *device != id)) continue;
      used[i] = true;
      return EdgeOut{m.id, side, static_cast<int>(i)};
    }
  }
  return std::nullopt;
}

std::string to_yaml(const SystemOut& sys) {
  std::string y = fmt::format("# Imported from {} ({}) by ttemu topo import.\n", Error::one_line(sys.source), sys.format);
  y += "ChipSpec:\n";
  for (const auto& c : sys.chips) {
    std::string ports;
    for (int s = 0; s < kSides; ++s) {
      if (c.ports[static_cast<size_t>(s)] == 0) continue;
      ports += fmt::format("{}{}: {}", ports.empty() ? "" : ", ", side_letter(static_cast<Side>(s)),
                           c.ports[static_cast<size_t>(s)]);
    }
    y += fmt::format("  {}:\n    arch: {}\n    ethernet_ports: {{{}}}\n", quoted(c.name), quoted(c.arch), ports);
  }
  y += "Board:\n";
  for (const auto& b : sys.boards) {
    y += fmt::format("  {}:\n    submodule: {}\n    topology: {}\n", quoted(b.name), quoted(b.chip), dims(b.topology));
  }
  if (!sys.hosts.empty()) {
    std::string hosts;
    for (const auto& h : sys.hosts) hosts += (hosts.empty() ? "" : ", ") + quoted(h);
    y += fmt::format("Host: [{}]\n", hosts);
  }
  y += "Mesh:\n";
  for (const auto& m : sys.meshes) {
    y += fmt::format("  {}:\n    submodule: {}\n    topology: {}\n", m.id, quoted(m.board), dims(m.boards));
    std::string rows;
    for (int r = 0; r < m.boards.rows * m.boards.layers; ++r) {
      std::string row;
      for (int c = 0; c < m.boards.cols; ++c) {
        row += (c ? ", " : "") + quoted(m.hosts.at(static_cast<size_t>(r * m.boards.cols + c)));
      }
      rows += fmt::format("{}[{}]", r ? ", " : "", row);
    }
    if (!m.hosts.empty()) y += fmt::format("    host_mapping: [{}]\n", rows);
  }
  if (!sys.graph.empty()) {
    y += "Graph:\n";
    for (const auto& [a, b] : sys.graph) y += fmt::format("  - \"{} <-> {}\"\n", endpoint(a), endpoint(b));
  }
  return y;
}

}  // namespace ttemu::control::mgd
