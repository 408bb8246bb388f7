// `ttemu sim`: a whole system in one process on a simulated clock (spec 6.2), running the very
// ChipNode of the chip processes. It drives the traffic patterns of `ttemu traffic` from
// simulated workers that submit through each chip's command buffer, with a fault plan, chip
// kills and restarts and link cuts at simulated times, verifies every byte, and reports the
// same fields as `ttemu traffic` plus what the faults did, and what the fabric delivered per pair
// of chips (deliveries.hpp). With --replay it injects a capture's requests again instead
// (replay.hpp, sim_replay.hpp). The same seed gives the same run and the same trace, byte for
// byte.
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::tools {

void add_sim_command(CLI::App& app, int& exit_status);

}  // namespace ttemu::tools
