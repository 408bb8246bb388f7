// Swarm mode (docs/campaigns.md, "Swarm scenarios"): instead of hand-picked faults, each run
// draws its own fault schedule from its seed (FoundationDB's and TigerBeetle's swarm testing:
// many small random combinations find what no list of scenarios names). A schedule is a list
// of faults, each of which can be left out on its own, so a failing one can be shrunk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emulator/control/system.hpp"

namespace ttemu::tools {

// One fault of a schedule. Rates act on what `where` (a port) sends; a cut takes both
// directions of its link from `at_ms` to `at_ms + for_ms`; a kill kills chip `where` at
// `at_ms` and, with `for_ms` > 0, restarts it that long after.
struct Fault {
  enum class Kind { kCorrupt, kBurst, kDrop, kDelay, kCut, kKill };
  Kind kind{};
  std::string where;
  double rate = 0;  // corrupt, drop: per frame; burst: enter_bad; delay: microseconds
  double at_ms = 0, for_ms = 0;
  bool operator==(const Fault&) const = default;
};

struct SwarmSpec {
  int faults = 4;                    // at most this many per run (at least one)
  std::vector<Fault::Kind> kinds;    // drawn from; empty: all
  double span_ms = 20;               // cuts and kills start within this much simulated time
};

const char* to_string(Fault::Kind k);
// Throws Error for an unknown name ("corrupt", "burst", "drop", "delay", "cut", "kill").
Fault::Kind fault_kind(const std::string& name);

// The schedule of a run: the same spec, system and seed give the same schedule. Faults land on
// routing plane 0's links (where the workloads run); no port, link or chip is drawn twice for
// the same kind.
std::vector<Fault> draw_schedule(const SwarmSpec& spec, const control::System& sys, uint64_t seed);

// A schedule as `ttemu sim` takes it: a fault plan (YAML text, docs/fault-plan.md; empty if
// none) and --cut, --kill and --restart arguments.
struct SimFaults {
  std::string plan_yaml;
  std::vector<std::string> cuts, kills, restarts;
};
SimFaults sim_faults(const std::vector<Fault>& schedule);

// One fault in words, e.g. "corrupt 0.0031 on M0D0P4" or "cut M0D0P4 at 3.2 ms for 7.5 ms".
std::string describe(const Fault& f);

}  // namespace ttemu::tools
