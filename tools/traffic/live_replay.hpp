// `ttemu traffic --replay FILE.pcapng`: a capture's injections (replay.hpp; captured from a
// running system by `ttemu capture`, or from the simulator by `ttemu sim --capture`) issued
// again into a running system through the client library, and what it delivered compared, pair
// of chips by pair, with what the same replay delivers in the simulator
// (docs/capture.md#replay-on-a-running-system).
//
// Each source chip gets a worker (core 0) that issues its injections in capture order, as fast
// as the fabric takes them, with their command, destination, address, size, FVC and plane; a
// write's payload is staged first in the source's DRAM, above every address the injections
// touch. Writes and atomic increments are replayed; a capture with multicasts, reads or
// atomic read-increments is refused in one line (`ttemu sim --replay` replays those).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "emulator/job/description.hpp"

namespace ttemu::tools {

// Runs the replay against the running system `desc` (control socket `socket`) and returns the
// report: {"replay", "injections", "seconds", "nacks", "equal", "expected", "delivered" (both
// session::Deliveries::to_json without by_pair), "differing_pairs" (the first few, each with
// what was expected and what was delivered)}. Throws Error for a capture it cannot replay.
nlohmann::json run_live_replay(const job::SystemDescription& desc, const std::string& socket, const std::string& file);

}  // namespace ttemu::tools
