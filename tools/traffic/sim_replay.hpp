// `ttemu sim --replay`: a capture's injections (replay.hpp) injected again into the simulated
// system, each from its source chip at the simulated time the capture first shows it; while
// its FVC's buffer is full, as soon after as there is room, behind that source's earlier
// injections (its order holds). Then the system runs until nothing moves.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "emulator/sim/fabric_sim.hpp"
#include "emulator/session/deliveries.hpp"
#include "tools/traffic/replay.hpp"

namespace ttemu::tools {

// Runs the replay on `sim` (its links up) until nothing moves, or for at most `limit_s`
// simulated seconds past the last injection's time; `replay` must outlive the simulation
// (injections still waiting at the limit go on if it runs on). `deliveries` is the record the
// simulation's delivery tap keeps. Returns {"replay": file, "injections", "lost_with_source"
// (injections from a chip dead by their time), "complete", "link_ends_captured", "link_ends",
// "bad_frames", "seconds" (simulated, to the millisecond of the last delivery), "idle" (false:
// stopped at the limit), "nacks", "router_events", "deliveries" (what it delivered)}.
nlohmann::json run_replay(sim::FabricSim& sim, const control::System& sys, const Replay& replay, const std::string& file,
                          double limit_s, const session::Deliveries& deliveries);

// What the replay delivers on a fresh simulated copy of `sys` whose routers have `data_fvcs`
// data FVCs, every link up first, run until idle: the yardstick `ttemu traffic --replay` holds
// a running system's deliveries to. Throws Error if it is not idle `limit_s` simulated seconds
// after the last injection.
session::Deliveries simulate_replay(const control::System& sys, const Replay& replay, int data_fvcs, double limit_s);

}  // namespace ttemu::tools
