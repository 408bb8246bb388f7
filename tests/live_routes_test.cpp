// The live control plane's routing (control/live_routes): when tables are recomputed, around
// what, and whether switching to them while packets are in flight is safe.
#include "emulator/control/live_routes.hpp"

#include <gtest/gtest.h>

#include "emulator/control/routing_tables.hpp"
#include "tests/test_support.hpp"

namespace ttemu::control {
namespace {

using test::load;

// The four links between M0D0 and M0D1 on the Galaxy.
std::vector<int> pair_links(const System& sys, ChipId a, ChipId b) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(sys.links.size()); ++i) {
    const Link& l = sys.links[static_cast<size_t>(i)];
    if ((l.a.chip == a && l.b.chip == b) || (l.a.chip == b && l.b.chip == a)) out.push_back(i);
  }
  return out;
}

TEST(LiveRoutes, ADirectionWithNoLiveLinkIsRoutedAroundAndBackWhenOneReturns) {
  const System sys = load("galaxy.yaml");
  LiveRoutes live(sys, compute_tables(sys), /*efc=*/true);
  const auto links = pair_links(sys, {0, 0}, {0, 1});
  ASSERT_EQ(links.size(), 4u);
  // Three of four down: the fallback channel carries them, the tables stay.
  for (size_t i = 0; i < 3; ++i) live.link_up(sys.links[static_cast<size_t>(links[i])].a, false);
  EXPECT_FALSE(live.reload());
  EXPECT_EQ(live.version(), 1);
  // The fourth: no live link between the two chips.
  live.link_up(sys.links[static_cast<size_t>(links[3])].b, false);
  auto r = live.reload();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->version, 2);
  EXPECT_EQ(r->failures.links, std::set<int>(links.begin(), links.end()));
  EXPECT_EQ(r->summary(sys), "M0D0-M0D1 (4 links)");
  ASSERT_EQ(r->planes.size(), static_cast<size_t>(sys.planes));
  for (const auto& p : r->planes) EXPECT_TRUE(p.ok()) << "plane " << p.plane;
  for (const auto& p : r->planes) EXPECT_EQ(p.reachable, p.pairs) << "the Galaxy is still connected";
  EXPECT_EQ(r->switch_risk, "");
  const Walk w = walk_route(sys, live.tables(), 0, 0, 1, r->failures);
  ASSERT_TRUE(w.arrived()) << w.reason(sys);
  EXPECT_EQ(w.hops.size(), 3u) << "around the missing direction";
  EXPECT_FALSE(live.reload()) << "nothing changed since";
  // One link back: the direction lives again, the first tables return.
  live.link_up(sys.links[static_cast<size_t>(links[3])].b, true);
  r = live.reload();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->version, 3);
  EXPECT_TRUE(r->failures.links.empty());
  EXPECT_EQ(walk_route(sys, live.tables(), 0, 0, 1).hops.size(), 1u);
}

TEST(LiveRoutes, WithoutTheFallbackChannelEveryDownLinkIsAFailure) {
  const System sys = load("galaxy.yaml");
  LiveRoutes live(sys, compute_tables(sys), /*efc=*/false);
  const auto links = pair_links(sys, {0, 0}, {0, 1});
  live.link_up(sys.links[static_cast<size_t>(links[0])].a, false);
  auto r = live.reload();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->failures.links, std::set<int>{links[0]});
}

TEST(LiveRoutes, ADeadChipIsRoutedAroundAndUnreachable) {
  const System sys = load("galaxy.yaml");
  LiveRoutes live(sys, compute_tables(sys), true);
  const int dead = *sys.node({0, 5});
  live.chip_alive(dead, false);
  auto r = live.reload();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary(sys), "chip M0D5");
  ASSERT_EQ(r->planes.size(), static_cast<size_t>(sys.planes));
  for (const auto& p : r->planes) {
    EXPECT_TRUE(p.ok());
    EXPECT_EQ(p.reachable, p.pairs) << "every live pair still routed";
  }
  const Walk to_dead = walk_route(sys, live.tables(), 0, 0, dead);
  EXPECT_FALSE(to_dead.arrived()) << "no route to a dead chip: its requests are NACKed at their source";
  EXPECT_EQ(r->switch_risk, "");
}

// A chip killed and restarted within one settling time, its links up again by the reload:
// the routes are what they were, but packets inside the dead chip were lost, and clients'
// retry mode takes unanswered packets as lost only once the tables changed. So the death alone
// makes a new version (it used to make none, and such a client waited for its barrier's limit).
TEST(LiveRoutes, AChipThatDiedAndCameBackBeforeTheReloadStillMakesNewTables) {
  const System sys = load("galaxy.yaml");
  LiveRoutes live(sys, compute_tables(sys), true);
  const int v = *sys.node({0, 5});
  live.chip_alive(v, false);
  live.chip_restarted(v);
  for (uint8_t port : sys.wired_ports(v)) live.link_up({sys.chips[static_cast<size_t>(v)].id, port}, true);
  auto r = live.reload();
  ASSERT_TRUE(r) << "a death is news even when the routes come back the same";
  EXPECT_EQ(r->version, 2);
  EXPECT_EQ(r->summary(sys), "nothing failed");
  EXPECT_FALSE(live.reload()) << "and once only";
}

TEST(LiveRoutes, OperatorFailuresForceTheirOwnTables) {
  const System sys = load("galaxy.yaml");
  LiveRoutes live(sys, compute_tables(sys), true);
  live.set_operator_failures(parse_failures(sys, {"M0D0P4"}));
  auto r = live.reload();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->failures.links.size(), 1u);
  EXPECT_TRUE(live.reload(/*force=*/true)) << "a forced reload reloads even when nothing changed";
}

// Two tables that each route without a loop alone can loop when mixed: on the T3000 (2x4),
// M0D0 sends M0D2's packets to M0D1; if new tables at M0D1 send them back to M0D0 while M0D0
// still uses the old ones, a packet can bounce between the two.
TEST(CheckSwitch, FindsALoopOnlyAMixOfOldAndNewTablesCanMake) {
  const System sys = load("t3k.yaml");
  const TableSet before = compute_tables(sys);
  EXPECT_EQ(check_switch(sys, before, before, 0, {}), "") << "identical tables switch safely";
  TableSet after = before;
  const int d0 = *sys.node({0, 0}), d1 = *sys.node({0, 1});
  after.at(0, d1).set_l0(2, before.at(0, d1).l0(0));  // M0D1: M0D2's packets toward M0D0
  after.at(0, d0).set_l0(2, before.at(0, d0).l0(4));  // M0D0: M0D2's packets down, via M0D4
  const std::string risk = check_switch(sys, before, after, 0, {});
  EXPECT_NE(risk.find("a packet for M0D2 can loop"), std::string::npos) << risk;
}

}  // namespace
}  // namespace ttemu::control
