// Failed links and chips that the control plane routes around (spec 1.1.2: "reconfigure
// routing tables when ethernet links are down", "remove ... mesh devices").
#pragma once

#include <set>
#include <string>
#include <vector>

#include "emulator/control/system.hpp"

namespace ttemu::control {

struct Failures {
  std::set<int> links;  // indices into System::links
  std::set<int> nodes;  // failed chips

  bool chip_ok(int node) const { return !nodes.count(node); }
  bool operator==(const Failures&) const = default;
  bool link_ok(const System& sys, int link) const;
};

// Items are "MxDyPz" (the link on that port, named from either end) or "MxDy" (a chip).
// Throws ttemu::Error naming the item when it is malformed, unknown or an unwired port.
Failures parse_failures(const System& sys, const std::vector<std::string>& items);

}  // namespace ttemu::control
