#include "emulator/control/host_placement.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::control {

std::vector<int> place_chips(const System& sys) {
  if (sys.hosts.empty()) throw Error(fmt::format("{}: no Host is declared, so no chip can be placed on a host", sys.source));
  std::vector<int> host(static_cast<size_t>(sys.node_count()), -1);
  for (int v = 0; v < sys.node_count(); ++v) {
    const std::string& name = sys.chips[static_cast<size_t>(v)].host;
    if (name.empty()) continue;
    host[static_cast<size_t>(v)] = static_cast<int>(std::find(sys.hosts.begin(), sys.hosts.end(), name) - sys.hosts.begin());
  }
  // A host-less board in a mesh that has hosts runs on its mesh's first host.
  for (const Mesh& mesh : sys.meshes) {
    const auto begin = host.begin() + mesh.first_node, end = begin + mesh.chips.size();
    const auto hosted = std::find_if(begin, end, [](int h) { return h >= 0; });
    if (hosted != end) std::replace(begin, end, -1, *hosted);
  }
  // Host-less meshes, in rounds: a mesh counts links to chips placed before the round (the
  // first round: hosts the spec declares), so a Galaxy goes where its gateways are, not where
  // a neighbouring Galaxy was just put.
  for (bool placed = true; placed;) {
    placed = false;
    const std::vector<int> before = host;
    for (const Mesh& mesh : sys.meshes) {
      const int first = mesh.first_node, count = mesh.chips.size();
      if (host[static_cast<size_t>(first)] >= 0) continue;
      std::vector<int> links(sys.hosts.size(), 0);
      for (const Link& l : sys.links) {
        const int a = *sys.node(l.a.chip), b = *sys.node(l.b.chip);
        const bool a_in = a >= first && a < first + count, b_in = b >= first && b < first + count;
        if (a_in == b_in) continue;
        const int other = before[static_cast<size_t>(a_in ? b : a)];
        if (other >= 0) ++links[static_cast<size_t>(other)];
      }
      const auto best = std::max_element(links.begin(), links.end());
      if (*best == 0) continue;
      std::fill(host.begin() + first, host.begin() + first + count, static_cast<int>(best - links.begin()));
      placed = true;
    }
  }
  for (const Mesh& mesh : sys.meshes) {
    if (host[static_cast<size_t>(mesh.first_node)] < 0) {
      throw Error(fmt::format("{}: mesh {} has no host and no link to a chip that has one", sys.source, mesh.id));
    }
  }
  return host;
}

std::vector<HostPair> host_pairs(const System& sys, const std::vector<int>& host_of_node, const Failures& failures) {
  std::map<std::pair<int, int>, HostPair> pairs;
  for (int i = 0; i < static_cast<int>(sys.links.size()); ++i) {
    const Link& l = sys.links[static_cast<size_t>(i)];
    const int na = *sys.node(l.a.chip), nb = *sys.node(l.b.chip);
    int ha = host_of_node.at(static_cast<size_t>(na)), hb = host_of_node.at(static_cast<size_t>(nb));
    if (ha == hb || !failures.chip_ok(na) || !failures.chip_ok(nb)) continue;
    if (ha > hb) std::swap(ha, hb);
    HostPair& p = pairs[{ha, hb}];
    p.a = ha;
    p.b = hb;
    ++p.links;
    p.down += !failures.link_ok(sys, i);
  }
  std::vector<HostPair> out;
  for (const auto& [key, p] : pairs) out.push_back(p);
  return out;
}

}  // namespace ttemu::control
