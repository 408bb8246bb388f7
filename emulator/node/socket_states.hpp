// A chip's sockets and SSocket reservations, read from its control block (the socket table, the
// reservations its router published): what `ttemu status` and `ttemu snapshot` show
// (snapshot.hpp has the types and their JSON).
#pragma once

#include <vector>

#include "emulator/chip/chip_control.hpp"
#include "emulator/node/snapshot.hpp"

namespace ttemu::node {

// The endpoints in use, in endpoint order.
std::vector<SocketState> socket_states(const chip::ChipControl& c);
// Reservations held at this chip's router, by output port ("MxDyPz", then "center") and FVC.
std::vector<Reservation> reservations(const chip::ChipControl& c, routing::ChipId self);

}  // namespace ttemu::node
