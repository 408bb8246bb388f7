// Which host runs which chip when one system is spread across hosts (multi-host launch,
// docs/multi-host.md). The specification's host_mapping decides for every board that has a
// host. A board without one (spec 7.1: a Galaxy reached through gateway cards, 7.3) runs on
// the host that has the most links into its mesh, the first declared on a tie: the host
// whose gateways reach it, as its PCIe would.
#pragma once

#include <string>
#include <vector>

#include "emulator/control/system.hpp"

namespace ttemu::control {

// The host index (into System::hosts) of every chip, by node. Throws Error when the system
// declares no host, or a host-less mesh has no link to any chip with a host.
std::vector<int> place_chips(const System& sys);

}  // namespace ttemu::control
