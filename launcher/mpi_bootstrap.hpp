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

// The ranks of one MPI program that stay together for a while (`ttemu traffic` spread over
// hosts: each rank drives its own host's chips, and they agree on when to start and what they
// found). MPI_Init in the constructor, MPI_Finalize in the destructor; every call is
// collective.
class MpiGroup {
 public:
  MpiGroup();
  ~MpiGroup();
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  void barrier();
  uint64_t sum(uint64_t v);
  double max(double v);
  // Element-wise maximum over the ranks.
  std::vector<int> max(std::vector<int> v);
  // Every rank's string, by rank.
  std::vector<std::string> all(const std::string& mine);
  // Every rank's values, concatenated in rank order (at rank 0; others get their own).
  std::vector<double> gather(const std::vector<double>& mine);

 private:
  int rank_ = 0, size_ = 1;
};

// Whether this process was started by mpirun or srun (their rank variables are set).
bool started_by_mpi();

// This host's address for links: in `network` (a CIDR like 10.1.0.0/24 or fd00::/64, or an
// interface name like eth0); empty: the first non-loopback IPv4 address, else 127.0.0.1.
// Throws Error naming the network when no address of this host is in it.
std::string local_address(const std::string& network);

}  // namespace ttemu::launcher
