#include "emulator/control/failures.hpp"

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::control {

bool Failures::link_ok(const System& sys, int link) const {
  if (links.count(link)) return false;
  const Link& l = sys.links.at(static_cast<size_t>(link));
  return chip_ok(*sys.node(l.a.chip)) && chip_ok(*sys.node(l.b.chip));
}

Failures parse_failures(const System& sys, const std::vector<std::string>& items) {
  Failures f;
  for (const auto& item : items) {
    if (auto port = routing::parse_port(item)) {
      auto node = sys.node(port->chip);
      if (!node) throw Error(fmt::format("failed link '{}': no such chip in {}", item, sys.source));
      int link = sys.link_at(*node, port->port);
      if (link < 0) throw Error(fmt::format("failed link '{}': that port has no link", item));
      f.links.insert(link);
    } else if (auto chip = routing::parse_chip(item)) {
      auto node = sys.node(*chip);
      if (!node) throw Error(fmt::format("failed chip '{}': no such chip in {}", item, sys.source));
      f.nodes.insert(*node);
    } else {
      throw Error(fmt::format("failure '{}' is neither a chip (M0D1) nor a port (M0D1P2)", item));
    }
  }
  return f;
}

}  // namespace ttemu::control
