// ttemu campaign FILE.yaml: every run of a fault-injection campaign (campaign_file.hpp) as a
// `ttemu sim` child, several at once; each judged (verdict.hpp); one JSON line per run, a
// verdict table, and for every failure the line that reproduces it.
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::tools {

void add_campaign_command(CLI::App& app, int& exit_status);

}  // namespace ttemu::tools
