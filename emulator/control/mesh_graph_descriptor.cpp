#include "emulator/control/mesh_graph_descriptor.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"
#include "emulator/control/mesh_graph_import.hpp"
#include "emulator/control/textproto.hpp"

namespace ttemu::control {

namespace mgd {

namespace {

using Kind = TextField::Kind;

struct MeshDesc {
  std::string name, arch;
  Dims chips, hosts;
  int channels = 0;
};

// An instantiated mesh (mesh >= 0) or graph, with the ids its descriptor gives it.
struct Instance {
  std::string desc;
  int ref_id = 0;
  int mesh = -1;
  const TextField* graph = nullptr;
  std::vector<Instance> members;
};

struct End {
  int mesh = 0;
  std::optional<int> device;
};

class TextReader {
 public:
  explicit TextReader(const std::string& source) : source_(source) {}

  std::string read(const TextField& root) {
    check(root, "the descriptor", {"mesh_descriptors", "graph_descriptors", "top_level_instance"});
    for (const TextField* m : all(root, "mesh_descriptors")) read_mesh_desc(*m);
    for (const TextField* g : all(root, "graph_descriptors")) {
      std::string name = text(need(*g, "name", "a graph descriptor"), "graph descriptor name", Kind::String);
      if (!graphs_.emplace(name, g).second) fail(g->line, fmt::format("graph descriptor '{}' is defined twice", name));
    }
    const TextField* top = one(root, "top_level_instance");
    if (!top) fail(1, "the descriptor has no top_level_instance");
    std::vector<std::string> stack;
    Instance inst = instantiate(*top, stack);
    connect(inst);
    out_.source = source_;
    out_.format = "tt-metal MeshGraphDescriptor textproto";
    return to_yaml(out_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(fmt::format("{}:{}: {}", source_, line, what));
  }

  void check(const TextField& msg, const std::string& what, std::initializer_list<const char*> known) const {
    if (msg.kind != Kind::Message) fail(msg.line, fmt::format("{} must be a message {{ ... }}", what));
    for (const auto& f : msg.fields) {
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return f.name == k; })) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(f.line, fmt::format("{}: unknown field '{}' (expected {})", what, f.name, list));
      }
    }
  }
  static std::vector<const TextField*> all(const TextField& msg, const char* name) {
    std::vector<const TextField*> out;
    for (const auto& f : msg.fields) {
      if (f.name == name) out.push_back(&f);
    }
    return out;
  }
  const TextField* one(const TextField& msg, const char* name) const {
    auto found = all(msg, name);
    if (found.size() > 1) fail(found[1]->line, fmt::format("field '{}' is given twice", name));
    return found.empty() ? nullptr : found[0];
  }
  const TextField& need(const TextField& msg, const char* name, const std::string& what) const {
    const TextField* f = one(msg, name);
    if (!f) fail(msg.line, fmt::format("{} has no '{}'", what, name));
    return *f;
  }
  std::string text(const TextField& f, const std::string& what, Kind kind) const {
    if (f.kind != kind) {
      fail(f.line, fmt::format("{} must be {}", what, kind == Kind::String ? "a quoted string" : "a number or an enum name"));
    }
    return f.value;
  }
  int integer(const TextField& f, const std::string& what, int lo, int hi) const {
    std::string v = text(f, what, Kind::Word);
    std::optional<long> n = whole_number(v);
    if (!n) fail(f.line, fmt::format("{} must be a whole number, not '{}'", what, v));
    if (*n < lo || *n > hi) fail(f.line, fmt::format("{} must be {}-{}, not {}", what, lo, hi, *n));
    return static_cast<int>(*n);
  }
  Dims grid(const TextField& topo, const std::string& what) const {
    auto dims = all(topo, "dims");
    if (dims.size() != 2) {
      fail(topo.line, fmt::format("{} has {} dims; only 2 (rows, columns) are supported", what, dims.size()));
    }
    return Dims{integer(*dims[0], what + " rows", 1, 1024), integer(*dims[1], what + " columns", 1, 1024), 1};
  }
  int channels(const TextField& ch, const std::string& what) const {
    check(ch, what + " channels", {"count", "policy"});
    if (const TextField* p = one(ch, "policy")) {
      std::string policy = text(*p, "channels policy", Kind::Word);
      if (policy != "STRICT" && policy != "RELAXED") fail(p->line, fmt::format("unknown channels policy '{}'", policy));
    }
    return integer(need(ch, "count", what + " channels"), what + " channel count", 1, 16);
  }

  void read_mesh_desc(const TextField& m) {
    check(m, "a mesh descriptor", {"name", "arch", "device_topology", "channels", "host_topology", "express_connections"});
    MeshDesc d;
    d.name = text(need(m, "name", "a mesh descriptor"), "mesh descriptor name", Kind::String);
    const std::string what = fmt::format("mesh descriptor '{}'", d.name);
    if (const TextField* x = one(m, "express_connections")) {
      fail(x->line, fmt::format("{}: express_connections are not supported (links inside a mesh come only from its grid)", what));
    }
    d.arch = "wormhole_b0";
    if (const TextField* a = one(m, "arch")) {
      std::string arch = text(*a, "arch", Kind::Word);
      if (arch != "WORMHOLE_B0" && arch != "BLACKHOLE") fail(a->line, fmt::format("{}: unknown arch '{}'", what, arch));
      d.arch = arch == "BLACKHOLE" ? "blackhole" : "wormhole_b0";
    }
    const TextField& topo = need(m, "device_topology", what);
    check(topo, what + " device_topology", {"dims", "types"});
    d.chips = grid(topo, what + " device_topology");
    for (const TextField* t : all(topo, "types")) {
      std::string type = text(*t, "device_topology type", Kind::Word);
      if (type == "RING") fail(t->line, fmt::format("{}: RING (torus) dimensions are not supported; only LINE", what));
      if (type != "LINE") fail(t->line, fmt::format("{}: unknown device_topology type '{}'", what, type));
    }
    d.channels = channels(need(m, "channels", what), what);
    if (d.channels > 4) {
      fail(one(m, "channels")->line, fmt::format("{}: {} channels per neighbour need {} ports on a chip; at most 16 (4 per side) are possible",
                                                  what, d.channels, 4 * d.channels));
    }
    d.hosts = Dims{1, 1, 1};
    if (const TextField* h = one(m, "host_topology")) {
      check(*h, what + " host_topology", {"dims"});
      d.hosts = grid(*h, what + " host_topology");
      if (d.chips.rows % d.hosts.rows || d.chips.cols % d.hosts.cols) {
        fail(h->line, fmt::format("{}: host_topology {}x{} does not divide device_topology {}x{} into equal blocks",
                                  what, d.hosts.rows, d.hosts.cols, d.chips.rows, d.chips.cols));
      }
    }
    if (!meshes_.emplace(d.name, d).second) fail(m.line, fmt::format("mesh descriptor '{}' is defined twice", d.name));
    out_.chips.push_back(ChipOut{d.name + "_chip", d.arch, {d.channels, d.channels, d.channels, d.channels, 0, 0}});
    out_.boards.push_back(BoardOut{d.name, d.name + "_chip", Dims{d.chips.rows / d.hosts.rows, d.chips.cols / d.hosts.cols, 1}});
  }

  // An instance (a NodeRef of top_level_instance or of a graph's instances) and its members.
  Instance instantiate(const TextField& ref, std::vector<std::string>& stack) {
    check(ref, "an instance", {"mesh", "graph"});
    if (ref.fields.size() != 1) fail(ref.line, "an instance must name exactly one mesh or graph");
    const TextField& r = ref.fields[0];
    Instance inst;
    if (r.name == "mesh") {
      check(r, "a mesh instance", {"mesh_descriptor", "mesh_id"});
      inst.desc = text(need(r, "mesh_descriptor", "a mesh instance"), "mesh_descriptor", Kind::String);
      inst.ref_id = one(r, "mesh_id") ? integer(*one(r, "mesh_id"), "mesh_id", 0, 1 << 20) : 0;
      auto it = meshes_.find(inst.desc);
      if (it == meshes_.end()) fail(r.line, fmt::format("mesh descriptor '{}' is not defined", inst.desc));
      if (out_.meshes.size() >= 1024) fail(r.line, "more than 1024 meshes");
      const MeshDesc& d = it->second;
      MeshOut m{static_cast<int>(out_.meshes.size()), d.name, d.hosts, d.chips, {}, d.channels};
      for (int h = 0; h < d.hosts.size(); ++h) {
        m.hosts.push_back(fmt::format("host{}", out_.hosts.size()));
        out_.hosts.push_back(m.hosts.back());
      }
      inst.mesh = m.id;
      out_.meshes.push_back(m);
      return inst;
    }
    check(r, "a graph instance", {"graph_descriptor", "graph_id"});
    inst.desc = text(need(r, "graph_descriptor", "a graph instance"), "graph_descriptor", Kind::String);
    inst.ref_id = one(r, "graph_id") ? integer(*one(r, "graph_id"), "graph_id", 0, 1 << 20) : 0;
    auto it = graphs_.find(inst.desc);
    if (it == graphs_.end()) fail(r.line, fmt::format("graph descriptor '{}' is not defined", inst.desc));
    if (std::find(stack.begin(), stack.end(), inst.desc) != stack.end()) {
      fail(r.line, fmt::format("graph descriptor '{}' contains itself", inst.desc));
    }
    inst.graph = it->second;
    check(*inst.graph, fmt::format("graph descriptor '{}'", inst.desc),
          {"name", "type", "instances", "channels", "graph_topology", "connections"});
    stack.push_back(inst.desc);
    for (const TextField* m : all(*inst.graph, "instances")) {
      Instance member = instantiate(*m, stack);
      for (const auto& other : inst.members) {
        if (other.desc == member.desc && other.ref_id == member.ref_id && (other.mesh >= 0) == (member.mesh >= 0)) {
          fail(m->line, fmt::format("graph '{}' has instance '{}' id {} twice", inst.desc, member.desc, member.ref_id));
        }
      }
      inst.members.push_back(std::move(member));
    }
    stack.pop_back();
    return inst;
  }

  // A connection's node, looked up among the members of the graph instance that declares it.
  End resolve(const TextField& ref, const Instance& in) const {
    check(ref, "a connection node", {"mesh", "graph"});
    if (ref.fields.size() != 1) fail(ref.line, "a connection node must name exactly one mesh or graph");
    const TextField& r = ref.fields[0];
    return r.name == "mesh" ? resolve_mesh(r, in) : resolve_graph(r, in);
  }
  End resolve_mesh(const TextField& r, const Instance& in) const {
    check(r, "a connection's mesh", {"mesh_descriptor", "mesh_id", "device_id"});
    std::string desc = text(need(r, "mesh_descriptor", "a connection's mesh"), "mesh_descriptor", Kind::String);
    int id = one(r, "mesh_id") ? integer(*one(r, "mesh_id"), "mesh_id", 0, 1 << 20) : 0;
    for (const auto& m : in.members) {
      if (m.mesh < 0 || m.desc != desc || m.ref_id != id) continue;
      End end{m.mesh, std::nullopt};
      if (const TextField* d = one(r, "device_id")) {
        end.device = integer(*d, "device_id", 0, out_.meshes[static_cast<size_t>(m.mesh)].chips.size() - 1);
      }
      return end;
    }
    fail(r.line, fmt::format("the connection names mesh '{}' id {}, which graph '{}' does not contain", desc, id, in.desc));
  }
  End resolve_graph(const TextField& r, const Instance& in) const {
    check(r, "a connection's graph", {"graph_descriptor", "graph_id", "mesh", "graph"});
    std::string desc = text(need(r, "graph_descriptor", "a connection's graph"), "graph_descriptor", Kind::String);
    int id = one(r, "graph_id") ? integer(*one(r, "graph_id"), "graph_id", 0, 1 << 20) : 0;
    for (const auto& g : in.members) {
      if (g.mesh >= 0 || g.desc != desc || g.ref_id != id) continue;
      if (const TextField* m = one(r, "mesh")) return resolve_mesh(*m, g);
      if (const TextField* sub = one(r, "graph")) return resolve_graph(*sub, g);
      fail(r.line, fmt::format("a connection to the whole graph '{}' id {} is not supported: name a mesh in it", desc, id));
    }
    fail(r.line, fmt::format("the connection names graph '{}' id {}, which graph '{}' does not contain", desc, id, in.desc));
  }

  void connect(const Instance& in) {
    if (!in.graph) return;
    for (const auto& m : in.members) connect(m);
    const TextField& g = *in.graph;
    const std::string what = fmt::format("graph descriptor '{}'", in.desc);
    std::optional<int> graph_channels;
    if (const TextField* c = one(g, "channels")) graph_channels = channels(*c, what);
    for (const TextField* c : all(g, "connections")) {
      check(*c, "a connection", {"nodes", "channels", "directional"});
      auto nodes = all(*c, "nodes");
      if (nodes.size() != 2) fail(c->line, fmt::format("a connection with {} nodes is not supported; give 2", nodes.size()));
      if (const TextField* d = one(*c, "directional"); d && text(*d, "directional", Kind::Word) != "false") {
        fail(d->line, "directional connections are not supported: every link carries both directions");
      }
      link(resolve(*nodes[0], in), resolve(*nodes[1], in), channels(need(*c, "channels", "a connection"), "a connection's"), c->line);
    }
    if (const TextField* t = one(g, "graph_topology")) topology(*t, in, graph_channels);
  }

  // graph_topology: ALL_TO_ALL or RING over the graph's meshes, graph channels per edge; also
  // read in its message form { layout_type: ... channels { ... } }.
  void topology(const TextField& t, const Instance& in, std::optional<int> count) {
    std::string layout;
    if (t.kind == Kind::Message) {
      check(t, "graph_topology", {"layout_type", "channels"});
      layout = text(need(t, "layout_type", "graph_topology"), "layout_type", Kind::Word);
      if (const TextField* c = one(t, "channels")) count = channels(*c, "graph_topology");
    } else {
      layout = text(t, "graph_topology", Kind::Word);
    }
    if (layout != "ALL_TO_ALL" && layout != "RING") fail(t.line, fmt::format("unknown graph_topology '{}'", layout));
    if (!count) fail(t.line, fmt::format("graph '{}' has a graph_topology but no channels", in.desc));
    std::vector<int> meshes;
    for (const auto& m : in.members) {
      if (m.mesh < 0) fail(t.line, fmt::format("graph_topology over graphs (graph '{}') is not supported; only over meshes", in.desc));
      meshes.push_back(m.mesh);
    }
    const size_t n = meshes.size();
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        bool ring_edge = j == i + 1 || (i == 0 && j == n - 1 && n > 2);
        if (layout == "ALL_TO_ALL" || ring_edge) link(End{meshes[i], {}}, End{meshes[j], {}}, *count, t.line);
      }
    }
  }

  // `count` links between two meshes, on free edge ports: the lower-numbered mesh takes its
  // south edge first, the other its north edge, so a chain of meshes stacks top to bottom.
  void link(End a, End b, int count, int line) {
    if (a.mesh == b.mesh) fail(line, fmt::format("a connection inside mesh {} is not supported; links inside a mesh come from its grid", a.mesh));
    if (a.mesh > b.mesh) std::swap(a, b);
    static const std::vector<Side> first{Side::S, Side::E, Side::N, Side::W};
    static const std::vector<Side> second{Side::N, Side::W, Side::S, Side::E};
    for (int k = 0; k < count; ++k) {
      auto pa = ports_.take(a.mesh, first, a.device);
      auto pb = ports_.take(b.mesh, second, b.device);
      for (const auto& [p, e] : {std::pair{pa, a}, std::pair{pb, b}}) {
        if (!p) {
          fail(line, fmt::format("mesh {}{} has no free edge port left for link {} of {} of this connection", e.mesh,
                                 e.device ? fmt::format(" device {}", *e.device) : "", k + 1, count));
        }
      }
      out_.graph.emplace_back(*pa, *pb);
      out_.graph.emplace_back(*pb, *pa);
    }
  }

  const std::string& source_;
  std::map<std::string, MeshDesc> meshes_;
  std::map<std::string, const TextField*> graphs_;
  SystemOut out_;
  EdgePorts ports_{out_.meshes};
};

}  // namespace

std::string import_textproto(std::string_view text, const std::string& source) {
  check_utf8(text, source);
  TextField root = parse_textproto(text, source);
  return TextReader(source).read(root);
}

}  // namespace mgd

DescriptorFormat descriptor_format(const std::string& path, std::string_view text) {
  for (const char* ext : {".textproto", ".txtpb", ".pbtxt"}) {
    std::string_view e(ext);
    if (path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) return DescriptorFormat::TextProto;
  }
  // The first word that is not a comment: a textproto descriptor starts with one of its fields.
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
    } else {
      break;
    }
  }
  for (const char* field : {"mesh_descriptors", "graph_descriptors", "top_level_instance"}) {
    std::string_view f(field);
    if (text.substr(i, f.size()) == f) {
      size_t after = i + f.size();
      if (after < text.size() && (text[after] == ' ' || text[after] == '{' || text[after] == ':' || text[after] == '\t')) {
        return DescriptorFormat::TextProto;
      }
    }
  }
  return mgd::looks_like_yaml_descriptor(text) ? DescriptorFormat::Yaml : DescriptorFormat::None;
}

std::string import_mesh_graph_descriptor(std::string_view text, const std::string& source, DescriptorFormat format) {
  if (format == DescriptorFormat::TextProto) return mgd::import_textproto(text, source);
  if (format == DescriptorFormat::Yaml) return mgd::import_yaml(text, source);
  throw Error(fmt::format("{}:1: not a tt-metal mesh graph descriptor", source));
}

}  // namespace ttemu::control
