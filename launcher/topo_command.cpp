#include "launcher/topo_command.hpp"

#include <poll.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"
#include "emulator/control/mesh_graph_descriptor.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_check.hpp"
#include "emulator/control/table_json.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/control_client.hpp"
#include "tools/viz/live_picture.hpp"
#include "tools/viz/top_view.hpp"
#include "tools/viz/topology_svg.hpp"

namespace ttemu::launcher {

using namespace ttemu::control;
using routing::to_string;

namespace {

// Options shared by the topo subcommands.
struct TopoOptions {
  std::string file;
  std::vector<std::string> failed;
  int plane = 0;
  bool json = false;
  std::string device;
  std::string src, dst;
  std::vector<std::string> draw_path;
  std::string out;
  std::string tables_file;
  // draw --live: a running system's state
  bool live = false;
  std::string job;
  double interval_s = 1;
  std::string by = "utilisation";
};

int resolve_node(const System& sys, const std::string& name) {
  auto chip = routing::parse_chip(name);
  if (!chip) throw Error(fmt::format("'{}' is not a device name like M0D1", name));
  auto node = sys.node(*chip);
  if (!node) throw Error(fmt::format("device {} is not in {}", name, sys.source));
  return *node;
}

void check_plane_option(const System& sys, int plane) {
  if (plane < 0 || plane >= sys.planes) {
    throw Error(fmt::format("plane {} does not exist: {} has plane(s) 0-{}", plane, sys.source,
                            sys.planes - 1));
  }
}

std::string dims_text(const Dims& d) {
  return d.layers > 1 ? fmt::format("{}x{}x{}", d.rows, d.cols, d.layers)
                      : fmt::format("{}x{}", d.rows, d.cols);
}

std::string plane_summary(const PlaneReport& r) {
  std::string s = fmt::format("plane {}: {}/{} pairs reachable", r.plane, r.reachable, r.pairs);
  if (r.disconnected) s += fmt::format(" ({} have no path on this plane)", r.disconnected);
  if (r.missed) s += fmt::format(", {} MISSED by the tables", r.missed);
  s += fmt::format(", longest route {} hop(s)", r.longest);
  s += r.loops ? fmt::format(", {} FORWARDING LOOP(S)", r.loops) : ", no loops";
  s += r.dependency_cycle.empty() ? ", channel dependencies acyclic"
                                  : ", CHANNEL-DEPENDENCY CYCLE";
  return s;
}

void print_plane_details(const System& sys, const PlaneReport& r) {
  for (const auto& f : r.failures) {
    fmt::print("    {} -> {}: {}{}\n", to_string(sys.chips[static_cast<size_t>(f.src)].id),
               to_string(sys.chips[static_cast<size_t>(f.dst)].id),
               f.has_path ? "" : "no path on this plane; ", f.walk.reason(sys));
  }
  if (long shown = static_cast<long>(r.failures.size()); r.missed + r.disconnected > shown) {
    fmt::print("    ... and {} more\n", r.missed + r.disconnected - shown);
  }
  if (!r.dependency_cycle.empty()) {
    fmt::print("    dependency cycle: {}\n", describe_cycle(r.dependency_cycle));
  }
}

void run_validate(const TopoOptions& o) {
  System sys = load_system(o.file);
  int inter = 0;
  for (const auto& l : sys.links) inter += l.inter_mesh();
  fmt::print("{}: valid: {} mesh(es), {} chip(s), {} link(s) ({} between meshes), {} routing plane(s)\n",
             o.file, sys.meshes.size(), sys.chips.size(), sys.links.size(), inter, sys.planes);
}

void run_show(const TopoOptions& o) {
  System sys = load_system(o.file);
  Failures failures = parse_failures(sys, o.failed);
  TableSet tables = compute_tables(sys, failures);
  int inter = 0;
  for (const auto& l : sys.links) inter += l.inter_mesh();
  fmt::print("{}: {} mesh(es), {} chip(s), {} host(s), {} routing plane(s)\n", o.file,
             sys.meshes.size(), sys.chips.size(), sys.hosts.size(), sys.planes);
  fmt::print("  links: {} inside meshes, {} between meshes\n", sys.links.size() - static_cast<size_t>(inter), inter);
  if (!o.failed.empty()) {
    std::string list;
    for (const auto& f : o.failed) list += (list.empty() ? "" : ", ") + f;
    fmt::print("  failed: {}\n", list);
  }
  for (const Mesh& m : sys.meshes) {
    const Board& board = sys.boards[static_cast<size_t>(m.board)];
    const ChipSpec& spec = sys.chip_specs[static_cast<size_t>(board.chip_spec)];
    std::set<std::string> hosts(m.host_of_board.begin(), m.host_of_board.end());
    hosts.erase("");
    std::string host_text;
    for (const auto& h : hosts) host_text += (host_text.empty() ? "" : ", ") + h;
    fmt::print("\nMesh {}: {} board(s) {} ({} {} chips, {}) = {} chips, host: {}\n", m.id,
               dims_text(m.boards), board.name, dims_text(board.topology), spec.name, spec.arch,
               dims_text(m.chips), host_text.empty() ? "none (reached over ethernet)" : host_text);
    if (m.chips.cols <= 16) {
      for (int layer = 0; layer < m.chips.layers; ++layer) {
        if (m.chips.layers > 1) fmt::print("  layer {}\n", layer);
        for (int r = 0; r < m.chips.rows; ++r) {
          std::string row = "  ";
          for (int c = 0; c < m.chips.cols; ++c) {
            int v = sys.node_at(m, Coord{r, c, layer});
            std::string name = to_string(sys.chips[static_cast<size_t>(v)].id);
            if (sys.is_exit_node(v)) name += "*";
            if (!failures.chip_ok(v)) name += "!";
            row += fmt::format("{:<9}", name);
          }
          fmt::print("{}\n", row);
        }
      }
    }
    std::map<int, std::set<int>> exits;
    for (const auto& l : sys.links) {
      if (!l.inter_mesh()) continue;
      for (auto [self, other] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
        if (self.chip.mesh == m.id) exits[self.chip.device].insert(other.chip.mesh);
      }
    }
    if (!exits.empty()) {
      std::string list;
      for (const auto& [dev, meshes] : exits) {
        std::string to;
        for (int x : meshes) to += (to.empty() ? "" : ",") + std::to_string(x);
        list += fmt::format("{}M{}D{} (to mesh {})", list.empty() ? "" : ", ", m.id, dev, to);
      }
      fmt::print("  exit nodes (*): {}\n", list);
    }
  }
  if (inter) {
    fmt::print("\nLinks between meshes:\n");
    for (const auto& l : sys.links) {
      if (l.inter_mesh()) {
        fmt::print("  {:<10} <-> {:<10} plane {}\n", to_string(l.a), to_string(l.b), l.plane);
      }
    }
  }
  fmt::print("\nRouting (L0 dimension-ordered X then Y; L1 toward exit nodes):\n");
  for (int p = 0; p < sys.planes; ++p) {
    auto report = check_plane(sys, tables, p, failures);
    fmt::print("  {}\n", plane_summary(report));
    if (!report.ok()) print_plane_details(sys, report);
  }
}

void run_path(const TopoOptions& o) {
  System sys = load_system(o.file);
  check_plane_option(sys, o.plane);
  Failures failures = parse_failures(sys, o.failed);
  int src = resolve_node(sys, o.src), dst = resolve_node(sys, o.dst);
  for (int v : {src, dst}) {
    if (!failures.chip_ok(v)) {
      throw Error(fmt::format("device {} is failed", to_string(sys.chips[static_cast<size_t>(v)].id)));
    }
  }
  TableSet tables = compute_tables(sys, failures);
  Walk walk = walk_route(sys, tables, o.plane, src, dst, failures);
  if (!walk.arrived()) {
    throw Error(fmt::format("{} cannot reach {} on plane {}: {}", o.src, o.dst, o.plane,
                            walk.reason(sys)));
  }
  if (o.json) {
    nlohmann::json hops = nlohmann::json::array();
    for (const auto& h : walk.hops) hops.push_back({{"from", to_string(h.from)}, {"to", to_string(h.to)}});
    fmt::print("{}\n", nlohmann::json{{"plane", o.plane}, {"hops", hops}}.dump());
    return;
  }
  fmt::print("Route from {} to {} on plane {}: {} hop(s)\n", to_string(sys.chips[static_cast<size_t>(src)].id),
             to_string(sys.chips[static_cast<size_t>(dst)].id), o.plane, walk.hops.size());
  fmt::print("  {:>3}  {:<12} {:<12}\n", "hop", "sender", "receiver");
  for (size_t i = 0; i < walk.hops.size(); ++i) {
    fmt::print("  {:>3}  {:<12} {:<12}\n", i + 1, to_string(walk.hops[i].from), to_string(walk.hops[i].to));
  }
}

void print_table_matrix(const System& sys, const TableSet& tables, int plane, const Mesh& m,
                        std::optional<int> only) {
  auto cell = [](std::optional<uint8_t> p) { return p ? std::to_string(*p) : std::string("x"); };
  fmt::print("\nPlane {}, mesh {}: L0 (intra-mesh) port toward each destination device\n", plane, m.id);
  std::string head = fmt::format("  {:<8}", "src\\dst");
  for (int d = 0; d < m.chips.size(); ++d) head += fmt::format("{:>4}", fmt::format("D{}", d));
  fmt::print("{}\n", head);
  for (int s = 0; s < m.chips.size(); ++s) {
    int v = m.first_node + s;
    if (only && *only != v) continue;
    std::string row = fmt::format("  {:<8}", to_string(sys.chips[static_cast<size_t>(v)].id));
    for (int d = 0; d < m.chips.size(); ++d) {
      row += fmt::format("{:>4}", d == s ? "-" : cell(tables.at(plane, v).l0(static_cast<uint16_t>(d))));
    }
    fmt::print("{}\n", row);
  }
  if (sys.meshes.size() < 2) return;
  fmt::print("Plane {}, mesh {}: L1 (inter-mesh) port toward each destination mesh\n", plane, m.id);
  head = fmt::format("  {:<8}", "src\\dst");
  for (const Mesh& dm : sys.meshes) head += fmt::format("{:>4}", fmt::format("M{}", dm.id));
  fmt::print("{}\n", head);
  for (int s = 0; s < m.chips.size(); ++s) {
    int v = m.first_node + s;
    if (only && *only != v) continue;
    std::string row = fmt::format("  {:<8}", to_string(sys.chips[static_cast<size_t>(v)].id));
    for (const Mesh& dm : sys.meshes) {
      row += fmt::format("{:>4}", dm.id == m.id ? "-" : cell(tables.at(plane, v).l1(dm.id)));
    }
    fmt::print("{}\n", row);
  }
}

void run_tables(const TopoOptions& o, bool plane_given) {
  System sys = load_system(o.file);
  if (plane_given) check_plane_option(sys, o.plane);
  Failures failures = parse_failures(sys, o.failed);
  std::optional<int> node;
  if (!o.device.empty()) node = resolve_node(sys, o.device);
  TableSet tables = compute_tables(sys, failures);
  std::optional<int> plane = plane_given ? std::optional<int>(o.plane) : std::nullopt;
  if (o.json) {
    fmt::print("{}\n", tables_to_json(sys, tables, plane, node).dump());
    return;
  }
  fmt::print("{}: routing tables (entries are ethernet port numbers; '-' self, 'x' no route)\n", o.file);
  for (int p = 0; p < sys.planes; ++p) {
    if (plane && *plane != p) continue;
    for (const Mesh& m : sys.meshes) {
      if (node && sys.chips[static_cast<size_t>(*node)].id.mesh != m.id) continue;
      print_table_matrix(sys, tables, p, m, node);
    }
  }
}

void run_check(const TopoOptions& o) {
  System sys = load_system(o.file);
  Failures failures = parse_failures(sys, o.failed);
  TableSet tables;
  std::string what = "computed tables";
  if (o.tables_file.empty()) {
    tables = compute_tables(sys, failures);
  } else {
    tables = load_tables_json(sys, o.tables_file);
    what = o.tables_file;
  }
  fmt::print("{}: checking {}\n", o.file, what);
  bool ok = true;
  for (int p = 0; p < sys.planes; ++p) {
    auto report = check_plane(sys, tables, p, failures);
    fmt::print("  {}\n", plane_summary(report));
    print_plane_details(sys, report);
    ok = ok && report.ok();
  }
  if (!ok) throw Error(fmt::format("{} failed the checks (see above)", what));
}

// Writes what a subcommand made to its -o file, and says so.
void write_output(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) throw Error(fmt::format("{}: cannot write the file", path));
  fmt::print("wrote {}\n", path);
}

// A running system as it is now: two status replies `interval` apart (the rates) and a snapshot
// (the buffers), as `ttemu top` takes them, drawn by viz::live_picture.
void run_draw_live(const TopoOptions& o) {
  if (!o.draw_path.empty() || !o.failed.empty()) throw Error("--live draws the system as it is: it takes no --path or --fail");
  const std::string socket = control_socket(o.job);
  const nlohmann::json before = request(socket, {{"cmd", "status"}});
  ::poll(nullptr, 0, static_cast<int>(o.interval_s * 1000));  // the rates' interval
  const nlohmann::json now = request(socket, {{"cmd", "status"}});
  const nlohmann::json snapshot = request(socket, {{"cmd", "snapshot"}});
  const std::string file = o.file.empty() ? now.value("system_path", "") : o.file;
  if (file.empty()) throw Error("the running system does not say its specification: give FILE");
  const System sys = load_system(file);
  const viz::TopFrame frame = viz::top_frame(before, now, snapshot, {});
  if (frame.links != static_cast<int>(sys.links.size())) {
    throw Error(fmt::format("{} has {} link(s), the running system {}: give the file it was launched with", file, sys.links.size(), frame.links));
  }
  write_output(o.out, viz::draw_svg(sys, viz::live_picture(sys, frame, o.by == "errors" ? viz::LinkColouring::kErrors
                                                                                        : viz::LinkColouring::kUtilisation)));
}

void run_draw(const TopoOptions& o) {
  if (o.live) return run_draw_live(o);
  if (o.file.empty()) throw Error("FILE is required (or --live, to draw a running system)");
  System sys = load_system(o.file);
  check_plane_option(sys, o.plane);
  Failures failures = parse_failures(sys, o.failed);
  viz::DrawOptions draw;
  draw.failures = failures;
  if (!o.draw_path.empty()) {
    if (o.draw_path.size() != 2) throw Error("--path takes two devices: SRC DST");
    int src = resolve_node(sys, o.draw_path[0]), dst = resolve_node(sys, o.draw_path[1]);
    TableSet tables = compute_tables(sys, failures);
    Walk walk = walk_route(sys, tables, o.plane, src, dst, failures);
    if (!walk.arrived()) {
      throw Error(fmt::format("{} cannot reach {} on plane {}: {}", o.draw_path[0],
                              o.draw_path[1], o.plane, walk.reason(sys)));
    }
    draw.route = walk.hops;
    draw.title_note = fmt::format("route {} -> {} on plane {}: {} hop(s)", o.draw_path[0],
                                  o.draw_path[1], o.plane, walk.hops.size());
  }
  write_output(o.out, viz::draw_svg(sys, draw));
}

// A tt-metal mesh graph descriptor as our YAML, checked by loading it before it is written.
void run_import(const TopoOptions& o) {
  std::string text = read_text_file(o.file);
  DescriptorFormat format = descriptor_format(o.file, text);
  if (format == DescriptorFormat::None) {
    throw Error(fmt::format("{}: not a tt-metal mesh graph descriptor (a .textproto MeshGraphDescriptor, "
                            "or YAML with a ChipSpec of ethernet_ports and lists of Board and Mesh)", o.file));
  }
  std::string yaml = import_mesh_graph_descriptor(text, o.file, format);
  parse_system(yaml, o.file + " (as imported)");
  if (o.out.empty()) {
    fmt::print("{}", yaml);
    return;
  }
  write_output(o.out, yaml);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  auto* topo = app.add_subcommand("topo", "Validate, show, route and draw a system specification");
  topo->require_subcommand(1);
  auto opts = std::make_shared<TopoOptions>();

  auto file_arg = [&](CLI::App* cmd) {
    cmd->add_option("FILE", opts->file, "System specification (YAML, or a tt-metal mesh graph descriptor), e.g. topologies/galaxy.yaml")
        ->required();
  };
  auto fail_opt = [&](CLI::App* cmd) {
    cmd->add_option("--fail", opts->failed,
                    "Route around a failed link (MxDyPz, either end) or chip (MxDy); repeatable");
  };

  auto* validate = topo->add_subcommand("validate", "Check a system specification; exit 0 if valid");
  file_arg(validate);
  validate->callback([opts] { run_validate(*opts); });

  auto* show = topo->add_subcommand("show", "Meshes, chips, links, hosts, exit nodes and routing summary");
  file_arg(show);
  fail_opt(show);
  show->callback([opts] { run_show(*opts); });

  auto* path = topo->add_subcommand("path", "The hop-by-hop route between two devices");
  file_arg(path);
  path->add_option("SRC", opts->src, "Source device, e.g. M0D0")->required();
  path->add_option("DST", opts->dst, "Destination device, e.g. M0D8")->required();
  path->add_option("--plane", opts->plane, "Routing plane")->default_val(0)->check(whole_number(0, 255));
  path->add_flag("--json", opts->json, "Print one JSON object: {\"plane\", \"hops\": [{\"from\", \"to\"}]}");
  fail_opt(path);
  path->callback([opts] { run_path(*opts); });

  auto* tables = topo->add_subcommand("tables", "The L0/L1 routing tables the control plane computes");
  file_arg(tables);
  tables->add_option("--device", opts->device, "Only this device's router, e.g. M0D1");
  auto* plane_opt = tables->add_option("--plane", opts->plane, "Only this routing plane")->check(whole_number(0, 255));
  tables->add_flag("--json", opts->json, "Print JSON (the format 'topo check --tables' reads)");
  fail_opt(tables);
  tables->callback([opts, plane_opt] { run_tables(*opts, plane_opt->count() > 0); });

  auto* check = topo->add_subcommand(
      "check", "Check routing tables: reachability, forwarding loops, channel-dependency cycles");
  file_arg(check);
  check->add_option("--tables", opts->tables_file,
                    "Check these tables (JSON from 'topo tables --json') instead of computed ones");
  fail_opt(check);
  check->callback([opts] { run_check(*opts); });

  auto* draw = topo->add_subcommand("draw", "Draw meshes, chips, links and exit nodes as SVG; with --live, a running system's state");
  draw->add_option("FILE", opts->file, "System specification (with --live: default, the one the running system was launched with)");
  draw->add_flag("--live", opts->live, "Draw the running system: links coloured by utilisation (or --by errors), chips by buffered packets");
  draw->add_option("--job", opts->job, std::string("With --live: ") + kJobHelp);
  draw->add_option("--interval", opts->interval_s, "With --live: seconds over which rates are measured")->default_val(1.0)->check(number_in(0.05, 60));
  draw->add_option("--by", opts->by, "With --live: colour links by utilisation or errors (CRC errors per frame)")
      ->check(CLI::IsMember({"utilisation", "errors"}));
  draw->add_option("--path", opts->draw_path, "Highlight the route between two devices: SRC DST")
      ->expected(2);
  draw->add_option("--plane", opts->plane, "Routing plane of the highlighted route")->default_val(0)->check(whole_number(0, 255));
  draw->add_option("-o,--output", opts->out, "Output SVG file")->required();
  fail_opt(draw);
  draw->callback([opts] { run_draw(*opts); });

  auto* import = topo->add_subcommand("import", "Convert a tt-metal mesh graph descriptor (textproto or YAML) to our YAML");
  import->add_option("FILE", opts->file, "tt-metal mesh graph descriptor, e.g. topologies/tt-metal/t3k.textproto")
      ->required();
  import->add_option("-o,--output", opts->out, "Write the YAML to this file instead of printing it");
  import->callback([opts] { run_import(*opts); });
}

}  // namespace ttemu::launcher
