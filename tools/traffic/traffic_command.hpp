// `ttemu traffic`: drives the fabric of a running system from workers on its chips with the
// patterns tt-metal's fabric tests name, verifies every byte that lands, and reports
// goodput, per-link load, latency and errors per pattern.
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::tools {

void add_traffic_command(CLI::App& app, int& exit_status);

}  // namespace ttemu::tools
