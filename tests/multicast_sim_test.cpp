// Multicast in the fabric (spec 3.2) on the simulator: one packet to the origin, copies made by
// the fabric nodes on the way out (routing/multicast.hpp), every device of the group
// acknowledging. The spec's example table, and the bytes on the wire against unicasts.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "emulator/control/routing_tables.hpp"
#include "emulator/routing/multicast.hpp"
#include "emulator/sim/fabric_sim.hpp"
#include "tests/test_support.hpp"

namespace ttemu::sim {
namespace {

using routing::ChipId;
using test::load;

constexpr uint64_t kSrc = 0x10000, kDst = 0x4000;  // kDst: an offset inside a Tensix core's L1 too
constexpr uint32_t kSize = 4096;

// Payload bytes every link end sent (first transmissions): data, acks and credits.
uint64_t bytes_on_the_wire(const FabricSim& sim, const control::System& sys) {
  uint64_t n = 0;
  for (const auto& l : sys.links) n += sim.counters(l.a).bytes_tx + sim.counters(l.b).bytes_tx;
  return n;
}

struct McastRun {
  std::set<int> written;  // devices whose kDst holds the payload
  std::set<int> every_core;  // devices where every Tensix core's L1 holds it at kDst
  uint64_t wire = 0;
  uint32_t unanswered = 0, nacked = 0;
};

// From M0D15 of the 4x4 mesh, a multicast (or, `unicasts`, one write per device of its group).
McastRun run(uint8_t e, uint8_t w, uint8_t n, uint8_t s, uint8_t flags, bool unicasts = false, bool cut_d1_d5 = false) {
  auto sys = load("mesh_4x4.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  FabricSim sim(sys, tables, cfg);
  EXPECT_TRUE(sim.run());
  if (cut_d1_d5) {  // the link M0D1 - M0D5 out of service (no answer's route takes it)
    for (const auto& l : sys.links) {
      for (const auto& [end, far] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
        if (end.chip == ChipId{0, 1} && far.chip == ChipId{0, 5}) sim.admin_down(end, true);
      }
    }
    sim.run(std::chrono::milliseconds(10));
  }
  const ChipId src{0, 15}, origin{0, 0};
  std::vector<uint8_t> data(kSize);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  std::memcpy(sim.memory(src, kSrc, kSize).data(), data.data(), kSize);
  const uint64_t before = bytes_on_the_wire(sim, sys);
  auto& w0 = sim.worker(src, 1);
  chip::CommandRequest r;
  r.src_addr = kSrc;
  r.dst_addr = kDst;
  r.size = kSize;
  r.txn_id = 2;
  if (unicasts) {
    // The group, as the fabric's copies cover it: the origin and every copy's destination.
    std::vector<std::pair<ChipId, routing::McastDepths>> todo{{origin, {e, w, n, s}}};
    for (size_t i = 0; i < todo.size(); ++i) {
      for (const auto& c : routing::mcast_copies(todo[i].first, 4, 4, todo[i].second)) todo.push_back({c.to, c.depths});
    }
    for (const auto& [d, depths] : todo) {
      r.dst_mesh = d.mesh;
      r.dst_device = d.device;
      EXPECT_TRUE(w0.try_submit(r));
    }
  } else {
    r.command = routing::Command::kMcastWrite;
    r.dst_mesh = origin.mesh;
    r.dst_device = origin.device;
    r.arg = routing::McastDepths{e, w, n, s}.pack();
    r.wrap = flags;
    r.copies = static_cast<uint16_t>((std::min(e, uint8_t{3}) + 1) * (std::min(s, uint8_t{3}) + 1));  // from the corner
    EXPECT_TRUE(w0.try_submit(r));
  }
  sim.run(std::chrono::seconds(1));
  McastRun out;
  out.nacked = w0.nacked(2);
  out.wire = bytes_on_the_wire(sim, sys) - before;
  out.unanswered = w0.in_flight(2);
  const size_t core_l1 = cfg.l1_bytes / static_cast<size_t>(cfg.tensix_cores);
  for (int d = 0; d < 16; ++d) {
    const ChipId c{0, static_cast<uint16_t>(d)};
    if (std::memcmp(sim.memory(c, kDst, kSize).data(), data.data(), kSize) == 0) out.written.insert(d);
    bool all = true;
    for (int k = 0; k < cfg.tensix_cores; ++k) all = all && std::memcmp(sim.memory(c, static_cast<uint64_t>(k) * core_l1 + kDst, kSize).data(), data.data(), kSize) == 0;
    if (all) out.every_core.insert(d);
  }
  return out;
}

// Spec 3.2's table on the 4x4 mesh, whose M0D0 is the spec's D1 (mesh_4x4.yaml): depths
// (2, 0, 0, 2) from D1 reach the 3x3 block at its corner, in every Tensix core with the NOC
// flag; depths 0 reach D1 alone, as an async write does.
TEST(MulticastSim, TheSpecsTableOfMulticastModes) {
  const std::set<int> block{0, 1, 2, 4, 5, 6, 8, 9, 10};
  McastRun a = run(2, 0, 0, 2, 0);
  EXPECT_EQ(a.written, block);
  EXPECT_TRUE(a.every_core.empty());
  EXPECT_EQ(a.unanswered, 0u) << "every device acknowledged";
  McastRun b = run(2, 0, 0, 2, routing::kMcastNoc);
  EXPECT_EQ(b.every_core, block);
  EXPECT_EQ(b.unanswered, 0u);
  McastRun c = run(0, 0, 0, 0, 0);
  EXPECT_EQ(c.written, std::set<int>{0});
  EXPECT_TRUE(c.every_core.empty());
  McastRun d = run(0, 0, 0, 0, routing::kMcastNoc);
  EXPECT_EQ(d.every_core, std::set<int>{0});
}

// The multicast's packet crosses 6 hops to its origin and 8 copies one hop each (14 link
// crossings); the 9 unicasts cross 36. Bytes on the wire (data, acks, credits) follow.
TEST(MulticastSim, IsCheaperOnTheWireThanUnicasts) {
  McastRun m = run(2, 0, 0, 2, 0);
  McastRun u = run(2, 0, 0, 2, 0, /*unicasts=*/true);
  EXPECT_EQ(m.written, u.written);
  EXPECT_EQ(u.unanswered, 0u);
  const double ratio = static_cast<double>(m.wire) / static_cast<double>(u.wire);
  std::printf("spec 3.2 example from M0D15, 4 KiB: multicast %llu bytes on the wire, unicasts %llu, ratio %.2f\n",
              static_cast<unsigned long long>(m.wire), static_cast<unsigned long long>(u.wire), ratio);
  EXPECT_LT(ratio, 0.5) << "14 link crossings against 36";
  EXPECT_GT(ratio, 0.3);
}

// A copy dropped in the tree (its link down) is NACKed for every device it was still to reach,
// so the barrier ends (NACKed, not hung): M0D1's copy down column 1 is lost with M0D5 and M0D9.
// (Its NACK once counted one device: the barrier waited for the other for good.)
TEST(MulticastSim, ACopyDroppedIsNackedForItsWholeSubtree) {
  McastRun r = run(2, 0, 0, 2, 0, false, /*cut_d1_d5=*/true);
  EXPECT_EQ(r.written, (std::set<int>{0, 1, 2, 4, 6, 8, 10}));
  EXPECT_EQ(r.unanswered, 0u) << "every device answered for: acked or NACKed";
  EXPECT_EQ(r.nacked, 2u) << "M0D5 and M0D9, in one NACK";
}

}  // namespace
}  // namespace ttemu::sim
