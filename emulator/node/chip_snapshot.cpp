// ChipNode::snapshot: what a chip holds at one moment, for people reading a hang.
#include <chrono>

#include <nlohmann/json.hpp>

#include "emulator/node/chip_node.hpp"
#include "emulator/node/socket_json.hpp"
#include "emulator/transport/lanes.hpp"

namespace ttemu::node {

using nlohmann::json;

namespace {

json lane_json(uint8_t lane) {
  return {{"fvc", transport::fvc_of_lane(lane)}, {"class", transport::class_of_lane(lane)}, {"kind", transport::answer_lane(lane) ? "answer" : "request"}};
}

double ms(Time t) { return std::chrono::duration<double, std::milli>(t).count(); }

}  // namespace

json ChipNode::snapshot(Time now) const {
  const routing::FabricRouter& router = fabric_.router();
  json buffers = json::array();
  for (const auto& b : router.buffers()) {
    json j = lane_json(b.lane);
    j["input"] = b.port == routing::FabricRouter::kCenter ? std::string("center") : routing::to_string(routing::PortId{cfg_.self, b.port});
    j["packets"] = b.packets;
    const routing::PacketHeader& h = b.head;
    j["head"] = {{"command", routing::to_string(h.command)}, {"src", routing::to_string(h.src())}, {"dst", routing::to_string(h.dst())},
                 {"packet_id", h.packet_id}, {"ttl", h.ttl}, {"waited_ms", ms(now - b.head_since)}};
    buffers.push_back(std::move(j));
  }
  json ports = json::array();
  for (size_t i = 0; i < ports_.size(); ++i) {
    const PortView p = view(i);
    // Lanes toward the far end with no credit left: what this router cannot send on.
    json starved = json::array();
    for (uint8_t l = 0; l < router.lanes(); ++l) {
      if (router.credits(p.number, l) == 0) starved.push_back(lane_json(l));
    }
    json j = {{"port", routing::to_string(routing::PortId{cfg_.self, p.number})},
              {"state", link::to_string(p.link.state())},
              {"backlog", fabric_.backlog(p.number).size()},
              {"window_room", p.link.send_room()},
              {"starved_lanes", std::move(starved)}};
    if (p.wire != p.number) j["fallback_via"] = routing::to_string(routing::PortId{cfg_.self, p.wire});
    if (p.admin_down) j["admin_down"] = true;
    ports.push_back(std::move(j));
  }
  json stalled = json::array();
  for (uint8_t f = 0; f < router.fvcs(); ++f) {
    if (router.center_stalled(f)) stalled.push_back(f);
  }
  return {{"chip", routing::to_string(cfg_.self)},
          {"tables_version", ctl_.tables_version.load(std::memory_order_relaxed)},
          {"idle", idle()},
          {"buffers", std::move(buffers)},
          {"ports", std::move(ports)},
          {"stalled_fvcs", std::move(stalled)},
          {"sockets", sockets_json(ctl_)},
          {"reservations", reservations_json(ctl_, cfg_.self)}};
}

}  // namespace ttemu::node
