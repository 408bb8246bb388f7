#include "emulator/control/system.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::control {

char side_letter(Side side) { return "NESWUD"[static_cast<int>(side)]; }

Side opposite(Side side) {
  switch (side) {
    case Side::N: return Side::S;
    case Side::S: return Side::N;
    case Side::E: return Side::W;
    case Side::W: return Side::E;
    case Side::U: return Side::D;
    case Side::D: return Side::U;
  }
  return side;
}

std::optional<Side> ChipSpec::side_of(uint8_t port) const {
  for (int s = 0; s < kSides; ++s) {
    const auto& list = ports[static_cast<size_t>(s)];
    if (std::find(list.begin(), list.end(), port) != list.end()) return static_cast<Side>(s);
  }
  return std::nullopt;
}

void System::index() {
  mesh_index_.assign(routing::kMaxMeshes, -1);
  for (size_t i = 0; i < meshes.size(); ++i) mesh_index_[meshes[i].id] = static_cast<int>(i);
  for (auto& chip : chips) chip.link_of_port.fill(-1);
  for (size_t i = 0; i < links.size(); ++i) {
    for (const PortId& end : {links[i].a, links[i].b}) {
      chips[static_cast<size_t>(*node(end.chip))].link_of_port[end.port] = static_cast<int>(i);
    }
  }
}

const Mesh* System::mesh(uint16_t id) const {
  if (id >= mesh_index_.size() || mesh_index_[id] < 0) return nullptr;
  return &meshes[static_cast<size_t>(mesh_index_[id])];
}

std::optional<int> System::node(ChipId chip) const {
  const Mesh* m = mesh(chip.mesh);
  if (!m || chip.device >= m->chips.size()) return std::nullopt;
  return m->first_node + chip.device;
}

int System::node_at(const Mesh& m, Coord c) const {
  return m.first_node + (c.layer * m.chips.rows + c.row) * m.chips.cols + c.col;
}

const ChipSpec& System::spec_of(int node) const {
  return chip_specs.at(static_cast<size_t>(chips.at(static_cast<size_t>(node)).chip_spec));
}

int System::link_at(int node, uint8_t port) const {
  if (port >= routing::kMaxPorts) return -1;
  return chips.at(static_cast<size_t>(node)).link_of_port[port];
}

std::vector<uint8_t> System::wired_ports(int node) const {
  std::vector<uint8_t> ports;
  for (int p = 0; p < routing::kMaxPorts; ++p) {
    if (link_at(node, static_cast<uint8_t>(p)) >= 0) ports.push_back(static_cast<uint8_t>(p));
  }
  return ports;
}

std::optional<PortId> System::peer(PortId port) const {
  auto n = node(port.chip);
  if (!n) return std::nullopt;
  int l = link_at(*n, port.port);
  if (l < 0) return std::nullopt;
  const Link& link = links[static_cast<size_t>(l)];
  return link.a == port ? link.b : link.a;
}

std::vector<PortId> System::link_ends(const std::vector<std::string>& ports) const {
  std::vector<PortId> ends;
  if (ports.empty()) {
    for (const auto& l : links) ends.push_back(l.a), ends.push_back(l.b);
  }
  for (const auto& name : ports) {
    const auto p = routing::parse_port(name);
    if (!p || !node(p->chip) || !peer(*p)) throw Error(fmt::format("'{}' is not a wired port of {}", name, source));
    for (const auto& end : {*p, *peer(*p)}) {
      if (std::find(ends.begin(), ends.end(), end) == ends.end()) ends.push_back(end);
    }
  }
  return ends;
}

bool System::is_exit_node(int node) const {
  for (int l : chips.at(static_cast<size_t>(node)).link_of_port) {
    if (l >= 0 && links[static_cast<size_t>(l)].inter_mesh()) return true;
  }
  return false;
}

routing::Wiring System::wiring() const {
  routing::Wiring w;
  w.name = source;
  for (const auto& l : links) w.links.emplace_back(l.a, l.b);
  return w;
}

}  // namespace ttemu::control
