#include "emulator/control/live_routes.hpp"

#include <algorithm>
#include <map>
#include <unordered_set>

#include <fmt/format.h>

#include "emulator/control/plane_graph.hpp"
#include "emulator/control/routing_tables.hpp"

namespace ttemu::control {

using routing::to_string;

namespace {

// The two chips a link joins, lower node first: the key of its direction (a chip pair).
std::pair<int, int> chip_pair(const System& sys, int link) {
  const Link& l = sys.links[static_cast<size_t>(link)];
  const int a = *sys.node(l.a.chip), b = *sys.node(l.b.chip);
  return std::minmax(a, b);
}

}  // namespace

std::string Reload::summary(const System& sys) const {
  std::vector<std::string> parts;
  std::map<std::pair<int, int>, int> pairs;  // failed links by chip pair (not counting dead chips')
  for (int i : failures.links) {
    const auto pair = chip_pair(sys, i);
    if (failures.chip_ok(pair.first) && failures.chip_ok(pair.second)) ++pairs[pair];
  }
  for (const auto& [pair, n] : pairs) {
    parts.push_back(fmt::format("{}-{} ({} link{})", to_string(sys.chips[static_cast<size_t>(pair.first)].id),
                                to_string(sys.chips[static_cast<size_t>(pair.second)].id), n, n == 1 ? "" : "s"));
  }
  for (int v : failures.nodes) parts.push_back("chip " + to_string(sys.chips[static_cast<size_t>(v)].id));
  if (parts.empty()) return "nothing failed";
  return fmt::format("{}", fmt::join(parts, ", "));
}

long Reload::unreachable_pairs() const {
  long n = 0;
  for (const auto& p : planes) n += p.disconnected + p.missed;
  return n;
}

LiveRoutes::LiveRoutes(const System& sys, TableSet initial, bool efc)
    : sys_(sys), tables_(std::move(initial)), efc_(efc), up_(static_cast<size_t>(sys.node_count())),
      alive_(static_cast<size_t>(sys.node_count()), true) {
  for (auto& ports : up_) ports.fill(true);  // the system is up when the control plane takes over
  std::map<std::pair<int, int>, std::vector<int>> by_pair;
  for (int i = 0; i < static_cast<int>(sys.links.size()); ++i) by_pair[chip_pair(sys, i)].push_back(i);
  for (auto& [pair, links] : by_pair) directions_.push_back(std::move(links));
}

void LiveRoutes::link_up(PortId end, bool up) {
  if (const auto v = sys_.node(end.chip); v && end.port < routing::kMaxPorts) up_[static_cast<size_t>(*v)][end.port] = up;
}

void LiveRoutes::chip_alive(int node, bool alive) {
  alive_.at(static_cast<size_t>(node)) = alive;
  if (!alive) died_ = true;
}

void LiveRoutes::chip_restarted(int node) {
  chip_alive(node, true);
  const auto id = sys_.chips.at(static_cast<size_t>(node)).id;
  for (uint8_t port : sys_.wired_ports(node)) link_up({id, port}, false);
}

Failures LiveRoutes::failures() const {
  Failures f = operator_;
  for (int v = 0; v < sys_.node_count(); ++v) {
    if (!alive_[static_cast<size_t>(v)]) f.nodes.insert(v);
  }
  for (const auto& links : directions_) {
    auto live = [&](int i) {
      const Link& l = sys_.links[static_cast<size_t>(i)];
      const auto a = static_cast<size_t>(*sys_.node(l.a.chip)), b = static_cast<size_t>(*sys_.node(l.b.chip));
      return alive_[a] && alive_[b] && up_[a][l.a.port] && up_[b][l.b.port] && !operator_.links.count(i);
    };
    const bool any_live = std::any_of(links.begin(), links.end(), live);
    for (int i : links) {
      // With the EFC, a down link whose neighbour is still reachable travels a parallel link.
      if (!live(i) && (!efc_ || !any_live)) f.links.insert(i);
    }
  }
  return f;
}

std::optional<Reload> LiveRoutes::reload(bool force) {
  reload_due_ = false;
  Failures now = failures();
  const bool died = std::exchange(died_, false);
  if (!force && !died && now == in_force_) return std::nullopt;
  Reload r;
  r.version = ++version_;
  r.tables = compute_tables(sys_, now);
  // Packets in flight were routed around the old failures and meet the new ones.
  Failures both = now;
  both.links.insert(in_force_.links.begin(), in_force_.links.end());
  both.nodes.insert(in_force_.nodes.begin(), in_force_.nodes.end());
  for (int p = 0; p < sys_.planes; ++p) {
    r.planes.push_back(check_plane(sys_, r.tables, p, now));
    if (r.switch_risk.empty()) {
      if (auto risk = check_switch(sys_, tables_, r.tables, p, both); !risk.empty()) {
        r.switch_risk = fmt::format("plane {}: {}", p, risk);
      }
    }
  }
  r.failures = now;
  in_force_ = std::move(now);
  tables_ = r.tables;
  return r;
}

std::string check_switch(const System& sys, const TableSet& before, const TableSet& after, int plane,
                         const Failures& failures) {
  const PlaneGraph graph(sys, plane, failures);
  const int n = sys.node_count();
  auto name = [&](int v) { return to_string(sys.chips[static_cast<size_t>(v)].id); };
  // Where a router may send a packet for `dst`: the live neighbours either table names.
  auto next = [&](int at, int dst, std::vector<std::pair<uint8_t, int>>& out) {
    out.clear();
    const ChipId target = sys.chips[static_cast<size_t>(dst)].id;
    for (const TableSet* t : {&before, &after}) {
      const auto hop = routing::next_hop(t->at(plane, at), sys.chips[static_cast<size_t>(at)].id, target);
      if (hop.kind != routing::NextHop::kForward) continue;
      const Neighbour* nb = graph.on_port(at, hop.port);
      if (nb && std::find(out.begin(), out.end(), std::make_pair(hop.port, nb->peer)) == out.end()) {
        out.emplace_back(hop.port, nb->peer);
      }
    }
  };
  std::vector<std::pair<uint8_t, int>> hops;
  // Forwarding loops: per destination, the graph of every next hop either table gives.
  for (int dst = 0; dst < n; ++dst) {
    if (!failures.chip_ok(dst)) continue;
    std::vector<std::vector<int>> adj(static_cast<size_t>(n));
    for (int at = 0; at < n; ++at) {
      if (at == dst || !failures.chip_ok(at)) continue;
      next(at, dst, hops);
      for (const auto& h : hops) adj[static_cast<size_t>(at)].push_back(h.second);
    }
    if (const auto loop = find_cycle(adj); !loop.empty()) {
      std::string chain;
      for (int v : loop) chain += name(v) + " -> ";
      return fmt::format("a packet for {} can loop {}{}", name(dst), chain, name(loop.front()));
    }
  }
  // Deadlock: the channel dependencies of every path a mix can take, in the router's classes
  // (as check_plane: class 0 while the sending chip is in the packet's source mesh, else 1).
  auto channel = [&](int at, uint8_t port, int vc) { return channel_index(sys, {sys.chips[static_cast<size_t>(at)].id, port}, vc); };
  std::vector<std::vector<int>> deps(sys.links.size() * 2 * kChannelClasses);
  std::unordered_set<uint64_t> seen_dep;
  for (int src = 0; src < n; ++src) {
    if (!failures.chip_ok(src)) continue;
    const uint16_t home = sys.chips[static_cast<size_t>(src)].id.mesh;
    for (int dst = 0; dst < n; ++dst) {
      if (dst == src || !failures.chip_ok(dst)) continue;
      // States: (chip, the channel the packet arrived on, or -1 at its source).
      std::unordered_set<uint64_t> seen;
      std::vector<std::pair<int, int>> stack{{src, -1}};
      while (!stack.empty()) {
        const auto [at, in] = stack.back();
        stack.pop_back();
        if (at == dst) continue;
        next(at, dst, hops);
        for (const auto& [port, peer] : hops) {
          const int out = channel(at, port, sys.chips[static_cast<size_t>(at)].id.mesh == home ? 0 : 1);
          if (in >= 0 && seen_dep.insert(static_cast<uint64_t>(in) << 32 | static_cast<uint32_t>(out)).second) {
            deps[static_cast<size_t>(in)].push_back(out);
          }
          if (seen.insert(static_cast<uint64_t>(peer) << 32 | static_cast<uint32_t>(out)).second) stack.emplace_back(peer, out);
        }
      }
    }
  }
  if (const auto cycle = find_cycle(deps); !cycle.empty()) {
    std::vector<Channel> channels;
    for (int c : cycle) channels.push_back(channel_at(sys, c));
    return "a channel-dependency cycle (deadlock possible): " + describe_cycle(channels);
  }
  return "";
}

}  // namespace ttemu::control
