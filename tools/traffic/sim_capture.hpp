// `ttemu sim --capture FILE [--capture-link PORT ...]`: a pcapng capture (emulator/wire/pcapng)
// of the datagrams the simulator's wire carries, in simulated time. A named port captures its
// link, both directions; none named, every link. Each end is an interface named after it, with
// a UDP port of its own in the synthetic headers: 40000 + its place in the system's links (a
// link's first end 2k, its second 2k + 1), the same whichever links are captured.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emulator/control/system.hpp"
#include "emulator/sim/fabric_sim.hpp"
#include "emulator/wire/pcapng.hpp"

namespace ttemu::tools {

// The link ends a capture records and their interfaces, one per end in that order: both ends
// of each named port's link, or of every link when none is named. Each end's UDP port in the
// synthetic headers is 40000 + its place in the system's links, the same whatever is captured,
// so a simulated and a live capture of one system agree. Throws Error naming `option` and the
// port for a port that is not a wired port of the system.
struct CaptureLayout {
  std::vector<routing::PortId> ends;
  std::vector<wire::CaptureInterface> interfaces;
  std::map<routing::PortId, size_t> interface_of;
};
CaptureLayout capture_layout(const control::System& sys, const std::vector<std::string>& links, const std::string& option);

// Opens the capture (its interfaces written at once, so a bad path fails before the run) and
// sets the simulator's tap to write to it; the writer must outlive the simulation. Throws
// Error for a port that is not a wired port of the system, or a file that cannot be written.
std::unique_ptr<wire::PcapngWriter> start_capture(const control::System& sys, const std::string& file,
                                                  const std::vector<std::string>& links, sim::SimConfig& cfg);

}  // namespace ttemu::tools
