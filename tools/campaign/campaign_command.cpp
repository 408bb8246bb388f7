#include "tools/campaign/campaign_command.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/error.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/launch.hpp"
#include "tools/campaign/campaign_file.hpp"
#include "tools/campaign/child.hpp"
#include "tools/campaign/leftovers.hpp"
#include "tools/campaign/report.hpp"
#include "tools/campaign/run_summary.hpp"
#include "tools/campaign/shrink.hpp"
#include "tools/campaign/verdict.hpp"

namespace ttemu::tools {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct CampaignOptions {
  std::string file, out, engine = "sim";
  int jobs = 0;
  int run = -1;
  double budget_s = 0;
};

std::vector<json> json_lines(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return out;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A run of `p` in `dir`, start to verdict; its files stay there (the plan, the sim's output, its
// stderr, the event log, and the trace when asked).
struct Ran {
  Verdict verdict;
  ChildResult child;
  std::vector<std::string> sim_line;  // ttemu sim ..., as run
  std::vector<json> results, events;
};

// The binary's name, as the lines that reproduce a run print it: `ttemu`, or `ttemu_planted`
// for the campaign that must find the planted defect, whose runs only that binary reproduces.
std::string program() { return fs::path(launcher::self_exe()).filename().string(); }

// The processes engine: a launch whose client runs the traffic and the faults (run.sh). The
// event log is moved to dir/events.jsonl; at the bound, the hung system's routers (ttemu
// snapshot) are kept in dir/state.json and its status in dir/status.json before the launcher
// is stopped; then what the job left behind is looked for.
Ran run_processes(const RunPlan& p, const fs::path& dir, double limit_s) {
  const ProcessesRun pr = processes_run(p, dir.string(), launcher::self_exe());
  std::ofstream(dir / "run.sh") << pr.script;
  auto job = [&] {
    std::error_code none;  // no directory yet: the launch did not get that far
    for (const auto& e : fs::directory_iterator(dir / "events", none)) return e.path().stem().string();
    return std::string();
  };
  const auto at_bound = [&] {
    run_child(launcher::self_exe(), {"snapshot", "--json", "--job", job()}, (dir / "state.json").string(),
              (dir / "state.stderr.txt").string(), 10);
    run_child(launcher::self_exe(), {"status", "--json", "--job", job()}, (dir / "status.json").string(),
              (dir / "status.stderr.txt").string(), 10);
  };
  Ran ran;
  ran.child = run_child(launcher::self_exe(), pr.args, (dir / "launch.txt").string(), (dir / "stderr.txt").string(), limit_s, at_bound);
  const std::string id = job();
  std::vector<std::string> left;
  if (!id.empty()) {
    fs::rename(dir / "events" / (id + ".jsonl"), dir / "events.jsonl");
    left = leftovers(id);
  }
  fs::remove_all(dir / "events");
  ran.results = json_lines(dir / "stdout.jsonl");
  ran.events = json_lines(dir / "events.jsonl");
  ran.verdict = judge(p.scenario, p.retry, ran.child.exit_status, ran.child.timed_out, ran.results, ran.events, slurp(dir / "stderr.txt"), left);
  ran.sim_line = {program()};
  ran.sim_line.insert(ran.sim_line.end(), pr.args.begin(), pr.args.end());
  return ran;
}

Ran run_in(const RunPlan& p, const fs::path& dir, double limit_s, bool trace, bool processes) {
  fs::create_directories(dir);
  if (const std::string& plan = p.scenario.faults_yaml; !plan.empty()) std::ofstream(dir / "plan.yaml") << plan << "\n";
  if (processes) return run_processes(p, dir, limit_s);
  std::vector<std::string> args = sim_args(p, dir.string());
  if (trace) args.insert(args.end(), {"--trace", (dir / "trace.txt").string()});
  Ran ran;
  ran.child = run_child(launcher::self_exe(), args, (dir / "stdout.jsonl").string(), (dir / "stderr.txt").string(), limit_s);
  ran.results = json_lines(dir / "stdout.jsonl");
  ran.events = json_lines(dir / "events.jsonl");
  ran.verdict = judge(p.scenario, p.retry, ran.child.exit_status, ran.child.timed_out, ran.results, ran.events, slurp(dir / "stderr.txt"));
  ran.sim_line = {program()};
  ran.sim_line.insert(ran.sim_line.end(), args.begin(), args.end());
  return ran;
}

json described(const std::vector<Fault>& schedule) {
  json out = json::array();
  for (const Fault& f : schedule) out.push_back(describe(f));
  return out;
}

// One run of the campaign, and its record. A passing run leaves nothing behind unless `keep`
// (with it, the trace is written too); a failing one keeps its directory.
json run_one(const Campaign& c, const Run& r, const fs::path& out, bool keep, bool processes) {
  const RunPlan p = plan_run(c, r);
  const fs::path dir = out / "runs" / std::to_string(r.id);
  const Ran ran = run_in(p, dir, c.limit_s, keep, processes);
  const Verdict& v = ran.verdict;
  json j{{"id", r.id}, {"topology", p.topology}, {"workload", r.workload}, {"pattern", p.workload.pattern}, {"op", p.workload.op},
         {"scenario", p.scenario.name}, {"seed", r.seed}, {"pass", v.pass}, {"invariant", v.invariant}, {"reason", v.reason},
         {"seconds", ran.child.seconds}, {"reproduce", shell_line({program(), "campaign", c.file, "--run", std::to_string(r.id)})},
         {"sim", shell_line(ran.sim_line)}, {"engine", processes ? "processes" : "sim"},
         {"figures", summarise_run(p.scenario, ran.results, ran.events)}};
  if (p.scenario.swarm) j["schedule"] = described(p.schedule);
  if (!v.pass || keep) j["kept"] = dir.string();
  else fs::remove_all(dir);
  return j;
}

// A failing swarm run, shrunk: the smallest schedule and workload found that fail the same
// way (the same invariant). The smallest runs once more with its files and trace kept in
// runs/ID/shrunk: its sim line is the short reproduction.
json shrink_run(const Campaign& c, const Run& r, const std::string& invariant, const fs::path& out, bool processes) {
  const RunPlan p = plan_run(c, r);
  const fs::path dir = out / "runs" / std::to_string(r.id);
  const StillFails fails = [&](const std::vector<Fault>& schedule, uint32_t count) {
    RunPlan q = with_schedule(p, schedule);
    q.workload.count = count;
    const Ran ran = run_in(q, dir / "shrinking", c.limit_s, false, processes);
    fs::remove_all(dir / "shrinking");
    return !ran.verdict.pass && ran.verdict.invariant == invariant;
  };
  const Shrunk s = shrink(p.schedule, p.workload.count, fails);
  RunPlan q = with_schedule(p, s.schedule);
  q.workload.count = s.count;
  const Ran ran = run_in(q, dir / "shrunk", c.limit_s, true, processes);
  return {{"faults", described(s.schedule)}, {"of_faults", p.schedule.size()}, {"count", s.count}, {"of_count", p.workload.count},
          {"tries", s.tries}, {"fails", !ran.verdict.pass && ran.verdict.invariant == invariant}, {"reason", ran.verdict.reason},
          {"sim", shell_line(ran.sim_line)}};
}

std::string join(const json& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : "; ") + w.get<std::string>();
  return out;
}

void print_table(const Campaign& c, const std::vector<json>& records) {
  // Runs, passed and failed per scenario and topology.
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> cells;
  for (const auto& r : records) {
    auto& [runs, failed] = cells[{r["scenario"].get<std::string>(), r["topology"].get<std::string>()}];
    ++runs;
    failed += !r["pass"].get<bool>();
  }
  fmt::print("{:<20} {:<16} {:>6} {:>6} {:>6}\n", "scenario", "topology", "runs", "passed", "failed");
  for (const auto& s : c.scenarios) {
    for (const auto& t : c.topologies) {
      const auto it = cells.find({s.name, t.first});
      if (it == cells.end()) continue;
      fmt::print("{:<20} {:<16} {:>6} {:>6} {:>6}\n", s.name, t.first, it->second.first, it->second.first - it->second.second,
                 it->second.second);
    }
  }
}

int run_campaign(const CampaignOptions& o) {
  const Campaign c = load_campaign(o.file);
  std::vector<Run> runs = expand(c);
  if (o.run >= 0) {
    if (o.run >= static_cast<int>(runs.size())) throw Error(fmt::format("--run {}: the campaign has runs 0 to {}", o.run, runs.size() - 1));
    runs = {runs[static_cast<size_t>(o.run)]};
  }
  const fs::path out = o.out.empty() ? fs::path("campaign-" + c.name) : fs::path(o.out);
  // Simulations share nothing and run side by side; systems of processes one at a time (each
  // takes every CPU, and their timing is part of what is tested).
  const bool processes = o.engine == "processes";
  if (processes && o.jobs > 1) throw Error("--jobs: the processes engine runs one system at a time");
  // Why the engine does not run a run, or nullptr. (No operator command corrupts a running
  // system's tables.)
  auto engine_skips = [&](const Run& r) -> const char* {
    if (processes && !c.scenarios[r.scenario].loops.empty()) return "a forwarding loop runs in the simulator only";
    return nullptr;
  };
  if (o.run >= 0) {
    if (const char* why = engine_skips(runs.front())) throw Error(fmt::format("run {} does not run in the {} engine: {}", o.run, o.engine, why));
  }
  fs::create_directories(out);
  const int jobs = processes ? 1 : o.jobs > 0 ? o.jobs : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  fmt::print(stderr, "ttemu campaign: {}: {} run(s) ({} topologies x {} workloads x {} scenarios x {} seeds), {} at once, into {}\n",
             c.name, runs.size(), c.topologies.size(), c.workloads.size(), c.scenarios.size(), c.seeds.size(), jobs, out.string());
  std::vector<json> records(runs.size());
  std::atomic<size_t> next{0};
  std::atomic<int> done{0}, failed{0};
  std::mutex progress;
  // The time left, from the mean run of each topology so far (a Galaxy run takes many times an
  // N300's, and the matrix runs them in order): runs to go x their topology's mean, over the jobs.
  std::vector<double> spent(c.topologies.size(), 0);
  std::vector<size_t> to_go(c.topologies.size(), 0), ran_of(c.topologies.size(), 0);
  for (const auto& r : runs) ++to_go[static_cast<size_t>(r.topology)];
  auto time_left = [&] {
    double all = 0;
    size_t n = 0;
    for (size_t t = 0; t < spent.size(); ++t) all += spent[t], n += ran_of[t];
    double left = 0;
    for (size_t t = 0; t < spent.size(); ++t) {
      left += static_cast<double>(to_go[t]) * (ran_of[t] ? spent[t] / static_cast<double>(ran_of[t]) : n ? all / static_cast<double>(n) : 0);
    }
    return left / jobs;
  };
  const auto start = std::chrono::steady_clock::now();
  const bool tty = ::isatty(2);
  std::string broken;  // why the campaign stopped short
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < runs.size();) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const char* skip = o.budget_s > 0 && elapsed > o.budget_s ? "over the budget" : engine_skips(runs[i]);
      if (skip) {
        records[i] = {{"id", runs[i].id}, {"skipped", skip}};
        std::lock_guard lock(progress);
        --to_go[static_cast<size_t>(runs[i].topology)];
        continue;
      }
      const auto began = std::chrono::steady_clock::now();
      try {
        records[i] = run_one(c, runs[i], out, o.run >= 0, processes);
      } catch (const std::exception& e) {  // the campaign cannot go on (e.g. ttemu is gone): no run starts after
        std::lock_guard lock(progress);
        if (broken.empty()) broken = fmt::format("run {}: {}", runs[i].id, e.what());
        next = runs.size();
        return;
      }
      const int d = ++done, f = failed += !records[i]["pass"].get<bool>();
      std::lock_guard lock(progress);
      const auto topology = static_cast<size_t>(runs[i].topology);
      spent[topology] += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      ++ran_of[topology], --to_go[topology];
      const double left = time_left();
      if (tty) fmt::print(stderr, "\r{}/{} runs, {} failed, about {:.0f} s left   ", d, runs.size(), f, left);
      else if (static_cast<size_t>(d) % std::max<size_t>(1, runs.size() / 10) == 0 || static_cast<size_t>(d) == runs.size()) {
        fmt::print(stderr, "ttemu campaign: {}/{} runs, {} failed, about {:.0f} s left\n", d, runs.size(), f, left);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (!broken.empty()) throw Error(broken);
  if (tty) fmt::print(stderr, "\n");
  // The first failing swarm run of each scenario and invariant is shrunk (the others likely
  // fail for the same reason, and each shrink costs dozens of runs).
  std::set<std::pair<std::string, std::string>> shrunk;
  for (size_t i = 0; i < runs.size(); ++i) {
    json& r = records[i];
    if (r.contains("skipped") || r["pass"].get<bool>() || !r.contains("schedule") || r["schedule"].empty()) continue;
    if (!shrunk.insert({r["scenario"].get<std::string>(), r["invariant"].get<std::string>()}).second) continue;
    fmt::print(stderr, "ttemu campaign: shrinking run {} ({} fault(s), {} write(s) per pair)\n", runs[i].id, r["schedule"].size(),
               c.workloads[runs[i].workload].count);
    r["shrunk"] = shrink_run(c, runs[i], r["invariant"].get<std::string>(), out, processes);
  }
  std::vector<json> ran;
  // One run alone (a reproduction) keeps its record with its files, not over the campaign's.
  const fs::path record = o.run >= 0 ? out / "runs" / std::to_string(o.run) / "run.jsonl" : out / "runs.jsonl";
  std::ofstream lines(record);
  for (const auto& r : records) {
    lines << r.dump() << "\n";
    if (!r.contains("skipped")) ran.push_back(r);
  }
  print_table(c, ran);
  const fs::path report = o.run >= 0 ? out / "runs" / std::to_string(o.run) / "report.html" : out / "report.html";
  write_report(c, records, report);
  int failures = 0;
  for (const auto& r : ran) {
    if (r["pass"].get<bool>()) continue;
    ++failures;
    fmt::print("FAIL run {} ({} x {} x {} x seed {}): {}: {}\n  reproduce: {}\n  or: {}\n", r["id"].get<int>(),
               r["topology"].get<std::string>(), r["pattern"].get<std::string>(), r["scenario"].get<std::string>(),
               r["seed"].get<uint64_t>(), r["invariant"].get<std::string>(), r["reason"].get<std::string>(),
               r["reproduce"].get<std::string>(), r["sim"].get<std::string>());
    if (r.contains("schedule")) fmt::print("  faults: {}\n", join(r["schedule"]));
    if (!r.contains("shrunk")) continue;
    const json& s = r["shrunk"];
    fmt::print("  shrunk in {} run(s) to {} of {} fault(s) and {} of {} write(s) per pair{}: {}\n  reproduce the shrunk run: {}\n",
               s["tries"].get<int>(), s["faults"].size(), s["of_faults"].get<size_t>(), s["count"].get<uint32_t>(),
               s["of_count"].get<uint32_t>(), s["fails"].get<bool>() ? "" : " (it no longer fails the same way once more!)",
               s["faults"].empty() ? "no faults at all" : join(s["faults"]), s["sim"].get<std::string>());
  }
  std::map<std::string, int> skipped;  // by reason
  for (const auto& r : records) {
    if (r.contains("skipped")) ++skipped[r["skipped"].get<std::string>()];
  }
  std::string not_run;
  for (const auto& [why, n] : skipped) not_run += fmt::format(", {} not run: {}", n, why);
  fmt::print("verdict: {} ({} run(s), {} failed{}); every run in {}, the report in {}\n", failures ? "FAIL" : "PASS",
             ran.size(), failures, not_run, record.string(), report.string());
  return failures ? 1 : 0;
}

}  // namespace

void add_campaign_command(CLI::App& app, int& exit_status) {
  auto o = std::make_shared<CampaignOptions>();
  auto* c = app.add_subcommand("campaign", "Run a fault-injection campaign: topologies x workloads x faults x seeds, each run judged");
  c->add_option("FILE", o->file, "The campaign (docs/campaigns.md)")->required();
  c->add_option("--engine", o->engine, "sim (ttemu sim, several runs at once) or processes (ttemu launch and ttemu traffic, one system at a time)")
      ->check(CLI::IsMember({"sim", "processes"}));
  c->add_option("--jobs,-j", o->jobs, "Runs at once (default: one per CPU)")->check(launcher::whole_number(1, 1024));
  c->add_option("--budget", o->budget_s, "Seconds after which no new run starts (0: no budget)")->check(launcher::number_in(0, 1e7));
  c->add_option("--out", o->out, "Where the runs' record and the failing runs' files go (default: ./campaign-NAME)");
  c->add_option("--run", o->run, "Run only this run (its id), keeping its files and trace: the reproduction")->check(launcher::whole_number(0, 1 << 30));
  c->callback([o, &exit_status] { exit_status = run_campaign(*o); });
}

}  // namespace ttemu::tools
