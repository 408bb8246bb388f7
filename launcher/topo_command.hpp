// `ttemu topo ...`: validate, show, route and draw a system specification without starting
// it (the control plane's view: topology, routing tables, checks).
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::launcher {

// Subcommands run from their callbacks; they throw ttemu::Error on bad input and throw
// CLI::RuntimeError(code) to exit non-zero after printing a reason.
void add_topo_command(CLI::App& app);

}  // namespace ttemu::launcher
