// A worker program for memory protection against a live system launched with
// `--memory protected`: run as `ttemu launch n300.yaml --memory protected --
// ttemu_memory_keys_client` (it finds the system through TTEMU_JOB). One worker registers
// windows of M0D1's memory (tt_fabric_mr_register); a worker on M0D0 writes and reads them by
// key through real chip processes, and every refusal must reach it as a permission NACK with
// the target's bytes unchanged (read straight from M0D1's memory).
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "libfabric_tt/tt_fabric.h"
#include "tests/client_support.hpp"

namespace {

constexpr tt_fabric_device kIssuerChip{0, 0}, kOwnerChip{0, 1};
constexpr uint16_t kCore = 2;
constexpr uint8_t kTxn = 3;
constexpr uint64_t kWindowSize = 64 << 10;
constexpr uint8_t kFill = 0x5A;  // the owner's memory before each refused request

using ttemu::test::Handle;
using ttemu::test::open_on;
using ttemu::test::status_text;

// How the fabric answered: NACKs and permission NACKs counted meanwhile, and the reasons of
// the NACKs' completions.
struct Answer {
  uint32_t nacks = 0, permission = 0;
  std::set<uint16_t> reasons;
};

class MemoryKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    open_on(issuer_, kIssuerChip, kCore);
    open_on(owner_, kOwnerChip, kCore);
    ASSERT_NE(issuer_.f, nullptr);
    ASSERT_NE(owner_.f, nullptr);
    src_ = tt_fabric_core_l1(issuer_.f);
    back_ = src_ + (256 << 10);
    rw_at_ = tt_fabric_core_l1(owner_.f) + (128 << 10);
    ro_at_ = rw_at_ + (256 << 10);
    ASSERT_EQ(tt_fabric_mr_register(owner_.f, rw_at_, kWindowSize, TT_FABRIC_REMOTE_READ | TT_FABRIC_REMOTE_WRITE, &rw_), TT_FABRIC_OK);
    ASSERT_EQ(tt_fabric_mr_register(owner_.f, ro_at_, kWindowSize, TT_FABRIC_REMOTE_READ, &ro_), TT_FABRIC_OK);
    EXPECT_NE(rw_, 0u);
    EXPECT_NE(ro_, rw_);
    uint8_t* s = source(0, 3 * 4096);
    for (size_t i = 0; i < 3 * 4096; ++i) s[i] = static_cast<uint8_t>(i * 13 + 7);
    std::memset(owner(rw_at_), kFill, kWindowSize);
    std::memset(owner(ro_at_), kFill, kWindowSize);
  }

  uint8_t* source(uint64_t at, size_t n) { return static_cast<uint8_t*>(tt_fabric_memory(issuer_.f, src_ + at, n)); }
  // The owner's chip memory, read and written directly (the issuer's view goes through the fabric).
  uint8_t* owner(uint64_t addr) { return static_cast<uint8_t*>(tt_fabric_memory(owner_.f, addr, kWindowSize)); }
  bool untouched(uint64_t addr) {
    const uint8_t* p = owner(addr);
    for (uint64_t i = 0; i < kWindowSize; ++i) {
      if (p[i] != kFill) return false;
    }
    return true;
  }

  // One write (or read) from the issuer naming `key`, waited for by its barrier.
  Answer issue(bool read, uint64_t key, uint64_t addr, uint32_t size) {
    tt_fabric_completion c[64];
    while (tt_fabric_poll_completions(issuer_.f, c, 64) > 0) {
    }
    const uint32_t nacks = tt_fabric_nacks(issuer_.f), permission = tt_fabric_permission_nacks(issuer_.f);
    EXPECT_EQ(tt_fabric_set_key(issuer_.f, key), TT_FABRIC_OK);
    if (read) {
      EXPECT_EQ(fabric_async_read(issuer_.f, 0, kOwnerChip, addr, back_, size, -1, kTxn, nullptr), TT_FABRIC_OK);
      EXPECT_EQ(fabric_async_read_barrier(issuer_.f, kTxn), TT_FABRIC_OK);
    } else {
      EXPECT_EQ(fabric_async_write(issuer_.f, 0, src_, kOwnerChip, addr, size, -1, kTxn, nullptr), TT_FABRIC_OK);
      EXPECT_EQ(fabric_async_write_barrier(issuer_.f, kTxn), TT_FABRIC_OK);
    }
    Answer a{tt_fabric_nacks(issuer_.f) - nacks, tt_fabric_permission_nacks(issuer_.f) - permission, {}};
    for (int n; (n = tt_fabric_poll_completions(issuer_.f, c, 64)) > 0;) {
      for (int i = 0; i < n; ++i) {
        if (c[i].kind == TT_FABRIC_NACKED) a.reasons.insert(c[i].reason);
      }
    }
    return a;
  }

  void expect_refused(const Answer& a, uint64_t window_at) {
    EXPECT_EQ(a.nacks, 1u);
    EXPECT_EQ(a.permission, 1u);
    EXPECT_EQ(a.reasons, std::set<uint16_t>{TT_FABRIC_NACK_PERMISSION});
    EXPECT_TRUE(untouched(window_at)) << "a refused write changes no byte";
  }

  Handle issuer_, owner_;
  uint64_t src_ = 0, back_ = 0, rw_at_ = 0, ro_at_ = 0, rw_ = 0, ro_ = 0;
};

TEST_F(MemoryKeys, AKeyedWriteLandsByteForByteAndReadsBack) {
  // 10000 bytes: three packets, each checked and committed at window + offset.
  const Answer w = issue(false, rw_, 0x100, 10000);
  EXPECT_EQ(w.nacks, 0u);
  EXPECT_EQ(std::memcmp(owner(rw_at_) + 0x100, source(0, 10000), 10000), 0);
  EXPECT_EQ(owner(rw_at_)[0xFF], kFill);
  EXPECT_EQ(owner(rw_at_)[0x100 + 10000], kFill);
  std::memset(tt_fabric_memory(issuer_.f, back_, 10000), 0, 10000);
  const Answer r = issue(true, rw_, 0x100, 10000);
  EXPECT_EQ(r.nacks, 0u);
  EXPECT_EQ(std::memcmp(tt_fabric_memory(issuer_.f, back_, 10000), source(0, 10000), 10000), 0);
}

TEST_F(MemoryKeys, AWrongKeyIsNackedForPermissionAndChangesNothing) {
  expect_refused(issue(false, rw_ ^ (uint64_t{1} << 40), 0, 64), rw_at_);
}

TEST_F(MemoryKeys, AWriteOutsideTheWindowIsNackedForPermissionAndChangesNothing) {
  expect_refused(issue(false, rw_, kWindowSize, 64), rw_at_);          // past its end
  expect_refused(issue(false, rw_, kWindowSize - 100, 4096), rw_at_);  // starts inside, runs past the end
}

TEST_F(MemoryKeys, AWriteToAReadOnlyWindowIsNackedForPermissionAndChangesNothing) {
  expect_refused(issue(false, ro_, 0, 64), ro_at_);
  const Answer r = issue(true, ro_, 0, 64);  // reading it is allowed
  EXPECT_EQ(r.nacks, 0u);
  EXPECT_EQ(static_cast<uint8_t*>(tt_fabric_memory(issuer_.f, back_, 64))[0], kFill);
}

TEST_F(MemoryKeys, AnUnkeyedWriteOrReadIsRefusedInProtectedMemory) {
  expect_refused(issue(false, 0, rw_at_, 64), rw_at_);  // the window's own address, without its key
  const Answer r = issue(true, 0, rw_at_, 64);
  EXPECT_EQ(r.permission, 1u);
}

TEST_F(MemoryKeys, ADeregisteredOrClosedWindowIsRefused) {
  Handle other;
  open_on(other, kOwnerChip, kCore + 1);
  EXPECT_EQ(tt_fabric_mr_deregister(other.f, rw_), TT_FABRIC_EARG) << "another core's window";
  uint64_t key = 0;
  EXPECT_EQ(tt_fabric_mr_register(other.f, rw_at_, 64, 0, &key), TT_FABRIC_EARG);
  EXPECT_EQ(tt_fabric_mr_register(other.f, rw_at_, 64, 4, &key), TT_FABRIC_EARG);
  EXPECT_EQ(tt_fabric_mr_register(other.f, TT_FABRIC_DRAM | (uint64_t{64} << 30), 64, TT_FABRIC_REMOTE_WRITE, &key), TT_FABRIC_EADDR);
  ASSERT_EQ(tt_fabric_mr_register(other.f, rw_at_, kWindowSize, TT_FABRIC_REMOTE_WRITE, &key), TT_FABRIC_OK);
  tt_fabric_close(other.f);  // takes its windows with it
  other.f = nullptr;
  expect_refused(issue(false, key, 0, 64), rw_at_);
  EXPECT_EQ(tt_fabric_mr_deregister(owner_.f, rw_), TT_FABRIC_OK);
  expect_refused(issue(false, rw_, 0, 64), rw_at_);
}

TEST_F(MemoryKeys, StatusSaysTheMemoryIsProtectedAndCountsRefusals) {
  expect_refused(issue(false, 0, rw_at_, 64), rw_at_);
  const auto s = nlohmann::json::parse(status_text("--json"), nullptr, false);
  ASSERT_TRUE(s.is_object()) << "ttemu status --json did not answer";
  EXPECT_EQ(s.value("memory", ""), "protected");
  uint64_t refused = 0;
  for (const auto& c : s["chips"]) {
    if (c["name"] == "M0D1") refused = c.value("memory_refused", uint64_t{0});
  }
  EXPECT_GE(refused, 1u);
  EXPECT_NE(status_text("").find("memory: protected"), std::string::npos);
}

}  // namespace
