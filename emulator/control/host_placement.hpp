// Which host runs which chip when one system is spread across hosts (multi-host launch,
// docs/multi-host.md). The specification's host_mapping decides for every board that has a
// host. A board without one (spec 7.1: a Galaxy reached through gateway cards, 7.3) runs on
// the host that has the most links into its mesh, the first declared on a tie: the host
// whose gateways reach it, as its PCIe would.
#pragma once

#include <string>
#include <tuple>
#include <vector>

#include "emulator/control/failures.hpp"
#include "emulator/control/system.hpp"

namespace ttemu::control {

// The host index (into System::hosts) of every chip, by node. Throws Error when the system
// declares no host, or a host-less mesh has no link to any chip with a host.
std::vector<int> place_chips(const System& sys);

// Two hosts whose chips are linked, and the links between them.
struct HostPair {
  int a = 0, b = 0;  // host indices, a < b
  int links = 0;     // between live chips
  int down = 0;      // of those, the ones `failures` routes around
  bool cut() const { return links > 0 && down == links; }
  bool operator<(const HostPair& o) const { return std::tie(a, b) < std::tie(o.a, o.b); }
};
// Every pair of hosts with a link between live chips (chips that failed leave the count: a
// lost host is not a cut), with how many of those links are down.
std::vector<HostPair> host_pairs(const System& sys, const std::vector<int>& host_of_node, const Failures& failures);

}  // namespace ttemu::control
