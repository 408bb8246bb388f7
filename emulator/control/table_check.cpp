#include "emulator/control/table_check.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "emulator/control/plane_graph.hpp"

namespace ttemu::control {

using routing::to_string;

std::string Walk::reason(const System& sys) const {
  auto name = [&](int node) { return to_string(sys.chips.at(static_cast<size_t>(node)).id); };
  switch (status) {
    case kArrived:
      return "";
    case kNoRoute:
      return fmt::format("no route at {}: its table has no entry for the destination", name(stuck));
    case kDeadPort:
      return fmt::format("{} forwards on P{}, which has no live link on this plane", name(stuck),
                         port);
    case kLoop: {
      std::string chain;
      for (int n : loop) chain += name(n) + " -> ";
      return fmt::format("forwarding loop: {}{}", chain, name(loop.front()));
    }
  }
  return "";
}

namespace {

std::vector<Channel> dependency_cycle(const PlaneGraph& graph, const TableSet& tables);

Walk walk_on(const PlaneGraph& graph, const TableSet& tables, int src, int dst) {
  const System& sys = graph.system();
  const int plane = graph.plane();
  Walk walk;
  const ChipId target = sys.chips.at(static_cast<size_t>(dst)).id;
  std::vector<int> order{src};  // chips visited, in order
  int at = src;
  while (true) {
    const ChipId self = sys.chips[static_cast<size_t>(at)].id;
    auto hop = routing::next_hop(tables.at(plane, at), self, target);
    if (hop.kind == routing::NextHop::kDeliver) return walk;
    if (hop.kind == routing::NextHop::kNoRoute) {
      walk.status = Walk::kNoRoute;
      walk.stuck = at;
      return walk;
    }
    const Neighbour* n = graph.on_port(at, hop.port);
    if (!n) {
      walk.status = Walk::kDeadPort;
      walk.stuck = at;
      walk.port = hop.port;
      return walk;
    }
    walk.hops.push_back({PortId{self, hop.port}, *sys.peer(PortId{self, hop.port})});
    at = n->peer;
    auto seen = std::find(order.begin(), order.end(), at);
    if (seen != order.end()) {
      walk.status = Walk::kLoop;
      walk.loop.assign(seen, order.end());
      return walk;
    }
    order.push_back(at);
  }
}

}  // namespace

std::vector<int> find_cycle(const std::vector<std::vector<int>>& adj) {
  enum : uint8_t { kWhite, kGrey, kBlack };
  std::vector<uint8_t> colour(adj.size(), kWhite);
  std::vector<int> parent(adj.size(), -1);
  for (size_t root = 0; root < adj.size(); ++root) {
    if (colour[root] != kWhite) continue;
    std::vector<std::pair<int, size_t>> stack{{static_cast<int>(root), 0}};
    colour[root] = kGrey;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const auto& out = adj[static_cast<size_t>(v)];
      if (next == out.size()) {
        colour[static_cast<size_t>(v)] = kBlack;
        stack.pop_back();
        continue;
      }
      int w = out[next++];
      if (colour[static_cast<size_t>(w)] == kGrey) {
        std::vector<int> cycle;
        for (int x = v; x != w; x = parent[static_cast<size_t>(x)]) cycle.push_back(x);
        cycle.push_back(w);
        std::reverse(cycle.begin(), cycle.end());
        return cycle;
      }
      if (colour[static_cast<size_t>(w)] == kWhite) {
        colour[static_cast<size_t>(w)] = kGrey;
        parent[static_cast<size_t>(w)] = v;
        stack.push_back({w, 0});
      }
    }
  }
  return {};
}

Walk walk_route(const System& sys, const TableSet& tables, int plane, int src, int dst,
                const Failures& failures) {
  return walk_on(PlaneGraph(sys, plane, failures), tables, src, dst);
}

PlaneReport check_plane(const System& sys, const TableSet& tables, int plane,
                        const Failures& failures) {
  PlaneReport report;
  report.plane = plane;
  const PlaneGraph graph(sys, plane, failures);
  // Connected components of the plane tell a missing route from a missing path.
  std::vector<int> component(static_cast<size_t>(sys.node_count()), -1);
  for (int v = 0; v < sys.node_count(); ++v) {
    if (component[static_cast<size_t>(v)] >= 0) continue;
    std::vector<int> stack{v};
    component[static_cast<size_t>(v)] = v;
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      for (const auto& nb : graph.neighbours(x)) {
        if (component[static_cast<size_t>(nb.peer)] < 0) {
          component[static_cast<size_t>(nb.peer)] = v;
          stack.push_back(nb.peer);
        }
      }
    }
  }
  std::vector<PlaneReport::Failure> loops, missed, disconnected;
  for (int src = 0; src < sys.node_count(); ++src) {
    if (!failures.chip_ok(src)) continue;
    for (int dst = 0; dst < sys.node_count(); ++dst) {
      if (dst == src || !failures.chip_ok(dst)) continue;
      ++report.pairs;
      Walk walk = walk_on(graph, tables, src, dst);
      if (walk.arrived()) {
        ++report.reachable;
        report.longest = std::max(report.longest, static_cast<int>(walk.hops.size()));
        continue;
      }
      bool has_path = component[static_cast<size_t>(src)] == component[static_cast<size_t>(dst)];
      if (has_path) ++report.missed;
      else ++report.disconnected;
      if (walk.status == Walk::kLoop) ++report.loops;
      auto& list = walk.status == Walk::kLoop ? loops : has_path ? missed : disconnected;
      if (list.size() < PlaneReport::kSample) list.push_back({src, dst, has_path, std::move(walk)});
    }
  }
  for (auto* list : {&loops, &missed, &disconnected}) {
    for (auto& f : *list) {
      if (report.failures.size() < PlaneReport::kSample) report.failures.push_back(std::move(f));
    }
  }
  report.dependency_cycle = dependency_cycle(graph, tables);
  return report;
}

std::vector<Channel> dependency_cycle(const System& sys, const TableSet& tables, int plane, const Failures& failures) {
  return dependency_cycle(PlaneGraph(sys, plane, failures), tables);
}

namespace {

// Every route's consecutive hops, without walking every pair: a router's next hop depends on
// the destination only, so for one destination the routes form a graph with one edge out of
// each chip, and every route from a source in mesh h shares its suffix with any other route
// from mesh h through the same chip (a hop's channel class depends on h: 0 while the sending
// chip is in the source's mesh, else 1). Each chip is visited once per destination and source
// mesh, and the routes from a mesh stop where they meet one already followed: O(chips x
// (chips + the corridors between meshes)) instead of O(pairs x hops).
std::vector<Channel> dependency_cycle(const PlaneGraph& graph, const TableSet& tables) {
  const System& sys = graph.system();
  const int n = sys.node_count();
  const size_t chips = static_cast<size_t>(n);
  std::vector<std::vector<int>> deps(sys.links.size() * 2 * kChannelClasses);
  auto depend = [&](int from, int to) {
    auto& out = deps[static_cast<size_t>(from)];
    if (std::find(out.begin(), out.end(), to) == out.end()) out.push_back(to);
  };
  std::vector<int> mesh_of(chips), meshes;
  for (size_t v = 0; v < chips; ++v) {
    mesh_of[v] = sys.chips[v].id.mesh;
    if (graph.alive(static_cast<int>(v)) && std::find(meshes.begin(), meshes.end(), mesh_of[v]) == meshes.end()) meshes.push_back(mesh_of[v]);
  }
  // Per chip and port: the class-0 channel of that port's link direction, found once.
  std::vector<int> channel(chips * routing::kMaxPorts, -1);
  std::vector<int> next(chips), out_channel(chips);  // for the destination in hand: -1 when none
  std::vector<int> mark(chips, -1);                  // the last (destination, mesh) that visited
  int stamp = 0;
  for (int dst = 0; dst < n; ++dst) {
    if (!graph.alive(dst)) continue;
    const ChipId target = sys.chips[static_cast<size_t>(dst)].id;
    for (int v = 0; v < n; ++v) {
      const size_t i = static_cast<size_t>(v);
      next[i] = -1;
      if (v == dst || !graph.alive(v)) continue;
      const auto hop = routing::next_hop(tables.at(graph.plane(), v), sys.chips[i].id, target);
      if (hop.kind != routing::NextHop::kForward) continue;
      const Neighbour* nb = graph.on_port(v, hop.port);
      if (!nb) continue;
      int& c = channel[i * routing::kMaxPorts + hop.port];
      if (c < 0) c = channel_index(sys, PortId{sys.chips[i].id, hop.port}, 0);
      next[i] = nb->peer;
      out_channel[i] = c;
    }
    for (const int home : meshes) {
      ++stamp;
      for (int src = 0; src < n; ++src) {
        if (mesh_of[static_cast<size_t>(src)] != home || src == dst || !graph.alive(src)) continue;
        for (int v = src; v >= 0 && mark[static_cast<size_t>(v)] != stamp;) {
          const size_t i = static_cast<size_t>(v);
          mark[i] = stamp;
          const int w = next[i];
          if (w >= 0 && next[static_cast<size_t>(w)] >= 0) {
            const size_t j = static_cast<size_t>(w);
            depend(out_channel[i] + (mesh_of[i] == home ? 0 : 1), out_channel[j] + (mesh_of[j] == home ? 0 : 1));
          }
          v = w;
        }
      }
    }
  }
  std::vector<Channel> cycle;
  for (int c : find_cycle(deps)) cycle.push_back(channel_at(sys, c));
  return cycle;
}

}  // namespace

int channel_index(const System& sys, PortId from, int vc) {
  const int link = sys.link_at(*sys.node(from.chip), from.port);
  return (link * 2 + (sys.links[static_cast<size_t>(link)].a == from ? 0 : 1)) * kChannelClasses + vc;
}

Channel channel_at(const System& sys, int index) {
  const int dir = index / kChannelClasses;
  const Link& l = sys.links[static_cast<size_t>(dir / 2)];
  return {dir % 2 == 0 ? l.a : l.b, index % kChannelClasses};
}

std::string describe_cycle(const std::vector<Channel>& cycle) {
  std::string out;
  auto name = [](const Channel& c) { return to_string(c.port) + (c.vc ? "(inter-mesh vc)" : ""); };
  for (const auto& c : cycle) out += name(c) + " -> ";
  if (!cycle.empty()) out += name(cycle.front());
  return out;
}

}  // namespace ttemu::control
