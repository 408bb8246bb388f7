// ChipNode::snapshot: what a chip holds at one moment, for people reading a hang.
#include <chrono>

#include "emulator/node/chip_node.hpp"
#include "emulator/node/socket_states.hpp"
#include "emulator/transport/lanes.hpp"

namespace ttemu::node {

namespace {

LaneRef lane_ref(uint8_t lane) {
  return {transport::fvc_of_lane(lane), transport::class_of_lane(lane), transport::answer_lane(lane) ? "answer" : "request"};
}

double ms(Time t) { return std::chrono::duration<double, std::milli>(t).count(); }

}  // namespace

ChipSnapshot ChipNode::snapshot(Time now) const {
  const routing::FabricRouter& router = fabric_.router();
  ChipSnapshot s;
  s.chip = routing::to_string(cfg_.self);
  s.tables_version = ctl_.tables_version.load(std::memory_order_relaxed);
  s.idle = idle();
  for (const auto& b : router.buffers()) {
    const routing::PacketHeader& h = b.head;
    s.buffers.push_back({lane_ref(b.lane),
                         b.port == routing::FabricRouter::kCenter ? std::string("center") : routing::to_string(routing::PortId{cfg_.self, b.port}),
                         b.packets,
                         {routing::to_string(h.command), routing::to_string(h.src()), routing::to_string(h.dst()), h.packet_id, h.ttl, ms(now - b.head_since)}});
  }
  for (size_t i = 0; i < ports_.size(); ++i) {
    const PortView p = view(i);
    PortState port{routing::to_string(routing::PortId{cfg_.self, p.number}), link::to_string(p.link.state()),
                   fabric_.backlog(p.number).size(), p.link.send_room(), {}, std::nullopt, p.admin_down};
    // Lanes toward the far end with no credit left: what this router cannot send on.
    for (uint8_t l = 0; l < router.lanes(); ++l) {
      if (router.credits(p.number, l) == 0) port.starved_lanes.push_back(lane_ref(l));
    }
    if (p.wire != p.number) port.fallback_via = routing::to_string(routing::PortId{cfg_.self, p.wire});
    s.ports.push_back(std::move(port));
  }
  for (uint8_t f = 0; f < router.fvcs(); ++f) {
    if (router.center_stalled(f)) s.stalled_fvcs.push_back(f);
  }
  s.sockets = socket_states(ctl_);
  s.reservations = reservations(ctl_, cfg_.self);
  return s;
}

}  // namespace ttemu::node
