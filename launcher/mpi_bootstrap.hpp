// How the host agents of one multi-host launch find each other (docs/multi-host.md): through
// the distributed engine that started them. Each agent is one MPI process (mpirun, or srun
// with PMIx); they exchange their link addresses and the control plane's TCP port in one
// MPI_Allgather and then leave MPI (MPI_Finalize), so that MPI holds nothing while the system
// runs and a host's death is ttemu's to handle, not MPI's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ttemu::launcher {

struct HostEntry {
  int rank = 0;
  std::string address;        // where this host's chips bind their links, and its agent listens
  uint16_t control_port = 0;  // the control plane's (rank 0's); 0 elsewhere
  std::string version;        // ttemu's control version: every host must run the same
};

struct MpiWorld {
  int rank = 0, size = 1;
  std::vector<HostEntry> hosts;  // by rank
};

// MPI_Init, then `mine(rank, size)` (which may throw: the error is passed to every rank, and
// each throws Error naming the rank that failed), MPI_Allgather, MPI_Finalize.
MpiWorld exchange_through_mpi(const std::function<HostEntry(int rank, int size)>& mine);

// Whether this process was started by mpirun or srun (their rank variables are set).
bool started_by_mpi();

// This host's address for links: in `network` (a CIDR like 10.1.0.0/24 or fd00::/64, or an
// interface name like eth0); empty: the first non-loopback IPv4 address, else 127.0.0.1.
// Throws Error naming the network when no address of this host is in it.
std::string local_address(const std::string& network);

}  // namespace ttemu::launcher
