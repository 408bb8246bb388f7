// The invariants a campaign run must keep (docs/campaigns.md), judged from what `ttemu sim`
// printed (one JSON line per pattern) and the event log it wrote. Pure: no I/O.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/campaign/campaign_file.hpp"

namespace ttemu::tools {

struct Verdict {
  bool pass = true;
  std::string invariant;  // the first one broken ("" when it passed)
  std::string reason;     // in words, with the figures
};

// `exit_status` of the run (ttemu sim, or ttemu launch with ttemu traffic as its client; -1: it
// was killed at the bound), `stderr_text` its last words; `left_behind`: what the processes
// engine found of the job after it (leftovers.hpp).
Verdict judge(const Scenario& s, int retry, int exit_status, bool timed_out, const std::vector<nlohmann::json>& results,
              const std::vector<nlohmann::json>& events, const std::string& stderr_text,
              const std::vector<std::string>& left_behind = {});

}  // namespace ttemu::tools
