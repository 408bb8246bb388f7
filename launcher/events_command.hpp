// ttemu events: shows a job's event log (launcher/event_log.hpp), as lines for people or as
// the log's own JSON lines, once or following it as it grows.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace ttemu::launcher {

void add_events_command(CLI::App& app);

// The event log `what` names (a file, or a job's log in `dir`); with `what` empty, the running
// system's, else the newest in `dir`. `dir` empty: default_events_dir(). Throws Error naming
// what is missing.
std::string find_event_log(const std::string& what, const std::string& dir);
// A log's complete lines as JSON objects (a last line with no newline yet is being written: it
// waits); a line that is not one is skipped with a warning naming it.
std::vector<nlohmann::json> read_event_lines(const std::string& path);
// One event in words, as `ttemu events` prints it: time, uptime, chip, kind, what happened.
std::string event_text(const nlohmann::json& event);

}  // namespace ttemu::launcher
