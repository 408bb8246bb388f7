#include "emulator/control/tt_metal_tests.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"
#include "emulator/common/yaml_input.hpp"

namespace ttemu::control::ttmetal {

namespace {

// tt-metal's names, and the ones ttemu maps.
const std::vector<std::string> kFtypes = {"unicast", "mcast"};
const std::vector<std::string> kNtypes = {"unicast_write", "atomic_inc", "fused_atomic_inc", "unicast_scatter_write"};
const std::vector<std::string> kTopologies = {"Linear", "Ring", "Mesh", "Torus", "NeighborExchange"};
// High-level pattern types tt-metal knows (current and older spellings) -> the ttemu pattern,
// or "" where ttemu has none.
const std::map<std::string, std::string> kHighLevel = {
    {"all_to_all", "all_to_all"},
    {"all_to_all_unicast", "all_to_all"},
    {"one_to_all", "one_to_all"},
    {"one_to_all_unicast", "one_to_all"},
    {"all_to_one", "all_to_one"},
    {"full_device_random_pairing", "random_pairing"},
    {"neighbor_exchange", "neighbor_exchange"},
    {"all_to_one_random", ""},
    {"sequential_all_to_all", ""},
    {"unidirectional_linear", ""},
    {"unidirectional_linear_multicast", ""},
    {"perimeter_linear", ""},
    {"full_ring", ""},
    {"half_ring", ""},
    {"full_ring_multicast", ""},
    {"half_ring_multicast", ""},
    {"all_to_all_multicast", ""},
    {"one_to_all_multicast", ""},
    {"all_devices_uniform_pattern", ""},
};
const char* kMapped = "all_to_all (all_to_all_unicast), one_to_all (one_to_all_unicast), all_to_one, "
                      "full_device_random_pairing, neighbor_exchange";

std::string joined(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

bool one_of(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// Errors name the file, the line, the test and the key.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& why) const {
    const int line = at.Mark().line >= 0 ? at.Mark().line + 1 : test_line_;
    if (test_.empty()) throw Error(fmt::format("{}:{}: {}: {}", source_, line, key, why));
    throw Error(fmt::format("{}:{}: test '{}': {}: {}", source_, line, test_, key, why));
  }

  std::string scalar(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, key, "expected a single value");
    return n.Scalar();
  }

  uint64_t number(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) const {
    const std::string s = scalar(n, key);
    uint64_t v = 0;
    size_t used = 0;
    try {
      const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');  // 0x40000, as addresses are written
      v = std::stoull(s, &used, hex ? 16 : 10);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size() || s[0] == '-' || v < lo || v > hi) {
      fail(n, key, fmt::format("'{}' is not a whole number from {} to {}", s, lo, hi));
    }
    return v;
  }

  bool boolean(const YAML::Node& n, const std::string& key) const {
    const std::string s = scalar(n, key);
    if (s == "true" || s == "True") return true;
    if (s == "false" || s == "False") return false;
    fail(n, key, fmt::format("'{}' is not true or false", s));
  }

  // Every key of a map is one of `known`; `ignored` ones are accepted and not used.
  void keys(const YAML::Node& map, const std::string& where, const std::vector<std::string>& known) const {
    if (!map.IsMap()) fail(map, where, "expected a map");
    for (const auto& kv : map) {
      const std::string k = kv.first.Scalar();
      if (!one_of(known, k)) fail(kv.first, where.empty() ? k : where + "." + k, fmt::format("unknown key (known here: {})", joined(known)));
    }
  }

  Device device(const YAML::Node& n, const std::string& key) const {
    Device d;
    d.key = key;
    if (n.IsScalar()) {
      d.kind = Device::kChipId;
      d.chip = static_cast<int>(number(n, key, 0, 65535));
      d.text = n.Scalar();
      return d;
    }
    if (n.IsSequence() && n.size() == 2) {
      d.mesh = static_cast<int>(number(n[0], key, 0, 65535));
      if (n[1].IsScalar()) {
        d.kind = Device::kMeshChip;
        d.chip = static_cast<int>(number(n[1], key, 0, 65535));
        d.text = fmt::format("[{}, {}]", d.mesh, d.chip);
        return d;
      }
      if (n[1].IsSequence() && n[1].size() == 2) {
        d.kind = Device::kMeshCoord;
        d.row = static_cast<int>(number(n[1][0], key, 0, 65535));
        d.col = static_cast<int>(number(n[1][1], key, 0, 65535));
        d.text = fmt::format("[{}, [{}, {}]]", d.mesh, d.row, d.col);
        return d;
      }
    }
    fail(n, key, "expected a chip id, [mesh, chip] or [mesh, [row, col]]");
  }

  std::string ftype(const YAML::Node& n, const std::string& key) const {
    const std::string v = scalar(n, key);
    if (!one_of(kFtypes, v)) fail(n, key, fmt::format("unknown ftype '{}' (tt-metal's: {})", v, joined(kFtypes)));
    if (v != "unicast") fail(n, key, "ftype mcast is not mapped onto ttemu (only unicast is)");
    return v;
  }

  std::string ntype(const YAML::Node& n, const std::string& key) const {
    const std::string v = scalar(n, key);
    if (!one_of(kNtypes, v)) fail(n, key, fmt::format("unknown ntype '{}' (tt-metal's: {})", v, joined(kNtypes)));
    if (v != "unicast_write") fail(n, key, fmt::format("ntype {} is not mapped onto ttemu (only unicast_write is)", v));
    return v;
  }

  uint32_t size(const YAML::Node& n, const std::string& key) const {
    return static_cast<uint32_t>(number(n, key, 1, 1u << 20));
  }
  uint32_t num_packets(const YAML::Node& n, const std::string& key) const {
    return static_cast<uint32_t>(number(n, key, 1, 100000));
  }

  // A traffic pattern's map: `defaults`, or one of a sender's patterns (with its destination).
  Traffic traffic(const YAML::Node& n, const std::string& key, std::optional<Device>* destination) const {
    std::vector<std::string> known = {"ftype", "ntype", "size", "num_packets", "atomic_inc_val", "atomic_inc_wrap", "mcast_start_hops"};
    if (destination) known.push_back("destination");
    keys(n, key, known);
    Traffic t;
    const std::string dot = key + ".";
    if (n["ftype"]) t.ftype = ftype(n["ftype"], dot + "ftype");
    if (n["ntype"]) t.ntype = ntype(n["ntype"], dot + "ntype");
    if (n["size"]) t.size = size(n["size"], dot + "size");
    if (n["num_packets"]) t.num_packets = num_packets(n["num_packets"], dot + "num_packets");
    for (const char* k : {"atomic_inc_val", "atomic_inc_wrap"}) {
      if (n[k]) fail(n[k], dot + k, "atomics are not mapped onto ttemu (only unicast_write is)");
    }
    if (n["mcast_start_hops"]) fail(n["mcast_start_hops"], dot + "mcast_start_hops", "multicast is not mapped onto ttemu");
    if (destination && n["destination"]) {
      const YAML::Node& d = n["destination"];
      const std::string dk = dot + "destination";
      keys(d, dk, {"device", "core", "hops", "target_address", "atomic_inc_address"});
      if (d["hops"]) fail(d["hops"], dk + ".hops", "a destination by hops is not mapped onto ttemu (name the device)");
      if (d["atomic_inc_address"]) fail(d["atomic_inc_address"], dk + ".atomic_inc_address", "atomics are not mapped onto ttemu");
      if (d["target_address"]) number(d["target_address"], dk + ".target_address", 0, ~uint64_t{0});
      if (!d["device"]) fail(d, dk, "no device");
      *destination = device(d["device"], dk + ".device");
    }
    return t;
  }

  Test test(const YAML::Node& n, size_t index) {
    test_.clear();
    test_line_ = n.Mark().line + 1;
    if (!n.IsMap()) fail(n, fmt::format("Tests[{}]", index), "expected a map");
    if (!n["name"]) fail(n, fmt::format("Tests[{}]", index), "no name");
    Test t;
    t.name = scalar(n["name"], "name");
    t.line = test_line_;
    test_ = t.name;
    keys(n, "", {"name", "fabric_setup", "defaults", "patterns", "senders", "parametrization_params", "top_level_iterations",
                 "seed", "sync", "benchmark_mode", "latency_test_mode", "skip", "bw_calc_func", "enable_flow_control",
                 "skip_packet_validation", "on_missing_param_policy"});
    if (!n["fabric_setup"]) fail(n, "fabric_setup", "missing (tt-metal requires it)");
    const YAML::Node& fs = n["fabric_setup"];
    keys(fs, "fabric_setup", {"topology", "num_links", "routing_type", "fabric_tensix_config", "fabric_reliability_mode",
                              "max_packet_size", "torus_config"});
    if (!fs["topology"]) fail(fs, "fabric_setup.topology", "missing");
    t.topology = scalar(fs["topology"], "fabric_setup.topology");
    if (!one_of(kTopologies, t.topology)) {
      fail(fs["topology"], "fabric_setup.topology", fmt::format("unknown topology '{}' (tt-metal's: {})", t.topology, joined(kTopologies)));
    }
    if (fs["num_links"]) {
      t.num_links = static_cast<uint32_t>(number(fs["num_links"], "fabric_setup.num_links", 1, 64));
      if (t.num_links != 1) {
        fail(fs["num_links"], "fabric_setup.num_links", "several links per direction are not mapped onto ttemu (it drives one routing plane)");
      }
    }
    if (n["latency_test_mode"] && boolean(n["latency_test_mode"], "latency_test_mode")) {
      fail(n["latency_test_mode"], "latency_test_mode", "tt-metal's latency mode is not mapped onto ttemu (ttemu traffic reports latency itself)");
    }
    for (const char* flag : {"sync", "benchmark_mode", "enable_flow_control", "skip_packet_validation"}) {
      if (n[flag]) boolean(n[flag], flag);
    }
    if (n["on_missing_param_policy"]) {
      const std::string p = scalar(n["on_missing_param_policy"], "on_missing_param_policy");
      if (p != "error") fail(n["on_missing_param_policy"], "on_missing_param_policy", fmt::format("'{}' is not mapped onto ttemu: give every parameter", p));
    }
    if (n["top_level_iterations"]) t.top_level_iterations = static_cast<uint32_t>(number(n["top_level_iterations"], "top_level_iterations", 1, 1000));
    if (n["seed"]) t.seed = number(n["seed"], "seed", 0, ~uint64_t{0});
    if (n["defaults"]) t.defaults = traffic(n["defaults"], "defaults", nullptr);
    if (n["parametrization_params"]) {
      const YAML::Node& p = n["parametrization_params"];
      keys(p, "parametrization_params", {"size", "num_packets", "ntype", "ftype"});
      for (const auto& kv : p) {
        const std::string k = kv.first.Scalar(), key = "parametrization_params." + k;
        if (!kv.second.IsSequence() || kv.second.size() == 0) fail(kv.second, key, "expected a list of values");
        std::vector<std::string> values;
        for (const auto& v : kv.second) {
          if (k == "size") values.push_back(std::to_string(size(v, key)));
          else if (k == "num_packets") values.push_back(std::to_string(num_packets(v, key)));
          else if (k == "ntype") values.push_back(ntype(v, key));
          else values.push_back(ftype(v, key));
        }
        t.parametrization.emplace_back(k, values);
      }
    }
    if (n["patterns"]) {
      const YAML::Node& ps = n["patterns"];
      if (!ps.IsSequence()) fail(ps, "patterns", "expected a list");
      for (size_t i = 0; i < ps.size(); ++i) {
        const std::string key = fmt::format("patterns[{}]", i);
        keys(ps[i], key, {"type", "iterations"});
        if (!ps[i]["type"]) fail(ps[i], key + ".type", "missing");
        HighLevelPattern h{scalar(ps[i]["type"], key + ".type"), 1, key};
        const auto it = kHighLevel.find(h.type);
        if (it == kHighLevel.end()) fail(ps[i]["type"], key + ".type", fmt::format("unknown pattern '{}' (mapped onto ttemu: {})", h.type, kMapped));
        if (it->second.empty()) fail(ps[i]["type"], key + ".type", fmt::format("pattern '{}' is not mapped onto ttemu (mapped: {})", h.type, kMapped));
        if (ps[i]["iterations"]) h.iterations = static_cast<uint32_t>(number(ps[i]["iterations"], key + ".iterations", 1, 1000));
        t.patterns.push_back(h);
      }
    }
    if (n["senders"]) {
      const YAML::Node& ss = n["senders"];
      if (!ss.IsSequence()) fail(ss, "senders", "expected a list");
      for (size_t i = 0; i < ss.size(); ++i) {
        const std::string key = fmt::format("senders[{}]", i);
        keys(ss[i], key, {"device", "patterns", "core", "link_id"});
        if (!ss[i]["device"]) fail(ss[i], key + ".device", "missing");
        if (!ss[i]["patterns"] || !ss[i]["patterns"].IsSequence()) fail(ss[i], key + ".patterns", "missing, or not a list");
        if (ss[i]["link_id"] && number(ss[i]["link_id"], key + ".link_id", 0, 64) != 0) {
          fail(ss[i]["link_id"], key + ".link_id", "links other than 0 are not mapped onto ttemu (it drives one routing plane)");
        }
        Sender s{device(ss[i]["device"], key + ".device"), {}};
        for (size_t j = 0; j < ss[i]["patterns"].size(); ++j) {
          SenderPattern p;
          p.key = fmt::format("{}.patterns[{}]", key, j);
          p.traffic = traffic(ss[i]["patterns"][j], p.key, &p.destination);
          if (!p.destination) fail(ss[i]["patterns"][j], p.key + ".destination", "missing (ttemu needs the destination device)");
          s.patterns.push_back(std::move(p));
        }
        t.senders.push_back(std::move(s));
      }
    }
    if (t.patterns.empty() && t.senders.empty()) fail(n, "patterns", "the test has neither patterns nor senders");
    return t;
  }

  File file(const YAML::Node& root) {
    File f;
    f.source = source_;
    if (!root.IsMap()) fail(root, "Tests", "expected a map with a 'Tests' list at the top");
    keys(root, "", {"Tests", "allocation_policies", "physical_mesh"});
    if (!root["Tests"] || !root["Tests"].IsSequence()) fail(root, "Tests", "missing, or not a list");
    std::set<std::string> names;
    for (size_t i = 0; i < root["Tests"].size(); ++i) {
      f.tests.push_back(test(root["Tests"][i], i));
      if (!names.insert(f.tests.back().name).second) fail(root["Tests"][i]["name"], "name", "a second test of this name");
    }
    return f;
  }

 private:
  std::string source_;
  std::string test_;
  int test_line_ = 0;
};

// The context of one test's expansion: its errors name the file, the test and the key.
class Expander {
 public:
  Expander(const File& f, const Test& t, const System& sys) : f_(f), t_(t), sys_(sys) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(fmt::format("{}:{}: test '{}': {}: {}", f_.source, t_.line, t_.name, key, why));
  }

  int node(const Device& d) const {
    const int n = sys_.node_count();
    if (d.kind == Device::kChipId) {
      if (d.chip >= n) fail(d.key, fmt::format("device {}: {} has {} chips (ids 0-{}, in its node order)", d.text, sys_.source, n, n - 1));
      return d.chip;
    }
    for (int i = 0; i < n; ++i) {
      const Chip& c = sys_.chips[static_cast<size_t>(i)];
      if (c.id.mesh != d.mesh) continue;
      if (d.kind == Device::kMeshChip ? c.id.device == d.chip : (c.coord.row == d.row && c.coord.col == d.col && c.coord.layer == 0)) return i;
    }
    fail(d.key, fmt::format("device {}: {} has no such chip", d.text, sys_.source));
  }

  bool linear(int a, int b) const {
    const Chip &x = sys_.chips[static_cast<size_t>(a)], &y = sys_.chips[static_cast<size_t>(b)];
    return x.id.mesh == y.id.mesh && (x.coord.row == y.coord.row || x.coord.col == y.coord.col);
  }

  // The pairs of a high-level pattern, as tt-metal's test builder draws them.
  std::vector<std::pair<int, int>> pairs(const HighLevelPattern& h, uint32_t iteration, uint64_t seed) const {
    const int n = sys_.node_count();
    const bool line = t_.topology == "Linear";
    const std::string ours = kHighLevel.at(h.type);
    std::vector<std::pair<int, int>> out;
    if (ours == "all_to_all" || ours == "one_to_all") {
      if (ours == "all_to_all" && sys_.meshes.size() > 1) {
        fail(h.key + ".type", "all_to_all over several meshes is not mapped onto ttemu (tt-metal keeps the pairs of "
                              "adjacent meshes only)");
      }
      for (int s = 0; s < (ours == "one_to_all" ? std::min(n, 1) : n); ++s) {
        for (int d = 0; d < n; ++d) {
          if (s != d && (!line || linear(s, d))) out.emplace_back(s, d);
        }
      }
    } else if (ours == "all_to_one") {
      const int dst = static_cast<int>(iteration % static_cast<uint32_t>(n));
      for (int s = 0; s < n; ++s) {
        if (s != dst && (!line || linear(s, dst))) out.emplace_back(s, dst);
      }
    } else if (ours == "neighbor_exchange") {
      if (t_.topology == "Ring") fail(h.key + ".type", "neighbor_exchange on a Ring topology (the mesh's perimeter) is not mapped onto ttemu");
      for (int s = 0; s < n; ++s) {
        for (int d = 0; d < n; ++d) {
          const Chip &x = sys_.chips[static_cast<size_t>(s)], &y = sys_.chips[static_cast<size_t>(d)];
          if (x.id.mesh == y.id.mesh && x.coord.layer == y.coord.layer &&
              std::abs(x.coord.row - y.coord.row) + std::abs(x.coord.col - y.coord.col) == 1) {
            out.emplace_back(s, d);
          }
        }
      }
    } else {  // random_pairing, one way per pair as tt-metal draws it
      std::mt19937 gen(static_cast<uint32_t>(seed + iteration));
      std::vector<int> unpaired(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) unpaired[static_cast<size_t>(i)] = i;
      std::shuffle(unpaired.begin(), unpaired.end(), gen);
      while (unpaired.size() >= 2) {
        const int src = unpaired.back();
        unpaired.pop_back();
        std::vector<size_t> valid;
        for (size_t i = 0; i < unpaired.size(); ++i) {
          if (!line || linear(src, unpaired[i])) valid.push_back(i);
        }
        if (valid.empty()) break;
        std::shuffle(valid.begin(), valid.end(), gen);
        out.emplace_back(src, unpaired[valid.front()]);
        std::swap(unpaired[valid.front()], unpaired.back());
        unpaired.pop_back();
      }
    }
    return out;
  }

  std::vector<Run> runs(uint64_t default_seed) const {
    // The cross product of the parametrization, in file order (one combination when none).
    std::vector<std::vector<std::pair<std::string, std::string>>> combos{{}};
    for (const auto& [key, values] : t_.parametrization) {
      std::vector<std::vector<std::pair<std::string, std::string>>> next;
      for (const auto& c : combos) {
        for (const auto& v : values) {
          auto more = c;
          more.emplace_back(key, v);
          next.push_back(more);
        }
      }
      combos = std::move(next);
    }
    uint32_t per_top = 1;
    for (const auto& h : t_.patterns) per_top = std::max(per_top, h.iterations);
    const uint32_t total = per_top * t_.top_level_iterations;
    const uint64_t seed = t_.seed.value_or(default_seed);
    std::vector<Run> out;
    for (const auto& combo : combos) {
      Traffic base = t_.defaults;
      std::string name = t_.name;
      for (const auto& [k, v] : combo) {
        name += "_" + k + "_" + v;
        if (k == "size") base.size = static_cast<uint32_t>(std::stoul(v));
        else if (k == "num_packets") base.num_packets = static_cast<uint32_t>(std::stoul(v));
        else if (k == "ntype") base.ntype = v;
        else base.ftype = v;
      }
      for (uint32_t it = 0; it < total; ++it) {
        const uint32_t i = it % per_top;  // the index within a top-level iteration
        struct Part {
          Traffic traffic;
          std::string key;
        };
        std::vector<Part> parts;
        std::vector<std::pair<int, int>> chosen;
        std::map<std::pair<int, int>, std::string> from;  // which key each pair came from
        std::vector<std::string> kinds;
        auto add = [&](std::pair<int, int> p, const std::string& key) {
          auto [at, fresh] = from.emplace(p, key);
          if (!fresh) {
            fail(key, fmt::format("{} -> {} is driven twice (also by {}); ttemu drives each pair once",
                                  routing::to_string(sys_.chips[static_cast<size_t>(p.first)].id),
                                  routing::to_string(sys_.chips[static_cast<size_t>(p.second)].id), at->second));
          }
          chosen.push_back(p);
        };
        for (const auto& h : t_.patterns) {
          if (i >= h.iterations) continue;
          parts.push_back({base, h.key});
          const auto ps = this->pairs(h, i, seed);
          if (ps.empty()) fail(h.key + ".type", fmt::format("pattern {} has no pairs on {}", h.type, sys_.source));
          for (auto p : ps) add(p, h.key);
          if (!one_of(kinds, kHighLevel.at(h.type))) kinds.push_back(kHighLevel.at(h.type));
        }
        for (const auto& s : t_.senders) {
          const int src = node(s.device);
          for (const auto& p : s.patterns) {
            Traffic merged = base;
            if (p.traffic.ftype) merged.ftype = p.traffic.ftype;
            if (p.traffic.ntype) merged.ntype = p.traffic.ntype;
            if (p.traffic.size) merged.size = p.traffic.size;
            if (p.traffic.num_packets) merged.num_packets = p.traffic.num_packets;
            parts.push_back({merged, p.key});
            const int dst = node(*p.destination);
            if (dst == src) fail(p.destination->key, fmt::format("device {} is the sender itself", p.destination->text));
            if (t_.topology == "Linear" && !linear(src, dst)) {
              fail(p.destination->key, fmt::format("device {} is not in the sender's row or column (topology Linear)", p.destination->text));
            }
            add({src, dst}, p.key);
          }
          if (!one_of(kinds, "unicast")) kinds.push_back("unicast");
        }
        // Every part's parameters given, and one set of them for the whole test.
        for (const auto& part : parts) {
          const Traffic& tr = part.traffic;
          const std::pair<bool, const char*> given[] = {
              {tr.ftype.has_value(), "ftype"}, {tr.ntype.has_value(), "ntype"}, {tr.size.has_value(), "size"}, {tr.num_packets.has_value(), "num_packets"}};
          for (const auto& [present, what] : given) {
            if (!present) fail(part.key, fmt::format("no {} (here, in defaults or in parametrization_params)", what));
          }
          if (!(tr == parts.front().traffic)) {
            fail(part.key, fmt::format("its ftype/ntype/size/num_packets ({}/{}/{}/{}) differ from {}'s ({}/{}/{}/{}); ttemu runs one "
                                       "shape per test", *tr.ftype, *tr.ntype, *tr.size, *tr.num_packets, parts.front().key,
                                       *parts.front().traffic.ftype, *parts.front().traffic.ntype, *parts.front().traffic.size,
                                       *parts.front().traffic.num_packets));
          }
        }
        const Traffic& tr = parts.front().traffic;
        const std::string kind = fmt::format("{}", fmt::join(kinds, "+"));
        out.push_back(Run{name, *tr.ftype, *tr.ntype, t_.topology, t_.num_links, *tr.size, *tr.num_packets, kind, std::move(chosen), it, total});
      }
    }
    return out;
  }

 private:
  const File& f_;
  const Test& t_;
  const System& sys_;
};

}  // namespace

File parse_text(const std::string& text, const std::string& source) { return Reader(source).file(load_yaml(text, source)); }

File parse_file(const std::string& path) { return parse_text(read_text_file(path), path); }

std::vector<Run> expand(const File& file, const System& sys, uint64_t seed) {
  std::vector<Run> out;
  for (const auto& t : file.tests) {
    auto runs = Expander(file, t, sys).runs(seed);
    out.insert(out.end(), std::make_move_iterator(runs.begin()), std::make_move_iterator(runs.end()));
  }
  return out;
}

std::string report_ftype(const std::string& ftype) { return ftype == "mcast" ? "CHIP_MULTICAST" : "CHIP_UNICAST"; }

std::string report_ntype(const std::string& ntype) {
  if (ntype == "atomic_inc") return "NOC_UNICAST_ATOMIC_INC";
  if (ntype == "fused_atomic_inc") return "NOC_FUSED_UNICAST_ATOMIC_INC";
  if (ntype == "unicast_scatter_write") return "NOC_UNICAST_SCATTER_WRITE";
  return "NOC_UNICAST_WRITE";
}

}  // namespace ttemu::control::ttmetal
