// ttemu events: shows a job's event log (launcher/event_log.hpp), as lines for people or as
// the log's own JSON lines, once or following it as it grows.
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::launcher {

void add_events_command(CLI::App& app);

}  // namespace ttemu::launcher
