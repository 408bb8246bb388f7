// Memory protection with keys (session/memory_windows.hpp) in the simulator: the very center
// and command intake of the chip processes, with windows registered through the worker's side
// of the table (chip/window_client.hpp). A refused request must change no byte and must reach
// its issuer as a NACK that says "permission".
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "emulator/chip/address_space.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/sim/fabric_sim.hpp"
#include "tests/test_support.hpp"

namespace ttemu::sim {
namespace {

using routing::ChipId;
using routing::Command;
using session::kRemoteRead;
using session::kRemoteWrite;
using session::MemoryMode;

constexpr uint16_t kCore = 1;          // the issuing worker, on kSrcChip
constexpr uint16_t kOwner = 3;         // the worker that owns the windows, on kDstChip
constexpr uint64_t kData = 0x10000;    // the issuer's data, in its L1
constexpr uint64_t kBack = 0x20000;    // where the issuer's reads land
constexpr uint64_t kWindow = 0x40000;  // the window at the destination (L1)
constexpr uint64_t kWindowSize = 0x4000;
constexpr uint8_t kFill = 0xA5;        // what the destination holds before each request
constexpr ChipId kSrcChip{0, 0}, kDstChip{0, 1};

// How the fabric answered one request: packets acknowledged or read, packets NACKed, and the
// reasons the NACKs' completions gave.
struct Answer {
  uint32_t acked = 0, read = 0, nacked = 0, permission = 0;
  std::set<uint16_t> reasons;
};

class MemoryKeysSim : public ::testing::Test {
 protected:
  void start(MemoryMode mode) {
    SimConfig cfg;
    cfg.memory = mode;
    sim_ = std::make_unique<FabricSim>(sys_, tables_, cfg);
    ASSERT_TRUE(sim_->run());
    for (size_t i = 0; i < 3 * routing::kMaxPacketPayload; ++i) data()[i] = static_cast<uint8_t>(i * 7 + 1);
  }

  uint8_t* data() { return sim_->memory(kSrcChip, kData, 3 * routing::kMaxPacketPayload).data(); }
  std::span<uint8_t> dst(uint64_t addr, size_t n) { return sim_->memory(kDstChip, addr, n); }

  uint64_t window(uint32_t access, uint64_t addr = kWindow, uint64_t size = kWindowSize) {
    const auto w = sim_->register_window(kDstChip, kOwner, addr, size, access);
    EXPECT_EQ(w.status, chip::kStatusOk);
    EXPECT_NE(w.key, 0u);
    return w.key;
  }

  // Runs one request from kSrcChip's worker to kDstChip until it is answered.
  Answer issue(Command command, uint64_t key, uint64_t dst_addr, uint32_t size) {
    auto& w = sim_->worker(kSrcChip, kCore);
    const uint32_t permission_before = sim_->control(kSrcChip).commands.workers[kCore].permission_nacks.load();
    chip::CommandRequest r{.command = command, .txn_id = 4, .dst_mesh = kDstChip.mesh, .dst_device = kDstChip.device,
                           .size = size, .src_addr = kData, .dst_addr = dst_addr, .key = key};
    if (command == Command::kReadRequest) r.return_addr = kBack;
    if (command == Command::kAtomicInc) r.size = 0, r.arg = 1;
    EXPECT_TRUE(w.try_submit(r));
    EXPECT_TRUE(sim_->run());
    EXPECT_EQ(w.in_flight(4), 0u) << "every packet answered";
    Answer a;
    chip::Completion got[16];
    for (size_t n; (n = w.poll(got)) > 0;) {
      for (size_t i = 0; i < n; ++i) {
        if (got[i].command == Command::kWriteAck) a.acked += got[i].packets;
        if (got[i].command == Command::kReadResponse) a.read += got[i].packets;
        if (got[i].command == Command::kNack) a.nacked += got[i].packets, a.reasons.insert(got[i].reason);
      }
    }
    a.permission = sim_->control(kSrcChip).commands.workers[kCore].permission_nacks.load() - permission_before;
    return a;
  }

  // The destination holds kFill in and around the window: a refused request must leave it so.
  void fill_destination() {
    auto d = dst(kWindow - 0x1000, kWindowSize + 0x2000);
    std::memset(d.data(), kFill, d.size());
  }
  bool destination_untouched() {
    for (uint8_t b : dst(kWindow - 0x1000, kWindowSize + 0x2000)) {
      if (b != kFill) return false;
    }
    return true;
  }

  // A NACK for permission, counted as such, and nothing written.
  void expect_refused(const Answer& a, uint32_t packets = 1) {
    EXPECT_EQ(a.acked, 0u);
    EXPECT_EQ(a.read, 0u);
    EXPECT_EQ(a.nacked, packets);
    EXPECT_EQ(a.permission, packets);
    EXPECT_EQ(a.reasons, std::set<uint16_t>{routing::kNackPermission});
    EXPECT_TRUE(destination_untouched()) << "a refused request changes no byte";
  }

  control::System sys_ = test::load("n300.yaml");
  control::TableSet tables_ = control::compute_tables(sys_);
  std::unique_ptr<FabricSim> sim_;
};

TEST_F(MemoryKeysSim, AKeyedWriteInsideAWritableWindowLandsAtItsOffset) {
  start(MemoryMode::kProtected);
  const uint64_t key = window(kRemoteWrite);
  fill_destination();
  // Two packets (8 KiB), at offset 0x1000 of the window.
  const Answer a = issue(Command::kWrite, key, 0x1000, 2 * routing::kMaxPacketPayload);
  EXPECT_EQ(a.acked, 2u);
  EXPECT_EQ(a.nacked, 0u);
  EXPECT_EQ(std::memcmp(dst(kWindow + 0x1000, 8192).data(), data(), 8192), 0) << "landed at window + offset";
  EXPECT_EQ(dst(kWindow + 0x0FFF, 1)[0], kFill) << "nothing before it";
  EXPECT_EQ(dst(kWindow + 0x3000, 1)[0], kFill) << "nothing after it";
  EXPECT_EQ(dst(0x1000, 1)[0], 0) << "the offset is not an address";
}

TEST_F(MemoryKeysSim, AWrongKeyIsNackedForPermissionAndChangesNoByte) {
  start(MemoryMode::kOpen);
  const uint64_t key = window(kRemoteRead | kRemoteWrite);
  fill_destination();
  // The same entry (low bits), other random bits; and an entry that holds no window.
  expect_refused(issue(Command::kWrite, key ^ (uint64_t{1} << 40), 0, 64));
  expect_refused(issue(Command::kWrite, (key + 1) | 1, 0, 64));
  expect_refused(issue(Command::kAtomicInc, key ^ (uint64_t{1} << 40), 0, 0));
}

TEST_F(MemoryKeysSim, AWriteThatLeavesTheWindowIsNackedAndChangesNoByte) {
  start(MemoryMode::kOpen);
  const uint64_t key = window(kRemoteWrite);
  fill_destination();
  expect_refused(issue(Command::kWrite, key, kWindowSize, 64));          // wholly past the end
  expect_refused(issue(Command::kWrite, key, kWindowSize - 100, 4096));  // starts inside, runs past the end
  // A write of several packets whose first packets lie inside: every packet answers for the
  // whole write, so none lands.
  expect_refused(issue(Command::kWrite, key, kWindowSize - 3 * 4096 - 100, 4 * 4096), 4);
  expect_refused(issue(Command::kWrite, key, ~uint64_t{0} - 10, 64));    // an offset that would wrap
  expect_refused(issue(Command::kAtomicInc, key, kWindowSize - 2, 0));   // the counter's 4 bytes cross the end
  // The last byte of the window is still inside.
  const Answer a = issue(Command::kWrite, key, kWindowSize - 1, 1);
  EXPECT_EQ(a.acked, 1u);
  EXPECT_EQ(dst(kWindow + kWindowSize - 1, 1)[0], data()[0]);
}

TEST_F(MemoryKeysSim, AWriteOrAtomicToAReadOnlyWindowIsNackedAndChangesNoByte) {
  start(MemoryMode::kOpen);
  const uint64_t key = window(kRemoteRead);
  fill_destination();
  expect_refused(issue(Command::kWrite, key, 0, 64));
  expect_refused(issue(Command::kAtomicInc, key, 0, 0));
  expect_refused(issue(Command::kAtomicReadInc, key, 0, 0));
  // Reading it is allowed.
  const Answer a = issue(Command::kReadRequest, key, 0x10, 64);
  EXPECT_EQ(a.read, 1u);
  EXPECT_EQ(sim_->memory(kSrcChip, kBack, 1)[0], kFill);
}

TEST_F(MemoryKeysSim, AReadOfAWriteOnlyWindowIsNackedAndReturnsNothing) {
  start(MemoryMode::kOpen);
  const uint64_t key = window(kRemoteWrite);
  fill_destination();
  auto back = sim_->memory(kSrcChip, kBack, 64);
  std::memset(back.data(), 0x11, back.size());
  expect_refused(issue(Command::kReadRequest, key, 0, 64));
  for (uint8_t b : back) ASSERT_EQ(b, 0x11) << "nothing came back";
  // An atomic needs the write right only.
  const Answer a = issue(Command::kAtomicInc, key, 0x100, 0);
  EXPECT_EQ(a.acked, 1u);
  EXPECT_EQ(dst(kWindow + 0x100, 1)[0], static_cast<uint8_t>(kFill + 1));
}

TEST_F(MemoryKeysSim, ProtectedModeRefusesUnkeyedRequestsAndLetsKeyedOnesThrough) {
  start(MemoryMode::kProtected);
  const uint64_t key = window(kRemoteRead | kRemoteWrite);
  fill_destination();
  expect_refused(issue(Command::kWrite, 0, kWindow, 64));  // the window's own address, but no key
  expect_refused(issue(Command::kReadRequest, 0, kWindow, 64));
  expect_refused(issue(Command::kAtomicInc, 0, kWindow, 0));
  EXPECT_EQ(sim_->control(kDstChip).windows.refused.load(), 3u) << "the center counts what it refused";
  EXPECT_EQ(issue(Command::kWrite, key, 0, 64).acked, 1u);
  EXPECT_EQ(std::memcmp(dst(kWindow, 64).data(), data(), 64), 0);
  EXPECT_EQ(issue(Command::kReadRequest, key, 0, 64).read, 1u);
  EXPECT_EQ(std::memcmp(sim_->memory(kSrcChip, kBack, 64).data(), data(), 64), 0);
}

TEST_F(MemoryKeysSim, OpenModeLetsUnkeyedRequestsThroughAnywhere) {
  start(MemoryMode::kOpen);
  window(kRemoteRead);  // a window elsewhere protects nothing from unkeyed requests
  fill_destination();
  EXPECT_EQ(issue(Command::kWrite, 0, kWindow, 64).acked, 1u);
  EXPECT_EQ(std::memcmp(dst(kWindow, 64).data(), data(), 64), 0);
  EXPECT_EQ(issue(Command::kReadRequest, 0, kWindow, 64).read, 1u);
  EXPECT_EQ(issue(Command::kAtomicInc, 0, kWindow + 0x100, 0).acked, 1u);
  EXPECT_EQ(sim_->control(kDstChip).windows.refused.load(), 0u);
}

TEST_F(MemoryKeysSim, ADeregisteredKeyIsRefused) {
  start(MemoryMode::kProtected);
  const uint64_t key = window(kRemoteWrite);
  EXPECT_EQ(issue(Command::kWrite, key, 0, 64).acked, 1u);
  EXPECT_EQ(sim_->deregister_window(kDstChip, kOwner + 1, key), chip::kStatusBadArgument) << "only its owner's core";
  EXPECT_EQ(sim_->deregister_window(kDstChip, kOwner, key), chip::kStatusOk);
  EXPECT_EQ(sim_->deregister_window(kDstChip, kOwner, key), chip::kStatusBadArgument) << "gone";
  fill_destination();
  expect_refused(issue(Command::kWrite, key, 0, 64));
  // The entry comes back under another key; the old one stays refused.
  std::set<uint64_t> keys;
  for (int i = 0; i < 8; ++i) keys.insert(window(kRemoteWrite));
  EXPECT_FALSE(keys.contains(key));
  expect_refused(issue(Command::kWrite, key, 0, 64));
}

TEST_F(MemoryKeysSim, RegistrationChecksItsArgumentsAndTheTableHasRoomFor1024) {
  start(MemoryMode::kOpen);
  const auto reg = [&](uint64_t addr, uint64_t size, uint32_t access) {
    return sim_->register_window(kDstChip, kOwner, addr, size, access).status;
  };
  EXPECT_EQ(reg(0, 64, 0), chip::kStatusBadArgument);
  EXPECT_EQ(reg(0, 64, 4), chip::kStatusBadArgument);
  EXPECT_EQ(reg(0, 0, kRemoteRead), chip::kStatusBadSize);
  const uint64_t l1 = SimConfig{}.l1_bytes, dram = SimConfig{}.dram_bytes;
  EXPECT_EQ(reg(l1 - 32, 64, kRemoteRead), chip::kStatusBadAddress);
  EXPECT_EQ(reg(chip::kDramBit | (dram - 32), 64, kRemoteRead), chip::kStatusBadAddress);
  EXPECT_EQ(reg(chip::kDramBit | (dram - 64), 64, kRemoteRead), chip::kStatusOk) << "the last 64 bytes of DRAM";
  std::set<uint64_t> keys, entries;
  for (uint32_t i = 1; i < session::kMemoryWindows; ++i) {
    const auto w = sim_->register_window(kDstChip, kOwner, 0, 64, kRemoteRead);
    ASSERT_EQ(w.status, chip::kStatusOk) << i;
    keys.insert(w.key);
    entries.insert(w.key & session::kWindowIndexMask);
  }
  EXPECT_EQ(keys.size(), session::kMemoryWindows - 1) << "every key differs";
  EXPECT_EQ(entries.size(), session::kMemoryWindows - 1) << "each its own entry";
  EXPECT_EQ(reg(0, 64, kRemoteRead), chip::kStatusNoWindow) << "full";
  EXPECT_EQ(sim_->deregister_window(kDstChip, kOwner, *keys.begin()), chip::kStatusOk);
  EXPECT_EQ(reg(0, 64, kRemoteRead), chip::kStatusOk) << "room again";
}

TEST_F(MemoryKeysSim, AKeyedWriteInDramLandsAndAnUnkeyedMulticastIsRefusedInProtectedMode) {
  start(MemoryMode::kProtected);
  const uint64_t key = window(kRemoteWrite, chip::kDramBit | 0x8000, 0x1000);
  EXPECT_EQ(issue(Command::kWrite, key, 0x10, 64).acked, 1u);
  EXPECT_EQ(std::memcmp(dst(chip::kDramBit | 0x8010, 64).data(), data(), 64), 0);
  fill_destination();
  auto& w = sim_->worker(kSrcChip, kCore);
  const chip::CommandRequest m{.command = Command::kMcastWrite, .txn_id = 5, .dst_mesh = kDstChip.mesh,
                               .dst_device = kDstChip.device, .size = 64, .src_addr = kData, .dst_addr = kWindow};
  ASSERT_TRUE(w.try_submit(m));
  ASSERT_TRUE(sim_->run());
  EXPECT_EQ(w.in_flight(5), 0u);
  EXPECT_EQ(w.nacked(5), 1u);
  EXPECT_TRUE(destination_untouched());
}

}  // namespace
}  // namespace ttemu::sim
