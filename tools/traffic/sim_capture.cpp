#include "tools/traffic/sim_capture.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::tools {

using routing::PortId;

std::unique_ptr<wire::PcapngWriter> start_capture(const control::System& sys, const std::string& file,
                                                  const std::vector<std::string>& links, sim::SimConfig& cfg) {
  // Every end's synthetic UDP port, by its place in the system.
  std::map<PortId, uint16_t> udp_port;
  for (const auto& l : sys.links) {
    for (const auto& end : {l.a, l.b}) udp_port[end] = static_cast<uint16_t>(40000 + udp_port.size() % 25536);
  }
  std::vector<PortId> ends;
  if (links.empty()) {
    for (const auto& l : sys.links) ends.push_back(l.a), ends.push_back(l.b);
  }
  for (const auto& name : links) {
    const auto p = routing::parse_port(name);
    if (!p || !sys.node(p->chip) || !sys.peer(*p)) {
      throw Error(fmt::format("--capture-link: '{}' is not a wired port of {}", name, sys.source));
    }
    for (const auto& end : {*p, *sys.peer(*p)}) {
      if (std::find(ends.begin(), ends.end(), end) == ends.end()) ends.push_back(end);
    }
  }
  std::vector<wire::CaptureInterface> interfaces;
  std::map<PortId, size_t> interface_of;
  for (const auto& end : ends) {
    const PortId peer = *sys.peer(end);
    interface_of[end] = interfaces.size();
    interfaces.push_back({.name = routing::to_string(end),
                          .description = fmt::format("{} -> {}", routing::to_string(end), routing::to_string(peer)),
                          .local_port = udp_port.at(end),
                          .peer_port = udp_port.at(peer)});
  }
  std::unique_ptr<wire::PcapngWriter> writer;
  try {
    writer = std::make_unique<wire::PcapngWriter>(file, std::move(interfaces));
  } catch (const std::runtime_error& e) {
    throw Error(fmt::format("--capture: {}", e.what()));
  }
  cfg.tap_ends = ends;
  cfg.tap = [w = writer.get(), interface_of](PortId from, link::Time at, std::span<const uint8_t> datagram) {
    w->write(interface_of.at(from), at, datagram);
  };
  return writer;
}

}  // namespace ttemu::tools
