// A chip's sockets and SSocket reservations as JSON, from its control block (the socket table,
// the reservations its router published): what `ttemu status` and `ttemu snapshot` show.
#pragma once

#include <nlohmann/json.hpp>

#include "emulator/chip/chip_control.hpp"

namespace ttemu::node {

// The endpoints in use: [{"socket", "endpoint", "type", "direction", "state", "status", "epoch",
// "remote", "fvc", "handshake", bytes...}].
nlohmann::json sockets_json(const chip::ChipControl& c);
// Reservations held at this chip's router: [{"output": "MxDyPz" | "center", "fvc", "owner",
// "endpoint"}].
nlohmann::json reservations_json(const chip::ChipControl& c, routing::ChipId self);

}  // namespace ttemu::node
