// Sockets (spec 2.4.2-2.4.4, 4) in the simulator: the chip node, session layer and socket
// client that chip processes run, on a simulated clock, so each case replays from its seed.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "emulator/chip/address_space.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/sim/fabric_sim.hpp"
#include "tests/sim_support.hpp"
#include "tests/test_support.hpp"

namespace ttemu::sim {
namespace {

using routing::ChipId;
using session::kAnyDevice;
using session::kEndToEnd;
using session::kLocalHandshake;
using test::load;

constexpr uint16_t kCore = 1;
constexpr uint64_t kSrc = 0x10000;          // the sender's data, in its L1
constexpr uint64_t kL1cb = 0x80000;         // the receiver's L1CB
constexpr uint64_t kDscb = chip::kDramBit | 0x20000;

std::vector<uint8_t> stream_bytes(size_t n, uint32_t salt) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(salt);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct Pair {
  FabricSim& sim;
  ChipId from, to;
  int tx = -1, rx = -1;
  chip::SocketClient& sender() { return sim.sockets(from, kCore); }
  chip::SocketClient& receiver() { return sim.sockets(to, kCore); }
};

chip::SocketClient::Options options(uint32_t id, uint32_t epoch, uint8_t direction, uint8_t handshake, ChipId remote) {
  chip::SocketClient::Options o;
  o.socket_id = id;
  o.epoch = epoch;
  o.direction = direction;
  o.handshake = handshake;
  o.remote_mesh = remote.mesh;
  o.remote_device = remote.device;
  return o;
}

chip::SocketClient::Options sender_options(uint32_t id, uint32_t epoch, ChipId to, uint8_t handshake = kEndToEnd) {
  return options(id, epoch, session::kSocketSend, handshake, to);
}

chip::SocketClient::Options receiver_options(uint32_t id, uint32_t epoch, uint8_t handshake, uint32_t l1cb,
                                             uint32_t dscb, ChipId from = {kAnyDevice, kAnyDevice}) {
  auto o = options(id, epoch, session::kSocketReceive, handshake, from);
  o.l1cb_addr = kL1cb;
  o.l1cb_size = l1cb;
  o.dscb_addr = kDscb;
  o.dscb_size = dscb;
  return o;
}

// Puts `data` into the sender's L1 at kSrc and queues it on the socket.
void queue(Pair& p, const std::vector<uint8_t>& data) {
  std::memcpy(p.sim.memory(p.from, kSrc, data.size()).data(), data.data(), data.size());
  EXPECT_TRUE(p.sender().try_send(p.tx, kSrc, static_cast<uint32_t>(data.size())));
}

// Queues `data` on the sender (from its L1 at kSrc) and runs the simulation, reading whatever
// arrives in chunks of `read` bytes, until the receiver has everything or nothing moves.
std::vector<uint8_t> stream(Pair& p, const std::vector<uint8_t>& data, size_t read = 1 << 20) {
  queue(p, data);
  std::vector<uint8_t> got, buf(read);
  for (int round = 0; round < 10000 && got.size() < data.size(); ++round) {
    p.sim.run(std::chrono::milliseconds(1));
    const size_t n = p.receiver().recv(p.rx, buf);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(n));
  }
  return got;
}

// The spec's 4-mesh system of 3x3 meshes, simulated and up.
struct MeshSim {
  control::System sys = load("spec_4mesh_3x3.yaml");
  control::TableSet tables = control::compute_tables(sys);
  FabricSim sim;
  explicit MeshSim(SimConfig config = {}) : sim(sys, tables, std::move(config)) { EXPECT_TRUE(sim.run()); }
};

// With the live control plane: a chip's death is routed around, as the launcher does.
SimConfig with_control_plane() {
  SimConfig c;
  c.control_plane = true;
  return c;
}

// An SSocket sender's options: its FVC chosen by the client.
chip::SocketClient::Options ssocket_sender_options(uint32_t id, ChipId to) {
  auto o = sender_options(id, 1, to);
  o.type = session::kSSocket;
  o.fvc = chip::SocketClient::kAutoFvc;
  return o;
}

// Opens an SSocket from p.from to p.to (epoch 1, end to end, a 16 KiB L1CB and a DSCB of
// `dscb` bytes) and runs until it has connected.
void connect_ssocket(Pair& p, uint32_t id, uint32_t dscb) {
  auto rx = receiver_options(id, 1, kEndToEnd, 16 << 10, dscb);
  rx.type = session::kSSocket;
  p.rx = p.receiver().open(rx);
  p.tx = p.sender().open(ssocket_sender_options(id, p.to));
  ASSERT_GE(p.rx, 0);
  ASSERT_GE(p.tx, 0);
  p.sim.run(std::chrono::milliseconds(5));
  ASSERT_EQ(p.sender().endpoint(p.tx)->state.load(), session::kSocketConnected);
}

void connect(Pair& p, uint32_t id, uint32_t epoch, const chip::SocketClient::Options& rx) {
  p.rx = p.receiver().open(rx);
  p.tx = p.sender().open(sender_options(id, epoch, p.to, rx.handshake));
  ASSERT_GE(p.rx, 0);
  ASSERT_GE(p.tx, 0);
  p.sim.run(std::chrono::milliseconds(5));
  ASSERT_EQ(p.sender().endpoint(p.tx)->state.load(), session::kSocketConnected);
  ASSERT_EQ(p.receiver().endpoint(p.rx)->state.load(), session::kSocketConnected);
}

TEST(SocketSim, ADSocketStreamCrossesMeshesByteForByte) {
  test::BootedSim booted("spec_4mesh_3x3.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  Pair p{sim, {0, 0}, {3, 8}};
  connect(p, 7, 1, receiver_options(7, 1, kEndToEnd, 16 << 10, 64 << 10));
  const auto data = stream_bytes(200 << 10, 1);
  const auto got = stream(p, data, 3000);
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data) << "every byte, in order";
  EXPECT_EQ(p.sender().sent(p.tx), data.size());
}

// Spec 2.4: two senders open socket 7 toward one receiver, in epochs 1 and 2. The receiver,
// ready for epoch 2, connects with that sender only; the other waits (told why) and connects
// once the receiver moves to epoch 1. Neither stream mixes into the other's epoch.
TEST(SocketSim, EpochsKeepTwoSendersApart) {
  test::BootedSim booted("spec_4mesh_3x3.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  const ChipId a{1, 4}, b{2, 0}, r{0, 8};
  auto& sa = sim.sockets(a, kCore);
  auto& sb = sim.sockets(b, kCore);
  auto& rr = sim.sockets(r, kCore);
  const int ta = sa.open(sender_options(7, 1, r));
  const int tb = sb.open(sender_options(7, 2, r));
  ASSERT_GE(ta, 0);
  ASSERT_GE(tb, 0);
  sim.run(std::chrono::milliseconds(5));
  int rx = rr.open(receiver_options(7, 2, kEndToEnd, 16 << 10, 0));
  ASSERT_GE(rx, 0);
  sim.run(std::chrono::milliseconds(5));
  EXPECT_EQ(sb.endpoint(tb)->state.load(), session::kSocketConnected);
  EXPECT_EQ(sa.endpoint(ta)->state.load(), session::kSocketOpening) << "epoch 1 waits";
  EXPECT_EQ(sa.endpoint(ta)->status.load(), session::kSocketEpochMismatch) << "and knows why";

  Pair pb{sim, b, r, tb, rx};
  const auto data_b = stream_bytes(40 << 10, 2);
  EXPECT_TRUE(stream(pb, data_b) == data_b);
  ASSERT_TRUE(sb.try_close(tb, 0));
  sim.run(std::chrono::milliseconds(5));
  EXPECT_EQ(rr.endpoint(rx)->state.load(), session::kSocketPeerClosed);
  ASSERT_TRUE(rr.try_close(rx, 0));
  sim.run(std::chrono::milliseconds(5));
  rr.release(rx);
  sb.release(tb);

  rx = rr.open(receiver_options(7, 1, kEndToEnd, 16 << 10, 0));
  ASSERT_GE(rx, 0);
  sim.run(std::chrono::milliseconds(5));
  ASSERT_EQ(sa.endpoint(ta)->state.load(), session::kSocketConnected);
  Pair pa{sim, a, r, ta, rx};
  const auto data_a = stream_bytes(40 << 10, 3);
  EXPECT_TRUE(stream(pa, data_a) == data_a);
}

// Spec 2.4.4's point, both ways. A consumer stalls; its producer streams more than the
// consumer can hold, and behind the stream, on the same FVC and route, another worker writes.
// Local handshake: the stream backs up into the fabric and the writes wait behind it until
// the consumer resumes. End-to-end: the producer stops at its credit, the rest of the stream
// waits in the consumer's DSCB, and the writes complete while the consumer is still stalled.
class StalledConsumer : public ::testing::TestWithParam<uint8_t> {};

TEST_P(StalledConsumer, BlocksTheSharedFvcOnlyWithLocalHandshake) {
  const uint8_t handshake = GetParam();
  auto sys = load("spec_4mesh_3x3.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.router.timeout = std::chrono::seconds(600);  // the stall is longer than the test looks
  FabricSim sim(sys, tables, cfg);
  ASSERT_TRUE(sim.run());
  Pair p{sim, {0, 0}, {0, 8}};
  const uint32_t dscb = handshake == kEndToEnd ? 64 << 10 : 0;
  connect(p, 9, 1, receiver_options(9, 1, handshake, 8 << 10, dscb));
  const auto data = stream_bytes(512 << 10, 4);
  std::memcpy(sim.memory(p.from, kSrc, data.size()).data(), data.data(), data.size());
  ASSERT_TRUE(p.sender().try_send(p.tx, kSrc, static_cast<uint32_t>(data.size())));
  // Another worker's writes toward the consumer's chip, behind the stream on FVC 0.
  auto& writer = sim.worker(p.from, 2);
  chip::CommandRequest w;
  w.dst_mesh = p.to.mesh;
  w.dst_device = p.to.device;
  w.fvc = 0;
  w.size = 4096;
  w.txn_id = 3;
  for (uint32_t i = 0; i < 4; ++i) {
    w.src_addr = kSrc + i * 4096;
    w.dst_addr = 0x40000 + i * 4096;
    ASSERT_TRUE(writer.try_submit(w));
  }
  sim.run(std::chrono::milliseconds(50));  // the consumer reads nothing meanwhile
  const auto& rx = *p.receiver().endpoint(p.rx);
  if (handshake == kLocalHandshake) {
    EXPECT_EQ(rx.backed_up.load(), 1u) << "the stream waits in the fabric";
    EXPECT_GT(writer.in_flight(3), 0u) << "and the writes wait behind it";
    EXPECT_EQ(rx.spilled.load(), 0u);
  } else {
    EXPECT_EQ(writer.in_flight(3), 0u) << "the writes completed while the consumer stalled";
    EXPECT_EQ(rx.backed_up.load(), 0u) << "nothing waits in the fabric";
    EXPECT_GT(rx.spilled.load(), 0u) << "the DSCB took what L1CB could not";
    EXPECT_LT(p.sender().sent(p.tx), data.size()) << "the producer stopped at its credit";
  }
  // The consumer resumes: every byte, in order, and the writes complete.
  std::vector<uint8_t> got, buf(5000);
  for (int round = 0; round < 20000 && got.size() < data.size(); ++round) {
    const size_t n = p.receiver().recv(p.rx, buf);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(n));
    sim.run(std::chrono::microseconds(200));
  }
  EXPECT_TRUE(got == data);
  sim.run(std::chrono::milliseconds(5));
  EXPECT_EQ(writer.in_flight(3), 0u);
}

INSTANTIATE_TEST_SUITE_P(Handshake, StalledConsumer, ::testing::Values(kLocalHandshake, kEndToEnd),
                         [](const auto& p) { return p.param == kEndToEnd ? "EndToEnd" : "Local"; });

// The DSCB keeps order (2.4.4's flowchart) under a consumer that stalls and resumes at random,
// reading random amounts: seeded, so a failure replays.
TEST(SocketSim, DscbSpillKeepsOrderUnderARandomlyStallingConsumer) {
  auto sys = load("n300.yaml");
  auto tables = control::compute_tables(sys);
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SimConfig cfg;
    cfg.seed = seed;
    FabricSim sim(sys, tables, cfg);
    ASSERT_TRUE(sim.run());
    Pair p{sim, {0, 0}, {0, 1}};
    connect(p, 3, seed, receiver_options(3, seed, kEndToEnd, 8 << 10, 32 << 10));
    const auto data = stream_bytes(300 << 10, seed);
    std::memcpy(sim.memory(p.from, kSrc, data.size()).data(), data.data(), data.size());
    ASSERT_TRUE(p.sender().try_send(p.tx, kSrc, static_cast<uint32_t>(data.size())));
    std::mt19937 rng(seed);
    std::vector<uint8_t> got, buf;
    for (int round = 0; round < 100000 && got.size() < data.size(); ++round) {
      sim.run(std::chrono::microseconds(rng() % 400));
      if (rng() % 3 == 0) continue;  // stalled this round
      buf.resize(1 + rng() % 12000);
      const size_t n = p.receiver().recv(p.rx, buf);
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(n));
    }
    ASSERT_EQ(got.size(), data.size());
    EXPECT_TRUE(got == data);
    EXPECT_GT(p.receiver().endpoint(p.rx)->spilled.load(), 0u) << "the stalls did spill";
  }
}

TEST(SocketSim, ErrorsAreNamedNeverAHang) {
  test::BootedSim booted("n300.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  auto& rx = sim.sockets({0, 1}, kCore);
  auto bad = receiver_options(1, 1, kEndToEnd, 100, 0);
  EXPECT_EQ(rx.open(bad), chip::kStatusBadSize) << "an L1CB smaller than a packet";
  bad = receiver_options(1, 1, kEndToEnd, 16 << 10, 0);
  bad.l1cb_addr = uint64_t{1} << 40;
  EXPECT_EQ(rx.open(bad), chip::kStatusBadAddress);
  // Data toward a receiver that closed: the sender's socket breaks, saying so.
  Pair p{sim, {0, 0}, {0, 1}};
  connect(p, 5, 1, receiver_options(5, 1, kLocalHandshake, 16 << 10, 0));
  ASSERT_TRUE(p.receiver().try_close(p.rx, 0));
  sim.run(std::chrono::milliseconds(5));
  const auto data = stream_bytes(8 << 10, 5);
  std::memcpy(sim.memory(p.from, kSrc, data.size()).data(), data.data(), data.size());
  ASSERT_TRUE(p.sender().try_send(p.tx, kSrc, static_cast<uint32_t>(data.size())));
  sim.run(std::chrono::milliseconds(5));
  EXPECT_EQ(p.sender().endpoint(p.tx)->state.load(), session::kSocketBroken);
  EXPECT_EQ(p.sender().endpoint(p.tx)->status.load(), session::kSocketClosedStatus);
  // Every endpoint taken: the open error of spec 2.4.2.
  auto& many = sim.sockets({0, 0}, 3);
  int opened = 0;
  while (many.open(sender_options(100 + static_cast<uint32_t>(opened), 1, {0, 1})) >= 0) ++opened;
  EXPECT_EQ(many.open(sender_options(999, 1, {0, 1})), session::kSocketOpenError);
  EXPECT_EQ(opened, session::kSocketEndpoints - 1) << "all but the one already open";
}


// The reservations every chip's router holds (its snapshot), as "CHIP fvc F -> OUTPUT".
std::multiset<std::string> reservations(const FabricSim& sim) {
  std::multiset<std::string> out;
  for (const auto& c : sim.snapshot().chips) {
    for (const auto& r : c.reservations) out.insert(fmt::format("{} fvc {} -> {}", c.chip, r.fvc, r.output));
  }
  return out;
}

chip::CommandRequest write_to(ChipId dst, uint8_t fvc, uint8_t txn) {
  chip::CommandRequest w;
  w.dst_mesh = dst.mesh;
  w.dst_device = dst.device;
  w.fvc = static_cast<int8_t>(fvc);
  w.size = 4096;
  w.txn_id = txn;
  w.src_addr = kSrc;
  w.dst_addr = 0x40000;
  return w;
}

// Spec 2.4.2: an SSocket from M0D0 to M0D2 (route D0 -> D1 -> D2) reserves FVC 1 at each
// router on the way. While it is open, another device's writes on FVC 1 over the shared
// segment D1 -> D2 wait; the same device's writes on FVC 0, and writes on FVC 1 over a route
// that shares no segment, flow; another SSocket wanting D1 -> D2 waits to connect. Closing
// frees every reservation: the waiting writes land, the other socket connects.
TEST(SocketSim, AnSSocketReservesItsFvcAlongItsRouteUntilClosed) {
  test::BootedSim booted("spec_4mesh_3x3.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  const ChipId d0{0, 0}, d1{0, 1}, d2{0, 2}, d3{0, 3}, d4{0, 4};
  Pair p{sim, d0, d2};
  connect_ssocket(p, 4, 64 << 10);
  EXPECT_EQ(p.sender().endpoint(p.tx)->fvc, 1) << "the one reservable FVC of two";
  const auto held = reservations(sim);
  ASSERT_EQ(held.size(), 3u) << fmt::format("{}", fmt::join(held, "; "));
  EXPECT_EQ(held.count("M0D2 fvc 1 -> center"), 1u);

  auto& blocked = sim.worker(d1, 2);
  auto& other_fvc = sim.worker(d1, 3);
  auto& elsewhere = sim.worker(d3, 2);
  ASSERT_TRUE(blocked.try_submit(write_to(d2, 1, 1)));
  ASSERT_TRUE(other_fvc.try_submit(write_to(d2, 0, 1)));
  ASSERT_TRUE(elsewhere.try_submit(write_to(d4, 1, 1)));
  auto second_tx = sender_options(5, 1, d2);
  second_tx.type = session::kSSocket;
  second_tx.fvc = chip::SocketClient::kAutoFvc;
  auto second_rx = receiver_options(5, 1, kEndToEnd, 16 << 10, 0);
  second_rx.type = session::kSSocket;
  second_rx.l1cb_addr = 0xC0000;
  const int t2 = sim.sockets(d1, 4).open(second_tx);
  const int r2 = sim.sockets(d2, 4).open(second_rx);
  ASSERT_GE(t2, 0);
  ASSERT_GE(r2, 0);
  sim.run(std::chrono::milliseconds(50));
  EXPECT_GT(blocked.in_flight(1), 0u) << "another device's FVC-1 writes over the reserved segment wait";
  EXPECT_TRUE(sim.events().empty()) << "and do not time out";
  EXPECT_EQ(other_fvc.in_flight(1), 0u) << "FVC 0 flows";
  EXPECT_EQ(elsewhere.in_flight(1), 0u) << "FVC 1 flows where the socket's route is not";
  EXPECT_EQ(sim.sockets(d1, 4).endpoint(t2)->state.load(), session::kSocketOpening) << "a second SSocket over D1 -> D2 waits";
  {  // This state (sockets open and waiting, reservations held) survives its JSON form field by
     // field, as `ttemu sim --snapshot` writes it and `ttemu snapshot` reads it.
    const node::SystemSnapshot s = sim.snapshot();
    auto at = [&](ChipId c) -> const node::ChipSnapshot& { return s.chips.at(static_cast<size_t>(*sys.node(c))); };
    ASSERT_EQ(at(d0).sockets.size(), 1u);
    EXPECT_EQ(at(d0).sockets[0].type, "ssocket");
    EXPECT_EQ(at(d0).sockets[0].direction, "send");
    EXPECT_EQ(at(d1).sockets.size(), 1u) << "the second sender, opening";
    EXPECT_FALSE(at(d2).reservations.empty());
    EXPECT_EQ(node::read_system_snapshot(nlohmann::json::parse(nlohmann::json(s).dump())), s);
  }

  const auto data = stream_bytes(100 << 10, 9);
  EXPECT_TRUE(stream(p, data) == data) << "the owner's stream flows";
  ASSERT_TRUE(p.sender().try_close(p.tx, 0));
  sim.run(std::chrono::milliseconds(50));
  EXPECT_EQ(blocked.in_flight(1), 0u) << "closed: the waiting writes land";
  EXPECT_EQ(sim.sockets(d1, 4).endpoint(t2)->state.load(), session::kSocketConnected) << "and the second socket connects";
  const auto now_held = reservations(sim);
  EXPECT_EQ(now_held.size(), 2u) << "only the second socket's (D1 -> D2, D2's center): " << fmt::format("{}", fmt::join(now_held, "; "));
  EXPECT_EQ(now_held.count("M0D2 fvc 1 -> center"), 1u);
}

// A sender whose worker is gone without closing (a worker process that died) right after it
// queued a stream, before its chip took the command: the chip takes it, sends it as credits
// come, then closes the socket behind it, as the worker's own close would. The receiver reads
// every byte and then the end; every reservation of the route is freed; so is the sender's
// endpoint, and FVC 1 can be bound again.
TEST(SocketSim, ASenderGoneWithoutClosingDeliversWhatItQueuedAndLeavesNothingBehind) {
  MeshSim mesh;
  FabricSim& sim = mesh.sim;
  const ChipId d0{0, 0}, d2{0, 2};
  Pair p{sim, d0, d2};
  connect_ssocket(p, 4, 16 << 10);
  ASSERT_FALSE(reservations(sim).empty());
  const auto data = stream_bytes(100 << 10, 21);  // more than the receiver has room for: most waits for credits
  queue(p, data);
  sim.worker_gone(d0, kCore);

  std::vector<uint8_t> got, buf(8 << 10);
  for (int round = 0; round < 10000 && p.receiver().endpoint(p.rx)->state.load() != session::kSocketPeerClosed; ++round) {
    sim.run(std::chrono::milliseconds(1));
    const size_t n = p.receiver().recv(p.rx, buf);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(n));
  }
  for (size_t n; (n = p.receiver().recv(p.rx, buf)) > 0;) got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(n));
  EXPECT_EQ(p.receiver().endpoint(p.rx)->state.load(), session::kSocketPeerClosed) << "the sender's close came";
  EXPECT_TRUE(got == data) << got.size() << " of " << data.size() << " bytes";
  sim.run(std::chrono::milliseconds(5));
  EXPECT_TRUE(reservations(sim).empty()) << fmt::format("{}", fmt::join(reservations(sim), "; "));
  EXPECT_EQ(sim.control(d0).sockets[p.tx].state.load(), session::kSocketFree) << "nobody is left to free it: the chip did";
  EXPECT_EQ(sim.control(d0).sockets[p.tx].owner.load(), 0u);
  const int again = sim.sockets(d0, 2).open(ssocket_sender_options(5, d2));
  EXPECT_GE(again, 0) << "FVC 1 can be bound again";
}

// While the control plane holds injection at the chip, a gone worker's socket waits with the
// rest: nothing it queued is sent and its endpoint stays; once injection resumes, its data goes,
// then its close, and the endpoint is freed.
TEST(SocketSim, AWorkerGoneWhileInjectionIsPausedIsClosedWhenItResumes) {
  MeshSim mesh;
  FabricSim& sim = mesh.sim;
  Pair p{sim, {0, 0}, {0, 2}};
  connect(p, 7, 1, receiver_options(7, 1, kEndToEnd, 64 << 10, 0));
  const auto data = stream_bytes(16 << 10, 7);
  sim.pause_injection(p.from, true);
  queue(p, data);
  sim.worker_gone(p.from, kCore);
  sim.run(std::chrono::milliseconds(20));
  EXPECT_EQ(sim.control(p.from).sockets[p.tx].state.load(), session::kSocketConnected) << "held, as everything else";
  EXPECT_EQ(p.receiver().readable(p.rx), 0u);
  sim.pause_injection(p.from, false);
  sim.run(std::chrono::milliseconds(20));
  std::vector<uint8_t> got(data.size() + 1);
  got.resize(p.receiver().recv(p.rx, got));
  EXPECT_TRUE(got == data) << got.size() << " of " << data.size() << " bytes";
  EXPECT_EQ(p.receiver().endpoint(p.rx)->state.load(), session::kSocketPeerClosed);
  EXPECT_EQ(sim.control(p.from).sockets[p.tx].state.load(), session::kSocketFree);
}

// A receiver whose worker is gone without closing, while its sender waits for credits that
// only reads would give: its chip closes it and tells the sender, whose socket breaks with the
// reason (closed) instead of waiting for good; the receiver's endpoint is freed.
TEST(SocketSim, AReceiverGoneWithoutClosingBreaksItsSendersSocket) {
  MeshSim mesh;
  FabricSim& sim = mesh.sim;
  Pair p{sim, {0, 0}, {0, 2}};
  connect(p, 6, 1, receiver_options(6, 1, kEndToEnd, 16 << 10, 0));
  queue(p, stream_bytes(64 << 10, 6));  // four times the receiver's room: the sender runs out of credit
  sim.run(std::chrono::milliseconds(20));
  ASSERT_LT(p.sender().sent(p.tx), 64u << 10) << "the sender waits for credits";
  const auto rx = static_cast<uint16_t>(p.rx);
  sim.worker_gone(p.to, kCore);
  sim.run(std::chrono::milliseconds(20));
  EXPECT_EQ(sim.control(p.to).sockets[rx].state.load(), session::kSocketFree);
  const session::SocketEndpoint* e = p.sender().endpoint(p.tx);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->state.load(), session::kSocketBroken);
  EXPECT_EQ(e->status.load(), session::kSocketClosedStatus);
}

// Both ends of an SSocket gone at once (a whole job killed) while the sender waits for credits:
// the receiver's chip tells the sender's, whose socket breaks, so its close is not stuck behind
// data that can never go; the close frees every reservation, and both endpoints are freed.
TEST(SocketSim, BothEndsGoneWithoutClosingLeaveNothingBehind) {
  MeshSim mesh;
  FabricSim& sim = mesh.sim;
  const ChipId d0{0, 0}, d2{0, 2};
  Pair p{sim, d0, d2};
  connect_ssocket(p, 8, 0);
  queue(p, stream_bytes(64 << 10, 8));
  sim.run(std::chrono::milliseconds(20));
  ASSERT_LT(p.sender().sent(p.tx), 64u << 10) << "the sender waits for credits";
  ASSERT_FALSE(reservations(sim).empty());
  const auto tx = static_cast<uint16_t>(p.tx), rx = static_cast<uint16_t>(p.rx);
  sim.worker_gone(d0, kCore);
  sim.worker_gone(d2, kCore);
  sim.run(std::chrono::milliseconds(50));
  EXPECT_TRUE(reservations(sim).empty()) << fmt::format("{}", fmt::join(reservations(sim), "; "));
  EXPECT_EQ(sim.control(d0).sockets[tx].state.load(), session::kSocketFree);
  EXPECT_EQ(sim.control(d2).sockets[rx].state.load(), session::kSocketFree);
  EXPECT_GE(sim.sockets(d0, 2).open(ssocket_sender_options(9, d2)), 0) << "FVC 1 can be bound again";
}

// The chip of an SSocket's sender dies (M0D0, route M0D0 -> M0D1 -> M0D2): once the control
// plane has routed around it, every router frees what the dead sender held (its close will
// never come), another device's writes on that FVC over the segment flow again, and the
// receiver hears that its stream is lost instead of waiting for the rest for good.
// An SSocket from M0D0 to M0D2, connected, in a system whose live control plane routes around
// a chip that dies, as the launcher does.
class SSocketChipDeath : public ::testing::Test {
 protected:
  void SetUp() override { connect_ssocket(p, 3, 0); }
  MeshSim mesh{with_control_plane()};
  FabricSim& sim = mesh.sim;
  const ChipId d0{0, 0}, d1{0, 1}, d2{0, 2};
  Pair p{sim, d0, d2};
};

TEST_F(SSocketChipDeath, TheSendersChipLeavesNoReservation) {
  ASSERT_EQ(reservations(sim).count("M0D1 fvc 1 -> M0D1P2"), 1u) << fmt::format("{}", fmt::join(reservations(sim), "; "));
  auto& blocked = sim.worker(d1, 2);
  ASSERT_TRUE(blocked.try_submit(write_to(d2, 1, 1)));
  sim.run(std::chrono::milliseconds(20));
  ASSERT_GT(blocked.in_flight(1), 0u) << "held behind the reservation";
  sim.kill(d0);
  sim.run(std::chrono::seconds(1));
  EXPECT_TRUE(reservations(sim).empty()) << fmt::format("{}", fmt::join(reservations(sim), "; "));
  EXPECT_EQ(blocked.in_flight(1), 0u) << "the write landed once the reservation was freed";
  EXPECT_EQ(p.receiver().endpoint(p.rx)->state.load(), session::kSocketBroken);
  EXPECT_EQ(p.receiver().endpoint(p.rx)->status.load(), session::kSocketDataLost);
}

// The chip of an SSocket's receiver dies: the routers on the way free the reservations toward
// it (the sender's close could not get past the dead chip), the sender hears that its stream is
// lost, and a new SSocket over the same segment can reserve it.
TEST_F(SSocketChipDeath, TheReceiversChipLeavesNoReservation) {
  ASSERT_FALSE(reservations(sim).empty());
  sim.kill(d2);
  sim.run(std::chrono::seconds(1));
  EXPECT_TRUE(reservations(sim).empty()) << fmt::format("{}", fmt::join(reservations(sim), "; "));
  EXPECT_EQ(p.sender().endpoint(p.tx)->state.load(), session::kSocketBroken);
  EXPECT_EQ(p.sender().endpoint(p.tx)->status.load(), session::kSocketDataLost);
  ASSERT_TRUE(p.sender().try_close(p.tx, 0));
  sim.run(std::chrono::milliseconds(20));
  p.sender().release(p.tx);
  Pair next{sim, d0, d1};
  connect_ssocket(next, 4, 0);  // fails unless M0D0's reservation toward M0D1 was freed
}

// An SSocket closed before any receiver took it: its close follows its open (same queue, same
// FVC), so it frees every reservation the open made and withdraws the open at the far end.
// (Its close once went straight to the router, ahead of the open still queued, and the open
// then reserved the route for good.)
TEST(SocketSim, AnSSocketClosedBeforeItConnectsLeavesNoReservation) {
  test::BootedSim booted("spec_4mesh_3x3.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  auto& s = sim.sockets({0, 0}, kCore);
  auto o = sender_options(8, 1, {3, 8});
  o.type = session::kSSocket;
  o.fvc = chip::SocketClient::kAutoFvc;
  const int t = s.open(o);
  ASSERT_GE(t, 0);
  ASSERT_TRUE(s.try_close(t, 0));
  sim.run(std::chrono::milliseconds(20));
  EXPECT_EQ(s.endpoint(t)->state.load(), session::kSocketClosed);
  EXPECT_TRUE(reservations(sim).empty()) << fmt::format("{}", fmt::join(reservations(sim), "; "));
  // A receiver opened now finds no stale open to connect with.
  auto& r = sim.sockets({3, 8}, kCore);
  auto ro = receiver_options(8, 1, kEndToEnd, 16 << 10, 0);
  ro.type = session::kSSocket;
  const int rx = r.open(ro);
  sim.run(std::chrono::milliseconds(5));
  EXPECT_EQ(r.endpoint(rx)->state.load(), session::kSocketOpening);
}

// Spec 2.4.2: as many SSockets from a chip as reservable FVCs; then the open error.
TEST(SocketSim, ExhaustingTheReservableFvcsIsAnOpenError) {
  auto sys = load("n300.yaml");
  auto tables = control::compute_tables(sys);
  SimConfig cfg;
  cfg.router.data_fvcs = 3;  // FVCs 1 and 2 are reservable
  FabricSim sim(sys, tables, cfg);
  ASSERT_TRUE(sim.run());
  auto& s = sim.sockets({0, 0}, kCore);
  auto o = sender_options(1, 1, {0, 1});
  o.type = session::kSSocket;
  o.fvc = chip::SocketClient::kAutoFvc;
  const int a = s.open(o);
  o.socket_id = 2;
  const int b = s.open(o);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_NE(s.endpoint(a)->fvc, s.endpoint(b)->fvc);
  o.socket_id = 3;
  EXPECT_EQ(s.open(o), session::kSocketOpenError);
  o.fvc = 1;
  EXPECT_EQ(s.open(o), session::kSocketOpenError) << "FVC 1 is bound";
  auto d = sender_options(4, 1, {0, 1});
  EXPECT_GE(s.open(d), 0) << "a DSocket needs no reservation";
  ASSERT_TRUE(s.try_close(a, 0));
  sim.run(std::chrono::milliseconds(5));
  s.release(a);
  o.fvc = chip::SocketClient::kAutoFvc;
  EXPECT_GE(s.open(o), 0) << "a closed SSocket's FVC is free again";
}


// Spec 2.4.2: a multicast SSocket delivers its sender's data to every subscribed receiver.
// M1D4 streams to the 2x2 block at M0D0 (each of the four opened a receiving socket); the
// socket connects once all four are ready, each gets the whole stream, and the close reaches
// each and frees every reservation.
TEST(SocketSim, AMulticastSSocketReachesEveryReceiver) {
  test::BootedSim booted("spec_4mesh_3x3.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  const ChipId from{1, 4};
  const std::vector<uint16_t> group{0, 1, 3, 4};  // origin M0D0, 1 east, 1 south
  auto tx = sender_options(6, 2, {0, 0});
  tx.type = session::kSSocket;
  tx.fvc = chip::SocketClient::kAutoFvc;
  tx.group_size = static_cast<uint16_t>(group.size());
  std::copy(group.begin(), group.end(), tx.group);
  std::vector<int> rx;
  for (size_t k = 0; k + 1 < group.size(); ++k) {  // the last receiver opens late: the socket waits for it
    auto o = receiver_options(6, 2, kEndToEnd, 16 << 10, 64 << 10, from);
    o.type = session::kSSocket;
    rx.push_back(sim.sockets({0, group[k]}, kCore).open(o));
    ASSERT_GE(rx.back(), 0);
  }
  const int t = sim.sockets(from, kCore).open(tx);
  ASSERT_GE(t, 0);
  sim.run(std::chrono::milliseconds(5));
  EXPECT_EQ(sim.sockets(from, kCore).endpoint(t)->state.load(), session::kSocketOpening) << "one receiver is not ready";
  auto o = receiver_options(6, 2, kEndToEnd, 16 << 10, 64 << 10, from);
  o.type = session::kSSocket;
  rx.push_back(sim.sockets({0, group.back()}, kCore).open(o));
  sim.run(std::chrono::milliseconds(5));
  ASSERT_EQ(sim.sockets(from, kCore).endpoint(t)->state.load(), session::kSocketConnected);

  const auto data = stream_bytes(150 << 10, 6);
  std::memcpy(sim.memory(from, kSrc, data.size()).data(), data.data(), data.size());
  ASSERT_TRUE(sim.sockets(from, kCore).try_send(t, kSrc, static_cast<uint32_t>(data.size())));
  std::vector<std::vector<uint8_t>> got(group.size());
  std::vector<uint8_t> buf(7000);
  for (int round = 0; round < 20000; ++round) {
    bool all = true;
    for (size_t k = 0; k < group.size(); ++k) {
      const size_t n = sim.sockets({0, group[k]}, kCore).recv(rx[k], buf);
      got[k].insert(got[k].end(), buf.begin(), buf.begin() + static_cast<long>(n));
      all = all && got[k].size() == data.size();
    }
    if (all) break;
    sim.run(std::chrono::microseconds(300));
  }
  for (size_t k = 0; k < group.size(); ++k) EXPECT_TRUE(got[k] == data) << "receiver M0D" << group[k];
  EXPECT_FALSE(reservations(sim).empty());
  ASSERT_TRUE(sim.sockets(from, kCore).try_close(t, 0));
  sim.run(std::chrono::milliseconds(20));
  for (size_t k = 0; k < group.size(); ++k) {
    EXPECT_EQ(sim.sockets({0, group[k]}, kCore).endpoint(rx[k])->state.load(), session::kSocketPeerClosed) << "M0D" << group[k];
  }
  EXPECT_TRUE(reservations(sim).empty()) << fmt::format("{}", fmt::join(reservations(sim), "; "));
}


// An endpoint freed while its chip still holds its jobs (a close that timed out in the library,
// behind a send waiting for credits) and claimed again at once: the old claim's send and close
// are dropped, not sent as the new socket's bytes or used to close it. (They once were: the
// new receiver got the old data at the new offsets, and the old close ended the new socket.)
TEST(SocketSim, AnEndpointClaimedAgainDropsTheOldClaimsJobs) {
  test::BootedSim booted("n300.yaml");
  auto& [sys, tables, sim] = booted;
  ASSERT_TRUE(sim.run());
  const ChipId a{0, 0}, b{0, 1};
  Pair old{sim, a, b};
  connect(old, 1, 1, receiver_options(1, 1, kEndToEnd, 8 << 10, 0));  // the reader never reads
  const auto stale = stream_bytes(64 << 10, 1);
  std::memcpy(sim.memory(a, kSrc, stale.size()).data(), stale.data(), stale.size());
  ASSERT_TRUE(old.sender().try_send(old.tx, kSrc, static_cast<uint32_t>(stale.size())));
  sim.run(std::chrono::milliseconds(5));
  ASSERT_LT(old.sender().sent(old.tx), stale.size()) << "the send waits for credits";
  ASSERT_TRUE(old.sender().try_close(old.tx, 0));  // queued behind it
  old.sender().release(old.tx);                    // the owner gave up waiting

  auto o = receiver_options(2, 1, kEndToEnd, 16 << 10, 0);
  o.l1cb_addr = 0xC0000;
  const int rx = sim.sockets(b, 2).open(o);
  Pair next{sim, a, b, -1, rx};
  next.tx = next.sender().open(sender_options(2, 1, b));
  ASSERT_EQ(next.tx, old.tx) << "the same entry, claimed again";
  sim.run(std::chrono::milliseconds(5));
  ASSERT_EQ(next.sender().endpoint(next.tx)->state.load(), session::kSocketConnected);
  const auto data = stream_bytes(40 << 10, 2);
  std::vector<uint8_t> got, buf(4096);
  std::memcpy(sim.memory(a, kSrc + (1 << 20) / 2, data.size()).data(), data.data(), data.size());
  ASSERT_TRUE(next.sender().try_send(next.tx, kSrc + (1 << 20) / 2, static_cast<uint32_t>(data.size())));
  for (int round = 0; round < 2000 && got.size() < data.size(); ++round) {
    sim.run(std::chrono::microseconds(200));
    const size_t n = sim.sockets(b, 2).recv(rx, buf);
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(n));
  }
  EXPECT_TRUE(got == data) << "only the new socket's bytes";
  EXPECT_EQ(next.sender().endpoint(next.tx)->state.load(), session::kSocketConnected) << "not closed by the old close";
  EXPECT_EQ(next.sender().sent(next.tx), data.size());
}

}  // namespace
}  // namespace ttemu::sim
