// What the control plane and host agents of a multi-host launch share besides JSON: the
// version both must run, and status entries carried as the bytes of the chips' own queue
// (every host runs the same ttemu, which the version check makes sure of).
#pragma once

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/status_queue.hpp"
#include "emulator/common/error.hpp"

namespace ttemu::launcher {

// The protocol's own revision, besides the chips' control block: 2 added the restart of a chip
// on another host ({"start", "renew"}), which an agent of revision 1 would take as a first start.
inline constexpr int kHostWireRevision = 2;
inline std::string host_wire_version() { return fmt::format("ttemu-control-{}.{}", chip::kControlVersion, kHostWireRevision); }

inline std::string status_entry_hex(const chip::StatusEntry& e) {
  unsigned char bytes[sizeof e];
  std::memcpy(bytes, &e, sizeof e);
  std::string out;
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

inline chip::StatusEntry status_entry_from_hex(const std::string& hex) {
  chip::StatusEntry e;
  if (hex.size() != 2 * sizeof e) throw Error("a status entry of the wrong size");
  unsigned char bytes[sizeof e];
  for (size_t i = 0; i < sizeof e; ++i) bytes[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  std::memcpy(&e, bytes, sizeof e);
  return e;
}

}  // namespace ttemu::launcher
