// Which host runs which chip of a system spread over hosts (control/host_placement.hpp).
#include <gtest/gtest.h>

#include "emulator/common/error.hpp"
#include "emulator/control/host_placement.hpp"
#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

std::string host_of(const control::System& sys, const std::vector<int>& placed, const std::string& chip) {
  return sys.hosts[static_cast<size_t>(placed[static_cast<size_t>(node(sys, chip))])];
}

TEST(HostPlacement, TheSpecsHostsHoldAndAGalaxyGoesWhereItsGatewaysAre) {
  const control::System sys = load("tgg.yaml");
  const std::vector<int> placed = control::place_chips(sys);
  ASSERT_EQ(placed.size(), 72u);
  EXPECT_EQ(host_of(sys, placed, "M0D0"), "host0");
  EXPECT_EQ(host_of(sys, placed, "M7D0"), "host1");
  // Galaxy 9 has more links to Galaxy 8 than to its gateways, but only the spec's hosts count
  // in the first round.
  EXPECT_EQ(host_of(sys, placed, "M8D0"), "host0");
  EXPECT_EQ(host_of(sys, placed, "M9D31"), "host1");
}

TEST(HostPlacement, ATieGoesToTheFirstHost) {
  const control::System sys = load("tgg_4host.yaml");
  const std::vector<int> placed = control::place_chips(sys);
  EXPECT_EQ(host_of(sys, placed, "M2D0"), "host1");
  EXPECT_EQ(host_of(sys, placed, "M8D5"), "host0");  // four links from host0, four from host1
  EXPECT_EQ(host_of(sys, placed, "M9D5"), "host2");
}

// Two hosts are cut apart when every link between their live chips is down; a host whose chips
// died is lost, not cut.
TEST(HostPlacement, HostsAreCutApartWhenEveryLinkBetweenTheirLiveChipsIsDown) {
  const control::System sys = load("tgg.yaml");
  const std::vector<int> placed = control::place_chips(sys);
  auto pairs = control::host_pairs(sys, placed, {});
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].a, 0);
  EXPECT_EQ(pairs[0].b, 1);
  EXPECT_EQ(pairs[0].links, 16);  // Galaxy 8 (host0) to Galaxy 9 (host1)
  EXPECT_FALSE(pairs[0].cut());
  control::Failures f;
  std::vector<int> crossing;
  for (int i = 0; i < static_cast<int>(sys.links.size()); ++i) {
    const auto& l = sys.links[static_cast<size_t>(i)];
    if (placed[static_cast<size_t>(node(sys, to_string(l.a.chip)))] != placed[static_cast<size_t>(node(sys, to_string(l.b.chip)))]) crossing.push_back(i);
  }
  ASSERT_EQ(crossing.size(), 16u);
  for (size_t k = 0; k + 1 < crossing.size(); ++k) f.links.insert(crossing[k]);
  pairs = control::host_pairs(sys, placed, f);
  EXPECT_EQ(pairs[0].down, 15);
  EXPECT_FALSE(pairs[0].cut()) << "one link still joins them";
  f.links.insert(crossing.back());
  EXPECT_TRUE(control::host_pairs(sys, placed, f)[0].cut());
  // host1's chips all dead: no link between live chips is left, and nothing is cut.
  control::Failures lost;
  for (int v = 0; v < sys.node_count(); ++v) {
    if (placed[static_cast<size_t>(v)] == 1) lost.nodes.insert(v);
  }
  EXPECT_TRUE(control::host_pairs(sys, placed, lost).empty());
}

// A placement that cannot be made throws an Error saying why.
std::string refusal(const control::System& sys) {
  try {
    control::place_chips(sys);
  } catch (const Error& e) {
    return e.what();
  }
  return "placed";
}

TEST(HostPlacement, WhatCannotBePlacedIsRefusedByName) {
  control::System sys = load("mesh_4x4.yaml");
  control::System no_hosts = sys;
  no_hosts.hosts.clear();
  EXPECT_NE(refusal(no_hosts).find("no Host is declared"), std::string::npos) << refusal(no_hosts);
  // A mesh without a host and without a link to a chip that has one.
  for (auto& chip : sys.chips) chip.host.clear();
  EXPECT_NE(refusal(sys).find("mesh 0 has no host and no link to a chip that has one"), std::string::npos) << refusal(sys);
}

}  // namespace
}  // namespace ttemu::test
