#include "emulator/control/system_yaml.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"
#include "emulator/common/yaml_input.hpp"
#include "emulator/control/mesh_graph_descriptor.hpp"

namespace ttemu::control {

namespace {

// A Graph endpoint as the spec writes it: {mesh, S0} is port 0 of the mesh's south edge.
struct EdgePort {
  uint16_t mesh = 0;
  Side side = Side::N;
  int index = 0;
};

std::string describe(const EdgePort& e) {
  return fmt::format("{{{}, {}{}}}", e.mesh, side_letter(e.side), e.index);
}

// The end of "X must be ...": what was there instead.
std::string found(const YAML::Node& n) {
  return ", not " + (n.IsMap() && n.size() == 0 ? std::string("an empty mapping") : yaml_kind(n));
}

// "Host Mapping", "host_mapping" and "hostMapping" name the same key.
std::string normalise_key(std::string key) {
  std::string out;
  for (char c : key) {
    if (c == ' ' || c == '-' || c == '_') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  System read(const YAML::Node& root);

 private:
  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1 : last_line_;
    throw Error(fmt::format("{}:{}: {}", source_, line, what));
  }
  [[noreturn]] void fail_line(int line, const std::string& what) const {
    throw Error(fmt::format("{}:{}: {}", source_, line, what));
  }
  int line_of(const YAML::Node& n) {
    if (n.IsDefined() && n.Mark().line >= 0) last_line_ = n.Mark().line + 1;
    return last_line_;
  }

  // Looks up the fields of a mapping, rejecting keys it does not know (typos).
  std::map<std::string, YAML::Node> fields(const YAML::Node& map, const std::string& what,
                                           std::initializer_list<const char*> known);
  std::string scalar(const YAML::Node& n, const std::string& what);
  int integer(const YAML::Node& n, const std::string& what, int lo, int hi);
  Dims dims(const YAML::Node& n, const std::string& what);

  void read_chip_specs(const YAML::Node& section, System& sys);
  void read_boards(const YAML::Node& section, System& sys);
  void read_hosts(const YAML::Node& section, System& sys);
  void read_meshes(const YAML::Node& section, System& sys);
  void build_intra_mesh_links(System& sys);
  void read_graph(const YAML::Node& section, System& sys);
  EdgePort edge_port(const YAML::Node& mesh, const YAML::Node& port);
  EdgePort edge_port(const YAML::Node& at, const std::string& text);
  PortId resolve(const System& sys, const EdgePort& e, const YAML::Node& at);
  void assign_planes(System& sys);
  void check_connected(const System& sys);

  std::string source_;
  int last_line_ = 1;
  bool hosts_declared_ = false;
};

std::map<std::string, YAML::Node> Reader::fields(const YAML::Node& map, const std::string& what,
                                                 std::initializer_list<const char*> known) {
  line_of(map);
  if (!map.IsMap()) fail(map, fmt::format("{} must be a mapping of keys to values{}", what, found(map)));
  std::map<std::string, YAML::Node> out;
  for (const auto& kv : map) {
    std::string key = normalise_key(scalar(kv.first, what + " key"));
    bool ok = std::any_of(known.begin(), known.end(),
                          [&](const char* k) { return normalise_key(k) == key; });
    if (!ok) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(kv.first, fmt::format("{}: unknown key '{}' (expected {})", what,
                                 kv.first.Scalar(), list));
    }
    if (out.count(key)) fail(kv.first, fmt::format("{}: key '{}' given twice", what, key));
    out[key] = kv.second;
  }
  return out;
}

std::string Reader::scalar(const YAML::Node& n, const std::string& what) {
  line_of(n);
  if (!n.IsDefined() || n.IsNull()) fail(n, fmt::format("{} is missing", what));
  if (!n.IsScalar()) fail(n, fmt::format("{} must be a single value{}", what, found(n)));
  return n.Scalar();
}

int Reader::integer(const YAML::Node& n, const std::string& what, int lo, int hi) {
  std::string text = scalar(n, what);
  const std::optional<long> number = whole_number(text);
  if (!number) fail(n, fmt::format("{} must be a whole number, not '{}'", what, text));
  const long value = *number;
  if (value < lo || value > hi) {
    fail(n, fmt::format("{} {} is out of range ({}-{})", what, value, lo, hi));
  }
  return static_cast<int>(value);
}

Dims Reader::dims(const YAML::Node& n, const std::string& what) {
  line_of(n);
  std::vector<int> parts;
  if (n.IsSequence()) {
    for (const auto& p : n) parts.push_back(integer(p, what, 1, routing::kMaxDevicesPerMesh));
  } else {
    std::string text = scalar(n, what);
    static const std::regex re(R"(\s*(\d+)\s*[xX]\s*(\d+)\s*(?:[xX]\s*(\d+)\s*)?)");
    std::smatch m;
    if (!std::regex_match(text, m, re)) {
      fail(n, fmt::format("{} '{}' is not of the form RxC or RxCxL (rows x columns x layers)",
                          what, text));
    }
    for (size_t i = 1; i < m.size(); ++i) {
      if (!m[i].matched) continue;
      long v = std::stol(m[i].str().substr(0, 6));
      if (v < 1 || v > routing::kMaxDevicesPerMesh) {
        fail(n, fmt::format("{} '{}': each dimension must be 1-{}", what, text,
                            routing::kMaxDevicesPerMesh));
      }
      parts.push_back(static_cast<int>(v));
    }
  }
  if (parts.size() < 2 || parts.size() > 3) {
    fail(n, fmt::format("{} needs two or three dimensions (rows, columns[, layers])", what));
  }
  return Dims{parts[0], parts[1], parts.size() == 3 ? parts[2] : 1};
}

void Reader::read_chip_specs(const YAML::Node& section, System& sys) {
  line_of(section);
  if (!section.IsMap() || section.size() == 0) {
    fail(section, "ChipSpec must map chip names to their specs" + found(section));
  }
  for (const auto& kv : section) {
    ChipSpec spec;
    spec.name = scalar(kv.first, "ChipSpec name");
    std::string what = "ChipSpec " + spec.name;
    auto f = fields(kv.second, what, {"arch", "ethernet_ports"});
    spec.arch = f.count("arch") ? scalar(f["arch"], what + " arch") : "wormhole_b0";
    if (!f.count("ethernetports")) fail(kv.second, what + ": ethernet_ports is missing");
    const YAML::Node ports = f["ethernetports"];
    auto side_fields = fields(ports, what + " ethernet_ports", {"N", "E", "S", "W", "U", "D"});
    // Counts are numbered side by side in N, E, S, W, U, D order; lists name the ports.
    int next = 0;
    std::set<int> used, explicit_ports;
    for (const auto& [key, v] : side_fields) {
      if (!v.IsSequence()) continue;
      for (const auto& p : v) {
        if (p.IsScalar()) explicit_ports.insert(std::atoi(p.Scalar().c_str()));
      }
    }
    for (int s = 0; s < kSides; ++s) {
      std::string key(1, static_cast<char>(std::tolower(side_letter(static_cast<Side>(s)))));
      if (!side_fields.count(key)) continue;
      const YAML::Node& v = side_fields[key];
      std::string side_what = fmt::format("{} side {}", what, side_letter(static_cast<Side>(s)));
      std::vector<int> numbers;
      if (v.IsSequence()) {
        for (const auto& p : v) {
          numbers.push_back(integer(p, side_what + " port", 0, routing::kMaxPorts - 1));
        }
      } else {
        // Counts take the lowest numbers not yet taken, side by side.
        int count = integer(v, side_what + " port count", 0, routing::kMaxPorts);
        for (int i = 0; i < count; ++i) {
          while (explicit_ports.count(next)) ++next;
          numbers.push_back(next++);
        }
      }
      for (int p : numbers) {
        if (p >= routing::kMaxPorts) {
          fail(v, fmt::format("{} has more than {} ethernet ports; routing table entries are 4 bits",
                              what, routing::kMaxPorts));
        }
        if (!used.insert(p).second) fail(v, fmt::format("{}: port {} is listed twice", what, p));
        spec.ports[static_cast<size_t>(s)].push_back(static_cast<uint8_t>(p));
      }
    }
    sys.chip_specs.push_back(std::move(spec));
  }
}

void Reader::read_boards(const YAML::Node& section, System& sys) {
  line_of(section);
  if (!section.IsMap() || section.size() == 0) fail(section, "Board must map board names to boards" + found(section));
  for (const auto& kv : section) {
    Board board;
    board.name = scalar(kv.first, "Board name");
    std::string what = "Board " + board.name;
    auto f = fields(kv.second, what, {"submodule", "topology"});
    std::string chip = scalar(f["submodule"], what + " submodule");
    auto it = std::find_if(sys.chip_specs.begin(), sys.chip_specs.end(),
                           [&](const ChipSpec& c) { return c.name == chip; });
    if (it == sys.chip_specs.end()) {
      fail(f["submodule"], fmt::format("{}: unknown submodule '{}' (no such ChipSpec)", what, chip));
    }
    board.chip_spec = static_cast<int>(it - sys.chip_specs.begin());
    board.topology = dims(f["topology"], what + " topology");
    sys.boards.push_back(std::move(board));
  }
}

void Reader::read_hosts(const YAML::Node& section, System& sys) {
  line_of(section);
  hosts_declared_ = section.size() > 0;  // "Host: []" declares nothing: mappings name hosts
  auto add = [&](const YAML::Node& n) {
    std::string name = scalar(n, "Host name");
    if (std::count(sys.hosts.begin(), sys.hosts.end(), name)) {
      fail(n, fmt::format("Host '{}' is declared twice", name));
    }
    sys.hosts.push_back(name);
  };
  if (section.IsSequence()) {
    for (const auto& n : section) add(n);
  } else if (section.IsMap()) {
    for (const auto& kv : section) add(kv.first);
  } else {
    fail(section, "Host must be a list of host names" + found(section));
  }
}

void Reader::read_meshes(const YAML::Node& section, System& sys) {
  line_of(section);
  if (!section.IsMap() || section.size() == 0) fail(section, "Mesh must map mesh ids to meshes" + found(section));
  for (const auto& kv : section) {
    Mesh mesh;
    mesh.id = static_cast<uint16_t>(integer(kv.first, "Mesh id", 0, routing::kMaxMeshes - 1));
    mesh.line = line_of(kv.first);
    std::string what = fmt::format("Mesh {}", mesh.id);
    if (std::any_of(sys.meshes.begin(), sys.meshes.end(),
                    [&](const Mesh& m) { return m.id == mesh.id; })) {
      fail(kv.first, fmt::format("{} is declared twice", what));
    }
    auto f = fields(kv.second, what, {"submodule", "topology", "host_mapping"});
    std::string board = scalar(f["submodule"], what + " submodule");
    auto it = std::find_if(sys.boards.begin(), sys.boards.end(),
                           [&](const Board& b) { return b.name == board; });
    if (it == sys.boards.end()) {
      fail(f["submodule"], fmt::format("{}: unknown submodule '{}' (no such Board)", what, board));
    }
    mesh.board = static_cast<int>(it - sys.boards.begin());
    mesh.boards = f.count("topology") ? dims(f["topology"], what + " topology") : Dims{};
    const Dims& b = it->topology;
    mesh.chips = Dims{mesh.boards.rows * b.rows, mesh.boards.cols * b.cols,
                      mesh.boards.layers * b.layers};
    if (static_cast<long>(mesh.boards.size()) * b.size() > routing::kMaxDevicesPerMesh) {
      fail(kv.second, fmt::format("{} has {} devices; a mesh holds at most {}", what,
                                  static_cast<long>(mesh.boards.size()) * b.size(),
                                  routing::kMaxDevicesPerMesh));
    }
    mesh.host_of_board.assign(static_cast<size_t>(mesh.boards.size()), "");
    if (f.count("hostmapping") && !f["hostmapping"].IsNull()) {
      const YAML::Node hm = f["hostmapping"];
      line_of(hm);
      std::vector<std::string> flat;
      bool any = false;
      if (!hm.IsSequence()) fail(hm, what + ": host_mapping must be a list of rows" + found(hm));
      for (const auto& row : hm) {
        if (!row.IsSequence()) fail(row, what + ": each host_mapping row must be a list" + found(row));
        for (const auto& h : row) {
          std::string name = h.IsNull() ? "" : scalar(h, what + " host");
          if (!name.empty() && name.front() == '<' && name.back() == '>') {
            name = name.substr(1, name.size() - 2);  // the spec writes [[<host0>]]
          }
          any = any || !name.empty();
          flat.push_back(name);
        }
      }
      if (any) {
        if (static_cast<int>(hm.size()) != mesh.boards.rows * mesh.boards.layers ||
            static_cast<int>(flat.size()) != mesh.boards.size()) {
          fail(hm, fmt::format("{}: host_mapping must have {} row(s) of {} host(s), one per board",
                               what, mesh.boards.rows * mesh.boards.layers, mesh.boards.cols));
        }
        for (const auto& name : flat) {
          if (name.empty()) continue;
          if (!std::count(sys.hosts.begin(), sys.hosts.end(), name)) {
            if (hosts_declared_) fail(hm, fmt::format("{}: unknown host '{}'", what, name));
            sys.hosts.push_back(name);
          }
        }
        mesh.host_of_board = flat;
      }
    }
    sys.meshes.push_back(std::move(mesh));
  }
  std::sort(sys.meshes.begin(), sys.meshes.end(),
            [](const Mesh& a, const Mesh& b) { return a.id < b.id; });
  int node = 0;
  for (auto& mesh : sys.meshes) {
    mesh.first_node = node;
    const Dims& b = sys.boards[static_cast<size_t>(mesh.board)].topology;
    for (int d = 0; d < mesh.chips.size(); ++d) {
      Chip chip;
      chip.id = ChipId{mesh.id, static_cast<uint16_t>(d)};
      chip.coord = Coord{(d / mesh.chips.cols) % mesh.chips.rows, d % mesh.chips.cols,
                         d / (mesh.chips.cols * mesh.chips.rows)};
      chip.chip_spec = sys.boards[static_cast<size_t>(mesh.board)].chip_spec;
      int board_index = ((chip.coord.layer / b.layers) * mesh.boards.rows + chip.coord.row / b.rows) *
                            mesh.boards.cols + chip.coord.col / b.cols;
      chip.host = mesh.host_of_board[static_cast<size_t>(board_index)];
      sys.chips.push_back(std::move(chip));
    }
    node += mesh.chips.size();
  }
}

void Reader::build_intra_mesh_links(System& sys) {
  // Uniform links between neighbours (7.1): the k-th port of a side meets the k-th port of the
  // facing side, and belongs to routing plane k (2.2.4).
  struct Step {
    Side side;
    Coord delta;
  };
  const Step steps[] = {{Side::E, {0, 1, 0}}, {Side::S, {1, 0, 0}}, {Side::U, {0, 0, 1}}};
  for (const auto& mesh : sys.meshes) {
    const ChipSpec& spec = sys.chip_specs[static_cast<size_t>(
        sys.boards[static_cast<size_t>(mesh.board)].chip_spec)];
    for (int d = 0; d < mesh.chips.size(); ++d) {
      const Chip& chip = sys.chips[static_cast<size_t>(mesh.first_node + d)];
      for (const Step& step : steps) {
        Coord to{chip.coord.row + step.delta.row, chip.coord.col + step.delta.col,
                 chip.coord.layer + step.delta.layer};
        if (to.row >= mesh.chips.rows || to.col >= mesh.chips.cols ||
            to.layer >= mesh.chips.layers) {
          continue;
        }
        const auto& out = spec.ports[static_cast<size_t>(step.side)];
        const auto& in = spec.ports[static_cast<size_t>(opposite(step.side))];
        int peer = sys.node_at(mesh, to);
        for (size_t k = 0; k < std::min(out.size(), in.size()); ++k) {
          sys.links.push_back(Link{PortId{chip.id, out[k]},
                                   PortId{sys.chips[static_cast<size_t>(peer)].id, in[k]},
                                   static_cast<int>(k)});
        }
      }
    }
  }
}

EdgePort Reader::edge_port(const YAML::Node& at, const std::string& text) {
  static const std::regex re(R"(\s*\{?\s*(\d+)\s*,\s*([NESWUDneswud])\s*(\d+)\s*\}?\s*)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) {
    fail(at, fmt::format("Graph: '{}' is not an endpoint like {{4, N0}}", text));
  }
  EdgePort e;
  long mesh = std::stol(m[1].str().substr(0, 6));
  if (mesh >= routing::kMaxMeshes) fail(at, fmt::format("Graph: mesh id {} is out of range", mesh));
  e.mesh = static_cast<uint16_t>(mesh);
  e.side = static_cast<Side>(std::string("NESWUD").find(
      static_cast<char>(std::toupper(static_cast<unsigned char>(m[2].str()[0])))));
  e.index = static_cast<int>(std::min(std::stol(m[3].str().substr(0, 6)), 99999L));
  return e;
}

EdgePort Reader::edge_port(const YAML::Node& mesh, const YAML::Node& port) {
  return edge_port(mesh, scalar(mesh, "Graph mesh") + ", " + scalar(port, "Graph port"));
}

PortId Reader::resolve(const System& sys, const EdgePort& e, const YAML::Node& at) {
  const Mesh* mesh = sys.mesh(e.mesh);
  if (!mesh) fail(at, fmt::format("Graph: {} names mesh {}, which is not declared", describe(e), e.mesh));
  const ChipSpec& spec = sys.chip_specs[static_cast<size_t>(
      sys.boards[static_cast<size_t>(mesh->board)].chip_spec)];
  // The chips along an edge, in order; the edge's ports count along them, each chip's ports
  // of that side in turn ({4, N4} on a Galaxy: port 0 of the second chip of the north edge).
  const Dims& c = mesh->chips;
  std::vector<Coord> edge;
  for (int l = 0; l < c.layers; ++l) {
    for (int r = 0; r < c.rows; ++r) {
      for (int col = 0; col < c.cols; ++col) {
        bool on = false;
        switch (e.side) {
          case Side::N: on = r == 0; break;
          case Side::S: on = r == c.rows - 1; break;
          case Side::W: on = col == 0; break;
          case Side::E: on = col == c.cols - 1; break;
          case Side::D: on = l == 0; break;
          case Side::U: on = l == c.layers - 1; break;
        }
        if (on) edge.push_back(Coord{r, col, l});
      }
    }
  }
  // N/S edges count along columns, E/W edges along rows (layer by layer).
  if (e.side == Side::W || e.side == Side::E) {
    std::stable_sort(edge.begin(), edge.end(), [](const Coord& a, const Coord& b) {
      return std::tie(a.layer, a.row) < std::tie(b.layer, b.row);
    });
  }
  const auto& ports = spec.ports[static_cast<size_t>(e.side)];
  int total = static_cast<int>(edge.size() * ports.size());
  if (e.index >= total) {
    fail(at, fmt::format("Graph: port {} is out of range: mesh {}'s {} edge has {} port(s) "
                         "({} chip(s) x {} {} port(s) of {})",
                         describe(e), e.mesh, side_letter(e.side), total, edge.size(),
                         ports.size(), side_letter(e.side), spec.name));
  }
  const Coord& pos = edge[static_cast<size_t>(e.index) / ports.size()];
  int node = sys.node_at(*mesh, pos);
  return PortId{sys.chips[static_cast<size_t>(node)].id,
                ports[static_cast<size_t>(e.index) % ports.size()]};
}

void Reader::read_graph(const YAML::Node& section, System& sys) {
  if (!section.IsDefined() || section.IsNull()) return;
  line_of(section);
  if (!section.IsSequence()) fail(section, "Graph must be a list of connections" + found(section));
  struct Seen {
    PortId partner;
    int line;
  };
  std::map<PortId, Seen> partner;
  struct Listed {
    int line;
    EdgePort a, b;
  };
  std::map<std::pair<PortId, PortId>, Listed> directed;
  for (const auto& entry : section) {
    int line = line_of(entry);
    EdgePort ea, eb;
    if (entry.IsScalar()) {
      // The spec's own notation: "{0, S0} <---> {4, N0}".
      static const std::regex arrow(R"(^(.*?)<-+>(.*)$)");
      std::smatch m;
      std::string text = entry.Scalar();
      if (!std::regex_match(text, m, arrow)) {
        fail(entry, fmt::format("Graph: '{}' is not a connection like \"{{0, S0}} <-> {{4, N0}}\"", text));
      }
      ea = edge_port(entry, m[1].str());
      eb = edge_port(entry, m[2].str());
    } else if (entry.IsSequence() && entry.size() == 2 && entry[0].IsSequence() &&
               entry[0].size() == 2 && entry[1].IsSequence() && entry[1].size() == 2) {
      ea = edge_port(entry[0][0], entry[0][1]);
      eb = edge_port(entry[1][0], entry[1][1]);
    } else {
      fail(entry, "Graph: a connection is [[mesh, port], [mesh, port]] or \"{mesh, port} <-> {mesh, port}\"");
    }
    PortId a = resolve(sys, ea, entry), b = resolve(sys, eb, entry);
    std::string text = fmt::format("{} <-> {}", describe(ea), describe(eb));
    if (a.chip == b.chip) fail(entry, fmt::format("Graph: connection {} joins a chip to itself", text));
    if (ea.mesh == eb.mesh) {
      fail(entry, fmt::format("Graph: connection {} joins mesh {} to itself; links inside a mesh come from its boards", text, ea.mesh));
    }
    if (auto it = directed.find({a, b}); it != directed.end()) {
      fail(entry, fmt::format("Graph: duplicate connection {} (first listed at line {})", text,
                              it->second.line));
    }
    for (auto [end, other, e] : {std::tuple{a, b, ea}, std::tuple{b, a, eb}}) {
      auto it = partner.find(end);
      if (it != partner.end() && it->second.partner != other) {
        fail(entry, fmt::format("Graph: port {} ({}) is used twice: here and at line {}",
                                describe(e), routing::to_string(end), it->second.line));
      }
      partner[end] = Seen{other, line};
    }
    directed[{a, b}] = Listed{line, ea, eb};
    if (!directed.count({b, a})) {
      sys.links.push_back(Link{a, b, 0});
    }
  }
  // Each link is written from both of its ends, as the spec's TG table does; report the
  // first one-sided entry in file order.
  const Listed* lonely = nullptr;
  for (const auto& [ab, listed] : directed) {
    if (!directed.count({ab.second, ab.first}) && (!lonely || listed.line < lonely->line)) {
      lonely = &listed;
    }
  }
  if (lonely) {
    fail_line(lonely->line, fmt::format("Graph: connection {} <-> {} is one-sided: add {} <-> {}",
                                        describe(lonely->a), describe(lonely->b),
                                        describe(lonely->b), describe(lonely->a)));
  }
}

void Reader::assign_planes(System& sys) {
  // A link's plane is its rank among the parallel links joining the same two chips, ordered
  // by the lower chip's port position on its side: on uniform boards the k-th port of every
  // side is plane k (2.2.4), and an inter-mesh link never joins two planes.
  std::map<std::pair<ChipId, ChipId>, std::vector<size_t>> groups;
  for (size_t i = 0; i < sys.links.size(); ++i) {
    Link& l = sys.links[i];
    if (l.b.chip < l.a.chip) std::swap(l.a, l.b);
    groups[{l.a.chip, l.b.chip}].push_back(i);
  }
  auto position = [&](const PortId& p) {
    const auto& spec = sys.spec_of(*sys.node(p.chip));
    auto side = spec.side_of(p.port);
    const auto& list = spec.ports[static_cast<size_t>(*side)];
    return std::find(list.begin(), list.end(), p.port) - list.begin();
  };
  sys.planes = 1;
  for (auto& [pair, members] : groups) {
    std::sort(members.begin(), members.end(), [&](size_t x, size_t y) {
      return position(sys.links[x].a) < position(sys.links[y].a);
    });
    for (size_t k = 0; k < members.size(); ++k) sys.links[members[k]].plane = static_cast<int>(k);
    sys.planes = std::max(sys.planes, static_cast<int>(members.size()));
  }
}

void Reader::check_connected(const System& sys) {
  std::vector<int> comp(sys.meshes.size());
  std::iota(comp.begin(), comp.end(), 0);
  std::function<int(int)> find = [&](int x) {
    return comp[static_cast<size_t>(x)] == x ? x : comp[static_cast<size_t>(x)] = find(comp[static_cast<size_t>(x)]);
  };
  auto index_of = [&](uint16_t id) {
    return static_cast<int>(sys.mesh(id) - sys.meshes.data());
  };
  for (const auto& l : sys.links) {
    if (l.inter_mesh()) comp[static_cast<size_t>(find(index_of(l.a.chip.mesh)))] = find(index_of(l.b.chip.mesh));
  }
  for (size_t i = 1; i < sys.meshes.size(); ++i) {
    if (find(static_cast<int>(i)) != find(0)) {
      fail_line(sys.meshes[i].line,
                fmt::format("meshes {} and {} cannot reach each other: no chain of Graph "
                            "connections joins them", sys.meshes[0].id, sys.meshes[i].id));
    }
  }
}

System Reader::read(const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) {
    throw Error(fmt::format("{}:1: the file is empty; a system needs ChipSpec, Board and Mesh", source_));
  }
  System sys;
  sys.source = source_;
  auto top = fields(root, "system specification", {"ChipSpec", "Board", "Host", "Mesh", "Graph"});
  for (const char* required : {"chipspec", "board", "mesh"}) {
    if (!top.count(required)) {
      fail(root, fmt::format("the system specification has no {} section",
                             std::string(required) == "chipspec" ? "ChipSpec"
                             : std::string(required) == "board" ? "Board" : "Mesh"));
    }
  }
  read_chip_specs(top["chipspec"], sys);
  read_boards(top["board"], sys);
  if (top.count("host") && !top["host"].IsNull()) read_hosts(top["host"], sys);
  read_meshes(top["mesh"], sys);
  sys.index();  // mesh lookup for the Graph
  build_intra_mesh_links(sys);
  read_graph(top.count("graph") ? top["graph"] : YAML::Node(), sys);
  assign_planes(sys);
  sys.index();
  check_connected(sys);
  return sys;
}

}  // namespace

System parse_system(std::string_view yaml_text, const std::string& source_name) {
  YAML::Node root = load_yaml(yaml_text, source_name);
  try {
    return Reader(source_name).read(root);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: {}", source_name, std::max(e.mark.line, 0) + 1, e.msg));
  }
}

System load_system(const std::string& path) {
  std::string text = read_text_file(path);
  DescriptorFormat format = descriptor_format(path, text);
  if (format == DescriptorFormat::None) return parse_system(text, path);
  // A tt-metal descriptor: read as the YAML `ttemu topo import` prints, whose line numbers a
  // message about the imported system then names.
  System sys = parse_system(import_mesh_graph_descriptor(text, path, format), path + " (as imported)");
  sys.source = path;
  return sys;
}

}  // namespace ttemu::control
