// Which ports are wired to which: the little a link-level consumer (a fault plan) needs to know
// of a system, without the system model of the control plane. control::System::wiring() makes
// one.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "emulator/routing/address.hpp"

namespace ttemu::routing {

struct Wiring {
  std::string name;  // the system's file, for messages
  std::vector<std::pair<PortId, PortId>> links;

  std::optional<PortId> peer(PortId end) const {
    for (const auto& [a, b] : links) {
      if (a == end) return b;
      if (b == end) return a;
    }
    return std::nullopt;
  }
};

}  // namespace ttemu::routing
