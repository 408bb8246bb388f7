// Shrinking a failing swarm run (docs/campaigns.md, "Shrinking"): a search for a smaller fault
// schedule and a shorter workload that still fail the same way, as property-based testing
// shrinks a counterexample. Pure: whether a candidate fails is the caller's question (it runs
// the candidate).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tools/campaign/swarm.hpp"

namespace ttemu::tools {

struct Shrunk {
  std::vector<Fault> schedule;
  uint32_t count = 1;  // writes per pair
  int tries = 0;       // candidates run
};

// `fails(schedule, count)`: the candidate still fails the way the original did. Tries first
// to leave faults out (halves of the schedule, then one fault at a time, until no single fault
// can go), then halves the workload, then shortens cuts and drops restarts, within `max_tries`.
using StillFails = std::function<bool(const std::vector<Fault>& schedule, uint32_t count)>;
Shrunk shrink(std::vector<Fault> schedule, uint32_t count, const StillFails& fails, int max_tries = 48);

}  // namespace ttemu::tools
