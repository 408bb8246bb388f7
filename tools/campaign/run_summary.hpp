// What a report needs from one campaign run, summed up while its files still exist (a passing
// run's directory is removed): goodput, latency, the measured frame error rate, the pause
// after a link cut, and per link its errors, reroutes and drops. Pure: no I/O.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "tools/campaign/campaign_file.hpp"

namespace ttemu::tools {

// `results`: the sim's JSON lines (one per pattern); `events`: its event log. The figures go
// into the run's record under "figures" (docs/campaigns.md lists them).
nlohmann::json summarise_run(const Scenario& s, const std::vector<nlohmann::json>& results,
                             const std::vector<nlohmann::json>& events);

}  // namespace ttemu::tools
