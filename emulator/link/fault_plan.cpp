#include "emulator/link/fault_plan.hpp"

#include <algorithm>
#include <charconv>
#include <regex>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"
#include "emulator/common/yaml_input.hpp"

namespace ttemu::link {

namespace {

// Bounds as the docs write them: 10000000, not 1e+07.
std::string bound(double v) { return fmt::format("{:.15g}", v); }

class PlanReader {
 public:
  PlanReader(std::string source, const routing::Wiring& wiring) : source_(std::move(source)), wiring_(wiring) {}

  // An empty value has no useful line of its own (yaml-cpp marks where the next token starts),
  // so errors about it point at its key.
  [[noreturn]] void fail(const YAML::Node& at, const std::string& what, const YAML::Node& key = YAML::Node()) const {
    const YAML::Node& n = (!at.IsDefined() || at.IsNull()) && key.Mark().line >= 0 ? key : at;
    int line = n.IsDefined() && n.Mark().line >= 0 ? n.Mark().line + 1 : 1;
    throw Error(fmt::format("{}:{}: {}", source_, line, what));
  }

  std::string key(const YAML::Node& k) const {
    if (!k.IsScalar()) fail(k, "a key must be a word, not " + yaml_kind(k));
    return k.Scalar();
  }

  // The key node of `name` in a mapping, for lines of errors about an empty value.
  YAML::Node key_node(const YAML::Node& map, const std::string& name) const {
    for (const auto& kv : map) {
      if (kv.first.IsScalar() && kv.first.Scalar() == name) return kv.first;
    }
    return YAML::Node();
  }

  double number(const YAML::Node& n, const std::string& what, double lo, double hi, const YAML::Node& k = YAML::Node()) {
    const std::string expected = fmt::format("{} must be a number {}-{}", what, bound(lo), bound(hi));
    if (!n.IsScalar()) fail(n, expected + ", not " + yaml_kind(n), k);
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(n.Scalar(), &used);
      if (used != n.Scalar().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      fail(n, expected + ", not " + yaml_kind(n));
    }
    if (!(v >= lo && v <= hi)) fail(n, fmt::format("{} {} is out of range ({}-{})", what, n.Scalar(), bound(lo), bound(hi)));
    return v;
  }

  uint64_t seed(const YAML::Node& n, const YAML::Node& k) {
    const std::string expected = fmt::format("seed must be a whole number 0-{}", kMaxSeed);
    if (!n.IsScalar()) fail(n, expected + ", not " + yaml_kind(n), k);
    const std::string& text = n.Scalar();
    static const std::regex whole(R"(-?[0-9]+)");
    if (!std::regex_match(text, whole)) fail(n, expected + ", not " + yaml_kind(n));
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data() + (text[0] == '-'), text.data() + text.size(), v);
    const bool negative = text[0] == '-' && v != 0;
    if (negative || ec != std::errc() || end != text.data() + text.size() || v > kMaxSeed) {
      fail(n, fmt::format("seed {} is out of range (0-{})", text, kMaxSeed));
    }
    return v;
  }

  void apply(const YAML::Node& spec, DirectionFaults& f, const std::string& what) {
    for (const auto& kv : spec) {
      const std::string k = key(kv.first);
      const YAML::Node& v = kv.second;
      if (k == "link" || k == "direction") continue;
      if (k == "corrupt") f.corrupt = number(v, what + " corrupt", 0, 1, kv.first);
      else if (k == "ber") f.ber = number(v, what + " ber", 0, 1, kv.first);
      else if (k == "drop") f.drop = number(v, what + " drop", 0, 1, kv.first);
      else if (k == "delay_us") f.delay = std::chrono::microseconds(static_cast<long>(number(v, what + " delay_us", 0, 10e6, kv.first)));
      else if (k == "burst") {
        if (!v.IsMap()) fail(v, what + " burst must be a mapping {enter_bad, leave_bad, corrupt_in_bad}, not " + yaml_kind(v), kv.first);
        for (const auto& b : v) {
          const std::string bk = key(b.first);
          if (bk == "enter_bad") f.burst.enter_bad = number(b.second, what + " burst enter_bad", 0, 1, b.first);
          else if (bk == "leave_bad") f.burst.leave_bad = number(b.second, what + " burst leave_bad", 0, 1, b.first);
          else if (bk == "corrupt_in_bad") f.burst.corrupt_in_bad = number(b.second, what + " burst corrupt_in_bad", 0, 1, b.first);
          else fail(b.first, fmt::format("{} burst: unknown key '{}' (enter_bad, leave_bad, corrupt_in_bad)", what, bk));
        }
      } else if (k == "down") {
        if (!v.IsSequence()) fail(v, what + " down must be a list of {at, for}, not " + yaml_kind(v), kv.first);
        for (const auto& w : v) {
          if (!w.IsMap() || !w["at"] || !w["for"]) fail(w, what + " down: each entry needs at and for (seconds)");
          auto at = std::chrono::duration<double>(number(w["at"], what + " down at", 0, 1e6, key_node(w, "at")));
          auto len = std::chrono::duration<double>(number(w["for"], what + " down for", 0, 1e6, key_node(w, "for")));
          f.down.push_back({std::chrono::duration_cast<Duration>(at), std::chrono::duration_cast<Duration>(at + len)});
        }
      } else {
        fail(kv.first, fmt::format("{}: unknown key '{}' (corrupt, ber, burst, drop, delay_us, down)", what, k));
      }
    }
  }

  FaultPlan read(const YAML::Node& root) {
    FaultPlan plan;
    if (!root.IsDefined() || root.IsNull()) return plan;
    if (!root.IsMap()) fail(root, "a fault plan is a mapping with seed, defaults and links, not " + yaml_kind(root));
    for (const auto& kv : root) {
      const std::string k = key(kv.first);
      if (k != "seed" && k != "defaults" && k != "links") {
        fail(kv.first, fmt::format("unknown key '{}' (seed, defaults, links)", k));
      }
    }
    if (root["seed"]) plan.seed = seed(root["seed"], key_node(root, "seed"));
    DirectionFaults defaults;
    if (root["defaults"]) {
      const YAML::Node d = root["defaults"];
      if (!d.IsMap()) fail(d, "defaults must be a mapping of faults, not " + yaml_kind(d), key_node(root, "defaults"));
      apply(d, defaults, "defaults");
      for (const auto& [a, b] : wiring_.links) {
        for (const auto& end : {a, b}) plan.tx[end] = defaults;
      }
    }
    if (!root["links"]) return plan;
    const YAML::Node links = root["links"];
    if (!links.IsSequence()) fail(links, "links must be a list, not " + yaml_kind(links), key_node(root, "links"));
    for (const auto& entry : links) {
      if (!entry.IsMap()) fail(entry, "each links entry must be a mapping with link: MxDyPz (or all), not " + yaml_kind(entry));
      for (const auto& kv : entry) key(kv.first);
      if (!entry["link"]) fail(entry, "each links entry needs link: MxDyPz (or all)");
      const YAML::Node link = entry["link"];
      if (!link.IsScalar()) fail(link, "link must be a port like M0D1P2 (or all), not " + yaml_kind(link), key_node(entry, "link"));
      const std::string name = link.Scalar();
      std::string dir = "both";
      if (entry["direction"]) {
        const YAML::Node d = entry["direction"];
        if (!d.IsScalar()) fail(d, "direction must be out, in or both, not " + yaml_kind(d), key_node(entry, "direction"));
        dir = d.Scalar();
        if (dir != "out" && dir != "in" && dir != "both") fail(d, fmt::format("direction '{}' must be out, in or both", dir));
      }
      std::vector<routing::PortId> ends;  // the ports named
      if (name == "all") {
        if (dir != "both") fail(entry["direction"], "link: all covers both directions of every link; leave out direction");
        for (const auto& [a, b] : wiring_.links) ends.push_back(a), ends.push_back(b);
        dir = "out";  // every port's outgoing wire covers every direction once
      } else {
        auto port = routing::parse_port(name);
        if (!port) fail(link, fmt::format("'{}' is not a port like M0D1P2 (or all)", name));
        auto peer = wiring_.peer(*port);
        if (!peer) fail(link, fmt::format("port {} has no link in {}", name, wiring_.name));
        ends.push_back(*port);
      }
      for (const auto& end : ends) {
        std::vector<routing::PortId> tx;
        if (dir != "in") tx.push_back(end);
        if (dir != "out") tx.push_back(*wiring_.peer(end));
        for (const auto& t : tx) {
          auto& f = plan.tx[t];
          apply(entry, f, "link " + name);
        }
      }
    }
    return plan;
  }

 private:
  std::string source_;
  const routing::Wiring& wiring_;
};

}  // namespace

FaultPlan parse_fault_plan(std::string_view yaml_text, const std::string& source,
                           const routing::Wiring& wiring) {
  YAML::Node root = load_yaml(yaml_text, source);
  try {
    return PlanReader(source, wiring).read(root);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: {}", source, std::max(e.mark.line, 0) + 1, e.msg));
  }
}

FaultPlan load_fault_plan(const std::string& path, const routing::Wiring& wiring) {
  return parse_fault_plan(read_text_file(path), path, wiring);
}

nlohmann::json to_json(const DirectionFaults& f) {
  nlohmann::json down = nlohmann::json::array();
  for (const auto& d : f.down) down.push_back({d.from.count(), d.to.count()});
  return {{"corrupt", f.corrupt},
          {"ber", f.ber},
          {"burst", {f.burst.enter_bad, f.burst.leave_bad, f.burst.corrupt_in_bad}},
          {"drop", f.drop},
          {"delay_ns", f.delay.count()},
          {"down", down}};
}

DirectionFaults faults_from_json(const nlohmann::json& j) {
  DirectionFaults f;
  f.corrupt = j.value("corrupt", 0.0);
  f.ber = j.value("ber", 0.0);
  if (j.contains("burst")) {
    f.burst.enter_bad = j["burst"][0];
    f.burst.leave_bad = j["burst"][1];
    f.burst.corrupt_in_bad = j["burst"][2];
  }
  f.drop = j.value("drop", 0.0);
  f.delay = Duration(j.value("delay_ns", 0L));
  if (j.contains("down")) {
    for (const auto& d : j["down"]) f.down.push_back({Duration(d[0].get<long>()), Duration(d[1].get<long>())});
  }
  return f;
}

}  // namespace ttemu::link
