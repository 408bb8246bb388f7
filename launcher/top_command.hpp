// ttemu top: a live view of a running system in the terminal, in the style of htop: link
// utilisation and errors, routing-buffer occupancy per chip, the newest events, refreshed in
// place (launcher/top_view.hpp). q or Ctrl-C ends it and gives the terminal back as it was.
// Without a terminal, or with --iterations, it prints frames one after another (--json: one
// JSON object per frame).
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::launcher {

void add_top_command(CLI::App& app);

}  // namespace ttemu::launcher
