// One fabric router's routing tables (spec 2.2.3): L0 maps a device id of the local mesh to
// the ethernet port that moves a packet one hop toward it; L1 maps a mesh id to the port
// toward that mesh's exit node. The control plane computes them (emulator/control), writes
// them into router memory in the packed layout below, and routers only ever look up.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "emulator/routing/address.hpp"

namespace ttemu::routing {

// The spec's packed layout: 4-bit port entries, 512 B for L0 (1024 devices) and 512 B for L1
// (1024 meshes); entry i sits in byte i/2, even i in the low nibble. All 16 nibble values are
// real Wormhole ports, so "no route" cannot be a nibble: a reachability bitmap follows
// (bit i of byte i/8 set when entry i holds a route).
struct PackedRouterTable {
  std::array<uint8_t, kMaxDevicesPerMesh / 2> l0{};
  std::array<uint8_t, kMaxMeshes / 2> l1{};
  std::array<uint8_t, kMaxDevicesPerMesh / 8> l0_valid{};
  std::array<uint8_t, kMaxMeshes / 8> l1_valid{};
};
static_assert(sizeof(PackedRouterTable::l0) + sizeof(PackedRouterTable::l1) == 1024,
              "spec 2.2.3: two-level tables need 1024 bytes per router");
static_assert(sizeof(PackedRouterTable) == 1280, "port entries plus reachability bitmaps");

class RouterTable {
 public:
  static constexpr uint8_t kNoRoute = 0xFF;

  std::optional<uint8_t> l0(uint16_t device) const { return get(l0_, device); }
  std::optional<uint8_t> l1(uint16_t mesh) const { return get(l1_, mesh); }
  void set_l0(uint16_t device, std::optional<uint8_t> port) { l0_.at(device) = raw(port); }
  void set_l1(uint16_t mesh, std::optional<uint8_t> port) { l1_.at(mesh) = raw(port); }

  PackedRouterTable pack() const;
  static RouterTable unpack(const PackedRouterTable& packed);

  bool operator==(const RouterTable&) const = default;

 private:
  static std::optional<uint8_t> get(const std::array<uint8_t, 1024>& t, uint16_t i) {
    uint8_t v = t.at(i);
    return v == kNoRoute ? std::nullopt : std::optional<uint8_t>(v);
  }
  static uint8_t raw(std::optional<uint8_t> port);

  std::array<uint8_t, kMaxDevicesPerMesh> l0_ = filled();
  std::array<uint8_t, kMaxMeshes> l1_ = filled();
  static constexpr std::array<uint8_t, 1024> filled() {
    std::array<uint8_t, 1024> a{};
    a.fill(kNoRoute);
    return a;
  }
};

// What a router at `self` does with a packet for `dst`: deliver it to its own device (the
// center), forward it on a port, or find no route (the table has no entry).
struct NextHop {
  enum Kind : uint8_t { kDeliver, kForward, kNoRoute } kind;
  uint8_t port = 0;
};
NextHop next_hop(const RouterTable& table, ChipId self, ChipId dst);

}  // namespace ttemu::routing
