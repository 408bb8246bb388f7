// The layout of a chip's memory as the control plane sees it.
//
// Control segment: a ChipControl block the chip updates and the launcher reads (per-port link
// counters, the UDP port each link is bound to, stream-check results) - the spec's status
// reporting (1.1.2), reached through shared memory as the control plane reaches DRAM over PCIe.
// L1 segment: Tensix cores' L1 then ethernet cores' L1; each ethernet core (one per port)
// starts with its router's configuration (the routing table of the port's plane, written by
// the control plane before the chip starts) followed by its receive buffer.
#pragma once

#include <atomic>
#include <cstdint>

#include "emulator/link/link_counters.hpp"
#include "emulator/routing/address.hpp"
#include "emulator/routing/routing_table.hpp"

namespace ttemu::chip {

inline constexpr uint64_t kControlMagic = 0x4c5254434d455454ull;  // "TTEMCTRL"
inline constexpr uint64_t kRouterMagic = 0x52544f524d455454ull;   // "TTEMROTR"

struct PortStatus {
  link::LinkCounters counters;
  std::atomic<uint32_t> udp_port{0};        // bound UDP port, 0 when the port is not wired
  std::atomic<uint64_t> stream_verified{0}; // stream payloads that arrived bit-exact, in order
  std::atomic<uint64_t> stream_errors{0};   // stream payloads that arrived wrong
};

struct ChipControl {
  uint64_t magic = 0;
  uint32_t version = 1;
  std::atomic<uint32_t> pid{0};
  std::atomic<uint32_t> running{0};
  uint16_t mesh = 0, device = 0;
  PortStatus ports[routing::kMaxPorts];
};

struct RouterConfig {
  uint64_t magic = 0;
  uint16_t plane = 0;
  uint8_t port = 0;
  uint8_t reserved[5] = {};
  routing::PackedRouterTable table;
};

// Where an ethernet core's receive buffer starts inside its L1.
inline constexpr size_t kRouterBufferOffset = 4096;
static_assert(sizeof(RouterConfig) <= kRouterBufferOffset);

// Destination addresses the chip's test traffic uses in the TT-link header.
inline constexpr uint32_t kStreamAddr = 0x5354'0000;  // a checked stream (ttemu link test)
inline constexpr uint32_t kEchoAddr = 0x4543'0000;    // reply with the same payload
inline constexpr uint32_t kEchoReplyAddr = 0x4543'0001;

}  // namespace ttemu::chip
