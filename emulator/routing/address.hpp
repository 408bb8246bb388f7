// Fabric addresses as the spec names them (2.2.3): a device is MxDy (mesh id, device id inside
// the mesh, row-major), an ethernet port on it is MxDyPz.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ttemu::routing {

inline constexpr int kMaxMeshes = 1024;          // 2.2.3: up to 1024 meshes ...
inline constexpr int kMaxDevicesPerMesh = 1024;  // ... of up to 1024 devices each
inline constexpr int kMaxPorts = 16;             // a routing table entry is 4 bits

struct ChipId {
  uint16_t mesh = 0;
  uint16_t device = 0;
  auto operator<=>(const ChipId&) const = default;
};

struct PortId {
  ChipId chip;
  uint8_t port = 0;
  auto operator<=>(const PortId&) const = default;
};

std::string to_string(ChipId chip);  // "M0D1"
std::string to_string(PortId port);  // "M0D1P2"

// Parse "M0D1" / "M0D1P2" (case-insensitive); nullopt on anything else or out of range.
std::optional<ChipId> parse_chip(std::string_view text);
std::optional<PortId> parse_port(std::string_view text);

}  // namespace ttemu::routing
