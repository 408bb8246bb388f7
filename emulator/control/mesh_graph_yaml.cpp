// tt-metal's older YAML mesh graph descriptor: one ChipSpec {arch, ethernet_ports}, a list of
// Boards {name, type: Mesh, topology}, a list of Meshes {id, board, topology | device_topology
// + host_topology, host_ranks} and a Graph of [[mesh, S0], [mesh, N0]] pairs, which is our own
// Graph notation and is passed on as written.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"
#include "emulator/common/yaml_input.hpp"
#include "emulator/control/mesh_graph_descriptor.hpp"
#include "emulator/control/mesh_graph_import.hpp"

namespace ttemu::control::mgd {

namespace {

class YamlReader {
 public:
  explicit YamlReader(const std::string& source) : source_(source) {}

  std::string read(const YAML::Node& root) {
    auto top = fields(root, "the descriptor", {"ChipSpec", "Board", "Mesh", "Graph"});
    for (const char* s : {"ChipSpec", "Board", "Mesh"}) {
      if (!top.count(s)) fail(root, fmt::format("the descriptor has no {} section", s));
    }
    read_chip(top["ChipSpec"]);
    read_boards(top["Board"]);
    read_meshes(top["Mesh"]);
    if (top.count("Graph")) read_graph(top["Graph"]);
    out_.source = source_;
    out_.format = "tt-metal mesh graph descriptor YAML";
    return to_yaml(out_);
  }

 private:
  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) {
    if (at.IsDefined() && at.Mark().line >= 0) line_ = at.Mark().line + 1;
    throw Error(fmt::format("{}:{}: {}", source_, line_, what));
  }

  std::map<std::string, YAML::Node> fields(const YAML::Node& map, const std::string& what,
                                           std::initializer_list<const char*> known) {
    if (!map.IsMap()) fail(map, fmt::format("{} must be a mapping, not {}", what, yaml_kind(map)));
    std::map<std::string, YAML::Node> out;
    for (const auto& kv : map) {
      std::string key = scalar(kv.first, what + " key");
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(kv.first, fmt::format("{}: unknown key '{}' (expected {})", what, key, list));
      }
      if (out.count(key)) fail(kv.first, fmt::format("{}: key '{}' given twice", what, key));
      out[key] = kv.second;
    }
    return out;
  }
  std::string scalar(const YAML::Node& n, const std::string& what) {
    if (!n.IsDefined() || !n.IsScalar()) fail(n, fmt::format("{} must be a single value, not {}", what, yaml_kind(n)));
    if (n.Mark().line >= 0) line_ = n.Mark().line + 1;
    return n.Scalar();
  }
  int integer(const YAML::Node& n, const std::string& what, int lo, int hi) {
    std::string v = scalar(n, what);
    std::optional<long> x = whole_number(v);
    if (!x) fail(n, fmt::format("{} must be a whole number, not '{}'", what, v));
    if (*x < lo || *x > hi) fail(n, fmt::format("{} must be {}-{}, not {}", what, lo, hi, *x));
    return static_cast<int>(*x);
  }
  Dims grid(const YAML::Node& n, const std::string& what) {
    if (!n.IsSequence() || n.size() != 2) fail(n, fmt::format("{} must be a list [rows, columns], not {}", what, yaml_kind(n)));
    return Dims{integer(n[0], what + " rows", 1, 1024), integer(n[1], what + " columns", 1, 1024), 1};
  }

  void read_chip(const YAML::Node& n) {
    auto f = fields(n, "ChipSpec", {"arch", "ethernet_ports"});
    ChipOut chip{"chip", f.count("arch") ? scalar(f["arch"], "ChipSpec arch") : "wormhole_b0", {}};
    if (!f.count("ethernet_ports")) fail(n, "ChipSpec has no ethernet_ports");
    auto ports = fields(f["ethernet_ports"], "ChipSpec ethernet_ports", {"N", "E", "S", "W", "U", "D"});
    for (const auto& [side, count] : ports) {
      size_t s = std::string("NESWUD").find(side);
      chip.ports[s] = integer(count, fmt::format("ethernet_ports {}", side), 0, 16);
    }
    out_.chips.push_back(chip);
  }

  void read_boards(const YAML::Node& n) {
    if (!n.IsSequence()) fail(n, fmt::format("Board must be a list of boards, not {}", yaml_kind(n)));
    for (const auto& b : n) {
      auto f = fields(b, "a Board", {"name", "type", "topology"});
      if (!f.count("name")) fail(b, "a Board has no name");
      std::string name = scalar(f["name"], "Board name");
      if (f.count("type") && scalar(f["type"], "Board type") != "Mesh") {
        fail(f["type"], fmt::format("Board {}: type '{}' is not supported; only Mesh", name, f["type"].Scalar()));
      }
      if (!f.count("topology")) fail(b, fmt::format("Board {} has no topology", name));
      if (board_dims_.count(name)) fail(b, fmt::format("Board {} is defined twice", name));
      board_dims_[name] = grid(f["topology"], fmt::format("Board {} topology", name));
      out_.boards.push_back(BoardOut{name, "chip", board_dims_[name]});
    }
  }

  void read_meshes(const YAML::Node& n) {
    if (!n.IsSequence()) fail(n, fmt::format("Mesh must be a list of meshes, not {}", yaml_kind(n)));
    for (const auto& m : n) {
      auto f = fields(m, "a Mesh", {"id", "board", "topology", "device_topology", "host_topology", "host_ranks"});
      if (!f.count("id") || !f.count("board")) fail(m, "a Mesh needs an id and a board");
      MeshOut mesh;
      mesh.id = integer(f["id"], "Mesh id", 0, 1023);
      if (!ids_.insert(mesh.id).second) fail(f["id"], fmt::format("Mesh {} is defined twice", mesh.id));
      mesh.board = scalar(f["board"], "Mesh board");
      auto board = board_dims_.find(mesh.board);
      if (board == board_dims_.end()) fail(f["board"], fmt::format("Mesh {}: board '{}' is not defined", mesh.id, mesh.board));
      if (f.count("device_topology")) {
        // The older form: the mesh's chip grid, split into blocks of one host each.
        mesh.chips = grid(f["device_topology"], fmt::format("Mesh {} device_topology", mesh.id));
        mesh.boards = f.count("host_topology") ? grid(f["host_topology"], fmt::format("Mesh {} host_topology", mesh.id)) : Dims{};
        if (mesh.chips.rows % mesh.boards.rows || mesh.chips.cols % mesh.boards.cols) {
          fail(m, fmt::format("Mesh {}: host_topology does not divide device_topology into equal blocks", mesh.id));
        }
        Dims block{mesh.chips.rows / mesh.boards.rows, mesh.chips.cols / mesh.boards.cols, 1};
        if (!(block == board->second)) {
          mesh.board = fmt::format("{}_{}x{}", mesh.board, block.rows, block.cols);
          out_.boards.push_back(BoardOut{mesh.board, "chip", block});
        }
      } else {
        mesh.boards = f.count("topology") ? grid(f["topology"], fmt::format("Mesh {} topology", mesh.id)) : Dims{};
        mesh.chips = Dims{mesh.boards.rows * board->second.rows, mesh.boards.cols * board->second.cols, 1};
      }
      read_hosts(f.count("host_ranks") ? f["host_ranks"] : YAML::Node(), mesh);
      mesh.ports_per_side = 0;
      out_.meshes.push_back(mesh);
    }
  }

  // host_ranks are a mesh's own: rank r of a mesh is host (hosts of earlier meshes) + r.
  void read_hosts(const YAML::Node& ranks, MeshOut& mesh) {
    std::vector<int> rank;
    if (!ranks.IsDefined() || ranks.IsNull()) {
      for (int b = 0; b < mesh.boards.size(); ++b) rank.push_back(b);
    } else {
      const std::string what = fmt::format("Mesh {} host_ranks", mesh.id);
      if (!ranks.IsSequence() || static_cast<int>(ranks.size()) != mesh.boards.rows) {
        fail(ranks, fmt::format("{} must be {} row(s) of {} rank(s), one per host block", what, mesh.boards.rows, mesh.boards.cols));
      }
      for (const auto& row : ranks) {
        if (!row.IsSequence() || static_cast<int>(row.size()) != mesh.boards.cols) {
          fail(row, fmt::format("{} must be {} row(s) of {} rank(s), one per host block", what, mesh.boards.rows, mesh.boards.cols));
        }
        for (const auto& r : row) rank.push_back(integer(r, what + " entry", 0, 1023));
      }
    }
    int base = static_cast<int>(out_.hosts.size());
    int top = *std::max_element(rank.begin(), rank.end());
    for (int r = 0; r <= top; ++r) out_.hosts.push_back(fmt::format("host{}", base + r));
    for (int r : rank) mesh.hosts.push_back(fmt::format("host{}", base + r));
  }

  void read_graph(const YAML::Node& n) {
    if (n.IsNull()) return;
    if (!n.IsSequence()) fail(n, fmt::format("Graph must be a list of [[mesh, port], [mesh, port]], not {}", yaml_kind(n)));
    for (const auto& c : n) {
      if (!c.IsSequence() || c.size() != 2) fail(c, fmt::format("a Graph entry must be [[mesh, port], [mesh, port]], not {}", yaml_kind(c)));
      out_.graph.emplace_back(endpoint(c[0]), endpoint(c[1]));
    }
  }
  EdgeOut endpoint(const YAML::Node& e) {
    if (!e.IsSequence() || e.size() != 2) fail(e, fmt::format("a Graph endpoint must be [mesh, port] like [4, N0], not {}", yaml_kind(e)));
    EdgeOut out;
    out.mesh = integer(e[0], "Graph mesh", 0, 1023);
    if (!ids_.count(out.mesh)) fail(e[0], fmt::format("Graph: mesh {} is not defined", out.mesh));
    std::string port = scalar(e[1], "Graph port");
    size_t side = port.empty() ? std::string::npos : std::string("NESWUD").find(port[0]);
    if (side == std::string::npos || port.size() < 2) fail(e[1], fmt::format("Graph: '{}' is not a port like N0", port));
    out.side = static_cast<Side>(side);
    YAML::Node index(port.substr(1));
    out.index = integer(index, "Graph port index", 0, 1 << 20);
    return out;
  }

  const std::string& source_;
  int line_ = 1;
  std::map<std::string, Dims> board_dims_;
  std::set<int> ids_;
  SystemOut out_;
};

}  // namespace

bool looks_like_yaml_descriptor(std::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception&) {
    return false;
  }
  if (!root.IsMap()) return false;
  const YAML::Node& top = root;  // const: looking a key up must not add it
  // A key that is not there gives an invalid node, whose kind cannot be asked (yaml-cpp
  // throws): IsDefined() first.
  const YAML::Node chip = top["ChipSpec"], board = top["Board"], mesh = top["Mesh"];
  return (chip.IsDefined() && chip.IsMap() && chip["ethernet_ports"].IsDefined()) ||
         (board.IsDefined() && board.IsSequence()) || (mesh.IsDefined() && mesh.IsSequence());
}

std::string import_yaml(std::string_view text, const std::string& source) {
  YAML::Node root = load_yaml(text, source);
  try {
    return YamlReader(source).read(root);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: {}", source, std::max(e.mark.line, 0) + 1, e.msg));
  }
}

}  // namespace ttemu::control::mgd
