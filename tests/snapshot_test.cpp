// Snapshots (emulator/node/snapshot.hpp): a system's state at one moment survives its JSON form
// field by field, whoever wrote it (the simulator here; processes in System.SnapshotShows...),
// and a file that is not one is refused with the chip and the field named.
#include "emulator/node/snapshot.hpp"

#include <gtest/gtest.h>

#include "emulator/common/error.hpp"
#include "emulator/sim/fabric_sim.hpp"
#include "tests/test_support.hpp"

namespace ttemu::node {
namespace {

using nlohmann::json;
using routing::ChipId;

SystemSnapshot through_json(const SystemSnapshot& s) { return read_system_snapshot(json::parse(json(s).dump())); }

// M0D1 stops consuming FVC 0 while M0D0 writes to it: packets wait in routing buffers, lanes
// run out of credit, the FVC is stalled; then the snapshot goes through JSON and back.
TEST(Snapshot, ABusySimulatedSystemRoundTripsThroughJson) {
  auto sys = test::load("n300.yaml");
  auto tables = control::compute_tables(sys);
  sim::SimConfig cfg;
  cfg.router.timeout = std::chrono::seconds(60);
  sim::FabricSim sim(sys, tables, cfg);
  ASSERT_TRUE(sim.run());
  sim.stall_center({0, 1}, 0, true);
  routing::Packet w;
  w.header.dst_device = 1;
  w.header.dst_addr = 0x40000;
  w.header.size = 1024;
  w.set_payload(std::vector<uint8_t>(1024, 7));
  for (int i = 0; i < 200; ++i) {
    if (!sim.inject({0, 0}, w)) sim.run(std::chrono::microseconds(100));
  }
  sim.run(std::chrono::milliseconds(5));

  const SystemSnapshot s = sim.snapshot();
  ASSERT_EQ(s.chips.size(), 2u);
  const ChipSnapshot& d1 = s.chips[1];
  EXPECT_EQ(d1.chip, "M0D1");
  EXPECT_EQ(d1.stalled_fvcs, std::vector<int>{0});
  EXPECT_FALSE(d1.idle);
  ASSERT_FALSE(d1.buffers.empty()) << "the writes wait at the stalled center";
  EXPECT_GT(d1.buffers[0].packets, 0u);
  EXPECT_EQ(d1.buffers[0].head.command, "write");
  EXPECT_EQ(d1.buffers[0].head.src, "M0D0");
  bool starved = false;
  for (const auto& p : s.chips[0].ports) starved = starved || !p.starved_lanes.empty();
  EXPECT_TRUE(starved) << "M0D0 has no credit left toward M0D1 on FVC 0";
  ASSERT_TRUE(s.sim_ns);

  const SystemSnapshot back = through_json(s);
  EXPECT_EQ(back, s);
  EXPECT_EQ(json(back), json(s));
}

TEST(Snapshot, ADeadChipAndASilentOneKeepOnlyThatFact) {
  SystemSnapshot s;
  s.job = "abc";
  s.uptime_s = 1.5;
  s.tables_version = 3;
  s.chips.resize(2);
  s.chips[0].chip = "M0D0";
  s.chips[0].dead = true;
  s.chips[1].chip = "M0D1";
  s.chips[1].answered = false;
  EXPECT_EQ(through_json(s), s);
  EXPECT_EQ(json(s)["chips"][1], (json{{"chip", "M0D1"}, {"answered", false}}));
}

std::string error_of(const json& j) {
  try {
    read_system_snapshot(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "(read without error)";
}

TEST(Snapshot, AFieldMissingOrMistypedIsNamedWithItsChip) {
  auto sys = test::load("n300.yaml");
  sim::FabricSim sim(sys, control::compute_tables(sys), {});
  ASSERT_TRUE(sim.run());
  const json good = sim.snapshot();
  ASSERT_EQ(read_system_snapshot(good), sim.snapshot());

  json j = good;
  j["chips"][1]["ports"][0].erase("window_room");
  EXPECT_EQ(error_of(j), "chip M0D1: 'window_room' is missing");
  j = good;
  j["chips"][0]["tables_version"] = "two";
  EXPECT_EQ(error_of(j), "chip M0D0: 'tables_version' is not a number or flag (\"two\")");
  j = good;
  j["chips"][0]["buffers"] = json::object();
  EXPECT_EQ(error_of(j), "chip M0D0: 'buffers' is not an array");
  j = good;
  j.erase("chips");
  EXPECT_EQ(error_of(j), "'chips' is missing");
  EXPECT_EQ(error_of(json::array()), "a snapshot is a JSON object, not array");
}

}  // namespace
}  // namespace ttemu::node
