#include "emulator/node/socket_json.hpp"

namespace ttemu::node {

using nlohmann::json;

json sockets_json(const chip::ChipControl& c) {
  json out = json::array();
  for (int i = 0; i < session::kSocketEndpoints; ++i) {
    const session::SocketEndpoint& e = c.sockets[i];
    const auto state = static_cast<session::SocketState>(e.state.load(std::memory_order_acquire));
    if (state == session::kSocketFree || state == session::kSocketClaimed) continue;
    const bool rx = e.direction == session::kSocketReceive;
    const std::string remote = e.remote_mesh == session::kAnyDevice ? std::string("any")
                                                                   : routing::to_string(routing::ChipId{e.remote_mesh, e.remote_device});
    json j = {{"socket", e.socket_id}, {"endpoint", i}, {"core", e.core},
              {"type", e.type == session::kSSocket ? "ssocket" : "dsocket"}, {"direction", rx ? "receive" : "send"},
              {"state", session::to_string(state)}, {"status", e.status.load(std::memory_order_relaxed)},
              {"epoch", e.epoch}, {"remote", remote}, {"fvc", e.fvc},
              {"handshake", e.handshake == session::kEndToEnd ? "end_to_end" : "local"}};
    if (rx) {
      j["received"] = e.l1_head.load(std::memory_order_relaxed);
      j["read"] = e.l1_tail.load(std::memory_order_relaxed);
      j["spilled"] = e.spilled.load(std::memory_order_relaxed);
      j["backed_up"] = e.backed_up.load(std::memory_order_relaxed) != 0;
    } else {
      j["queued"] = e.queued.load(std::memory_order_relaxed);
      j["sent"] = e.sent.load(std::memory_order_relaxed);
    }
    out.push_back(std::move(j));
  }
  return out;
}

json reservations_json(const chip::ChipControl& c, routing::ChipId self) {
  json out = json::array();
  auto add = [&](const std::string& output, int fvc, uint64_t v) {
    if (v == 0) return;
    out.push_back({{"output", output}, {"fvc", fvc}, {"owner", routing::to_string(chip::reservation_owner(v))},
                   {"endpoint", static_cast<uint16_t>(v)}});
  };
  for (int p = 0; p < routing::kMaxPorts; ++p) {
    for (int v = 0; v < chip::kMaxReservableFvcs; ++v) {
      add(routing::to_string(routing::PortId{self, static_cast<uint8_t>(p)}), v, c.ports[p].reserved[v].load(std::memory_order_relaxed));
    }
  }
  for (int v = 0; v < chip::kMaxReservableFvcs; ++v) add("center", v, c.center_reserved[v].load(std::memory_order_relaxed));
  return out;
}

}  // namespace ttemu::node
