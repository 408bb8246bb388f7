#include "emulator/routing/routing_table.hpp"

#include "emulator/common/error.hpp"

namespace ttemu::routing {

uint8_t RouterTable::raw(std::optional<uint8_t> port) {
  if (!port) return kNoRoute;
  if (*port >= kMaxPorts) throw Error("routing table entry out of range: port must be 0-15");
  return *port;
}

namespace {

template <size_t N, size_t V>
void pack_half(const std::array<uint8_t, N>& in, std::array<uint8_t, N / 2>& out,
               std::array<uint8_t, V>& valid) {
  for (size_t i = 0; i < N; ++i) {
    if (in[i] == RouterTable::kNoRoute) continue;
    out[i / 2] = static_cast<uint8_t>(out[i / 2] | (in[i] << (4 * (i % 2))));
    valid[i / 8] = static_cast<uint8_t>(valid[i / 8] | (1u << (i % 8)));
  }
}

template <size_t N, size_t V>
std::optional<uint8_t> unpack_one(const std::array<uint8_t, N>& in,
                                  const std::array<uint8_t, V>& valid, size_t i) {
  if (!(valid[i / 8] & (1u << (i % 8)))) return std::nullopt;
  return static_cast<uint8_t>((in[i / 2] >> (4 * (i % 2))) & 0xF);
}

}  // namespace

PackedRouterTable RouterTable::pack() const {
  PackedRouterTable p;
  pack_half(l0_, p.l0, p.l0_valid);
  pack_half(l1_, p.l1, p.l1_valid);
  return p;
}

RouterTable RouterTable::unpack(const PackedRouterTable& p) {
  RouterTable t;
  for (uint16_t i = 0; i < kMaxDevicesPerMesh; ++i) t.set_l0(i, unpack_one(p.l0, p.l0_valid, i));
  for (uint16_t i = 0; i < kMaxMeshes; ++i) t.set_l1(i, unpack_one(p.l1, p.l1_valid, i));
  return t;
}

NextHop next_hop(const RouterTable& table, ChipId self, ChipId dst) {
  if (dst == self) return {NextHop::kDeliver};
  auto port = dst.mesh == self.mesh ? table.l0(dst.device) : table.l1(dst.mesh);
  if (!port) return {NextHop::kNoRoute};
  return {NextHop::kForward, *port};
}

}  // namespace ttemu::routing
