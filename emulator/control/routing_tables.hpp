// The control plane's routing: computes every router's L0 and L1 table (spec 2.2.3) for every
// routing plane (2.2.4), around any failed links and chips.
//
// L0 (intra-mesh): dimension-ordered, X (east/west) first, then Y, then Z (5.1). Around
// failures a hop may leave that order, but only onto a shortest surviving path, so a route
// never loops. Where that closes a channel-dependency cycle inside the mesh, the mesh's plane
// is routed up*/down* instead: longer routes, but deadlock-free around any hole.
// L1 (inter-mesh): toward the exit node of the next mesh on a shortest mesh path (ties to the
// lowest mesh id). Each ordered mesh pair has one exit link, the one nearest the middle of the
// mesh; the two directions of a pair use edge-disjoint links (5.2) where the topology has
// them and that choice keeps the channel-dependency graph acyclic.
#pragma once

#include "emulator/control/failures.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_set.hpp"

namespace ttemu::control {

TableSet compute_tables(const System& sys, const Failures& failures = {});

}  // namespace ttemu::control
