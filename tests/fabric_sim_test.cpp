// Routers, TT-links and centers of a whole system in one process on a simulated clock
// (spec 6.2): directed hard cases, reproducible from a seed.
#include "emulator/sim/fabric_sim.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <stop_token>
#include <thread>
#include <map>
#include <memory>
#include <set>

#include "tests/sim_support.hpp"
#include "tests/test_support.hpp"

namespace ttemu::sim {
namespace {

using routing::ChipId;
using routing::Command;
using routing::Packet;
using test::load;

Packet write(ChipId dst, uint64_t addr, std::vector<uint8_t> data, uint8_t fvc = 0, uint8_t plane = 0) {
  Packet p;
  p.header.dst_mesh = dst.mesh;
  p.header.dst_device = dst.device;
  p.header.dst_addr = addr;
  p.header.size = static_cast<uint32_t>(data.size());
  p.header.fvc = fvc;
  p.header.plane = plane;
  p.set_payload(data);
  return p;
}

// What a worker was answered from `from` on in its inbox: `acked` sums the packets of each
// write ack (an ack counts a batch, in header.arg), `nacked` counts NACKs, one per write.
struct Answers {
  int acked = 0, nacked = 0;
};
Answers answers(const std::vector<Packet>& inbox, size_t from = 0) {
  Answers got;
  for (size_t k = from; k < inbox.size(); ++k) {
    const auto& p = inbox[k];
    if (p.header.command == Command::kWriteAck) got.acked += static_cast<int>(p.header.arg);
    if (p.header.command == Command::kNack) ++got.nacked;
  }
  return got;
}

std::vector<uint8_t> pattern(int src, int dst, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(static_cast<size_t>(src * 31 + dst * 7) + i);
  return v;
}

// Every chip writes 256 bytes to every other chip at an address of its own.
struct AllToAll {
  explicit AllToAll(FabricSim& sim, const control::System& sys, size_t bytes = 256) {
    for (int s = 0; s < sys.node_count(); ++s) {
      for (int d = 0; d < sys.node_count(); ++d) {
        if (s == d) continue;
        pending.push_back({s, d});
      }
    }
    // Inject as room allows, running the fabric in between.
    size_t next = 0;
    for (int round = 0; next < pending.size() && round < 10000; ++round) {
      while (next < pending.size()) {
        auto [s, d] = pending[next];
        const auto& src = sys.chips[static_cast<size_t>(s)].id;
        const auto& dst = sys.chips[static_cast<size_t>(d)].id;
        if (!sim.inject(src, write(dst, static_cast<uint64_t>(s) * bytes, pattern(s, d, bytes)))) break;
        ++next;
      }
      sim.run(std::chrono::microseconds(50));
    }
    idle = sim.run(std::chrono::seconds(30));
    injected = next;
  }
  std::vector<std::pair<int, int>> pending;
  size_t injected = 0;
  bool idle = false;
};

void expect_all_to_all_landed(FabricSim& sim, const control::System& sys, size_t bytes = 256) {
  for (int s = 0; s < sys.node_count(); ++s) {
    for (int d = 0; d < sys.node_count(); ++d) {
      if (s == d) continue;
      auto got = sim.memory(sys.chips[static_cast<size_t>(d)].id, static_cast<uint64_t>(s) * bytes, bytes);
      auto want = pattern(s, d, bytes);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << s << " -> " << d;
    }
    // Every write was acknowledged to its source (an ack counts its packets in arg).
    size_t acked = 0;
    for (const auto& p : sim.worker_inbox(sys.chips[static_cast<size_t>(s)].id)) acked += p.header.arg;
    EXPECT_EQ(acked, static_cast<size_t>(sys.node_count() - 1));
  }
}

TEST(FabricSim, GalaxyAllToAllWritesLandBitExact) {
  test::BootedSim booted("galaxy.yaml");
  auto& [sys, tables, sim] = booted;
  AllToAll run(sim, sys);
  ASSERT_EQ(run.injected, run.pending.size());
  EXPECT_TRUE(run.idle);
  expect_all_to_all_landed(sim, sys);
  EXPECT_TRUE(sim.events().empty());
}

// The doorbell protocol of chip processes, deterministically: once a chip has said it sleeps,
// it sees a worker's command only because the worker rings its doorbell (a lost wake-up would
// leave the write in the command buffer and fail this test); while it is awake, commands need
// no ring, and neither do commands that come while it is being woken.
TEST(FabricSim, AWorkerRingsASleepingChipAndItsWritesLand) {
  test::BootedSim booted("n300.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());  // the links come up and every chip goes to sleep
  const ChipId a{0, 0}, b{0, 1};
  const auto data = pattern(0, 1, 3 * 4096);
  std::memcpy(sim.memory(a, 0x1000, data.size()).data(), data.data(), data.size());
  chip::CommandRequest r;
  r.dst_mesh = b.mesh;
  r.dst_device = b.device;
  r.size = 4096;
  auto& w = sim.worker(a, 1);
  for (uint32_t i = 0; i < 3; ++i) {
    r.src_addr = 0x1000 + i * 4096;
    r.dst_addr = 0x8000 + i * 4096;
    ASSERT_TRUE(w.try_submit(r));
  }
  EXPECT_EQ(sim.doorbell_rings(a), 1u) << "the first command rang; the others found the chip being woken";
  ASSERT_TRUE(sim.run());
  auto landed = sim.memory(b, 0x8000, data.size());
  EXPECT_TRUE(std::equal(landed.begin(), landed.end(), data.begin())) << "every write landed";
  EXPECT_EQ(w.in_flight(0), 0u) << "every packet acknowledged";
  chip::Completion c[8];
  uint32_t acked = 0;
  for (size_t k = 0, n = w.poll(c); k < n; ++k) acked += c[k].command == Command::kWriteAck ? c[k].packets : 0;
  EXPECT_EQ(acked, 3u);
  EXPECT_EQ(sim.doorbell_rings(b), 0u) << "nobody rang the chip that only answered";
}

// A 64-byte write to `to`, from and to fixed addresses.
chip::CommandRequest write_64(ChipId to) {
  chip::CommandRequest r;
  r.dst_mesh = to.mesh;
  r.dst_device = to.device;
  r.size = 64;
  r.src_addr = 0x1000;
  r.dst_addr = 0x8000;
  return r;
}

// A worker process that dies after taking a ticket, before its command is ready, would hold
// its slot, and with it every slot behind it: once the other workers had gone round the
// buffer, no command would be taken again. The chip voids the slot once the worker is gone
// (its claim's pid, or no claim after a second), and the other workers' commands all go; a
// count the dead worker had made in its transaction is taken back.
TEST(FabricSim, AWorkerThatDiesWhileSubmittingDoesNotHoldTheCommandBuffer) {
  using DiedAt = FabricSim::DiedAt;
  for (const DiedAt when : {DiedAt::kBeforeClaim, DiedAt::kWhileWriting, DiedAt::kAfterCounting}) {
    SCOPED_TRACE(static_cast<int>(when));
    test::BootedSim booted("n300.yaml");
    auto& sim = booted.sim;
    ASSERT_TRUE(sim.run());
    const ChipId a{0, 0}, b{0, 1};
    sim.worker_dies_submitting(a, 2, when);
    const chip::CommandRequest r = write_64(b);
    auto& w = sim.worker(a, 1);
    // Three times round the buffer: a slot held for good stops this at the first lap's end.
    const uint32_t want = 3 * chip::kCommandSlots;
    uint32_t submitted = 0;
    for (int turn = 0; turn < 100 && submitted < want; ++turn) {
      while (submitted < want && w.try_submit(r)) ++submitted;
      sim.run(std::chrono::milliseconds(500));
      chip::Completion c[chip::kCompletionSlots];
      while (w.poll(c) > 0) {
      }
    }
    EXPECT_EQ(submitted, want);
    EXPECT_TRUE(sim.run());
    EXPECT_EQ(w.in_flight(0), 0u) << "every write acknowledged";
    EXPECT_EQ(sim.control(a).commands.voided.load(), 1u);
    EXPECT_EQ(sim.control(a).commands.workers[2].txn[0].load(), 0u) << "the dead worker's count was taken back";
  }
}

// While the control plane holds a chip's injection, it takes no command, and voids no slot
// either: the slot a dead worker left waits, and the chip sleeps (it once kept waking for the
// look at that slot it would not take, at the same instant, for ever). Resumed, it voids it.
TEST(FabricSim, AHeldChipNeitherVoidsNorSpinsOnASlotADeadWorkerLeft) {
  test::BootedSim booted("n300.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  const ChipId a{0, 0}, b{0, 1};
  sim.worker_dies_submitting(a, 2, FabricSim::DiedAt::kBeforeClaim);
  const chip::CommandRequest r = write_64(b);
  auto& w = sim.worker(a, 1);
  ASSERT_TRUE(w.try_submit(r));
  ASSERT_TRUE(sim.run(std::chrono::milliseconds(50)));  // the chip has seen the head wait
  sim.pause_injection(a, true);
  // A run that stands still at one instant never returns: a watchdog stops it.
  static volatile std::sig_atomic_t stuck = 0;
  stuck = 0;
  sim.interrupt_on(&stuck);
  std::jthread dog([](std::stop_token st) {
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock lock(m);
    if (!cv.wait_for(lock, st, std::chrono::seconds(30), [] { return false; }) && !st.stop_requested()) stuck = 1;
  });
  EXPECT_NO_THROW(sim.run(std::chrono::seconds(5)));
  EXPECT_EQ(sim.control(a).commands.voided.load(), 0u) << "nothing is voided while the chip is held";
  sim.pause_injection(a, false);
  EXPECT_NO_THROW(EXPECT_TRUE(sim.run()));
  EXPECT_EQ(sim.control(a).commands.voided.load(), 1u);
  EXPECT_EQ(w.in_flight(0), 0u) << "the live worker's write went and was acknowledged";
}

TEST(FabricSim, AllToAllAcrossTheFourMeshes) {
  test::BootedSim booted("spec_4mesh_3x3.yaml");
  auto& [sys, tables, sim] = booted;
  AllToAll run(sim, sys);
  EXPECT_TRUE(run.idle);
  expect_all_to_all_landed(sim, sys);
}

TEST(FabricSim, AllToAllSurvivesCrcErrorsOnEveryLink) {
  auto sys = load("t3k.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.faults.corrupt = 0.05;
  cfg.seed = 3;
  FabricSim sim(sys, tables, cfg);
  AllToAll run(sim, sys, 1024);
  EXPECT_TRUE(run.idle);
  expect_all_to_all_landed(sim, sys, 1024);
  uint64_t crc = 0;
  for (const auto& l : sys.links) crc += sim.counters(l.a).crc_errors + sim.counters(l.b).crc_errors;
  EXPECT_GT(crc, 0u);
}

// Spec 5.4: a routing loop D1 -> D5 -> D6 -> D7 -> D11 -> D10 -> D9 -> D5 ... for D16;
// with TTL 10 from D1 the router at D11 (M0D10 here) drops it.
control::TableSet ttl_loop(const control::System& sys) {
  auto t = control::compute_tables(sys);
  constexpr uint8_t N = 0, E = 1, S = 2, W = 3;
  const std::pair<int, uint8_t> loop[] = {{0, S}, {4, E}, {5, E}, {6, S}, {10, W}, {9, W}, {8, N}};
  for (auto [device, port] : loop) t.at(0, device).set_l0(15, port);
  return t;
}

std::vector<std::string> run_ttl_loop(uint64_t seed) {
  auto sys = load("mesh_4x4.yaml");
  auto tables = ttl_loop(sys);
  SimConfig cfg;
  cfg.seed = seed;
  FabricSim sim(sys, tables, cfg);
  Packet p = write({0, 15}, 0, std::vector<uint8_t>(64, 1));
  p.header.ttl = 10;
  EXPECT_TRUE(sim.inject({0, 0}, p));
  EXPECT_TRUE(sim.run());
  EXPECT_EQ(sim.events().size(), 1u);
  if (!sim.events().empty()) {
    const auto& ev = sim.events().front();
    EXPECT_EQ(ev.kind, routing::RouterEvent::kTtlExpired);
    EXPECT_EQ(ev.at, (ChipId{0, 10})) << "the router at the spec's D11";
    EXPECT_EQ(ev.packet.src(), (ChipId{0, 0}));
    EXPECT_EQ(ev.packet.dst(), (ChipId{0, 15}));
  }
  // The source hears of it: a NACK for its packet.
  const auto& inbox = sim.worker_inbox({0, 0});
  EXPECT_EQ(inbox.size(), 1u);
  if (!inbox.empty()) {
    EXPECT_EQ(inbox[0].header.command, Command::kNack);
  }
  EXPECT_EQ(sim.memory({0, 15}, 0, 1)[0], 0) << "nothing was written";
  return sim.trace();
}

TEST(FabricSim, TheTtlLoopOfSpec5_4IsDroppedWhereTtlRunsOut) { run_ttl_loop(1); }

// A system with a short router timeout (5 ms), for the tests that stall a consumer.
struct StallRig {
  control::System sys;
  control::TableSet tables;
  std::unique_ptr<FabricSim> sim;
  explicit StallRig(const std::string& topology) : sys(load(topology)), tables(control::compute_tables(sys)) {
    SimConfig cfg;
    cfg.router.timeout = std::chrono::milliseconds(5);
    sim = std::make_unique<FabricSim>(sys, tables, cfg);
  }
};

TEST(FabricSim, StalledConsumerTimesOutAndNacksWhileAnotherFvcFlows) {
  StallRig rig("mesh_4x4.yaml");
  FabricSim& sim = *rig.sim;
  sim.stall_center({0, 3}, 0, true);  // D3 stops consuming FVC 0
  int sent0 = 0, sent1 = 0;
  for (int i = 0; i < 6; ++i) sent0 += sim.inject({0, 0}, write({0, 3}, 64 * static_cast<uint64_t>(i), std::vector<uint8_t>(64, 7), 0));
  for (int i = 0; i < 6; ++i) sent1 += sim.inject({0, 0}, write({0, 3}, 4096 + 64 * static_cast<uint64_t>(i), std::vector<uint8_t>(64, 9), 1));
  ASSERT_EQ(sent0, 6);
  ASSERT_EQ(sent1, 6);
  sim.run(std::chrono::milliseconds(2));
  // FVC 1 went through while FVC 0 waited.
  EXPECT_EQ(sim.memory({0, 3}, 4096 + 64 * 5, 1)[0], 9);
  EXPECT_EQ(sim.memory({0, 3}, 0, 1)[0], 0);
  EXPECT_TRUE(sim.run(std::chrono::seconds(1)));
  int timeouts = 0;
  for (const auto& ev : sim.events()) timeouts += ev.kind == routing::RouterEvent::kTimeout;
  EXPECT_EQ(timeouts, 6) << "every stalled packet is dropped in turn";
  const auto [acks, nacks] = answers(sim.worker_inbox({0, 0}));
  EXPECT_EQ(nacks, 6);
  EXPECT_EQ(acks, 6);
}

// Packets whose next hop is a link that is down are dropped at once with a reason and NACKed
// (no router timeout); what the link itself had accepted is kept and delivered exactly once
// when the link comes back.
TEST(FabricSim, ADownLinkDropsAndNacksWhatWouldCrossItAndKeepsWhatItHadAccepted) {
  auto sys = load("mesh_4x4.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.link.max_retries = 2;
  cfg.router.timeout = std::chrono::seconds(60);  // far beyond the test: no timeout helps
  FabricSim sim(sys, tables, cfg);
  const routing::PortId d4p1{{0, 4}, 1};  // M0D4 -> M0D5, on the way to M0D6
  ASSERT_TRUE(sim.run(std::chrono::seconds(1)));  // every link up
  sim.cut(d4p1, true);
  ASSERT_TRUE(sim.inject({0, 4}, write({0, 6}, 0, std::vector<uint8_t>(64, 1), 0)));
  sim.run(std::chrono::seconds(5));  // lost on the wire, retried, the link goes down
  ASSERT_EQ(sim.counters(d4p1).state, static_cast<uint32_t>(link::LinkState::kDown));
  EXPECT_TRUE(sim.events().empty()) << "the link still holds the first write";
  ASSERT_TRUE(sim.inject({0, 4}, write({0, 6}, 64, std::vector<uint8_t>(64, 2), 0)));  // through M0D5
  ASSERT_TRUE(sim.inject({0, 4}, write({0, 5}, 64, std::vector<uint8_t>(64, 3), 1)));  // to M0D5
  sim.run(std::chrono::milliseconds(1));  // the router timeout is a minute
  ASSERT_EQ(sim.events().size(), 2u);
  for (const auto& ev : sim.events()) {
    EXPECT_EQ(ev.kind, routing::RouterEvent::kLinkDown);
    EXPECT_EQ(ev.at, (ChipId{0, 4}));
  }
  const int nacks = answers(sim.worker_inbox({0, 4})).nacked;
  EXPECT_EQ(nacks, 2);
  sim.cut(d4p1, false);
  EXPECT_TRUE(sim.run(std::chrono::seconds(5)));
  EXPECT_EQ(sim.counters(d4p1).state, static_cast<uint32_t>(link::LinkState::kUp));
  EXPECT_EQ(sim.memory({0, 6}, 0, 1)[0], 1) << "the accepted write arrived once the link was back";
  EXPECT_EQ(sim.memory({0, 6}, 64, 1)[0], 0) << "the NACKed ones did not";
  EXPECT_EQ(sim.memory({0, 5}, 64, 1)[0], 0);
  ASSERT_TRUE(sim.inject({0, 4}, write({0, 6}, 128, std::vector<uint8_t>(64, 4), 0)));
  EXPECT_TRUE(sim.run(std::chrono::seconds(1)));
  EXPECT_EQ(sim.memory({0, 6}, 128, 1)[0], 4) << "traffic crosses the restored link again";
}

TEST(FabricSim, ALostAckIsReportedButNackedToNobody) {
  // The writer's center stops consuming the control FVC: the ack of its write times out in
  // its own router. An ack is an answer: NACKing it would reach the chip that answered (whose
  // workers never asked) and count down one of their transactions.
  StallRig rig("n300.yaml");
  FabricSim& sim = *rig.sim;
  sim.stall_center({0, 0}, static_cast<uint8_t>(routing::RouterConfig{}.data_fvcs), true);  // the control FVC
  ASSERT_TRUE(sim.inject({0, 0}, write({0, 1}, 0, std::vector<uint8_t>(64, 3), 0)));
  sim.run(std::chrono::seconds(1));
  EXPECT_EQ(sim.memory({0, 1}, 0, 1)[0], 3) << "the write itself landed";
  ASSERT_EQ(sim.events().size(), 1u);
  EXPECT_EQ(sim.events()[0].kind, routing::RouterEvent::kTimeout);
  EXPECT_EQ(sim.events()[0].packet.command, Command::kWriteAck);
  EXPECT_TRUE(sim.worker_inbox({0, 1}).empty()) << "no NACK for the chip that answered";
  EXPECT_TRUE(sim.worker_inbox({0, 0}).empty());
}

TEST(FabricSim, ReadsAndAtomicsAnswerTheSource) {
  test::BootedSim booted("galaxy.yaml");
  auto& [sys, tables, sim] = booted;
  auto far = sim.memory({0, 31}, 100, 8);
  for (size_t i = 0; i < 8; ++i) far[i] = static_cast<uint8_t>(0xA0 + i);
  Packet rd;
  rd.header.dst_device = 31;
  rd.header.dst_addr = 100;
  rd.header.return_addr = 500;
  rd.header.size = 8;
  rd.header.command = Command::kReadRequest;
  ASSERT_TRUE(sim.inject({0, 0}, rd));
  Packet inc;
  inc.header.dst_device = 31;
  inc.header.dst_addr = 200;
  inc.header.command = Command::kAtomicReadInc;
  inc.header.arg = 5;
  inc.header.wrap = 2;  // counts 0-7
  for (uint64_t i = 0; i < 3; ++i) {
    inc.header.return_addr = 600 + 4 * i;  // each old value lands apart
    ASSERT_TRUE(sim.inject({0, 0}, inc));
  }
  EXPECT_TRUE(sim.run());
  auto back = sim.memory({0, 0}, 500, 8);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(back[i], 0xA0 + i);
  uint32_t counter;
  std::memcpy(&counter, sim.memory({0, 31}, 200, 4).data(), 4);
  EXPECT_EQ(counter, (5u * 3) % 8) << "wrapped at 2^(2+1)";
  // Read-and-increment answers the value before each increment, in order: 0, 5, 10 mod 8.
  const uint32_t want[] = {0, 5, 2};
  for (uint64_t i = 0; i < 3; ++i) {
    uint32_t old;
    std::memcpy(&old, sim.memory({0, 0}, 600 + 4 * i, 4).data(), 4);
    EXPECT_EQ(old, want[i]) << "read-and-increment " << i;
  }
  int responses = 0;
  for (const auto& p : sim.worker_inbox({0, 0})) {
    ASSERT_EQ(p.header.command, Command::kReadResponse);
    EXPECT_EQ(p.header.fvc, 0) << "a response rides its request's FVC, in the answer lanes";
    ++responses;
  }
  EXPECT_EQ(responses, 4) << "one read, three read-and-increments";
}

// Answers never wait behind requests, and a center whose answers cannot leave stops taking
// requests instead of queueing answers without bound: here M0D0 stops consuming FVC 0, so the
// read responses coming back to it pile up; M0D1 serves only as many reads as the buffers on
// the way and its bounded answer queue hold, then holds the rest back (no timeout: a minute).
TEST(FabricSim, ACenterWhoseAnswersCannotLeaveHoldsBackRequestsInsteadOfQueueingAnswers) {
  auto sys = load("n300.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.router.timeout = std::chrono::seconds(60);
  FabricSim sim(sys, tables, cfg);
  sim.stall_center({0, 0}, 0, true);
  constexpr int kReads = 200;
  int injected = 0;
  Packet rd;
  rd.header.dst_device = 1;
  rd.header.size = 64;
  rd.header.command = Command::kReadRequest;
  for (int round = 0; round < 1000 && injected < kReads; ++round) {
    rd.header.return_addr = 4096 + 64 * static_cast<uint64_t>(injected);
    if (sim.inject({0, 0}, rd)) ++injected;
    else sim.run(std::chrono::microseconds(100));
  }
  sim.run(std::chrono::milliseconds(100));
  auto served = [&] {
    int n = 0;
    for (const auto& line : sim.trace()) n += line.find("deliver read at M0D1 ") != std::string::npos;
    return n;
  };
  const int rb = cfg.router.rb_packets;
  // M0D0's input buffer, M0D1's center input and its answer queue: three buffers' worth.
  EXPECT_LE(served(), 3 * rb) << "answers queued without bound";
  EXPECT_GT(served(), 0);
  EXPECT_TRUE(sim.worker_inbox({0, 0}).empty());
  sim.stall_center({0, 0}, 0, false);
  for (int round = 0; round < 1000 && injected < kReads; ++round) {
    rd.header.return_addr = 4096 + 64 * static_cast<uint64_t>(injected);
    if (sim.inject({0, 0}, rd)) ++injected;
    else sim.run(std::chrono::microseconds(100));
  }
  EXPECT_TRUE(sim.run(std::chrono::seconds(1)));
  EXPECT_EQ(served(), kReads);
  EXPECT_EQ(sim.worker_inbox({0, 0}).size(), static_cast<size_t>(kReads)) << "every read answered once";
  EXPECT_TRUE(sim.events().empty()) << "nothing timed out or was dropped";
}

// What fault campaigns do, at simulated times: a chip is killed, one direction of a link is
// cut and later restored, one link has faults of its own. Every write is then either landed
// bit-exact and acknowledged, or NACKed (to or through the dead chip, or across the cut while
// it was down): never silent. (Frames the cut link had accepted wait in its window until it
// is back; without the restore they would wait for the fallback channel of issue 11.)
TEST(FabricSim, AKilledChipACutWireAndPerLinkFaultsLeaveNoWriteUnanswered) {
  auto sys = load("galaxy.yaml");
  auto tables = control::compute_tables(sys);
  auto first_port = [&](ChipId c) {
    for (const auto& l : sys.links) {
      if (l.a.chip == c) return l.a;
    }
    throw std::runtime_error("no link");
  };
  const routing::PortId faulty = first_port({0, 9}), clean = first_port({0, 10}), cut = first_port({0, 0});
  SimConfig cfg;
  cfg.link.max_retries = 3;
  cfg.link_faults[faulty].corrupt = 0.05;  // one direction of one link
  FabricSim sim(sys, tables, cfg);
  const ChipId dead{0, 5};
  sim.at(std::chrono::milliseconds(1), [&] { sim.kill(dead); });
  sim.at(std::chrono::milliseconds(1), [&] { sim.cut(cut, true, FabricSim::Direction::kOut); });
  sim.run(std::chrono::milliseconds(2));
  EXPECT_FALSE(sim.alive(dead));
  std::map<uint64_t, std::pair<int, int>> by_id;  // packet id -> (source, destination)
  std::map<int, int> written;
  const int n = sys.node_count();
  uint64_t id = 1;
  for (int s = 0; s < n; ++s) {
    const ChipId src = sys.chips[static_cast<size_t>(s)].id;
    if (src == dead) continue;
    for (int d = 0; d < n; ++d) {
      if (d == s) continue;
      const ChipId dst = sys.chips[static_cast<size_t>(d)].id;
      for (int tries = 0; !sim.inject(src, write(dst, 4096 + 64 * static_cast<uint64_t>(s), pattern(s, d, 64))); ++tries) {
        ASSERT_LT(tries, 2000) << "no room at " << to_string(src);  // 2 s: links time out before
        sim.run(std::chrono::milliseconds(1));
      }
      // FabricSim numbers packets in injection order, from 1; this run injected nothing before.
      by_id[id++] = {s, d};
      ++written[s];
    }
  }
  sim.at(sim.now() + std::chrono::milliseconds(100), [&] { sim.cut(cut, false, FabricSim::Direction::kOut); });
  sim.run(std::chrono::seconds(20));
  int landed = 0, nacked = 0;
  for (int s = 0; s < n; ++s) {
    const ChipId src = sys.chips[static_cast<size_t>(s)].id;
    if (src == dead) continue;
    std::set<std::pair<int, int>> nacked_pairs;
    const int acks = answers(sim.worker_inbox(src)).acked;
    for (const auto& p : sim.worker_inbox(src)) {
      if (p.header.command == Command::kNack) nacked_pairs.insert(by_id.at(p.header.packet_id));
    }
    // An ack dropped on its way back (its route crossed the dead chip) is reported, not NACKed.
    int acks_reported_lost = 0;
    for (const auto& ev : sim.events()) {
      if (ev.packet.command == Command::kWriteAck && ev.packet.dst() == src) acks_reported_lost += static_cast<int>(ev.packet.arg);
    }
    EXPECT_EQ(acks + acks_reported_lost + static_cast<int>(nacked_pairs.size()), written[s])
        << to_string(src) << ": every write acknowledged, NACKed, or its ack reported lost";
    for (int d = 0; d < n; ++d) {
      const ChipId dst = sys.chips[static_cast<size_t>(d)].id;
      if (d == s || dst == dead) continue;
      auto got = sim.memory(dst, 4096 + 64 * static_cast<uint64_t>(s), 64);
      auto want = pattern(s, d, 64);
      const bool ok = std::equal(got.begin(), got.end(), want.begin());
      EXPECT_NE(ok, nacked_pairs.count({s, d}) == 1) << to_string(src) << " -> " << to_string(dst) << ": landed xor NACKed";
      landed += ok;
    }
    nacked += static_cast<int>(nacked_pairs.size());
  }
  EXPECT_GT(landed, 800) << "most of the Galaxy still talks";
  EXPECT_GE(nacked, 31) << "at least every write to the dead chip";
  int link_down = 0;
  for (const auto& ev : sim.events()) link_down += ev.kind == routing::RouterEvent::kLinkDown;
  EXPECT_GT(link_down, 0);
  EXPECT_GT(sim.counters(faulty).injected_corrupt, 0u) << "the per-link faults applied";
  EXPECT_EQ(sim.counters(clean).injected_corrupt, 0u) << "and only there";
}

TEST(FabricSim, AKilledChipRestartsWithFreshMemoryAndItsNeighboursHearOfBoth) {
  test::BootedSim booted("n300.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.inject({0, 0}, write({0, 1}, 0, std::vector<uint8_t>(64, 7))));
  ASSERT_TRUE(sim.run());
  ASSERT_EQ(sim.memory({0, 1}, 0, 1)[0], 7);
  sim.at(sim.now() + std::chrono::milliseconds(1), [&] { sim.kill({0, 1}); });
  sim.at(sim.now() + std::chrono::milliseconds(5), [&] { sim.restart({0, 1}); });
  sim.run(std::chrono::milliseconds(3));
  EXPECT_FALSE(sim.alive({0, 1}));
  for (const auto& l : sys.links) {
    EXPECT_EQ(sim.counters(l.a).state, static_cast<uint32_t>(link::LinkState::kDown)) << "peer_down, at once";
  }
  EXPECT_FALSE(sim.inject({0, 1}, write({0, 0}, 0, std::vector<uint8_t>(64, 1)))) << "a dead chip takes no work";
  sim.run(std::chrono::milliseconds(10));
  EXPECT_TRUE(sim.alive({0, 1}));
  EXPECT_EQ(sim.memory({0, 1}, 0, 1)[0], 0) << "a new process, new memory";
  // Its neighbours take the new session (a restarted peer is not foreign), so the links come
  // up again and writes cross them both ways.
  for (const auto& l : sys.links) {
    EXPECT_EQ(sim.counters(l.a).state, static_cast<uint32_t>(link::LinkState::kUp)) << to_string(l.a);
    EXPECT_EQ(sim.counters(l.b).state, static_cast<uint32_t>(link::LinkState::kUp)) << to_string(l.b);
    const routing::PortId survivor = l.a.chip == ChipId{0, 0} ? l.a : l.b;
    EXPECT_EQ(sim.counters(survivor).peer_restarts, 1u);
    EXPECT_EQ(sim.counters(survivor).foreign, 0u) << "nothing of the new session was refused";
  }
  ASSERT_TRUE(sim.inject({0, 0}, write({0, 1}, 0, std::vector<uint8_t>(64, 9))));
  ASSERT_TRUE(sim.inject({0, 1}, write({0, 0}, 64, std::vector<uint8_t>(64, 5))));
  ASSERT_TRUE(sim.run());
  EXPECT_EQ(sim.memory({0, 1}, 0, 1)[0], 9);
  EXPECT_EQ(sim.memory({0, 0}, 64, 1)[0], 5);
}

// The operator's word on a link end outlives its chip, as in processes (the launcher remembers
// it): an end taken out of service while its chip is dead is out of service when it restarts
// (its own wire carries nothing: the link is down, or its session rides the parallel link's
// wire, the EFC), and its link returns to its own wire once both ends are back in service.
TEST(FabricSim, ALinkEndTakenDownWhileItsChipIsDeadStaysDownWhenItRestarts) {
  test::BootedSim booted("n300.yaml");
  auto& [sys, tables, sim] = booted;
  const auto& cut = sys.links.at(0);
  const ChipId b{0, 1};
  ASSERT_EQ(cut.b.chip, b);
  auto end_state = [&](routing::PortId end) {
    const node::SystemSnapshot snap = sim.snapshot();
    for (const auto& p : snap.chips.at(static_cast<size_t>(*sys.node(end.chip))).ports) {
      if (p.port == to_string(end)) return p;
    }
    ADD_FAILURE() << "no port " << to_string(end) << " in the snapshot";
    return node::PortState{};
  };
  auto own_wire_up = [&](routing::PortId end) {
    const node::PortState p = end_state(end);
    return p.state == "up" && !p.fallback_via && !p.admin_down;
  };
  sim.kill(b);
  EXPECT_THROW(sim.admin_down(routing::PortId{b, 0}, true), std::invalid_argument) << "not wired: refused, not kept";
  sim.admin_down(cut.a, true);
  sim.admin_down(cut.b, true);  // the dead end
  sim.restart(b);
  EXPECT_EQ(sim.counters(cut.b).state, static_cast<uint32_t>(link::LinkState::kDown)) << "not handshaking";
  sim.run(std::chrono::milliseconds(200));
  EXPECT_TRUE(own_wire_up(sys.links.at(1).b)) << "its other link came up";
  EXPECT_TRUE(end_state(cut.b).admin_down) << "the restarted end is out of service";
  EXPECT_FALSE(own_wire_up(cut.b));
  sim.admin_down(cut.a, false);
  sim.admin_down(cut.b, false);
  sim.run(std::chrono::seconds(2));
  EXPECT_TRUE(own_wire_up(cut.a));
  EXPECT_TRUE(own_wire_up(cut.b));
}

// A chip dies with frames in flight on its links and comes back: what its neighbour's links
// had sent and never had acknowledged is reported and NACKed to its sources, never lost in
// silence; credits start afresh, so traffic through the new incarnation flows at full rate.
TEST(FabricSim, APeerThatRestartsMidStreamHasItsUnacknowledgedWritesNackedAndTrafficFlowsAgain) {
  auto sys = load("n300.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.wire_latency = std::chrono::microseconds(200);  // a window's worth in flight
  FabricSim sim(sys, tables, cfg);
  const ChipId a{0, 0}, b{0, 1};
  constexpr int kWrites = 256;
  int sent = 0;
  auto pump = [&](int upto) {
    for (; sent < upto;) {
      if (!sim.inject(a, write(b, 4096 * static_cast<uint64_t>(sent % 64), std::vector<uint8_t>(4096, static_cast<uint8_t>(sent))))) break;
      ++sent;
    }
  };
  pump(kWrites);
  sim.run(std::chrono::microseconds(300));  // some frames in flight, none acknowledged yet
  sim.kill(b);
  sim.run(std::chrono::milliseconds(1));
  sim.restart(b);
  for (int i = 0; i < 200 && sent < kWrites; ++i) {
    pump(kWrites);
    sim.run(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(sim.run());
  ASSERT_EQ(sent, kWrites);
  const Answers replies = answers(sim.worker_inbox(a));
  const auto acked = static_cast<size_t>(replies.acked), nacked = static_cast<size_t>(replies.nacked);
  // Every write is answered: acknowledged by the first or the second incarnation, or NACKed.
  // (Writes the first incarnation had taken into its buffers died with it: those alone are
  // neither, as spec 5.5's source timeout finds.)
  uint64_t abandoned = 0;
  for (const auto& l : sys.links) abandoned += sim.counters(l.a.chip == a ? l.a : l.b).abandoned;
  EXPECT_GT(abandoned, 0u) << "the kill caught frames in flight";
  EXPECT_GE(nacked, abandoned) << "each abandoned write NACKed";
  EXPECT_GT(acked, static_cast<size_t>(kWrites / 2)) << "traffic flows through the new incarnation";
  EXPECT_LE(acked + nacked, static_cast<size_t>(kWrites));
  for (const auto& l : sys.links) EXPECT_EQ(sim.counters(l.a).state, static_cast<uint32_t>(link::LinkState::kUp));
}

TEST(FabricSim, SameSeedSameTrace) {
  EXPECT_EQ(run_ttl_loop(5), run_ttl_loop(5));
  auto galaxy = [](uint64_t seed) {
    auto sys = load("galaxy.yaml");
    auto tables = control::compute_tables(sys);
    SimConfig cfg;
    cfg.seed = seed;
    cfg.faults.corrupt = 0.01;
    FabricSim sim(sys, tables, cfg);
    AllToAll run(sim, sys, 128);
    EXPECT_TRUE(run.idle);
    return sim.trace();
  };
  auto a = galaxy(9), b = galaxy(9), c = galaxy(10);
  EXPECT_GT(a.size(), 2000u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c) << "another seed, other faults, another trace";
}

}  // namespace
}  // namespace ttemu::sim

namespace ttemu::sim {
namespace {

// Chips that look for more input before they sleep, as chip processes over UDP do
// (SimConfig::look), keep part-filled datagrams open: on a Galaxy with 1 % of its frames
// corrupted, an all_to_all of 4 KiB writes lands bit-exact either way, in fewer datagrams
// when they look.
TEST(FabricSim, ChipsThatLookBeforeTheySleepSendFewerDatagramsAndLoseNothing) {
  auto galaxy = [](link::Duration look) {
    auto sys = load("galaxy.yaml");
    auto tables = control::compute_tables(sys);
    SimConfig cfg;
    cfg.seed = 12;
    cfg.faults.corrupt = 0.01;
    cfg.wire_latency = std::chrono::microseconds(5);
    cfg.look = look;
    FabricSim sim(sys, tables, cfg);
    AllToAll run(sim, sys, 4096);
    EXPECT_EQ(run.injected, run.pending.size());
    EXPECT_TRUE(run.idle);
    expect_all_to_all_landed(sim, sys, 4096);
    EXPECT_TRUE(sim.events().empty());
    uint64_t datagrams = 0, errors = 0;
    for (const auto& l : sys.links) {
      for (const auto& end : {l.a, l.b}) {
        datagrams += sim.counters(end).datagrams_tx;
        errors += sim.counters(end).crc_errors;
      }
    }
    EXPECT_GT(errors, 0u) << "frames were corrupted";
    return datagrams;
  };
  const uint64_t plain = galaxy(link::Duration{0}), looking = galaxy(std::chrono::microseconds(20));
  EXPECT_LT(looking, plain) << looking << " datagrams looking, " << plain << " not";
}

TEST(FabricSim, DelayedCreditsAndAcksStillMoveEverything) {
  auto sys = load("t3k.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.router.credit_delay = std::chrono::milliseconds(1);
  cfg.link.ack_delay = std::chrono::milliseconds(1);
  FabricSim sim(sys, tables, cfg);
  AllToAll run(sim, sys, 2048);
  EXPECT_TRUE(run.idle);
  expect_all_to_all_landed(sim, sys, 2048);
}


// Writes one at a time across three hops, each acknowledged before the next, with the
// launcher's 1 ms credit and ack delays: the credits a router owes upstream ride on the write
// acknowledgement going that way, and the acknowledgements of frames on the next write, so no
// datagram goes for them alone while traffic flows. (Each waited for its 1 ms before, and
// went alone: a datagram and a wake-up of the chip upstream per millisecond and link.)
TEST(FabricSim, CreditsRideOnDatagramsGoingTheirWay) {
  auto sys = load("mesh_4x4.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.trace = false;
  cfg.router.credit_delay = std::chrono::milliseconds(1);
  cfg.link.ack_delay = std::chrono::milliseconds(1);
  FabricSim sim(sys, tables, cfg);
  ASSERT_TRUE(sim.run());  // every link up, every chip asleep
  auto datagrams = [&] {
    uint64_t n = 0;
    for (const auto& l : sys.links) n += sim.counters(l.a).datagrams_tx + sim.counters(l.b).datagrams_tx;
    return n;
  };
  const uint64_t before = datagrams();
  constexpr int kWrites = 40;
  const ChipId src{0, 0}, dst{0, 3};  // three hops along row 0
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_TRUE(sim.inject(src, write(dst, 4096 * static_cast<uint64_t>(i), pattern(0, i, 64))));
    for (int waited = 0; answers(sim.worker_inbox(src)).acked <= i; ++waited) {
      ASSERT_LT(waited, 1000) << "write " << i << " was not acknowledged";
      sim.run(std::chrono::microseconds(10));
    }
    sim.run(std::chrono::microseconds(300));  // the next write comes later, as a client's would
  }
  ASSERT_TRUE(sim.run());
  // Each write and its acknowledgement take a datagram per hop each way; what is owed after
  // the last one goes once per direction at most (6 directions).
  EXPECT_LE(datagrams() - before, 6u * kWrites + 6u);
}

// The Ethernet Fallback Channel (spec 2.2.5). Writes stream both ways across one link of a
// chip pair with four (M0D0-M0D1, plane 0) while that link's wire is broken.
struct EfcRig {
  explicit EfcRig(SimConfig cfg = {}) : sys(load("galaxy.yaml")), tables(control::compute_tables(sys)) {
    for (const auto& l : sys.links) {
      if (l.plane == 0 && l.a.chip == a && l.b.chip == b) ends = {l.a, l.b};
      if (l.plane == 0 && l.a.chip == b && l.b.chip == a) ends = {l.b, l.a};
    }
    cfg.trace = false;
    sim = std::make_unique<FabricSim>(sys, tables, cfg);
    EXPECT_TRUE(sim->run(std::chrono::seconds(1)));  // every link up
    start = sim->now();
  }
  // `writes` 4 KiB writes each way on plane 0, one each way every `gap`; then runs until idle.
  void stream(int writes, link::Duration gap) {
    for (int i = 0; i < writes; ++i) {
      for (auto [src, dst] : {std::pair{a, b}, std::pair{b, a}}) {
        for (int tries = 0; !sim->inject(src, write(dst, kBase + 4096 * static_cast<uint64_t>(i), data(src, i))); ++tries) {
          ASSERT_LT(tries, 50000) << "no room at " << to_string(src);
          sim->run(std::chrono::microseconds(100));
        }
      }
      sim->run(gap);
    }
    EXPECT_TRUE(sim->run(std::chrono::seconds(30)));
    for (auto [src, dst] : {std::pair{a, b}, std::pair{b, a}}) {
      const Answers replies = answers(sim->worker_inbox(src));
      acked += replies.acked;
      nacked += replies.nacked;
      for (int i = 0; i < writes; ++i) {
        auto got = sim->memory(dst, kBase + 4096 * static_cast<uint64_t>(i), 4096);
        auto want = data(src, i);
        landed += std::equal(got.begin(), got.end(), want.begin());
      }
    }
  }
  // Every write landed bit-exact and was acknowledged; nothing was NACKed or dropped.
  void expect_everything_delivered(int writes) const {
    EXPECT_EQ(landed, 2 * writes);
    EXPECT_EQ(acked, 2 * writes);
    EXPECT_EQ(nacked, 0);
    EXPECT_TRUE(sim->events().empty()) << "a packet dropped: " << (sim->events().empty() ? "" : sim->events()[0].name());
  }
  static std::vector<uint8_t> data(ChipId src, int i) { return pattern(src.device, i, 4096); }
  // What `end` sends is corrupted with probability p per frame from now on.
  void corrupt(routing::PortId end, double p) {
    link::DirectionFaults f;
    f.corrupt = p;
    sim->set_faults(end, f);
  }
  // The EFC events of one end, in order.
  std::vector<EfcEvent> of(routing::PortId end) const {
    std::vector<EfcEvent> v;
    for (const auto& e : sim->efc_events()) {
      if (e.port == end) v.push_back(e);
    }
    return v;
  }

  static constexpr uint64_t kBase = 64 << 10;
  const ChipId a{0, 0}, b{0, 1};
  control::System sys;
  control::TableSet tables;
  std::pair<routing::PortId, routing::PortId> ends;
  std::unique_ptr<FabricSim> sim;
  link::Time start{};
  int acked = 0, nacked = 0, landed = 0;
};

// A wire cut for 4 s, longer than the link's retries last (it would be declared down, and
// what waits for it NACKed): the link's traffic travels a parallel link's wire within a few
// timeouts, nothing is lost, and it comes back once its own wire answers probes again.
TEST(FabricSim, ACutLinkTravelsTheFallbackChannelAndReturnsWhenRestored) {
  EfcRig rig;
  FabricSim& sim = *rig.sim;
  const auto [ea, eb] = rig.ends;
  const link::Time cut_at = rig.start + std::chrono::milliseconds(10), restore_at = cut_at + std::chrono::seconds(4);
  sim.at(cut_at, [&] { sim.cut(ea, true); });
  sim.at(restore_at, [&] { sim.cut(ea, false); });
  rig.stream(200, std::chrono::milliseconds(25));
  rig.expect_everything_delivered(200);
  for (auto end : {ea, eb}) {
    const auto ev = rig.of(end);
    ASSERT_GE(ev.size(), 2u) << to_string(end) << ": onto a fallback channel and back";
    EXPECT_NE(ev.front().wire, end.port) << to_string(end);
    EXPECT_LT(ev.front().at - cut_at, std::chrono::milliseconds(60)) << to_string(end) << ": the pause";
    EXPECT_EQ(ev.back().wire, end.port) << to_string(end) << ": back on its own wire";
    EXPECT_GT(ev.back().at, restore_at) << "not before the restore";
    EXPECT_LT(ev.back().at, restore_at + std::chrono::milliseconds(500)) << "soon after it";
    EXPECT_EQ(sim.counters(end).state, static_cast<uint32_t>(link::LinkState::kUp));
    EXPECT_EQ(sim.counters(end).down_transitions, 0u) << to_string(end) << ": the link never went down";
    EXPECT_GT(sim.counters(end).fallback_rx, 0u) << to_string(end) << ": the far end's traffic came over the channel";
  }
  EXPECT_EQ(rig.of(ea).front().why, link::EfcReason::kTimeouts);
}

// Without the EFC, the same cut outlasts the link's retries: it goes down, and the writes
// that wait for it are dropped and NACKed. What the EFC buys, shown by its absence.
TEST(FabricSim, WithoutTheFallbackChannelTheSameCutLosesWrites) {
  SimConfig cfg;
  cfg.efc.enabled = false;
  EfcRig rig(cfg);
  FabricSim& sim = *rig.sim;
  const auto [ea, eb] = rig.ends;
  const link::Time cut_at = rig.start + std::chrono::milliseconds(10);
  sim.at(cut_at, [&] { sim.cut(ea, true); });
  sim.at(cut_at + std::chrono::seconds(4), [&] { sim.cut(ea, false); });
  rig.stream(200, std::chrono::milliseconds(25));
  EXPECT_TRUE(sim.efc_events().empty());
  EXPECT_EQ(sim.counters(ea).fallbacks, 0u);
  EXPECT_GT(sim.counters(ea).down_transitions, 0u);
  EXPECT_GT(rig.nacked, 0);
  EXPECT_LT(rig.landed, 400);
}

// `ttemu links down` on one end mid-stream, as the processes campaign's swarm does, at several
// moments of a dense stream both ways: the port goes onto the fallback channel and every write
// is answered, acknowledged or NACKed (an answer lost would leave its writer's barrier to time
// out; FabricNode.AnAckWaitingForALinkThatGoesDownWaitsForItsSession holds the case the
// processes engine found).
TEST(FabricSim, AnOperatorTakingALinkDownMidStreamLosesNoAnswer) {
  for (int offset_us : {0, 3, 7, 12, 20, 35, 60, 100}) {
    EfcRig rig;
    FabricSim& sim = *rig.sim;
    const auto [ea, eb] = rig.ends;
    const link::Time down_at = rig.start + std::chrono::microseconds(200 + offset_us);
    sim.at(down_at, [&, ea = ea] { sim.admin_down(ea, true); });
    sim.at(down_at + std::chrono::milliseconds(200), [&, ea = ea] { sim.admin_down(ea, false); });
    rig.stream(100, std::chrono::microseconds(2));
    EXPECT_EQ(rig.acked + rig.nacked, 200) << "down " << offset_us << " us later: every write answered";
    EXPECT_GE(rig.landed, rig.acked) << "every acknowledged write landed";
    EXPECT_GT(sim.counters(ea).fallbacks + sim.counters(eb).fallbacks, 0u) << "it went onto the fallback channel";
  }
}

TEST(FabricSim, OneDeadDirectionTakesBothDirectionsOntoTheFallbackChannel) {
  EfcRig rig;
  FabricSim& sim = *rig.sim;
  const auto [ea, eb] = rig.ends;
  // Only what `eb` sends is lost: `ea` hears no acknowledgements and falls back, and `eb`,
  // whose own frames also vanish, follows, so that its acknowledgements arrive.
  const link::Time cut_at = rig.start + std::chrono::milliseconds(10), restore_at = cut_at + std::chrono::seconds(1);
  sim.at(cut_at, [&] { sim.cut(eb, true, FabricSim::Direction::kOut); });
  sim.at(restore_at, [&] { sim.cut(eb, false, FabricSim::Direction::kOut); });
  rig.stream(100, std::chrono::milliseconds(20));
  rig.expect_everything_delivered(100);
  for (auto end : {ea, eb}) {
    const auto ev = rig.of(end);
    ASSERT_GE(ev.size(), 2u) << to_string(end);
    EXPECT_NE(ev.front().wire, end.port);
    EXPECT_EQ(ev.back().wire, end.port) << to_string(end) << ": back on its own wire";
    EXPECT_GT(ev.back().at, restore_at);
  }
}

// A carrier whose own wire then fails, while it carries nothing of its own (its plane is
// idle): only the passenger's timeouts can tell, and the passenger moves on to another.
TEST(FabricSim, APassengerLeavesACarrierWhoseWireFailsToo) {
  EfcRig rig;
  FabricSim& sim = *rig.sim;
  const auto [ea, eb] = rig.ends;
  const link::Time cut_at = rig.start + std::chrono::milliseconds(10);
  sim.at(cut_at, [&] { sim.cut(ea, true); });
  std::optional<uint8_t> first_carrier;
  sim.at(cut_at + std::chrono::milliseconds(300), [&] {
    const auto ev = rig.of(ea);
    ASSERT_FALSE(ev.empty());
    first_carrier = ev.back().wire;
    sim.cut({ea.chip, *first_carrier}, true);
  });
  rig.stream(100, std::chrono::milliseconds(10));
  rig.expect_everything_delivered(100);
  ASSERT_TRUE(first_carrier);
  const auto ev = rig.of(ea);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_NE(ev.back().wire, *first_carrier) << "it left the failed carrier";
  EXPECT_NE(ev.back().wire, ea.port) << "and did not go back to its own cut wire";
}

// The status queues' rates (spec 1.1.2.1), drained by the simulated control plane: while
// traffic flows each port reports what it moved every interval, and the entries add up to its
// link counters; the receiver of a corrupting wire raises a CRC alarm; idle, nothing more comes.
TEST(FabricSim, RateEntriesAddUpToTheCountersAndACorruptingWireRaisesACrcAlarm) {
  SimConfig cfg;
  cfg.control_plane = true;
  cfg.efc.enabled = false;  // the wire keeps its traffic: its receiver counts every bad frame
  cfg.rates.interval = std::chrono::milliseconds(10);
  EfcRig rig(cfg);
  FabricSim& sim = *rig.sim;
  const auto [ea, eb] = rig.ends;
  rig.corrupt(ea, 0.05);
  rig.stream(200, std::chrono::microseconds(300));
  rig.expect_everything_delivered(200);
  std::map<routing::PortId, chip::RateFigures> sum;
  int intervals = 0;
  bool alarm = false;
  for (const auto& r : sim.control_log()) {
    if (r.kind != ControlRecord::Kind::kStatus) continue;
    const chip::StatusEntry& e = r.entry;
    if (e.kind == chip::StatusKind::kRouterRates) ++intervals;
    if (e.kind == chip::StatusKind::kErrorRate && routing::PortId{r.chip, e.port} == eb &&
        static_cast<chip::RateAlarm>(e.reason) == chip::RateAlarm::kCrcHigh) {
      alarm = true;
    }
    if (e.kind != chip::StatusKind::kPortRates) continue;
    auto& s = sum[{r.chip, e.port}];
    s.frames_tx += e.rates.frames_tx;
    s.bytes_tx += e.rates.bytes_tx;
    s.frames_rx += e.rates.frames_rx;
    s.crc_errors += e.rates.crc_errors;
    s.retransmits += e.rates.retransmits;
  }
  EXPECT_GT(intervals, 2) << "the traffic lasted several intervals";
  EXPECT_TRUE(alarm) << "the receiver of the corrupting wire raised a CRC alarm";
  for (const auto end : {ea, eb}) {
    const auto& c = sim.counters(end);
    EXPECT_GT(c.frames_tx.load(), 200u);
    EXPECT_EQ(sum[end].frames_tx, c.frames_tx.load()) << to_string(end);
    EXPECT_EQ(sum[end].bytes_tx, c.bytes_tx.load()) << to_string(end);
    EXPECT_EQ(sum[end].frames_rx, c.frames_rx.load()) << to_string(end);
    EXPECT_EQ(sum[end].crc_errors, c.crc_errors.load()) << to_string(end);
    EXPECT_EQ(sum[end].retransmits, c.retransmits.load()) << to_string(end);
  }
  EXPECT_GT(sum[eb].crc_errors, 0u);
  const size_t logged = sim.control_log().size();
  const link::Time idle_since = sim.now();
  EXPECT_TRUE(sim.run(std::chrono::seconds(5)));
  EXPECT_EQ(sim.control_log().size(), logged) << "idle: no more rate entries";
  EXPECT_EQ(sim.now(), idle_since) << "idle: no timer is left to wake the chips";
}

TEST(FabricSim, AnUnreliableLinkMovesOntoTheFallbackChannelAtItsErrorRate) {
  SimConfig cfg;
  cfg.efc.interval = std::chrono::milliseconds(20);
  cfg.efc.min_frames = 16;
  EfcRig rig(cfg);
  FabricSim& sim = *rig.sim;
  const auto [ea, eb] = rig.ends;
  rig.corrupt(ea, 0.2);
  rig.stream(100, std::chrono::milliseconds(2));
  rig.expect_everything_delivered(100);
  // The receiver sees the CRC errors and judges; the sender follows it onto the channel.
  const auto ev = rig.of(eb);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front().why, link::EfcReason::kErrorRate);
  EXPECT_NE(ev.front().wire, eb.port);
  EXPECT_NE(ev.back().wire, eb.port) << "a link that still corrupts one frame in five stays off";
  ASSERT_FALSE(rig.of(ea).empty());
  EXPECT_EQ(rig.of(ea).front().why, link::EfcReason::kPeer);
  EXPECT_GT(sim.counters(ea).injected_corrupt, 0u);
  EXPECT_GT(sim.counters(ea).fallback_rx, 0u);
}

// Every link between M0D0 and M0D1 cut while they write to each other, with the control plane
// on: the EFC has no parallel wire left that works (the carriers, idle on their own, are made
// to prove their wires and fail), so all four links go down; the control plane hears it from
// the status queues and loads tables around the pair; writes sent afterwards land over the new
// routes. Restoring one wire brings the pair back into the tables.
TEST(FabricSim, AllFourLinksOfAPairCutGoDownAndTheControlPlaneRoutesAroundThem) {
  SimConfig cfg;
  cfg.control_plane = true;
  EfcRig rig(cfg);
  FabricSim& sim = *rig.sim;
  std::vector<routing::PortId> pair_ends;
  for (const auto& l : rig.sys.links) {
    if (l.a.chip == rig.a && l.b.chip == rig.b) pair_ends.push_back(l.a);
    if (l.b.chip == rig.a && l.a.chip == rig.b) pair_ends.push_back(l.b);
  }
  ASSERT_EQ(pair_ends.size(), 4u);
  const link::Time cut_at = rig.start + std::chrono::milliseconds(10);
  sim.at(cut_at, [&] {
    for (auto e : pair_ends) sim.cut(e, true);
  });
  auto reloads = [&] {
    std::vector<const control::Reload*> v;
    for (const auto& r : sim.control_log()) {
      if (r.kind == ControlRecord::Kind::kTablesReloaded) v.push_back(r.reload.get());
    }
    return v;
  };
  // Writes each way every 10 ms until the control plane acts (those caught by the cut are
  // NACKed or wait in a link that is down: this test is about what comes after).
  for (int i = 0; i < 2000 && reloads().empty(); ++i) {
    sim.inject(rig.a, write(rig.b, EfcRig::kBase, EfcRig::data(rig.a, 0)));
    sim.inject(rig.b, write(rig.a, EfcRig::kBase, EfcRig::data(rig.b, 0)));
    sim.run(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(reloads().size(), 1u);
  EXPECT_EQ(reloads()[0]->failures.links.size(), 4u);
  EXPECT_EQ(reloads()[0]->summary(rig.sys), "M0D0-M0D1 (4 links)");
  EXPECT_EQ(reloads()[0]->unreachable_pairs(), 0);
  EXPECT_TRUE(reloads()[0]->switch_risk.empty()) << reloads()[0]->switch_risk;
  EXPECT_EQ(sim.tables_version(), 2);
  for (auto e : pair_ends) {
    EXPECT_EQ(sim.counters(e).state, static_cast<uint32_t>(link::LinkState::kDown)) << to_string(e);
  }
  // The status queues told it: a link_down for each end, drained into the record.
  int downs = 0;
  for (const auto& r : sim.control_log()) {
    downs += r.kind == ControlRecord::Kind::kStatus && r.entry.kind == chip::StatusKind::kLinkDown;
  }
  EXPECT_EQ(downs, 8);
  // Over the new tables, every write lands and is acknowledged (the four links stay down, so
  // the simulation is never idle: it runs until the answers are in).
  for (const auto& [src, dst] : {std::pair{rig.a, rig.b}, std::pair{rig.b, rig.a}}) {
    const size_t before = sim.worker_inbox(src).size();
    for (int i = 1; i <= 20; ++i) {
      ASSERT_TRUE(sim.inject(src, write(dst, EfcRig::kBase + 4096 * static_cast<uint64_t>(i), EfcRig::data(src, i))));
      sim.run(std::chrono::microseconds(200));
    }
    int acked = 0, nacked = 0;
    for (int i = 0; i < 100 && acked < 20; ++i) {
      sim.run(std::chrono::milliseconds(1));
      const Answers replies = answers(sim.worker_inbox(src), before);
      acked = replies.acked;
      nacked = replies.nacked;
    }
    EXPECT_EQ(acked, 20) << to_string(src);
    EXPECT_EQ(nacked, 0) << to_string(src);
    for (int i = 1; i <= 20; ++i) {
      auto got = sim.memory(dst, EfcRig::kBase + 4096 * static_cast<uint64_t>(i), 4096);
      auto want = EfcRig::data(src, i);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << to_string(src) << " write " << i;
    }
  }
  sim.cut(pair_ends[0], false);
  for (int i = 0; i < 50 && reloads().size() < 2; ++i) sim.run(std::chrono::milliseconds(100));
  ASSERT_EQ(reloads().size(), 2u);
  EXPECT_TRUE(reloads()[1]->failures.links.empty()) << reloads()[1]->summary(rig.sys);
}

}  // namespace
}  // namespace ttemu::sim
