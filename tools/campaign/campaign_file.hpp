// A fault-injection campaign (docs/campaigns.md): a matrix of topologies x workloads x fault
// scenarios x seeds, read from YAML. Each cell is one run, numbered in a fixed order (so that
// `ttemu campaign FILE --run ID` names the same run every time), and a run is one `ttemu sim`
// command line: its own permanent reproduction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/campaign/swarm.hpp"

namespace ttemu::tools {

struct Workload {
  std::string pattern = "all_to_all";
  std::string op = "write";  // write | read (written, then read back) | atomic (increments)
  uint32_t size = 4096, count = 4;
  int fvc = -1;
};

struct Scenario {
  std::string name;
  std::string faults_yaml;  // an inline fault plan (docs/fault-plan.md), as YAML text; empty: none
  std::vector<std::string> cuts, kills, restarts;  // as ttemu sim takes them
  // Stalled consumers (CHIP:FVC@MS-MS) and forwarding loops (CHIP:DEST@MS-MS), as ttemu sim
  // takes them; either lets writes be NACKed. Loops run in the simulator only.
  std::vector<std::string> stalls, loops;
  std::vector<std::string> only;      // the topologies it applies to (names); empty: all
  std::vector<std::string> patterns;  // the workloads' patterns it applies to; empty: all
  // What the run must show besides the invariants every run checks (verdict.hpp).
  bool nacks_allowed = false;
  bool expect_fallback = false;  // traffic moved onto the fallback channel (spec 2.2.5)
  bool expect_reload = false;    // the control plane reloaded the tables (spec 1.1.2)
  // Swarm mode: each run draws its faults from its seed instead (none of the fault keys above).
  std::optional<SwarmSpec> swarm;
};

struct Campaign {
  std::string name, file;
  std::vector<std::pair<std::string, std::string>> topologies;  // name, path
  std::vector<Workload> workloads;
  std::vector<Scenario> scenarios;
  std::vector<uint64_t> seeds;
  int retry = 3;         // ttemu sim --retry
  double limit_s = 120;  // wall-clock seconds a run may take: longer is a hang
};

// Throws Error naming the file, the line and what is wrong.
Campaign load_campaign(const std::string& path);

struct Run {
  int id = 0;
  size_t topology = 0, workload = 0, scenario = 0;
  uint64_t seed = 1;
};
// Every run of the matrix, in id order: topology, then workload, then scenario, then seed.
std::vector<Run> expand(const Campaign& c);

// One run made concrete: what `ttemu sim` is told. A swarm run's schedule is drawn here, and
// its scenario holds the schedule's faults; shrinking changes the schedule and the workload.
struct RunPlan {
  std::string topology, topology_path;  // name, file
  Workload workload;
  Scenario base;      // as the campaign names it
  Scenario scenario;  // what the run is told and must show: a swarm run's from its schedule
  std::vector<Fault> schedule;  // a swarm run's faults (empty otherwise)
  uint64_t seed = 1;
  int retry = 0;
};
RunPlan plan_run(const Campaign& c, const Run& r);
// `plan` with another schedule: its scenario's faults (and what the run must show) follow.
RunPlan with_schedule(RunPlan plan, std::vector<Fault> schedule);

// The run's `ttemu sim` arguments (after the program name); files go into `dir`. The plan
// file, if the scenario has faults, is written there by the caller (dir/plan.yaml).
std::vector<std::string> sim_args(const RunPlan& p, const std::string& dir);

// The processes engine's run: `ttemu launch` of the system (its faults from dir/plan.yaml, its
// event log into dir/events/), whose client is a shell script (`script`, for dir/run.sh) that
// runs `ttemu traffic` and meanwhile the cuts (`ttemu links down`/`up`), kills and restarts at
// their times: the scenario's milliseconds, of wall-clock time since the traffic started.
// `ttemu` is the binary the script calls. Throws Error for a time that is not NAME@MS[-MS].
struct ProcessesRun {
  std::vector<std::string> args;
  std::string script;
};
ProcessesRun processes_run(const RunPlan& p, const std::string& dir, const std::string& ttemu);

}  // namespace ttemu::tools
