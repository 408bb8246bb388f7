#include "emulator/control/routing_tables.hpp"

#include <cstdlib>
#include <random>
#include <gtest/gtest.h>

#include "emulator/common/error.hpp"
#include "emulator/control/table_check.hpp"
#include "tests/test_support.hpp"

namespace ttemu::control {
namespace {

using test::hops_text;
using test::load;
using test::node;
using test::route;

TEST(Routing, TheRouteOfSpec2_2_3_1_1) {
  System sys = load("spec_4mesh_3x3.yaml");
  TableSet tables = compute_tables(sys);
  Walk w = route(sys, tables, "M0D0", "M0D8");
  ASSERT_TRUE(w.arrived()) << w.reason(sys);
  EXPECT_EQ(hops_text(w.hops), "M0D0P2>M0D1P4 M0D1P2>M0D2P4 M0D2P1>M0D5P3 M0D5P1>M0D8P3");
}

TEST(Routing, L0IsDimensionOrderedXThenY) {
  System sys = load("galaxy.yaml");
  test::for_each_route(sys, compute_tables(sys), [&](int, int src, int dst, const Walk& w) {
    ASSERT_TRUE(w.arrived()) << w.reason(sys);
    const Coord a = sys.chips[static_cast<size_t>(src)].coord;
    const Coord b = sys.chips[static_cast<size_t>(dst)].coord;
    EXPECT_EQ(w.hops.size(), static_cast<size_t>(std::abs(a.row - b.row) + std::abs(a.col - b.col)));
    bool turned = false;  // once moving in Y, never back to X
    for (const Hop& h : w.hops) {
      const Coord f = sys.chips[static_cast<size_t>(*sys.node(h.from.chip))].coord;
      const Coord t = sys.chips[static_cast<size_t>(*sys.node(h.to.chip))].coord;
      bool x_move = f.col != t.col;
      EXPECT_FALSE(turned && x_move) << routing::to_string(h.from);
      turned = turned || !x_move;
    }
  });
}

TEST(Routing, EachPlaneKeepsToItsOwnLinks) {
  System sys = load("galaxy.yaml");
  test::for_each_route(sys, compute_tables(sys), [&](int plane, int, int, const Walk& w) {
    for (const Hop& h : w.hops) {
      int link = sys.link_at(*sys.node(h.from.chip), h.from.port);
      EXPECT_EQ(sys.links[static_cast<size_t>(link)].plane, plane);
      // Ports are numbered side by side, four per side: the k-th of each side is plane k.
      EXPECT_EQ(h.from.port % 4, plane);
      EXPECT_EQ(h.to.port % 4, plane);
    }
  });
}

TEST(Routing, InterMeshRoutesFunnelThroughExitNodes) {
  System sys = load("spec_4mesh_3x3.yaml");
  TableSet tables = compute_tables(sys);
  // 2.2.3.2.1: anything in M0 bound for M1 funnels toward M0D5 and crosses M0D5P2 -> M1D3P4.
  for (int d = 0; d < 9; ++d) {
    for (int s = 0; s < 9; ++s) {
      Walk w = route(sys, tables, "M0D" + std::to_string(s), "M1D" + std::to_string(d));
      ASSERT_TRUE(w.arrived()) << w.reason(sys);
      EXPECT_NE(hops_text(w.hops).find("M0D5P2>M1D3P4"), std::string::npos) << hops_text(w.hops);
    }
  }
  // No direct route M0 -> M3: through M1, the lower of the two equally short ways.
  Walk w = route(sys, tables, "M0D0", "M3D8");
  ASSERT_TRUE(w.arrived());
  EXPECT_EQ(hops_text(w.hops),
            "M0D0P2>M0D1P4 M0D1P2>M0D2P4 M0D2P1>M0D5P3 M0D5P2>M1D3P4 M1D3P2>M1D4P4 "
            "M1D4P1>M1D7P3 M1D7P1>M3D1P3 M3D1P2>M3D2P4 M3D2P1>M3D5P3 M3D5P1>M3D8P3");
  Walk back = route(sys, tables, "M3D8", "M0D0");
  ASSERT_TRUE(back.arrived());
  EXPECT_NE(hops_text(back.hops).find("M3D1P3>M1D7P1"), std::string::npos);
  EXPECT_NE(hops_text(back.hops).find("M1D3P4>M0D5P2"), std::string::npos);
  // M1 -> M2 crosses M0.
  EXPECT_NE(hops_text(route(sys, tables, "M1D4", "M2D4").hops).find("M0D7P1>M2D1P3"),
            std::string::npos);
}

class EveryShippedTopology : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryShippedTopology, TablesAreSoundOnEveryPlane) {
  System sys = load(GetParam());
  TableSet tables = compute_tables(sys);
  for (int plane = 0; plane < sys.planes; ++plane) {
    PlaneReport r = check_plane(sys, tables, plane);
    EXPECT_TRUE(r.ok()) << GetParam() << " plane " << plane;
    EXPECT_EQ(r.missed, 0) << "every pair the plane connects is routed";
    EXPECT_EQ(r.loops, 0);
    EXPECT_TRUE(r.dependency_cycle.empty()) << describe_cycle(r.dependency_cycle);
    EXPECT_EQ(r.reachable + r.disconnected, r.pairs);
    if (plane == 0) {
      EXPECT_EQ(r.reachable, r.pairs) << "plane 0 joins every chip";
    }
  }
}

TEST_P(EveryShippedTopology, TablesAreDeterministicAndSurviveThePackedLayout) {
  System sys = load(GetParam());
  TableSet a = compute_tables(sys), b = compute_tables(sys);
  for (int plane = 0; plane < sys.planes; ++plane) {
    for (int v = 0; v < sys.node_count(); ++v) {
      EXPECT_EQ(a.at(plane, v), b.at(plane, v));
      EXPECT_EQ(routing::RouterTable::unpack(a.at(plane, v).pack()), a.at(plane, v));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, EveryShippedTopology,
                         ::testing::Values("n150.yaml", "n300.yaml", "t3k.yaml", "galaxy.yaml",
                                           "tg.yaml", "tgg.yaml", "quanta2_galaxy.yaml",
                                           "blackhole_2x4.yaml", "spec_4mesh_3x3.yaml",
                                           "mesh_4x4.yaml"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           return n.substr(0, n.find('.'));
                         });

TEST(Routing, TgGatewaysAreReachableOnlyOnPlaneZero) {
  // Each gateway has one link to each of two Galaxy chips: both links are plane 0.
  System sys = load("tg.yaml");
  TableSet tables = compute_tables(sys);
  EXPECT_TRUE(route(sys, tables, "M0D0", "M3D0", 0).arrived());
  Walk w = route(sys, tables, "M0D0", "M3D0", 1);
  EXPECT_FALSE(w.arrived());
  EXPECT_EQ(w.status, Walk::kNoRoute);
  EXPECT_TRUE(route(sys, tables, "M4D0", "M4D31", 3).arrived()) << "the Galaxy itself has 4 planes";
}

int exit_link(const System& sys, const Walk& w, int from_mesh, int to_mesh) {
  for (const Hop& h : w.hops) {
    if (h.from.chip.mesh == from_mesh && h.to.chip.mesh == to_mesh) {
      return sys.link_at(*sys.node(h.from.chip), h.from.port);
    }
  }
  return -1;
}

TEST(Routing, OppositeDirectionsOfAMeshPairUseEdgeDisjointExits) {
  System tg = load("tg.yaml");
  TableSet t = compute_tables(tg);
  int out = exit_link(tg, route(tg, t, "M0D0", "M4D12"), 0, 4);
  int in = exit_link(tg, route(tg, t, "M4D12", "M0D0"), 4, 0);
  ASSERT_GE(out, 0);
  ASSERT_GE(in, 0);
  EXPECT_NE(out, in);
  EXPECT_NE(tg.links[static_cast<size_t>(out)].b.chip, tg.links[static_cast<size_t>(in)].b.chip)
      << "different Galaxy chips";

  System tgg = load("tgg.yaml");
  TableSet u = compute_tables(tgg);
  for (int plane = 0; plane < 2; ++plane) {
    int down = exit_link(tgg, route(tgg, u, "M8D0", "M9D31", plane), 8, 9);
    int up = exit_link(tgg, route(tgg, u, "M9D31", "M8D0", plane), 9, 8);
    ASSERT_GE(down, 0);
    ASSERT_GE(up, 0);
    EXPECT_NE(tgg.links[static_cast<size_t>(down)].a.chip, tgg.links[static_cast<size_t>(up)].a.chip)
        << "plane " << plane;
    EXPECT_EQ(tgg.links[static_cast<size_t>(down)].plane, plane);
  }
}

TEST(Routing, ExitNodesSitNearTheMiddleOfTheMesh) {
  System tgg = load("tgg.yaml");
  TableSet t = compute_tables(tgg);
  int down = exit_link(tgg, route(tgg, t, "M8D0", "M9D0"), 8, 9);
  int col = tgg.chips[static_cast<size_t>(*tgg.node(tgg.links[static_cast<size_t>(down)].a.chip))].coord.col;
  EXPECT_TRUE(col == 3 || col == 4) << "column " << col << " of 0-7";
}

// --- recomputation around failures ---------------------------------------------------------

bool uses_link(const System& sys, const Walk& w, int link) {
  for (const Hop& h : w.hops) {
    if (sys.link_at(*sys.node(h.from.chip), h.from.port) == link) return true;
  }
  return false;
}

TEST(Rerouting, AroundAFailedLink) {
  System sys = load("galaxy.yaml");
  TableSet healthy = compute_tables(sys);
  Failures f = parse_failures(sys, {"M0D1P4"});  // D1 -> D2, plane 0
  ASSERT_EQ(f.links.size(), 1u);
  TableSet tables = compute_tables(sys, f);
  Walk w = route(sys, tables, "M0D0", "M0D3", 0, f);
  ASSERT_TRUE(w.arrived()) << w.reason(sys);
  EXPECT_FALSE(uses_link(sys, w, *f.links.begin()));
  EXPECT_EQ(w.hops.size(), 5u) << "the shortest way around: " << hops_text(w.hops);
  PlaneReport r = check_plane(sys, tables, 0, f);
  EXPECT_EQ(r.reachable, r.pairs);
  EXPECT_EQ(r.loops, 0);
  // The other planes do not notice.
  for (int plane = 1; plane < 4; ++plane) {
    for (int v = 0; v < sys.node_count(); ++v) EXPECT_EQ(tables.at(plane, v), healthy.at(plane, v));
  }
  // The same link named from its other end.
  EXPECT_EQ(parse_failures(sys, {"M0D2P12"}).links, f.links);
}

TEST(Rerouting, AroundAFailedChip) {
  System sys = load("galaxy.yaml");
  Failures f = parse_failures(sys, {"M0D9"});
  TableSet tables = compute_tables(sys, f);
  int dead = node(sys, "M0D9");
  for (int plane = 0; plane < sys.planes; ++plane) {
    PlaneReport r = check_plane(sys, tables, plane, f);
    EXPECT_EQ(r.pairs, 31 * 30);
    EXPECT_EQ(r.reachable, r.pairs) << "plane " << plane;
    EXPECT_EQ(r.loops, 0);
    EXPECT_TRUE(r.dependency_cycle.empty())
        << "a hole forces turns that XY forbids; the tables must stay deadlock-free: "
        << describe_cycle(r.dependency_cycle);
    for (int s = 0; s < sys.node_count(); ++s) {
      for (int d = 0; d < sys.node_count(); ++d) {
        if (s == d || s == dead || d == dead) continue;
        for (const Hop& h : walk_route(sys, tables, plane, s, d, f).hops) {
          EXPECT_NE(*sys.node(h.to.chip), dead);
        }
      }
    }
  }
}

TEST(Rerouting, RandomFailuresNeverLeaveLoopsCyclesOrMissedRoutes) {
  for (const char* file : {"galaxy.yaml", "tgg.yaml", "spec_4mesh_3x3.yaml"}) {
    System sys = load(file);
    std::mt19937 rng(20261122);
    for (int trial = 0; trial < 12; ++trial) {
      Failures f;
      for (int k = 0; k < 1 + trial % 4; ++k) {
        f.links.insert(static_cast<int>(rng() % sys.links.size()));
      }
      if (trial % 3 == 0) f.nodes.insert(static_cast<int>(rng() % sys.chips.size()));
      TableSet tables = compute_tables(sys, f);
      for (int plane = 0; plane < sys.planes; ++plane) {
        PlaneReport r = check_plane(sys, tables, plane, f);
        EXPECT_EQ(r.missed, 0) << file << " trial " << trial << " plane " << plane;
        EXPECT_EQ(r.loops, 0) << file << " trial " << trial;
        EXPECT_TRUE(r.dependency_cycle.empty())
            << file << " trial " << trial << " plane " << plane << ": "
            << describe_cycle(r.dependency_cycle);
      }
    }
  }
}

TEST(Rerouting, AroundAFailedLinkBetweenMeshes) {
  System sys = load("spec_4mesh_3x3.yaml");
  Failures f = parse_failures(sys, {"M0D5P2"});
  TableSet tables = compute_tables(sys, f);
  Walk w = route(sys, tables, "M0D0", "M1D0", 0, f);
  ASSERT_TRUE(w.arrived()) << w.reason(sys);
  std::string text = hops_text(w.hops);
  EXPECT_NE(text.find("M0D7P1>M2D1P3"), std::string::npos) << text;
  EXPECT_NE(text.find("M3D1P3>M1D7P1"), std::string::npos) << text;
  PlaneReport r = check_plane(sys, tables, 0, f);
  EXPECT_EQ(r.reachable, r.pairs);
  EXPECT_EQ(r.loops, 0);
}

TEST(Rerouting, APartitionIsReportedAsUnreachable) {
  System sys = load("n300.yaml");
  Failures f = parse_failures(sys, {"M0D0P2"});  // plane 0's only link
  TableSet tables = compute_tables(sys, f);
  Walk w = route(sys, tables, "M0D0", "M0D1", 0, f);
  EXPECT_EQ(w.status, Walk::kNoRoute);
  PlaneReport r = check_plane(sys, tables, 0, f);
  EXPECT_EQ(r.disconnected, 2);
  EXPECT_EQ(r.missed, 0);
  EXPECT_TRUE(r.ok()) << "no path is not a table defect";
  EXPECT_TRUE(route(sys, tables, "M0D0", "M0D1", 1, f).arrived()) << "plane 1 is intact";
}

TEST(Rerouting, FailureNamesAreChecked) {
  System sys = load("galaxy.yaml");
  EXPECT_THROW(parse_failures(sys, {"M0D0P0"}), Error) << "an unwired port";
  EXPECT_THROW(parse_failures(sys, {"M3D0"}), Error) << "no such chip";
  EXPECT_THROW(parse_failures(sys, {"link7"}), Error);
}

}  // namespace
}  // namespace ttemu::control
