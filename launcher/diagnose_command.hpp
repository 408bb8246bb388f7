// ttemu diagnose: reads a job's event log and names the physical places at fault (TNet's
// fault isolation): links ranked by what their ends reported (an error rate over the
// threshold, timeouts, downs; a chip death's downs count against the chip, not the wire),
// chips that died, and routers that dropped packets and why.
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::launcher {

void add_diagnose_command(CLI::App& app);

}  // namespace ttemu::launcher
