// The commands that start, watch and drive a live system: launch, status, link, faults,
// clean, and the hidden `chip` command each chip process runs.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "launcher/launch.hpp"

namespace ttemu::launcher {

// The options of `ttemu launch` (the system file and its settings), shared by `ttemu
// host-agent` and `ttemu mpirun`.
void add_launch_options(CLI::App* cmd, LaunchOptions& lo);

// `client_command` holds what followed `--` on the command line (for `launch`).
void add_system_commands(CLI::App& app, const std::vector<std::string>& client_command, int& exit_status);

}  // namespace ttemu::launcher
