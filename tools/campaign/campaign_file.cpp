#include "tools/campaign/campaign_file.hpp"

#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"
#include "emulator/common/yaml_input.hpp"
#include "emulator/control/live_routes.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/traffic_patterns.hpp"
#include "emulator/link/fault_plan.hpp"
#include "tools/campaign/child.hpp"

namespace ttemu::tools {

namespace fs = std::filesystem;

namespace {

struct Reader {
  std::string source;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& what) const {
    throw Error(fmt::format("{}:{}: {}", source, n.Mark().line + 1, what));
  }
  void keys(const YAML::Node& n, std::initializer_list<const char*> allowed, const char* what) const {
    if (!n.IsMap()) fail(n, fmt::format("{} must be a mapping, not {}", what, yaml_kind(n)));
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }) == allowed.end()) {
        fail(kv.first, fmt::format("unknown key '{}' in {}", k, what));
      }
    }
  }
  template <class T>
  T get(const YAML::Node& n, const char* key, T fallback, T lo, T hi) const {
    const YAML::Node v = n[key];
    return v ? number(v, key, lo, hi) : fallback;
  }
  // A number in [lo, hi]; `key` names it in errors.
  template <class T>
  T number(const YAML::Node& v, const char* key, T lo, T hi) const {
    T x{};
    try {
      x = v.as<T>();
    } catch (const YAML::Exception&) {
      fail(v, fmt::format("'{}' must be a number, not {}", key, yaml_kind(v)));
    }
    if (x < lo || x > hi) fail(v, fmt::format("'{}' must be from {} to {}", key, lo, hi));
    return x;
  }
  std::vector<std::string> strings(const YAML::Node& n, const char* key) const {
    std::vector<std::string> out;
    const YAML::Node v = n[key];
    if (!v) return out;
    if (!v.IsSequence()) fail(v, fmt::format("'{}' must be a list, not {}", key, yaml_kind(v)));
    for (const auto& s : v) {
      if (!s.IsScalar()) fail(s, fmt::format("'{}' takes names, not {}", key, yaml_kind(s)));
      out.push_back(s.Scalar());
    }
    return out;
  }
  bool flag(const YAML::Node& n, const char* key) const {
    const YAML::Node v = n[key];
    if (!v) return false;
    try {
      return v.as<bool>();
    } catch (const YAML::Exception&) {
      fail(v, fmt::format("'{}' must be true or false, not {}", key, yaml_kind(v)));
    }
  }
};

// A topology: a name in the project's topologies/ (without .yaml), or a path relative to the
// campaign file.
std::string find_topology(const Reader& rd, const YAML::Node& n, const fs::path& base) {
  const std::string t = n.Scalar();
  for (const fs::path& p : {base / t, fs::path(TTEMU_SOURCE_DIR) / "topologies" / (t + ".yaml"), fs::path("topologies") / (t + ".yaml")}) {
    if (fs::is_regular_file(p)) return fs::absolute(p).lexically_normal().string();
  }
  rd.fail(n, fmt::format("topology '{}' is neither a file next to the campaign nor a name in topologies/", t));
}

// "NAME@MS" or "NAME@MS-MS", as ttemu sim takes them: the name, and one or two times.
struct Timed {
  std::string what;
  std::vector<double> ms;
};
Timed timed(const std::string& text) {
  const auto at = text.find('@');
  Timed t{text.substr(0, at), {}};
  const auto bad = [&] { return Error(fmt::format("'{}': expected NAME@MS or NAME@MS-MS", text)); };
  if (at == std::string::npos || at == 0) throw bad();
  std::string rest = text.substr(at + 1);
  for (size_t from = 0; from <= rest.size();) {
    const size_t dash = std::min(rest.find('-', from), rest.size());
    size_t used = 0;
    try {
      t.ms.push_back(std::stod(rest.substr(from, dash - from), &used));
    } catch (const std::exception&) {
      throw bad();
    }
    if (used != dash - from || t.ms.back() < 0 || t.ms.size() > 2) throw bad();
    from = dash + 1;
  }
  return t;
}

// A stall or a loop: A:B@MS-MS, both times given.
void check_pair_at(const Reader& rd, const YAML::Node& n, const std::string& text, const char* form) {
  Timed t;
  try {
    t = timed(text);
  } catch (const Error& e) {
    rd.fail(n, e.what());
  }
  const auto colon = t.what.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == t.what.size() || t.ms.size() != 2 || t.ms[1] <= t.ms[0]) {
    rd.fail(n, fmt::format("'{}': expected {}@MS-MS, the second time after the first", text, form));
  }
}

SwarmSpec swarm_spec(const Reader& rd, const YAML::Node& n, const Scenario& s) {
  if (!s.faults_yaml.empty() || !s.cuts.empty() || !s.kills.empty() || !s.restarts.empty() || !s.stalls.empty() || !s.loops.empty()) {
    rd.fail(n, "a swarm scenario draws its own faults: leave out faults, cut, kill, restart, stall and loop");
  }
  if (n.IsNull()) return {};
  rd.keys(n, {"faults", "kinds", "span_ms"}, "swarm");
  SwarmSpec w;
  w.faults = rd.get<int>(n, "faults", w.faults, 1, 64);
  w.span_ms = rd.get<double>(n, "span_ms", w.span_ms, 1, 1e6);
  for (const auto& k : rd.strings(n, "kinds")) {
    try {
      w.kinds.push_back(fault_kind(k));
    } catch (const Error& e) {
      rd.fail(n["kinds"], e.what());
    }
  }
  return w;
}

}  // namespace

Campaign load_campaign(const std::string& path) {
  const YAML::Node root = load_yaml(read_text_file(path), path);
  Reader rd{path};
  rd.keys(root, {"name", "topologies", "workloads", "scenarios", "seeds", "retry", "limit_s"}, "a campaign");
  Campaign c;
  c.file = fs::absolute(path).string();
  c.name = root["name"] ? root["name"].Scalar() : fs::path(path).stem().string();
  const fs::path base = fs::path(path).parent_path();
  const YAML::Node topologies = root["topologies"];
  if (!topologies || !topologies.IsSequence() || topologies.size() == 0) rd.fail(root, "'topologies' must be a list of one or more");
  for (const auto& t : topologies) c.topologies.emplace_back(fs::path(t.Scalar()).stem().string(), find_topology(rd, t, base));
  const YAML::Node workloads = root["workloads"];
  if (!workloads || !workloads.IsSequence() || workloads.size() == 0) rd.fail(root, "'workloads' must be a list of one or more");
  for (const auto& w : workloads) {
    rd.keys(w, {"pattern", "op", "size", "count", "fvc"}, "a workload");
    Workload x;
    if (w["pattern"]) x.pattern = w["pattern"].Scalar();
    if (w["op"]) x.op = w["op"].Scalar();
    if (x.op != "write" && x.op != "read" && x.op != "atomic") rd.fail(w["op"], fmt::format("op '{}' is not write, read or atomic", x.op));
    try {
      control::expand_patterns({x.pattern});
    } catch (const Error& e) {
      rd.fail(w, e.what());
    }
    x.size = rd.get<uint32_t>(w, "size", x.size, 1, 1 << 20);
    x.count = rd.get<uint32_t>(w, "count", x.count, 1, 100000);
    x.fvc = rd.get<int>(w, "fvc", x.fvc, -1, 7);
    c.workloads.push_back(x);
  }
  const YAML::Node scenarios = root["scenarios"];
  if (!scenarios) {
    Scenario clean;
    clean.name = "clean";
    c.scenarios.push_back(clean);
  } else if (!scenarios.IsSequence()) rd.fail(scenarios, "'scenarios' must be a list");
  for (const auto& s : scenarios ? scenarios : YAML::Node(YAML::NodeType::Sequence)) {
    rd.keys(s, {"name", "faults", "cut", "kill", "restart", "stall", "loop", "only", "nacks_allowed", "expect_fallback",
                "expect_reload", "swarm", "patterns"},
            "a scenario");
    Scenario x;
    if (!s["name"]) rd.fail(s, "a scenario needs a name");
    x.name = s["name"].Scalar();
    if (s["faults"]) {
      YAML::Emitter out;
      out << s["faults"];
      x.faults_yaml = out.c_str();
    }
    x.cuts = rd.strings(s, "cut");
    x.kills = rd.strings(s, "kill");
    x.restarts = rd.strings(s, "restart");
    x.stalls = rd.strings(s, "stall");
    x.loops = rd.strings(s, "loop");
    for (const auto& t : x.stalls) check_pair_at(rd, s["stall"], t, "CHIP:FVC");
    for (const auto& t : x.loops) check_pair_at(rd, s["loop"], t, "CHIP:DESTINATION");
    x.only = rd.strings(s, "only");
    x.patterns = rd.strings(s, "patterns");
    x.nacks_allowed = rd.flag(s, "nacks_allowed");
    x.expect_fallback = rd.flag(s, "expect_fallback");
    x.expect_reload = rd.flag(s, "expect_reload");
    if (const YAML::Node w = s["swarm"]) x.swarm = swarm_spec(rd, w, x);
    c.scenarios.push_back(x);
  }
  const YAML::Node seeds = root["seeds"];
  if (!seeds) c.seeds = {1};
  else if (seeds.IsSequence()) {
    for (const auto& s : seeds) c.seeds.push_back(rd.number<uint64_t>(s, "seed", 0, link::kMaxSeed));
    if (c.seeds.empty()) rd.fail(seeds, "'seeds' must name one or more");
  } else {
    const auto n = rd.get<uint64_t>(root, "seeds", 1, 1, 1000000);
    for (uint64_t i = 1; i <= n; ++i) c.seeds.push_back(i);
  }
  c.retry = rd.get<int>(root, "retry", c.retry, 0, 100);
  c.limit_s = rd.get<double>(root, "limit_s", c.limit_s, 1, 86400);
  return c;
}

std::vector<Run> expand(const Campaign& c) {
  std::vector<Run> runs;
  for (size_t t = 0; t < c.topologies.size(); ++t) {
    for (size_t w = 0; w < c.workloads.size(); ++w) {
      for (size_t s = 0; s < c.scenarios.size(); ++s) {
        const auto& only = c.scenarios[s].only;
        if (!only.empty() && std::find(only.begin(), only.end(), c.topologies[t].first) == only.end()) continue;
        const auto& patterns = c.scenarios[s].patterns;
        if (!patterns.empty() && std::find(patterns.begin(), patterns.end(), c.workloads[w].pattern) == patterns.end()) continue;
        for (uint64_t seed : c.seeds) runs.push_back({static_cast<int>(runs.size()), t, w, s, seed});
      }
    }
  }
  return runs;
}

RunPlan plan_run(const Campaign& c, const Run& r) {
  const Scenario& s = c.scenarios[r.scenario];
  RunPlan p{c.topologies[r.topology].first, c.topologies[r.topology].second, c.workloads[r.workload], s, s, {}, r.seed, c.retry};
  if (!s.swarm) return p;
  return with_schedule(p, draw_schedule(*p.scenario.swarm, control::load_system(p.topology_path), r.seed));
}

RunPlan with_schedule(RunPlan p, std::vector<Fault> schedule) {
  SimFaults told = sim_faults(schedule);
  Scenario& s = p.scenario = p.base;
  s.faults_yaml = std::move(told.plan_yaml);
  s.cuts = std::move(told.cuts);
  s.kills = std::move(told.kills);
  s.restarts = std::move(told.restarts);
  // A killed chip's writes are NACKed, and the control plane routes around it unless the chip
  // is back before the reload is due (LiveRoutes::kSettle after the news); a cut link may cost
  // NACKs where no parallel link carries its traffic. What the scenario asks besides stays.
  const auto any = [&](auto pred) { return std::any_of(schedule.begin(), schedule.end(), pred); };
  const double settle_ms = std::chrono::duration<double, std::milli>(control::LiveRoutes::kSettle).count();
  s.nacks_allowed = s.nacks_allowed || any([](const Fault& f) { return f.kind == Fault::Kind::kKill || f.kind == Fault::Kind::kCut; });
  s.expect_reload = s.expect_reload || any([&](const Fault& f) {
    return f.kind == Fault::Kind::kKill && (f.for_ms == 0 || f.for_ms > 2 * settle_ms);
  });
  p.schedule = std::move(schedule);
  return p;
}

std::vector<std::string> sim_args(const RunPlan& p, const std::string& dir) {
  const Workload& w = p.workload;
  const Scenario& s = p.scenario;
  std::vector<std::string> a{"sim", p.topology_path, "--pattern", w.pattern, "--size", std::to_string(w.size),
                             "--count", std::to_string(w.count), "--fvc", std::to_string(w.fvc), "--seed", std::to_string(p.seed),
                             "--retry", std::to_string(p.retry), "--json", "--events", (fs::path(dir) / "events.jsonl").string(),
                             "--snapshot", (fs::path(dir) / "state.json").string()};
  if (w.op != "write") a.insert(a.end(), {"--op", w.op});
  if (!s.faults_yaml.empty()) a.insert(a.end(), {"--faults", (fs::path(dir) / "plan.yaml").string()});
  for (const auto& x : s.cuts) a.insert(a.end(), {"--cut", x});
  for (const auto& x : s.kills) a.insert(a.end(), {"--kill", x});
  for (const auto& x : s.restarts) a.insert(a.end(), {"--restart", x});
  for (const auto& x : s.stalls) a.insert(a.end(), {"--stall", x});
  for (const auto& x : s.loops) a.insert(a.end(), {"--loop", x});
  return a;
}

ProcessesRun processes_run(const RunPlan& p, const std::string& dir, const std::string& ttemu) {
  const Workload& w = p.workload;
  const Scenario& s = p.scenario;
  const fs::path d(dir);
  ProcessesRun r;
  r.args = {"launch", p.topology_path, "--seed", std::to_string(p.seed), "--events-dir", (d / "events").string(),
            "--status-interval-ms", "100"};
  if (!s.faults_yaml.empty()) r.args.insert(r.args.end(), {"--faults", (d / "plan.yaml").string()});
  r.args.insert(r.args.end(), {"--", "sh", (d / "run.sh").string()});
  std::multimap<double, std::string> actions;  // at (ms), the command (stable for equal times)
  for (const auto& c : s.cuts) {
    const Timed t = timed(c);
    actions.emplace(t.ms[0], "links down " + shell_word(t.what));
    if (t.ms.size() > 1) actions.emplace(t.ms[1], "links up " + shell_word(t.what));
  }
  for (const auto& k : s.kills) actions.emplace(timed(k).ms[0], "chip kill " + shell_word(timed(k).what));
  for (const auto& k : s.restarts) actions.emplace(timed(k).ms[0], "chip restart " + shell_word(timed(k).what));
  for (const auto& x : s.stalls) {
    const Timed t = timed(x);
    const auto colon = t.what.find(':');
    const std::string chip = shell_word(t.what.substr(0, colon)), fvc = shell_word(t.what.substr(colon + 1));
    actions.emplace(t.ms[0], fmt::format("fabric stall {} --fvc {}", chip, fvc));
    actions.emplace(t.ms[1], fmt::format("fabric resume {} --fvc {}", chip, fvc));
  }
  const std::string t = shell_word(ttemu);
  // The plan again as the traffic starts, its down intervals counted from then (in the
  // simulator, traffic starts as the links do).
  r.script = "# ttemu campaign, processes engine: the workload, and the faults at their times (ms since it started)\n";
  if (!s.faults_yaml.empty()) r.script += fmt::format("{} faults apply --from-now {} > /dev/null\n", t, shell_word((d / "plan.yaml").string()));
  r.script += fmt::format(
      "{} traffic --pattern {} --op {} --size {} --count {} --fvc {} --seed {} --retry {} --json > {} &\n"
      "traffic=$!\n",
      t, shell_word(w.pattern), shell_word(w.op), w.size, w.count, w.fvc, p.seed, p.retry, shell_word((d / "stdout.jsonl").string()));
  double now = 0;
  for (const auto& [at, command] : actions) {
    if (at > now) r.script += fmt::format("sleep {:.4f}\n", (at - now) / 1000);
    now = std::max(now, at);
    r.script += fmt::format("{} {} > /dev/null\n", t, command);
  }
  // As the simulator runs on past the last fault, the system lives on a moment after the
  // traffic when faults were scheduled: the control plane's reload (LiveRoutes::kSettle after
  // the news) and the EFC's moves are judged too, not cut short by the end of the run.
  if (actions.empty() && s.faults_yaml.empty()) {
    r.script += "wait $traffic\n";
  } else {
    r.script += "wait $traffic\nstatus=$?\nsleep 0.5\nexit $status\n";
  }
  return r;
}

}  // namespace ttemu::tools
