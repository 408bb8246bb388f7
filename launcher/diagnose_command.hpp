// ttemu diagnose: reads a job's event log and names the physical places at fault (TNet's
// fault isolation): links ranked by what their receivers judged first (a CRC alarm, an error
// rate over the EFC's threshold; most CRC errors per frame first), then by timeouts and downs
// (a chip death's downs count against the chip, not the wire); links with only retransmission
// alarms apart; chips that died, and routers that dropped packets and why. --svg draws the
// system with each link coloured by its CRC errors per frame.
#pragma once

#include <CLI/CLI.hpp>

namespace ttemu::launcher {

void add_diagnose_command(CLI::App& app);

}  // namespace ttemu::launcher
