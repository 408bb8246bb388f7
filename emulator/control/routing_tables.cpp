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
    for (const Mesh& mesh : sys_.meshes) {
      route_mesh(mesh);
      if (has_dependency_cycle(mesh)) route_mesh_up_down(mesh);
    }
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
  void route_mesh_up_down(const Mesh& mesh);
  bool has_dependency_cycle(const Mesh& mesh) const;
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

bool PlaneRouter::has_dependency_cycle(const Mesh& mesh) const {
  // Channel-dependency graph of this mesh's L0 routes alone; channel = local node * 16 + port.
  const int n = mesh.chips.size();
  std::vector<std::vector<int>> deps(static_cast<size_t>(n) * routing::kMaxPorts);
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      int v = mesh.first_node + s, prev = -1;
      for (int hops = 0; v != mesh.first_node + d && hops < n; ++hops) {
        auto port = tables_.at(plane_, v).l0(static_cast<uint16_t>(d));
        const Neighbour* nb = port ? g_.on_port(v, *port) : nullptr;
        if (!nb) break;
        int ch = (v - mesh.first_node) * routing::kMaxPorts + *port;
        if (prev >= 0) deps[static_cast<size_t>(prev)].push_back(ch);
        prev = ch;
        v = nb->peer;
      }
    }
  }
  for (auto& out : deps) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return !find_cycle(deps).empty();
}

void PlaneRouter::route_mesh_up_down(const Mesh& mesh) {
  // Up*/down* routing (Autonet): deadlock-free on any graph, used when holes in the mesh
  // force dimension-ordered routes into cyclic turns. Links point "up" toward a root chip
  // near the middle; a route climbs, then descends, never the reverse. Each chip descends
  // whenever the destination lies below it, so every route a table makes is legal.
  const int n = mesh.chips.size();
  const auto& dist = dist_.at(mesh.id);
  int root = -1;
  long best = std::numeric_limits<long>::max();
  for (int r = 0; r < n; ++r) {
    if (!g_.alive(mesh.first_node + r)) continue;
    long sum = 0;
    for (int s = 0; s < n; ++s) {
      int d = dist[static_cast<size_t>(r) * static_cast<size_t>(n) + static_cast<size_t>(s)];
      if (g_.alive(mesh.first_node + s)) sum += d == kFar ? 1'000'000 : d;
    }
    if (sum < best) best = sum, root = r;
  }
  if (root < 0) return;
  std::vector<int> level(static_cast<size_t>(n), kFar);
  std::deque<int> queue{root};
  level[static_cast<size_t>(root)] = 0;
  auto local_neighbours = [&](int s) {
    std::vector<std::pair<uint8_t, int>> out;  // (port, local peer)
    for (const auto& nb : g_.neighbours(mesh.first_node + s)) {
      int w = nb.peer - mesh.first_node;
      if (w >= 0 && w < n) out.push_back({nb.port, w});
    }
    return out;
  };
  while (!queue.empty()) {
    int v = queue.front();
    queue.pop_front();
    for (auto [port, w] : local_neighbours(v)) {
      if (level[static_cast<size_t>(w)] == kFar) {
        level[static_cast<size_t>(w)] = level[static_cast<size_t>(v)] + 1;
        queue.push_back(w);
      }
    }
  }
  auto key = [&](int v) { return std::make_pair(level[static_cast<size_t>(v)], v); };
  std::vector<int> order;
  for (int v = 0; v < n; ++v) {
    if (level[static_cast<size_t>(v)] != kFar) order.push_back(v);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  for (int d = 0; d < n; ++d) {
    for (int s = 0; s < n; ++s) tables_.at(plane_, mesh.first_node + s).set_l0(static_cast<uint16_t>(d), std::nullopt);
    if (level[static_cast<size_t>(d)] == kFar) continue;
    // down[v]: hops from v to d going only down; found backwards from d along up links.
    std::vector<int> down(static_cast<size_t>(n), kFar);
    down[static_cast<size_t>(d)] = 0;
    std::deque<int> q{d};
    while (!q.empty()) {
      int x = q.front();
      q.pop_front();
      for (auto [port, p] : local_neighbours(x)) {
        if (key(p) < key(x) && down[static_cast<size_t>(p)] == kFar) {
          down[static_cast<size_t>(p)] = down[static_cast<size_t>(x)] + 1;
          q.push_back(p);
        }
      }
    }
    // legal[v]: hops of the shortest climb-then-descend route, in root-first order.
    std::vector<int> legal(static_cast<size_t>(n), kFar);
    for (int v : order) {
      int best_v = down[static_cast<size_t>(v)];
      for (auto [port, w] : local_neighbours(v)) {
        if (key(w) < key(v) && legal[static_cast<size_t>(w)] != kFar) {
          best_v = std::min(best_v, legal[static_cast<size_t>(w)] + 1);
        }
      }
      legal[static_cast<size_t>(v)] = best_v;
    }
    for (int v : order) {
      if (v == d || legal[static_cast<size_t>(v)] == kFar) continue;
      std::optional<uint8_t> pick;
      bool descend = down[static_cast<size_t>(v)] != kFar;
      for (auto [port, w] : local_neighbours(v)) {
        bool ok = descend ? key(w) > key(v) && down[static_cast<size_t>(w)] == down[static_cast<size_t>(v)] - 1
                          : key(w) < key(v) && legal[static_cast<size_t>(w)] == legal[static_cast<size_t>(v)] - 1;
        if (ok && (!pick || port < *pick)) pick = port;
      }
      tables_.at(plane_, mesh.first_node + v).set_l0(static_cast<uint16_t>(d), pick);
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
      size_t before = shared.size();
      for (const auto& ch : dependency_cycle(sys, tables, plane, failures)) {
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
