// Checks on a set of routing tables, whoever computed them: walks every route hop by hop
// (the path query of 2.2.3.1.1), finds pairs that cannot reach each other, forwarding loops
// (5.4), and cycles in the channel-dependency graph, which make deadlock possible (5.1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "emulator/control/failures.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_set.hpp"

namespace ttemu::control {

struct Hop {
  PortId from;  // sender device-port
  PortId to;    // receiver device-port
};

struct Walk {
  enum Status { kArrived, kNoRoute, kDeadPort, kLoop };
  Status status = kArrived;
  std::vector<Hop> hops;
  int stuck = -1;          // node where the walk stopped (kNoRoute, kDeadPort)
  uint8_t port = 0;        // the port the table named (kDeadPort)
  std::vector<int> loop;   // the nodes of the loop, in order (kLoop)

  bool arrived() const { return status == kArrived; }
  // One line: why the walk did not arrive ("" when it did).
  std::string reason(const System& sys) const;
};

// Follows the tables from src to dst on one plane. Never loops forever: a chip seen twice for
// the same destination is a forwarding loop.
Walk walk_route(const System& sys, const TableSet& tables, int plane, int src, int dst,
                const Failures& failures = {});

// A channel of the dependency graph: one direction of one link (the sender's port) in one
// class. A packet travels in class 0 inside its source mesh and in class 1 once it has
// entered another mesh (the inter-mesh virtual channel, as tt-metal's fabric keeps one), so
// traffic passing through a mesh never waits behind that mesh's own outbound traffic.
struct Channel {
  PortId port;
  int vc = 0;
  bool operator==(const Channel&) const = default;
};
inline constexpr int kChannelClasses = 2;
// A channel as a number, for graphs over channels: (link * 2 + direction) * kChannelClasses + vc,
// direction 0 being the link's a -> b; and back.
int channel_index(const System& sys, PortId from, int vc);
Channel channel_at(const System& sys, int index);

struct PlaneReport {
  int plane = 0;
  long pairs = 0;        // ordered pairs of live chips
  long reachable = 0;    // pairs whose route arrives
  long disconnected = 0; // pairs with no path at all on this plane: unreachable, and reported
  long missed = 0;       // pairs with a path that the tables fail to follow (a defect)
  long loops = 0;        // walks that ended in a forwarding loop (among missed or disconnected)
  int longest = 0;       // hops of the longest route
  struct Failure {
    int src, dst;
    bool has_path;  // the plane connects them; the tables are at fault
    Walk walk;
  };
  std::vector<Failure> failures;         // defects first (loops first), then disconnected pairs
  std::vector<Channel> dependency_cycle; // empty when the channel-dependency graph is acyclic
  static constexpr size_t kSample = 16;  // failures keeps at most this many

  // Sound tables: every pair the plane connects is routed, with no deadlock-prone cycle.
  bool ok() const { return missed == 0 && dependency_cycle.empty(); }
};

PlaneReport check_plane(const System& sys, const TableSet& tables, int plane,
                        const Failures& failures = {});

// A cycle in the plane's channel-dependency graph (the hops that follow one another on some
// route between live chips, each channel a link direction and class), or empty when it is
// acyclic: what check_plane reports, and what compute_tables breaks between meshes. It costs
// O(chips^2), not a walk of every pair.
std::vector<Channel> dependency_cycle(const System& sys, const TableSet& tables, int plane, const Failures& failures = {});

std::string describe_cycle(const std::vector<Channel>& cycle);

// A directed cycle in a graph given as adjacency lists, as its vertices in order; empty if none.
std::vector<int> find_cycle(const std::vector<std::vector<int>>& adj);

}  // namespace ttemu::control
