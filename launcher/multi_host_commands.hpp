// `ttemu host-agent` (one per host, started by mpirun or srun) and `ttemu mpirun` (the
// tt-run-like wrapper that builds the mpirun line for a system spread across hosts).
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::launcher {

void add_multi_host_commands(CLI::App& app, int& exit_status);

}  // namespace ttemu::launcher
