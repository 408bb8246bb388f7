// `ttemu sim --op socket`: a pattern's pairs as socket streams (spec 2.4, 4) on the simulator.
// Each pair (source, destination) opens a socket of its own (socket id = pair number + 1,
// epoch 1): the destination's worker for that source receives, the source's worker for that
// destination sends its block (count x size bytes, the traffic patterns' bytes) in one send;
// the receivers read as data arrives, or stall and resume at random (seeded) with
// --reader-stalls. Every byte received is checked against what was sent.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/control/system.hpp"
#include "emulator/link/tt_link.hpp"
#include "emulator/sim/fabric_sim.hpp"

namespace ttemu::tools {

struct SocketRunOptions {
  std::string socket = "dsocket";        // dsocket | ssocket
  std::string handshake = "end_to_end";  // end_to_end | local
  uint32_t l1cb = 64 << 10, dscb = 256 << 10;  // the receivers' buffers (dscb 0: none)
  bool reader_stalls = false;            // readers stall and resume at random
  uint32_t size = 4096, count = 4;
  int fvc = -1;
  uint64_t seed = 1;
  double limit_s = 60;
};

// Runs the pairs; the JSON report: "pattern", "op": "socket", "socket", "handshake", "pairs",
// "bytes", "seconds", "gb_per_s", "verified", "errors", "unverified", "open_errors",
// "spilled", "backed_up" (pairs whose data waited in the fabric), "error_writes".
nlohmann::json run_socket_pattern(sim::FabricSim& sim, const control::System& sys, const SocketRunOptions& o,
                                  const std::string& pattern, int plane, const std::vector<std::pair<int, int>>& pairs,
                                  size_t l1_bytes);

// The memory a run needs per chip: L1 (data at the sources, L1CBs at the receivers) and DRAM
// (DSCBs).
size_t socket_l1_need(const SocketRunOptions& o, int chips);
size_t socket_dram_need(const SocketRunOptions& o, int chips);

}  // namespace ttemu::tools
