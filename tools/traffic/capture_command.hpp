// `ttemu capture -o FILE.pcapng [--link PORT ...] [--duration S] [-- COMMAND ...]`: records the
// TT-link datagrams of chosen links (or all) of a running system as pcapng, in the format of
// `ttemu sim --capture` (docs/capture.md), so that one dissector reads both and a live capture
// replays in the simulator. The chips send what their captured ends put on the wire to this
// process (emulator/wire/capture_stream.hpp), which writes the file as it goes: until
// --duration has passed, COMMAND has ended, or Ctrl-C.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ttemu::tools {

void add_capture_command(CLI::App& app, const std::vector<std::string>& client, int& exit_status);

}  // namespace ttemu::tools
