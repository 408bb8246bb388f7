// ttemu run: starts a program bound to a chip of the running system, as tt-metal's tt-run binds
// ranks: TTEMU_CHIP (and TTEMU_CORE) for one process, TTEMU_RANK_BINDING for the ranks an
// mpirun starts, and FI_PROVIDER_PATH pointing at the tt libfabric provider built beside ttemu.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ttemu::launcher {

void add_run_command(CLI::App& app, const std::vector<std::string>& client, int& exit_status);

// The folder holding libtt-fi.so, built beside this ttemu binary; empty if there is none.
std::string provider_dir();
// $FI_PROVIDER_PATH with provider_dir() in front (once); empty when there is no provider.
std::string provider_path_with_ours();
// Sets $FI_PROVIDER_PATH to that.
void export_provider_path();
// Replaces this process with argv[0] (searched in $PATH) run with argv; returns only if it
// could not, with errno's value.
int exec_program(const std::vector<std::string>& argv);

}  // namespace ttemu::launcher
