// A simulated system booted from a topology file with the default configuration, for the
// simulator's tests: the system and its tables live as long as the simulator, which refers to
// them.
#pragma once

#include <string>

#include "emulator/control/routing_tables.hpp"
#include "emulator/sim/fabric_sim.hpp"
#include "tests/test_support.hpp"

namespace ttemu::test {

struct BootedSim {
  control::System sys;
  control::TableSet tables;
  sim::FabricSim sim;

  explicit BootedSim(const std::string& topology)
      : sys(load(topology)), tables(control::compute_tables(sys)), sim(sys, tables, {}) {}
  BootedSim(const BootedSim&) = delete;
  BootedSim& operator=(const BootedSim&) = delete;
};

}  // namespace ttemu::test
