// A worker program against a live system: run as `ttemu launch FILE -- ttemu_fabric_client`
// (it finds the system through TTEMU_JOB). Exercises the read/write API of spec section 3
// across every chip and checks what lands, through the fabric and in chip memory directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/common/futex.hpp"
#include "libfabric_tt/tt_fabric.h"
#include "tests/eventually.hpp"

namespace {

struct Handle {
  tt_fabric* f = nullptr;
  ~Handle() { tt_fabric_close(f); }
};

constexpr uint16_t kCore = 2;

// Opens a core of a chip of the running system into h; a failure names the reason.
void open_on(Handle& h, tt_fabric_device d, uint16_t core = kCore) {
  char err[256] = {};
  h.f = tt_fabric_open(nullptr, d.mesh, d.device, core, err, sizeof err);
  if (!h.f) ADD_FAILURE() << "M" << d.mesh << "D" << d.device << ": " << err;
}

class Fabric : public ::testing::Test {
 protected:
  void SetUp() override {
    open_on(probe_, {0, 0});
    ASSERT_NE(probe_.f, nullptr);
    devices_.resize(static_cast<size_t>(tt_fabric_devices(probe_.f, nullptr, 0)));
    tt_fabric_devices(probe_.f, devices_.data(), static_cast<int>(devices_.size()));
    for (const auto& d : devices_) {
      auto h = std::make_unique<Handle>();
      open_on(*h, d);
      ASSERT_NE(h->f, nullptr);
      handles_.push_back(std::move(h));
    }
  }
  tt_fabric* at(size_t i) { return handles_[i]->f; }
  uint8_t* mem(size_t i, uint64_t addr, size_t n) { return static_cast<uint8_t*>(tt_fabric_memory(at(i), addr, n)); }

  Handle probe_;
  std::vector<tt_fabric_device> devices_;
  std::vector<std::unique_ptr<Handle>> handles_;
};

uint8_t byte(size_t s, size_t d, size_t i) { return static_cast<uint8_t>(s * 37 + d * 11 + i); }

constexpr uint64_t kSrc = 1 << 20, kDst = 2 << 20, kBack = 3 << 20, kCounter = 4 << 20, kStatus = 5 << 20;
constexpr uint32_t kBytes = 512;

TEST_F(Fabric, AllToAllWritesThenReadsBackBitExact) {
  const size_t n = devices_.size();
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d)
      for (size_t i = 0; i < kBytes; ++i) mem(s, kSrc + d * kBytes, kBytes)[i] = byte(s, d, i);
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) {
      if (s == d) continue;
      tt_fabric_status st;
      ASSERT_EQ(fabric_async_write(at(s), 0, kSrc + d * kBytes, devices_[d], kDst + s * kBytes, kBytes, -1, 3, &st), TT_FABRIC_OK);
    }
  }
  for (size_t s = 0; s < n; ++s) ASSERT_EQ(fabric_async_write_barrier(at(s), 3), TT_FABRIC_OK);
  // Once the barrier returns, everything is committed: look at the destinations' memory.
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d)
      if (s != d) ASSERT_EQ(std::memcmp(mem(d, kDst + s * kBytes, kBytes), mem(s, kSrc + d * kBytes, kBytes), kBytes), 0) << s << "->" << d;
  // Read it back through the fabric, on another transaction id.
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d)
      if (s != d) ASSERT_EQ(fabric_async_read(at(s), 0, devices_[d], kDst + s * kBytes, kBack + d * kBytes, kBytes, -1, 4, nullptr), TT_FABRIC_OK);
  for (size_t s = 0; s < n; ++s) ASSERT_EQ(fabric_async_read_barrier(at(s), 4), TT_FABRIC_OK);
  for (size_t s = 0; s < n; ++s)
    for (size_t d = 0; d < n; ++d)
      if (s != d) ASSERT_EQ(std::memcmp(mem(s, kBack + d * kBytes, kBytes), mem(s, kSrc + d * kBytes, kBytes), kBytes), 0);
  for (size_t s = 0; s < n; ++s) EXPECT_EQ(tt_fabric_nacks(at(s)), 0u);
}

TEST_F(Fabric, AtomicsCountEveryIncrementOnce) {
  const size_t n = devices_.size();
  const size_t target = n - 1;
  std::memset(mem(target, kCounter, 8), 0, 8);
  for (size_t s = 0; s < n; ++s) {
    ASSERT_EQ(fabric_async_atomic_inc(at(s), 0, devices_[target], kCounter, 2, 31, -1, 5, nullptr), TT_FABRIC_OK);
    ASSERT_EQ(fabric_async_atomic_read_inc(at(s), 0, kBack, devices_[target], kCounter + 4, 1, 31, -1, 5, nullptr), TT_FABRIC_OK);
  }
  for (size_t s = 0; s < n; ++s) ASSERT_EQ(fabric_async_write_barrier(at(s), 5), TT_FABRIC_OK);
  uint32_t sum, tickets;
  std::memcpy(&sum, mem(target, kCounter, 4), 4);
  std::memcpy(&tickets, mem(target, kCounter + 4, 4), 4);
  EXPECT_EQ(sum, 2 * n);
  EXPECT_EQ(tickets, n);
  // Read-and-increment hands every worker a different ticket (spec 2.2.2.2.1).
  std::set<uint32_t> seen;
  for (size_t s = 0; s < n; ++s) {
    uint32_t v;
    std::memcpy(&v, mem(s, kBack, 4), 4);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), n);
  EXPECT_EQ(*seen.rbegin(), n - 1);
}

TEST_F(Fabric, MulticastReachesExactlyTheDevicesInRange) {
  const size_t n = devices_.size();
  for (size_t d = 0; d < n; ++d) std::memset(mem(d, kDst, 64), 0, 64);
  std::memset(mem(0, kSrc, 64), 0x5c, 64);
  const size_t origin = n / 2;
  ASSERT_EQ(fabric_async_write_multicast(at(0), 0, devices_[origin], 1, 1, 1, 0, kSrc, kDst, 64, -1, 6, 0, nullptr), TT_FABRIC_OK);
  ASSERT_EQ(fabric_async_write_barrier(at(0), 6), TT_FABRIC_OK);
  int orow, ocol;
  ASSERT_EQ(tt_fabric_device_position(at(0), devices_[origin], &orow, &ocol), TT_FABRIC_OK);
  for (size_t d = 0; d < n; ++d) {
    int row, col;
    tt_fabric_device_position(at(0), devices_[d], &row, &col);
    // e=1, w=1, n=1, s=0: one column either side, the origin's row and the row above.
    const bool in = devices_[d].mesh == devices_[origin].mesh && col >= ocol - 1 && col <= ocol + 1 &&
                    row >= orow - 1 && row <= orow;
    EXPECT_EQ(mem(d, kDst, 1)[0] == 0x5c, in) << "device " << d << " at " << row << "," << col;
  }
}

TEST_F(Fabric, InvalidArgumentsAreRefusedAndWriteNothing) {
  const size_t n = devices_.size();
  std::memset(mem(n - 1, kDst, 64), 0x11, 64);
  tt_fabric_status st;
  EXPECT_EQ(fabric_async_write(at(0), 0, kSrc, {999, 0}, kDst, 64, -1, 0, &st), TT_FABRIC_EDEVICE);
  EXPECT_EQ(st.status, TT_FABRIC_EDEVICE);
  EXPECT_EQ(fabric_async_write(at(0), 0, kSrc, devices_[n - 1], uint64_t{1} << 40, 64, -1, 0, &st), TT_FABRIC_EADDR);
  EXPECT_EQ(fabric_async_write(at(0), 0, kSrc, devices_[n - 1], TT_FABRIC_DRAM | (uint64_t{1} << 40), 64, -1, 0, &st), TT_FABRIC_EADDR);
  EXPECT_EQ(fabric_async_write(at(0), 0, kSrc, devices_[n - 1], kDst, 0, -1, 0, &st), TT_FABRIC_ESIZE);
  EXPECT_EQ(fabric_async_write(at(0), 0, kSrc, devices_[n - 1], kDst, TT_FABRIC_MAX_SIZE + 1, -1, 0, &st), TT_FABRIC_ESIZE);
  EXPECT_EQ(fabric_async_write(at(0), 0, kSrc, devices_[n - 1], kDst, 64, -1, 16, &st), TT_FABRIC_ETXN);
  EXPECT_EQ(fabric_async_write(at(0), 0, kSrc, devices_[n - 1], kDst, 64, 7, 0, &st), TT_FABRIC_EFVC);
  EXPECT_EQ(fabric_async_write(at(0), 200, kSrc, devices_[n - 1], kDst, 64, -1, 0, &st), TT_FABRIC_EPLANE);
  EXPECT_EQ(fabric_async_write(nullptr, 0, kSrc, devices_[n - 1], kDst, 64, -1, 0, &st), TT_FABRIC_EARG);
  EXPECT_EQ(fabric_async_write_barrier(at(0), 0), TT_FABRIC_OK) << "nothing is in flight";
  for (int i = 0; i < 64; ++i) ASSERT_EQ(mem(n - 1, kDst, 64)[i], 0x11);
}

TEST_F(Fabric, AutomaticFvcIsReportedInTheStatus) {
  auto* st = static_cast<tt_fabric_status*>(tt_fabric_memory(at(0), kStatus, sizeof(tt_fabric_status)));
  st->fvc = -1;
  ASSERT_EQ(fabric_async_write(at(0), 0, kSrc, devices_.back(), kDst, 64, -1, 7, st), TT_FABRIC_OK);
  ASSERT_EQ(fabric_async_write_barrier(at(0), 7), TT_FABRIC_OK);
  EXPECT_EQ(st->status, TT_FABRIC_OK);
  EXPECT_GE(st->fvc, 0);
  EXPECT_LT(st->fvc, tt_fabric_data_fvcs(at(0)));
}

// Used by the TTL test: the system runs with a routing loop toward M0D15.
TEST(Loop, AWriteIntoARoutingLoopIsNackedNotLanded) {
  Handle src, dst;
  open_on(src, {0, 0}), open_on(dst, {0, 15});
  ASSERT_TRUE(src.f && dst.f);
  std::memset(tt_fabric_memory(dst.f, kDst, 64), 0, 64);
  std::memset(tt_fabric_memory(src.f, kSrc, 64), 0x77, 64);
  ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 15}, kDst, 64, 0, 1, nullptr), TT_FABRIC_OK);
  ASSERT_EQ(fabric_async_write_barrier(src.f, 1), TT_FABRIC_OK) << "the NACK completes the transaction";
  EXPECT_EQ(tt_fabric_nacks(src.f), 1u);
  EXPECT_EQ(static_cast<uint8_t*>(tt_fabric_memory(dst.f, kDst, 1))[0], 0);
}

// Used by the dead-chip test on a 4x4 mesh whose M0D5 was killed and which the control plane
// has routed around: a write to it is NACKed by M0D4's router at once, round after round (the
// system's router timeout is far longer than the barrier's), and a write whose route ran
// through it (M0D4 -> M0D5 -> M0D6) now goes around it and lands.
TEST(DeadChip, WritesToADeadChipAreNackedAtOnceAndWritesPastItGoAround) {
  Handle src, past;
  open_on(src, {0, 4}), open_on(past, {0, 6});
  ASSERT_TRUE(src.f && past.f);
  auto* d = static_cast<uint8_t*>(tt_fabric_memory(past.f, kDst, 64));
  std::memset(d, 0, 64);
  std::memset(tt_fabric_memory(src.f, kSrc, 64), 0x5d, 64);
  for (uint64_t round = 1; round <= 3; ++round) {
    ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 5}, kDst, 64, 0, 1, nullptr), TT_FABRIC_OK);
    ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 6}, kDst, 64, 0, 1, nullptr), TT_FABRIC_OK);
    ASSERT_EQ(fabric_async_write_barrier(src.f, 1), TT_FABRIC_OK) << "round " << round << ": the NACK completes it";
    EXPECT_EQ(tt_fabric_nacks(src.f), round);
  }
  EXPECT_EQ(d[0], 0x5d) << "the write past the dead chip went around it";
}

// In retry mode a transaction's NACKs are counted from before its first write. The source's own
// router NACKs a write to the dead chip at once, often before the write's call has returned
// (the chip, woken by the write, runs first on the writer's CPU); counted from after that
// call, the first write's NACK went unseen and the barrier called the transaction done
// (ttemu campaign's swarm found it as a write that was neither landed nor reported).
TEST(DeadChip, InRetryModeAWriteNackedBeforeItsCallReturnsIsStillReported) {
  Handle src;
  open_on(src, {0, 4}, 3);
  ASSERT_TRUE(src.f);
  ASSERT_EQ(tt_fabric_set_retry(src.f, 1, 1), TT_FABRIC_OK);
  std::memset(tt_fabric_memory(src.f, kSrc, 64), 0x5e, 64);
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 5}, kDst, 64, 0, 1, nullptr), TT_FABRIC_OK);
    ASSERT_EQ(fabric_async_write_barrier(src.f, 1), TT_FABRIC_ENACKED) << "transaction " << i;
  }
}

// Used on an n300 whose two links are out of service, so that the tables leave M0D1 with no
// route: the system test loads the same tables again once the write was NACKed, and brings a
// link back once it was NACKed again. Each round of retry mode waits for new tables: the
// second, after a reload that still left no route, waits for the one after the link's return,
// and the write lands (a later round used to give up at once, finding no tables newer than
// those its writes had met).
TEST(Retry, ALaterRoundWaitsForTheTablesThatRouteAgain) {
  Handle src, dst;
  open_on(src, {0, 0}, 4), open_on(dst, {0, 1}, 4);
  ASSERT_TRUE(src.f && dst.f);
  auto* d = static_cast<uint8_t*>(tt_fabric_memory(dst.f, kDst, 64));
  std::memset(d, 0, 64);
  std::memset(tt_fabric_memory(src.f, kSrc, 64), 0x6a, 64);
  ASSERT_EQ(tt_fabric_set_retry(src.f, 3, 60000), TT_FABRIC_OK);
  ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 1}, kDst, 64, 0, 1, nullptr), TT_FABRIC_OK);
  ASSERT_EQ(fabric_async_write_barrier(src.f, 1), TT_FABRIC_OK);
  EXPECT_EQ(tt_fabric_retried(src.f), 2u) << "written again after each reload";
  EXPECT_EQ(d[0], 0x6a);
  EXPECT_EQ(d[63], 0x6a);
}

// Used by the FVC-independence test on an n300 whose M0D1 has stopped consuming FVC 0 (router
// timeout a minute): writes on FVC 0 fill the buffers on the way and then the command buffer;
// writes on FVC 1 submitted after them still land at once (spec 2.3.1, 5.3).
TEST(Independence, AFullFvcAtTheSourceDoesNotHoldBackAnother) {
  Handle src, dst;
  open_on(src, {0, 0}), open_on(dst, {0, 1});
  ASSERT_TRUE(src.f && dst.f);
  auto* d = static_cast<uint8_t*>(tt_fabric_memory(dst.f, kDst, 1 << 20));
  std::memset(d, 0, 1 << 20);
  std::memset(tt_fabric_memory(src.f, kSrc, 4096), 0x0f, 4096);
  for (int i = 0; i < 64; ++i) {  // far more than the routing buffers between the two hold
    ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 1}, kDst + 4096 * static_cast<uint64_t>(i), 4096, 0, 1, nullptr), TT_FABRIC_OK);
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 1}, kDst + (512 << 10) + 64 * static_cast<uint64_t>(i), 64, 1, 2, nullptr), TT_FABRIC_OK);
  }
  ASSERT_EQ(fabric_async_write_barrier(src.f, 2), TT_FABRIC_OK) << "FVC 1 waited behind the full FVC 0";
  EXPECT_EQ(d[(512 << 10) + 64 * 3], 0x0f);
  EXPECT_EQ(d[0], 0) << "FVC 0 is stalled at M0D1";
  EXPECT_EQ(tt_fabric_nacks(src.f), 0u);
}

// Used with the FVC-independence test (n300, M0D1 not consuming FVC 0): a non-blocking worker
// is told to try again when the command buffer is full, and never waits.
TEST(NonBlocking, AFullCommandBufferSaysTryAgainAndSendsNothing) {
  Handle src;
  open_on(src, {0, 0}, 5);
  ASSERT_TRUE(src.f);
  ASSERT_EQ(tt_fabric_set_nonblocking(src.f, 1), TT_FABRIC_OK);
  std::memset(tt_fabric_memory(src.f, kSrc, 64), 0x11, 64);
  int accepted = 0, rc = TT_FABRIC_OK;
  tt_fabric_status st{};
  for (int i = 0; i < 10000 && rc == TT_FABRIC_OK; ++i) {  // FVC 0 is stalled at M0D1
    rc = fabric_async_write(src.f, 0, kSrc, {0, 1}, kDst, 64, 0, 3, &st);
    accepted += rc == TT_FABRIC_OK;
  }
  ASSERT_EQ(rc, TT_FABRIC_EAGAIN) << tt_fabric_strerror(rc) << " (a blocking submit would time out instead)";
  EXPECT_EQ(st.status, TT_FABRIC_EAGAIN);
  EXPECT_GT(accepted, 0);
  // The command buffer's 256 slots, and the two routing buffers on the way (M0D0's center's and
  // M0D1's port's, --rb-packets 128 by default); the test before this one filled part of them.
  EXPECT_LE(accepted, 256 + 2 * 128) << "the command buffer and the buffers on the way";
  EXPECT_EQ(tt_fabric_pending(src.f, 3), accepted) << "a refused call counts nothing";
  tt_fabric_completion c[4];
  EXPECT_EQ(tt_fabric_poll_completions(src.f, c, 4), 0) << "nothing answered on a stalled FVC";
}

// Completions polled from the worker's queue, as libfabric's CQs are: M0D1 writes and reads
// M0D0 on FVC 1 (unaffected by the stall) and reads back what answered.
TEST(NonBlocking, CompletionsArePolledWithTheirTransactionAndKind) {
  Handle src;
  open_on(src, {0, 1}, 6);
  ASSERT_TRUE(src.f);
  ASSERT_EQ(tt_fabric_set_nonblocking(src.f, 1), TT_FABRIC_OK);
  std::memset(tt_fabric_memory(src.f, kSrc, 8 * 4096), 0x22, 8 * 4096);
  ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 0}, kDst, 8 * 4096, 1, 3, nullptr), TT_FABRIC_OK);  // 8 packets
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fabric_async_read(src.f, 0, {0, 0}, kDst, kBack + 64 * static_cast<uint64_t>(i), 64, 1, 4, nullptr), TT_FABRIC_OK);
  }
  EXPECT_EQ(fabric_async_write_barrier(src.f, 3), TT_FABRIC_OK);
  EXPECT_EQ(fabric_async_read_barrier(src.f, 4), TT_FABRIC_OK);
  EXPECT_EQ(tt_fabric_pending(src.f, 3), 0);
  uint32_t acked = 0, read = 0;
  tt_fabric_completion c[32];
  const int n = tt_fabric_poll_completions(src.f, c, 32);
  ASSERT_GT(n, 0);
  for (int i = 0; i < n; ++i) {
    if (c[i].transaction_id == 3 && c[i].kind == TT_FABRIC_ACKED) acked += c[i].packets;
    else if (c[i].transaction_id == 4 && c[i].kind == TT_FABRIC_READ_DONE) read += c[i].packets;
    else ADD_FAILURE() << "unexpected completion: txn " << int{c[i].transaction_id} << " kind " << int{c[i].kind};
  }
  EXPECT_EQ(acked, 8u);
  EXPECT_EQ(read, 2u);
  EXPECT_EQ(tt_fabric_poll_completions(src.f, c, 32), 0) << "each completion is polled once";
  EXPECT_EQ(tt_fabric_completions_lost(src.f), 0u);
}

// Used by the timeout test: M0D3's center has stopped consuming FVC 0.
TEST(Stall, AStalledFvcTimesOutWhileAnotherFlows) {
  Handle src, dst;
  open_on(src, {0, 0}), open_on(dst, {0, 3});
  ASSERT_TRUE(src.f && dst.f);
  auto* d = static_cast<uint8_t*>(tt_fabric_memory(dst.f, kDst, 8192));
  std::memset(d, 0, 8192);
  std::memset(tt_fabric_memory(src.f, kSrc, 64), 0x42, 64);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 3}, kDst + 64 * i, 64, 0, 1, nullptr), TT_FABRIC_OK);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(fabric_async_write(src.f, 0, kSrc, {0, 3}, kDst + 4096 + 64 * i, 64, 1, 2, nullptr), TT_FABRIC_OK);
  ASSERT_EQ(fabric_async_write_barrier(src.f, 2), TT_FABRIC_OK);
  EXPECT_EQ(d[4096 + 64 * 3], 0x42) << "FVC 1 flows";
  EXPECT_EQ(fabric_async_write_barrier(src.f, 1), TT_FABRIC_OK) << "the NACKs complete the stalled writes";
  EXPECT_EQ(tt_fabric_nacks(src.f), 4u);
  EXPECT_EQ(d[0], 0) << "nothing committed on the stalled FVC";
}

// --- the doorbell -------------------------------------------------------------------------
//
// A worker marks its command ready, then rings the chip's doorbell only if the router has said
// it sleeps (router_asleep); the router says so, then looks once more before it blocks. A lost
// wake-up leaves a command untaken while the router sleeps. In a running system three things
// hide one, turning it into latency: the chip wakes by itself a millisecond after traffic
// (delayed acknowledgements and credit returns), another worker's traffic wakes it, and the
// client library's waits re-poll every 100 ms. So the system test runs the chips with no
// delays, and this test issues its first commands one at a time (no other traffic), some once
// both chips are asleep with nothing in flight, and waits on the command buffer's futex words
// itself, saying so as the library does, with no re-poll: a command must be taken, and its
// waiter woken, within a limit, or the test fails.

namespace chip = ttemu::chip;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using ttemu::test::eventually;

// A chip's control block, mapped as the control plane maps it: the command buffer the workers
// share with the router, and the link counters.
class ControlBlock {
 public:
  explicit ControlBlock(tt_fabric_device d) {
    const char* job = std::getenv("TTEMU_JOB");
    if (!job) throw std::runtime_error("TTEMU_JOB is not set: run this under ttemu launch");
    const auto id = chip::JobId::parse(job);
    if (!id) throw std::runtime_error(std::string("TTEMU_JOB is not a job id: ") + job);
    segment_ = chip::Segment::open(chip::segment_name(*id, {d.mesh, d.device}, chip::SegmentKind::kControl));
  }
  chip::ChipControl* operator->() const { return segment_.as<chip::ChipControl>(); }

 private:
  chip::Segment segment_;
};

// Sleeps on a futex word until done() holds, counted in `sleepers` first as workers are (the
// router wakes only sleepers that said so). True only if done() held before `limit` ran out:
// nothing here re-polls, so a waker that forgets the futex leaves this asleep for the whole
// limit, and that is a failure, not a delay.
template <class Done>
bool woken_within(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, Done done, milliseconds limit) {
  const auto deadline = steady_clock::now() + limit;
  while (!done()) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) return false;
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = word.load(std::memory_order_seq_cst);
    if (!done()) ttemu::futex_wait(word, seen, left);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
  return steady_clock::now() < deadline;
}

// Both chips of a two-chip system asleep, with every datagram either has sent received by the
// other: with no delayed acknowledgements or credits, nothing is then due to wake either one.
bool quiet(const ControlBlock& a, const ControlBlock& b) {
  auto sent_received = [](const ControlBlock& c) {
    uint64_t tx = 0, rx = 0;
    for (const auto& port : c->ports) {
      tx += port.counters.datagrams_tx.load();
      rx += port.counters.datagrams_rx.load();
    }
    return std::pair(tx, rx);
  };
  if (!a->commands.router_asleep.load() || !b->commands.router_asleep.load()) return false;
  const auto [a_tx, a_rx] = sent_received(a);
  const auto [b_tx, b_rx] = sent_received(b);
  return a_tx == b_rx && b_tx == a_rx && a->commands.router_asleep.load() && b->commands.router_asleep.load();
}

// Busy-waits for d: a worker pausing between commands without sleeping.
void spin_for(std::chrono::microseconds d) {
  const auto end = steady_clock::now() + d;
  while (steady_clock::now() < end) {
  }
}

// Used by the doorbell test on an n300 without delayed acknowledgements or credit returns:
// workers on four cores of M0D0 write to M0D1. First one command at a time, issued at once,
// after a yield, after a short spin (the router on its way to sleep), or once both chips are
// asleep with nothing in flight; each must be taken by the router and answered, its waiters
// woken, within a second. Then all four at once, with pauses of every length and bursts that
// fill all 256 command slots (non-blocking: a full buffer says try again, and the worker sleeps
// until the router frees a slot).
TEST(Doorbell, EveryCommandIsTakenWhetherTheRouterSleepsOrNot) {
  constexpr int kWorkers = 4;
  constexpr milliseconds kPrompt{1000};
  Handle probe;
  open_on(probe, {0, 0});
  ASSERT_NE(probe.f, nullptr);
  ASSERT_EQ(tt_fabric_devices(probe.f, nullptr, 0), 2) << "a two-chip system: every datagram goes between M0D0 and M0D1";
  const ControlBlock src_ctl({0, 0}), dst_ctl({0, 1});
  auto& cb = src_ctl->commands;
  Handle src[kWorkers], dst[kWorkers];
  for (int w = 0; w < kWorkers; ++w) {
    open_on(src[w], {0, 0}, static_cast<uint16_t>(kCore + w)), open_on(dst[w], {0, 1}, static_cast<uint16_t>(kCore + w));
    ASSERT_TRUE(src[w].f && dst[w].f);
  }
  auto src_at = [](int w) { return kSrc + static_cast<uint64_t>(w) * 4096; };
  auto dst_at = [](int w) { return kDst + static_cast<uint64_t>(w) * 65536; };

  // One command at a time: nothing but the doorbell (or the loop's own turn) can get it taken.
  const char* const kModes[] = {"at once", "after a yield", "after a short spin", "once both chips were asleep and quiet"};
  std::mt19937 rng(1);
  for (int r = 0; r < 240; ++r) {
    const int w = r % kWorkers, mode = (r / kWorkers) % 4;
    SCOPED_TRACE(testing::Message() << "round " << r << ", worker " << w << ", issued " << kModes[mode]);
    auto* out = static_cast<uint8_t*>(tt_fabric_memory(src[w].f, src_at(w), 64));
    std::memset(out, r & 0xFF, 64);
    if (mode == 1) std::this_thread::yield();
    if (mode == 2) spin_for(std::chrono::microseconds(rng() % 300));
    if (mode == 3) {
      ASSERT_TRUE(eventually([&] { return quiet(src_ctl, dst_ctl); }, milliseconds(2000)))
          << "the chips did not go quiet: M0D0 asleep " << cb.router_asleep.load() << ", M0D1 asleep "
          << dst_ctl->commands.router_asleep.load();
    }
    ASSERT_EQ(fabric_async_write(src[w].f, 0, src_at(w), {0, 1}, dst_at(w), 64, -1, 1, nullptr), TT_FABRIC_OK);
    const uint32_t issued = cb.next_ticket.load();
    ASSERT_TRUE(woken_within(cb.served, cb.served_waiters, [&] { return cb.served.load() == issued; }, kPrompt))
        << "the command was not taken within " << kPrompt.count() << " ms (a lost wake-up): tickets " << issued
        << ", served " << cb.served.load() << ", router asleep " << cb.router_asleep.load();
    auto& ws = cb.workers[kCore + w];
    ASSERT_TRUE(woken_within(ws.txn[1], ws.sleepers, [&] { return ws.txn[1].load() == 0; }, kPrompt))
        << "the write was not answered, or its waiter not woken, within " << kPrompt.count() << " ms: "
        << ws.txn[1].load() << " packet(s) in flight";
    ASSERT_EQ(fabric_async_write_barrier(src[w].f, 1), TT_FABRIC_OK);
    ASSERT_EQ(std::memcmp(tt_fabric_memory(dst[w].f, dst_at(w), 64), out, 64), 0);
  }

  // All four at once.
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      auto& ws = cb.workers[kCore + w];
      auto* out = static_cast<uint8_t*>(tt_fabric_memory(src[w].f, src_at(w), 64));
      auto* in = static_cast<uint8_t*>(tt_fabric_memory(dst[w].f, dst_at(w), 64 * 512));
      std::mt19937 pauses(static_cast<unsigned>(w + 1));
      for (int r = 0; r < 150; ++r) {
        std::memset(out, r & 0xFF, 64);
        if (fabric_async_write(src[w].f, 0, src_at(w), {0, 1}, dst_at(w), 64, -1, 1, nullptr) != TT_FABRIC_OK ||
            !woken_within(ws.txn[1], ws.sleepers, [&] { return ws.txn[1].load() == 0; }, kPrompt) ||
            fabric_async_write_barrier(src[w].f, 1) != TT_FABRIC_OK || std::memcmp(in, out, 64) != 0) {
          ADD_FAILURE() << "worker " << w << ", round " << r << ": not taken, answered and landed within "
                        << kPrompt.count() << " ms (" << ws.txn[1].load() << " packet(s) in flight)";
          return;
        }
        // The moment the next command arrives varies (router busy, going to sleep, asleep);
        // nothing waits on these pauses.
        const unsigned pause = pauses() % 4;
        if (pause == 1) std::this_thread::yield();
        if (pause == 2) spin_for(std::chrono::microseconds(pauses() % 200));
        if (pause == 3) std::this_thread::sleep_for(std::chrono::microseconds(1000 + pauses() % 3000));
      }
      // A burst larger than the command buffer: a full buffer says try again, and the worker
      // sleeps until the router frees a slot.
      tt_fabric_set_nonblocking(src[w].f, 1);
      for (int i = 0; i < 300; ++i) {
        int rc;
        while ((rc = fabric_async_write(src[w].f, 0, src_at(w), {0, 1}, dst_at(w) + 64 * static_cast<uint64_t>(i), 64, -1, 2,
                                        nullptr)) == TT_FABRIC_EAGAIN) {
          if (!woken_within(cb.served, cb.served_waiters,
                            [&] { return cb.next_ticket.load() - cb.served.load() < chip::kCommandSlots; }, kPrompt)) {
            ADD_FAILURE() << "worker " << w << ": no command slot came free within " << kPrompt.count() << " ms";
            return;
          }
        }
        if (rc != TT_FABRIC_OK) {
          ADD_FAILURE() << "worker " << w << ": " << tt_fabric_strerror(rc);
          return;
        }
      }
      if (!woken_within(ws.txn[2], ws.sleepers, [&] { return ws.txn[2].load() == 0; }, 5 * kPrompt) ||
          fabric_async_write_barrier(src[w].f, 2) != TT_FABRIC_OK) {
        ADD_FAILURE() << "worker " << w << ": the burst was not answered within " << 5 * kPrompt.count() << " ms ("
                      << ws.txn[2].load() << " packet(s) in flight)";
        return;
      }
      for (int i = 0; i < 300; ++i) {
        if (std::memcmp(in + 64 * i, out, 64) != 0) {
          ADD_FAILURE() << "worker " << w << ": write " << i << " of the burst did not land";
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(tt_fabric_nacks(src[0].f) + tt_fabric_nacks(src[1].f) + tt_fabric_nacks(src[2].f) + tt_fabric_nacks(src[3].f), 0u);
}

}  // namespace
