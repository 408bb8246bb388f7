#include "emulator/control/table_check.hpp"

#include <algorithm>
#include <gtest/gtest.h>

#include "emulator/common/error.hpp"
#include "emulator/control/table_json.hpp"
#include "tests/test_support.hpp"

namespace ttemu::control {
namespace {

using test::load;
using test::node;
using test::route;

// mesh_4x4: one port per side, N=P0 E=P1 S=P2 W=P3; spec 5.4's D1..D16 are M0D0..M0D15.
constexpr uint8_t kN = 0, kE = 1, kS = 2, kW = 3;

void set_l0(const System& sys, TableSet& t, const std::string& at, uint16_t dst, uint8_t port) {
  t.at(0, node(sys, at)).set_l0(dst, port);
}

// The routing loop of spec 5.4: D1 -> D5 -> D6 -> D7 -> D11 -> D10 -> D9 -> D5 -> ... for D16.
TableSet ttl_loop_tables(const System& sys) {
  TableSet t = compute_tables(sys);
  set_l0(sys, t, "M0D0", 15, kS);
  set_l0(sys, t, "M0D4", 15, kE);
  set_l0(sys, t, "M0D5", 15, kE);
  set_l0(sys, t, "M0D6", 15, kS);
  set_l0(sys, t, "M0D10", 15, kW);
  set_l0(sys, t, "M0D9", 15, kW);
  set_l0(sys, t, "M0D8", 15, kN);
  return t;
}

TEST(TableCheck, FindsTheForwardingLoopOfSpec5_4) {
  System sys = load("mesh_4x4.yaml");
  TableSet t = ttl_loop_tables(sys);
  Walk w = route(sys, t, "M0D0", "M0D15");
  ASSERT_EQ(w.status, Walk::kLoop);
  std::vector<int> expected;
  for (const char* n : {"M0D4", "M0D5", "M0D6", "M0D10", "M0D9", "M0D8"}) expected.push_back(node(sys, n));
  EXPECT_EQ(w.loop, expected);
  EXPECT_EQ(w.reason(sys),
            "forwarding loop: M0D4 -> M0D5 -> M0D6 -> M0D10 -> M0D9 -> M0D8 -> M0D4");
  EXPECT_EQ(w.hops.size(), 7u) << "the walk stops when the loop closes";

  PlaneReport r = check_plane(sys, t, 0);
  EXPECT_FALSE(r.ok());
  EXPECT_GE(r.loops, 7) << "every chip whose route to D16 enters the loop";
  EXPECT_EQ(r.missed, r.loops);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_EQ(r.failures.front().walk.status, Walk::kLoop) << "loops are reported first";
  EXPECT_FALSE(r.dependency_cycle.empty()) << "a loop is also a dependency cycle";
}

TEST(TableCheck, FindsTheCyclicDependencyOfSpec5_1) {
  // Four devices in a square, each turning Y-then-X for one flow: D0->D5 via D1, D1->D4 via
  // D5, D5->D0 via D4, D4->D1 via D0. No route loops, yet the channels wait on each other.
  System sys = load("mesh_4x4.yaml");
  TableSet t = compute_tables(sys);
  ASSERT_TRUE(check_plane(sys, t, 0).ok()) << "dimension-ordered tables are acyclic";
  set_l0(sys, t, "M0D1", 4, kS);
  set_l0(sys, t, "M0D4", 1, kN);
  PlaneReport r = check_plane(sys, t, 0);
  EXPECT_EQ(r.loops, 0);
  EXPECT_EQ(r.reachable, r.pairs);
  EXPECT_FALSE(r.ok());
  ASSERT_FALSE(r.dependency_cycle.empty());
  std::string cycle = describe_cycle(r.dependency_cycle);
  bool through_turn = std::any_of(r.dependency_cycle.begin(), r.dependency_cycle.end(), [](const Channel& c) {
    return c.port == *routing::parse_port("M0D1P2") || c.port == *routing::parse_port("M0D4P0");
  });
  EXPECT_TRUE(through_turn) << cycle;
  // The cycle closes on itself: it ends where it starts.
  EXPECT_EQ(cycle.substr(0, cycle.find(' ')), cycle.substr(cycle.rfind(' ') + 1));
}

TEST(TableCheck, WithoutTheInterMeshClassTheSpecRingWouldDeadlock) {
  // Traffic entering a mesh shares channels with that mesh's own outbound traffic; around the
  // ring of 2.2.3's four meshes that closes a cycle unless transit traffic has its own class.
  System sys = load("spec_4mesh_3x3.yaml");
  TableSet t = compute_tables(sys);
  PlaneReport r = check_plane(sys, t, 0);
  EXPECT_TRUE(r.dependency_cycle.empty()) << describe_cycle(r.dependency_cycle);
}

TEST(TableCheck, ExplainsRoutesThatStop) {
  System sys = load("mesh_4x4.yaml");
  TableSet t = compute_tables(sys);
  t.at(0, node(sys, "M0D1")).set_l0(3, std::nullopt);
  Walk w = route(sys, t, "M0D0", "M0D3");
  EXPECT_EQ(w.status, Walk::kNoRoute);
  EXPECT_EQ(w.reason(sys), "no route at M0D1: its table has no entry for the destination");
  EXPECT_EQ(w.hops.size(), 1u);

  set_l0(sys, t, "M0D0", 3, kN);  // the north edge is unwired
  w = route(sys, t, "M0D0", "M0D3");
  EXPECT_EQ(w.status, Walk::kDeadPort);
  EXPECT_EQ(w.reason(sys), "M0D0 forwards on P0, which has no live link on this plane");
  PlaneReport r = check_plane(sys, t, 0);
  EXPECT_EQ(r.missed, 2) << "M0D0 and M0D1 to M0D3";
}

TEST(TableCheck, DeadPortWhenTheLinkHasFailed) {
  System sys = load("mesh_4x4.yaml");
  TableSet t = compute_tables(sys);  // computed without knowing of the failure
  Failures f = parse_failures(sys, {"M0D0P1"});
  Walk w = route(sys, t, "M0D0", "M0D1", 0, f);
  EXPECT_EQ(w.status, Walk::kDeadPort);
  EXPECT_TRUE(route(sys, compute_tables(sys, f), "M0D0", "M0D1", 0, f).arrived());
}

TEST(TableJson, RoundTripsEveryRouter) {
  System sys = load("tg.yaml");
  TableSet t = compute_tables(sys);
  TableSet back = tables_from_json(sys, tables_to_json(sys, t), "t.json");
  for (int plane = 0; plane < sys.planes; ++plane) {
    for (int v = 0; v < sys.node_count(); ++v) EXPECT_EQ(back.at(plane, v), t.at(plane, v));
  }
  auto one = tables_to_json(sys, t, 0, node(sys, "M4D0"));
  ASSERT_EQ(one["routers"].size(), 1u);
  EXPECT_EQ(one["routers"][0]["device"], "M4D0");
  EXPECT_EQ(one["routers"][0]["l0"].size(), 32u);
  EXPECT_EQ(one["routers"][0]["l1"].size(), 5u);
  EXPECT_TRUE(one["routers"][0]["l1"][4].is_null()) << "its own mesh goes by L0";
}

TEST(TableJson, RejectsBadTablesNamingTheCulprit) {
  System sys = load("mesh_4x4.yaml");
  auto doc = tables_to_json(sys, compute_tables(sys));
  auto expect_error = [&](nlohmann::json bad, const std::string& fragment) {
    try {
      tables_from_json(sys, bad, "t.json");
      ADD_FAILURE() << "accepted; expected " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto bad = doc;
  bad["routers"][3]["l0"][5] = 16;
  expect_error(bad, "routers[3] (M0D3 plane 0): l0[5] is 16; an entry is a port 0-15 or null");
  bad = doc;
  bad["routers"][0]["device"] = "M7D0";
  expect_error(bad, "routers[0]: device 'M7D0' is not in");
  bad = doc;
  bad["routers"][0]["plane"] = 1;
  expect_error(bad, "plane 1 out of range");
  bad["routers"][0]["plane"] = 4294967296;  // no wrap to plane 0
  expect_error(bad, "plane 4294967296 out of range");
  bad["routers"][0]["plane"] = -4294967296;
  expect_error(bad, "plane -4294967296 out of range");
  bad = doc;
  bad["routers"][0]["l0"].push_back(1);
  expect_error(bad, "l0 must be a list of at most 16 entries");
  expect_error(nlohmann::json::array(), "expected an object with a \"routers\" list");
}

}  // namespace
}  // namespace ttemu::control
