// `ttemu host-agent SYSTEM.yaml`: one process per host of a system spread across hosts, started
// by mpirun or srun (docs/multi-host.md). The agents meet through MPI (mpi_bootstrap.hpp);
// rank 0 is the control plane (the launcher of `ttemu launch`, supervising every host through
// HostAgents) and also runs its own host's chips; every other rank runs its host's chips for
// it: their shared memory, their processes, their status queues, and a control socket that
// passes `ttemu status` and the other commands on to the control plane, so they work from
// any host. An agent whose control plane is gone stops its chips and ends; the chips of an
// agent that dies go with it (PR_SET_PDEATHSIG), and the control plane routes around them.
#pragma once

#include <string>

#include "launcher/launch.hpp"

namespace ttemu::launcher {

struct HostAgentOptions {
  LaunchOptions launch;    // the system and its settings, the same on every host
  std::string network;     // where links bind: CIDR or interface (mpi_bootstrap.hpp local_address)
  double connect_timeout = 30;  // seconds for an agent to reach the control plane
};

// Returns the exit status (as run_launch does on rank 0).
int run_host_agent(const HostAgentOptions& options);

}  // namespace ttemu::launcher
