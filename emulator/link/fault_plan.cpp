#include "emulator/link/fault_plan.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"

namespace ttemu::link {

namespace {

class PlanReader {
 public:
  PlanReader(std::string source, const control::System& sys) : source_(std::move(source)), sys_(sys) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    int line = at.IsDefined() && at.Mark().line >= 0 ? at.Mark().line + 1 : 1;
    throw Error(fmt::format("{}:{}: {}", source_, line, what));
  }

  double number(const YAML::Node& n, const std::string& what, double lo, double hi) {
    if (!n.IsScalar()) fail(n, what + " must be a number");
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(n.Scalar(), &used);
      if (used != n.Scalar().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      fail(n, fmt::format("{} must be a number, not '{}'", what, n.Scalar()));
    }
    if (!(v >= lo && v <= hi)) fail(n, fmt::format("{} {} is out of range ({}-{})", what, n.Scalar(), lo, hi));
    return v;
  }

  void apply(const YAML::Node& spec, DirectionFaults& f, const std::string& what) {
    for (const auto& kv : spec) {
      const std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (key == "link" || key == "direction") continue;
      if (key == "corrupt") f.corrupt = number(v, what + " corrupt", 0, 1);
      else if (key == "ber") f.ber = number(v, what + " ber", 0, 1);
      else if (key == "drop") f.drop = number(v, what + " drop", 0, 1);
      else if (key == "delay_us") f.delay = std::chrono::microseconds(static_cast<long>(number(v, what + " delay_us", 0, 10e6)));
      else if (key == "burst") {
        if (!v.IsMap()) fail(v, what + " burst must be {enter_bad, leave_bad, corrupt_in_bad}");
        for (const auto& b : v) {
          const std::string k = b.first.Scalar();
          if (k == "enter_bad") f.burst.enter_bad = number(b.second, what + " burst enter_bad", 0, 1);
          else if (k == "leave_bad") f.burst.leave_bad = number(b.second, what + " burst leave_bad", 0, 1);
          else if (k == "corrupt_in_bad") f.burst.corrupt_in_bad = number(b.second, what + " burst corrupt_in_bad", 0, 1);
          else fail(b.first, fmt::format("{} burst: unknown key '{}' (enter_bad, leave_bad, corrupt_in_bad)", what, k));
        }
      } else if (key == "down") {
        if (!v.IsSequence()) fail(v, what + " down must be a list of {at, for}");
        for (const auto& w : v) {
          if (!w.IsMap() || !w["at"] || !w["for"]) fail(w, what + " down: each entry needs at and for (seconds)");
          auto at = std::chrono::duration<double>(number(w["at"], what + " down at", 0, 1e6));
          auto len = std::chrono::duration<double>(number(w["for"], what + " down for", 0, 1e6));
          f.down.push_back({std::chrono::duration_cast<Duration>(at), std::chrono::duration_cast<Duration>(at + len)});
        }
      } else {
        fail(kv.first, fmt::format("{}: unknown key '{}' (corrupt, ber, burst, drop, delay_us, down)", what, key));
      }
    }
  }

  FaultPlan read(const YAML::Node& root) {
    FaultPlan plan;
    if (!root.IsDefined() || root.IsNull()) return plan;
    if (!root.IsMap()) fail(root, "a fault plan is a mapping with seed, defaults and links");
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      if (key != "seed" && key != "defaults" && key != "links") {
        fail(kv.first, fmt::format("unknown key '{}' (seed, defaults, links)", key));
      }
    }
    if (root["seed"]) {
      try {
        size_t used = 0;
        plan.seed = std::stoull(root["seed"].Scalar(), &used, 10);
        if (used != root["seed"].Scalar().size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        fail(root["seed"], fmt::format("seed must be a whole number, not '{}'", root["seed"].Scalar()));
      }
    }
    DirectionFaults defaults;
    if (root["defaults"]) {
      if (!root["defaults"].IsMap()) fail(root["defaults"], "defaults must be a mapping of faults");
      apply(root["defaults"], defaults, "defaults");
    }
    if (root["defaults"]) {
      for (const auto& l : sys_.links) {
        for (const auto& end : {l.a, l.b}) plan.tx[end] = defaults;
      }
    }
    if (!root["links"]) return plan;
    if (!root["links"].IsSequence()) fail(root["links"], "links must be a list");
    for (const auto& entry : root["links"]) {
      if (!entry.IsMap() || !entry["link"]) fail(entry, "each links entry needs link: MxDyPz (or all)");
      const std::string name = entry["link"].Scalar();
      std::string dir = entry["direction"] ? entry["direction"].Scalar() : "both";
      if (dir != "out" && dir != "in" && dir != "both") {
        fail(entry["direction"], fmt::format("direction '{}' must be out, in or both", dir));
      }
      std::vector<routing::PortId> ends;  // the ports named
      if (name == "all") {
        if (entry["direction"] && dir != "both") {
          fail(entry["direction"], "link: all covers both directions of every link; drop direction");
        }
        for (const auto& l : sys_.links) ends.push_back(l.a), ends.push_back(l.b);
        dir = "out";  // every port's outgoing wire covers every direction once
      } else {
        auto port = routing::parse_port(name);
        if (!port) fail(entry["link"], fmt::format("'{}' is not a port like M0D1P2 (or all)", name));
        auto peer = sys_.peer(*port);
        if (!peer) fail(entry["link"], fmt::format("port {} has no link in {}", name, sys_.source));
        ends.push_back(*port);
      }
      for (const auto& end : ends) {
        std::vector<routing::PortId> tx;
        if (dir != "in") tx.push_back(end);
        if (dir != "out") tx.push_back(*sys_.peer(end));
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
  const control::System& sys_;
};

}  // namespace

FaultPlan parse_fault_plan(std::string_view yaml_text, const std::string& source,
                           const control::System& sys) {
  try {
    return PlanReader(source, sys).read(YAML::Load(std::string(yaml_text)));
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg));
  }
}

FaultPlan load_fault_plan(const std::string& path, const control::System& sys) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open the file", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_fault_plan(buf.str(), path, sys);
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
