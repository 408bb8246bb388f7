#include "emulator/control/routing_tables.hpp"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <set>

#include "emulator/control/plane_graph.hpp"
#include "emulator/control/table_check.hpp"

namespace ttemu::control {

namespace {

constexpr int kFar = std::numeric_limits<int>::max();

// An exit: a live inter-mesh link of this plane, seen from the mesh it leaves.
struct Exit {
  int node;      // exit node
  uint8_t port;  // its port
  int peer;      // entry node in the next mesh
  int link;
};

class PlaneRouter {
 public:
  PlaneRouter(const System& sys, const PlaneGraph& graph, TableSet& tables)
      : sys_(sys), g_(graph), tables_(tables), plane_(graph.plane()) {}

  void route_intra_mesh() {
    for (const Mesh& mesh : sys_.meshes) route_mesh(mesh);
  }

  // Mesh pairs in shared_pairs use one link both ways; the others edge-disjoint links.
  void route_inter_mesh(const std::set<std::pair<int, int>>& shared_pairs);

  int distance(int from, int to) const {
    const Mesh& m = sys_.mesh_of(to);
    const auto& row = dist_.at(sys_.chips[static_cast<size_t>(to)].id.mesh);
    return row[static_cast<size_t>(to - m.first_node) * static_cast<size_t>(m.chips.size()) +
               static_cast<size_t>(from - m.first_node)];
  }

 private:
  void route_mesh(const Mesh& mesh);
  std::optional<Exit> choose_exit(int from_mesh, int to_mesh, const std::optional<Exit>& avoid,
                                  bool share) const;
  long centrality(int node) const;

  const System& sys_;
  const PlaneGraph& g_;
  TableSet& tables_;
  int plane_;
  // Per mesh id: distance[dst * n + src] inside the mesh on this plane (kFar: unreachable).
  std::map<int, std::vector<int>> dist_;
};

void PlaneRouter::route_mesh(const Mesh& mesh) {
  const int n = mesh.chips.size();
  auto& dist = dist_[mesh.id];
  dist.assign(static_cast<size_t>(n) * static_cast<size_t>(n), kFar);
  for (int d = 0; d < n; ++d) {
    const int dst = mesh.first_node + d;
    if (!g_.alive(dst)) continue;
    int* row = &dist[static_cast<size_t>(d) * static_cast<size_t>(n)];
    std::deque<int> queue{dst};
    row[d] = 0;
    while (!queue.empty()) {
      int v = queue.front();
      queue.pop_front();
      for (const auto& nb : g_.neighbours(v)) {
        int local = nb.peer - mesh.first_node;
        if (local < 0 || local >= n || row[local] != kFar) continue;
        row[local] = row[v - mesh.first_node] + 1;
        queue.push_back(nb.peer);
      }
    }
    const Coord target = sys_.chips[static_cast<size_t>(dst)].coord;
    for (int s = 0; s < n; ++s) {
      const int src = mesh.first_node + s;
      if (s == d || row[s] == kFar) continue;
      // Among neighbours one step closer, prefer the one that closes the X gap, then Y, then Z.
      const Coord from = sys_.chips[static_cast<size_t>(src)].coord;
      auto rank = [&](const Neighbour& nb) {
        const Coord to = sys_.chips[static_cast<size_t>(nb.peer)].coord;
        auto closer = [](int a, int b, int t) { return std::abs(b - t) < std::abs(a - t); };
        if (closer(from.col, to.col, target.col)) return 0;
        if (closer(from.row, to.row, target.row)) return 1;
        if (closer(from.layer, to.layer, target.layer)) return 2;
        return 3;
      };
      const Neighbour* best = nullptr;
      for (const auto& nb : g_.neighbours(src)) {
        int local = nb.peer - mesh.first_node;
        if (local < 0 || local >= n || row[local] != row[s] - 1) continue;
        if (!best || std::make_pair(rank(nb), nb.port) < std::make_pair(rank(*best), best->port)) {
          best = &nb;
        }
      }
      tables_.at(plane_, src).set_l0(static_cast<uint16_t>(d), best->port);
    }
  }
}

long PlaneRouter::centrality(int node) const {
  // Sum of hop counts from every live chip of the mesh: lower is nearer the middle.
  const Mesh& m = sys_.mesh_of(node);
  long sum = 0;
  for (int s = m.first_node; s < m.first_node + m.chips.size(); ++s) {
    if (!g_.alive(s)) continue;
    int d = distance(s, node);
    sum += d == kFar ? 1'000'000 : d;
  }
  return sum;
}

std::optional<Exit> PlaneRouter::choose_exit(int from_mesh, int to_mesh,
                                             const std::optional<Exit>& avoid, bool share) const {
  std::vector<Exit> candidates;
  const Mesh& m = *sys_.mesh(static_cast<uint16_t>(from_mesh));
  for (int v = m.first_node; v < m.first_node + m.chips.size(); ++v) {
    for (const auto& nb : g_.neighbours(v)) {
      if (sys_.chips[static_cast<size_t>(nb.peer)].id.mesh == to_mesh) {
        candidates.push_back({v, nb.port, nb.peer, nb.link});
      }
    }
  }
  if (candidates.empty()) return std::nullopt;
  if (avoid && share) {
    for (const auto& c : candidates) {
      if (c.link == avoid->link) return c;
    }
  }
  // Tiers for the second direction of a pair: disjoint chips, then a different link, then any.
  auto tier = [&](const Exit& c) {
    if (!avoid) return 0;
    if (c.node != avoid->peer && c.peer != avoid->node) return 0;
    return c.link != avoid->link ? 1 : 2;
  };
  auto key = [&](const Exit& c) { return std::make_tuple(tier(c), centrality(c.node), c.node, c.port); };
  return *std::min_element(candidates.begin(), candidates.end(),
                           [&](const Exit& a, const Exit& b) { return key(a) < key(b); });
}

void PlaneRouter::route_inter_mesh(const std::set<std::pair<int, int>>& shared_pairs) {
  std::map<int, std::set<int>> adjacent;  // mesh id -> neighbouring mesh ids on this plane
  for (const auto& chip : sys_.chips) {
    int v = *sys_.node(chip.id);
    for (const auto& nb : g_.neighbours(v)) {
      int other = sys_.chips[static_cast<size_t>(nb.peer)].id.mesh;
      if (other != chip.id.mesh) adjacent[chip.id.mesh].insert(other);
    }
  }
  std::map<std::pair<int, int>, Exit> exits;
  for (const auto& [a, set] : adjacent) {
    for (int b : set) {
      if (b < a) continue;
      auto ab = choose_exit(a, b, std::nullopt, false);
      exits[{a, b}] = *ab;
      exits[{b, a}] = *choose_exit(b, a, ab, shared_pairs.count({a, b}) > 0);
    }
  }
  for (const Mesh& dst : sys_.meshes) {
    // Breadth-first over meshes from the destination gives every mesh its next mesh.
    std::map<int, int> mdist{{dst.id, 0}};
    std::deque<int> queue{dst.id};
    while (!queue.empty()) {
      int v = queue.front();
      queue.pop_front();
      for (int w : adjacent[v]) {
        if (mdist.count(w)) continue;
        mdist[w] = mdist[v] + 1;
        queue.push_back(w);
      }
    }
    for (const Mesh& src : sys_.meshes) {
      if (src.id == dst.id || !mdist.count(src.id)) continue;
      int next = -1;
      for (int w : adjacent[src.id]) {  // ascending: the lowest id wins ties
        if (mdist.count(w) && mdist[w] == mdist[src.id] - 1) {
          next = w;
          break;
        }
      }
      const Exit& exit = exits.at({src.id, next});
      for (int v = src.first_node; v < src.first_node + src.chips.size(); ++v) {
        if (!g_.alive(v)) continue;
        auto& table = tables_.at(plane_, v);
        if (v == exit.node) {
          table.set_l1(dst.id, exit.port);
        } else if (distance(v, exit.node) != kFar) {
          table.set_l1(dst.id, table.l0(sys_.chips[static_cast<size_t>(exit.node)].id.device));
        }
      }
    }
  }
}

}  // namespace

TableSet compute_tables(const System& sys, const Failures& failures) {
  TableSet tables(sys.planes, sys.node_count());
  for (int plane = 0; plane < sys.planes; ++plane) {
    PlaneGraph graph(sys, plane, failures);
    PlaneRouter router(sys, graph, tables);
    router.route_intra_mesh();
    // Edge-disjoint exits can close a dependency cycle through two meshes that both carry
    // transit traffic; such pairs fall back to one shared link, until the graph is acyclic.
    std::set<std::pair<int, int>> shared;
    const TableSet intra = tables;
    while (true) {
      router.route_inter_mesh(shared);
      if (sys.meshes.size() < 2) break;
      auto report = check_plane(sys, tables, plane, failures);
      size_t before = shared.size();
      for (const auto& ch : report.dependency_cycle) {
        auto peer = sys.peer(ch.port);
        if (peer && peer->chip.mesh != ch.port.chip.mesh) {
          int a = ch.port.chip.mesh, b = peer->chip.mesh;
          shared.insert({std::min(a, b), std::max(a, b)});
        }
      }
      if (shared.size() == before) break;
      for (int v = 0; v < sys.node_count(); ++v) tables.at(plane, v) = intra.at(plane, v);
    }
  }
  return tables;
}

}  // namespace ttemu::control
