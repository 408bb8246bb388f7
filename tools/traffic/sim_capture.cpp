#include "tools/traffic/sim_capture.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::tools {

using routing::PortId;

CaptureLayout capture_layout(const control::System& sys, const std::vector<std::string>& links, const std::string& option) {
  // Every end's synthetic UDP port, by its place in the system.
  std::map<PortId, uint16_t> udp_port;
  for (const auto& l : sys.links) {
    for (const auto& end : {l.a, l.b}) udp_port[end] = static_cast<uint16_t>(40000 + udp_port.size() % 25536);
  }
  CaptureLayout out;
  try {
    out.ends = sys.link_ends(links);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", option, e.what()));
  }
  for (const auto& end : out.ends) {
    const PortId peer = *sys.peer(end);
    out.interface_of[end] = out.interfaces.size();
    out.interfaces.push_back({.name = routing::to_string(end),
                              .description = fmt::format("{} -> {}", routing::to_string(end), routing::to_string(peer)),
                              .local_port = udp_port.at(end),
                              .peer_port = udp_port.at(peer)});
  }
  return out;
}

std::unique_ptr<wire::PcapngWriter> start_capture(const control::System& sys, const std::string& file,
                                                  const std::vector<std::string>& links, sim::SimConfig& cfg) {
  CaptureLayout layout = capture_layout(sys, links, "--capture-link");
  std::unique_ptr<wire::PcapngWriter> writer;
  try {
    writer = std::make_unique<wire::PcapngWriter>(file, layout.interfaces);
  } catch (const std::runtime_error& e) {
    throw Error(fmt::format("--capture: {}", e.what()));
  }
  cfg.tap_ends = layout.ends;
  cfg.tap = [w = writer.get(), interface_of = layout.interface_of](PortId from, link::Time at, std::span<const uint8_t> datagram) {
    w->write(interface_of.at(from), at, datagram);
  };
  return writer;
}

}  // namespace ttemu::tools
