#include "emulator/node/socket_states.hpp"

namespace ttemu::node {

std::vector<SocketState> socket_states(const chip::ChipControl& c) {
  std::vector<SocketState> out;
  for (int i = 0; i < session::kSocketEndpoints; ++i) {
    const session::SocketEndpoint& e = c.sockets[i];
    const auto state = static_cast<session::SocketState>(e.state.load(std::memory_order_acquire));
    if (state == session::kSocketFree || state == session::kSocketClaimed) continue;
    const bool rx = e.direction == session::kSocketReceive;
    const std::string remote = e.remote_mesh == session::kAnyDevice ? std::string("any")
                                                                   : routing::to_string(routing::ChipId{e.remote_mesh, e.remote_device});
    SocketState s;
    s.socket = e.socket_id;
    s.endpoint = i;
    s.core = e.core;
    s.owner = e.owner.load(std::memory_order_relaxed);
    s.fvc = e.fvc;
    s.type = e.type == session::kSSocket ? "ssocket" : "dsocket";
    s.direction = rx ? "receive" : "send";
    s.state = session::to_string(state);
    s.remote = remote;
    s.handshake = e.handshake == session::kEndToEnd ? "end_to_end" : "local";
    s.status = e.status.load(std::memory_order_relaxed);
    s.epoch = e.epoch;
    if (rx) {
      s.received = e.l1_head.load(std::memory_order_relaxed);
      s.read = e.l1_tail.load(std::memory_order_relaxed);
      s.spilled = e.spilled.load(std::memory_order_relaxed);
      s.backed_up = e.backed_up.load(std::memory_order_relaxed) != 0;
    } else {
      s.queued = e.queued.load(std::memory_order_relaxed);
      s.sent = e.sent.load(std::memory_order_relaxed);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Reservation> reservations(const chip::ChipControl& c, routing::ChipId self) {
  std::vector<Reservation> out;
  auto add = [&](const std::string& output, int fvc, uint64_t v) {
    if (v == 0) return;
    out.push_back({output, routing::to_string(chip::reservation_owner(v)), fvc, static_cast<uint16_t>(v)});
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
