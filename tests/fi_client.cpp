// A libfabric program of our own, run inside a launched system (tests/libfabric_provider_test.cpp),
// for what fi_pingpong and Open MPI do not reach:
// - FiRma: RMA and atomics through the tt provider, and the chip's memory protection seen
//   through libfabric. One process holds two domains: the initiator on M0D0 and the target on
//   M0D1, whose windows lie in its chip memory (fi_tt.h) and are registered with fi_mr_reg.
//   Every refused operation fails with FI_EACCES and leaves the target's bytes as they were.
// - FiMsg: messages from two senders interleaving in one receiver, truncation, cancel,
//   counters and injects, and two endpoints of one chip on cores of their own.
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "libfabric_tt/prov/fi_tt.h"

namespace {

constexpr size_t kWindow = 64 << 10;

struct Side {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  fi_tt_memory_ops* memory = nullptr;

  fid_cntr* send_cntr = nullptr;

  explicit Side(const char* chip, bool with_counter = false) {
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC;
    hints->domain_attr->mr_mode = FI_MR_PROV_KEY;
    hints->fabric_attr->prov_name = strdup("tt");
    EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), chip, nullptr, 0, hints, &info), 0) << chip;
    fi_freeinfo(hints);
    EXPECT_EQ(info->domain_attr->mr_mode, FI_MR_PROV_KEY);
    EXPECT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    EXPECT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    EXPECT_EQ(fi_open_ops(&domain->fid, FI_TT_MEMORY_OPS, 0, reinterpret_cast<void**>(&memory), nullptr), 0);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    EXPECT_EQ(fi_av_open(domain, &av_attr, &av, nullptr), 0);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    EXPECT_EQ(fi_cq_open(domain, &cq_attr, &cq, nullptr), 0);
    EXPECT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
    EXPECT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    EXPECT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    if (with_counter) {
      fi_cntr_attr cntr_attr{};
      EXPECT_EQ(fi_cntr_open(domain, &cntr_attr, &send_cntr, nullptr), 0);
      EXPECT_EQ(fi_ep_bind(ep, &send_cntr->fid, FI_SEND), 0);
    }
    EXPECT_EQ(fi_enable(ep), 0);
  }
  ~Side() {
    fi_close(&ep->fid);
    if (send_cntr) fi_close(&send_cntr->fid);
    fi_close(&cq->fid);
    fi_close(&av->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
  }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  // The outcome of the next completion: 0, or the error of an error completion.
  int wait() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      fi_cq_tagged_entry e{};
      const ssize_t n = fi_cq_read(cq, &e, 1);
      if (n == 1) return 0;
      if (n == -FI_EAVAIL) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq, &err, 0);
        return err.err;
      }
      if (n != -FI_EAGAIN) return static_cast<int>(-n);
    }
    return -1;  // no completion within the deadline
  }
};

// The target side's windows: read-write and read-only, in M0D1's DRAM, with their keys.
struct Fixture {
  Side initiator{"M0D0"}, target{"M0D1"};
  uint8_t* rw = nullptr;
  uint8_t* ro = nullptr;
  fid_mr* rw_mr = nullptr;
  fid_mr* ro_mr = nullptr;
  fi_addr_t peer = FI_ADDR_NOTAVAIL;

  Fixture() {
    rw = static_cast<uint8_t*>(target.memory->chip_memory(target.domain, FI_TT_DRAM | 0, kWindow));
    ro = static_cast<uint8_t*>(target.memory->chip_memory(target.domain, FI_TT_DRAM | kWindow, kWindow));
    EXPECT_NE(rw, nullptr);
    EXPECT_GT(target.memory->free_dram(target.domain), 2 * kWindow);
    std::memset(rw, 0x11, kWindow);
    std::memset(ro, 0x22, kWindow);
    EXPECT_EQ(fi_mr_reg(target.domain, rw, kWindow, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0, &rw_mr, nullptr), 0);
    EXPECT_EQ(fi_mr_reg(target.domain, ro, kWindow, FI_REMOTE_READ, 0, 0, 0, &ro_mr, nullptr), 0);
    EXPECT_NE(fi_mr_key(rw_mr), 0u);
    char name[64];
    size_t len = sizeof name;
    EXPECT_EQ(fi_getname(&target.ep->fid, name, &len), 0);
    EXPECT_EQ(fi_av_insert(initiator.av, name, 1, &peer, 0, nullptr), 1);
  }
  ~Fixture() {
    fi_close(&rw_mr->fid);
    fi_close(&ro_mr->fid);
  }
  bool all(const uint8_t* p, size_t n, uint8_t v) const { return std::all_of(p, p + n, [v](uint8_t b) { return b == v; }); }
};

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

TEST(FiRma, AWriteLandsByteForByteAndReadsBack) {
  Fixture f;
  const auto data = pattern(40000);
  ASSERT_EQ(fi_write(f.initiator.ep, data.data(), data.size(), nullptr, f.peer, 100, fi_mr_key(f.rw_mr), nullptr), 0);
  ASSERT_EQ(f.initiator.wait(), 0);
  EXPECT_EQ(std::memcmp(f.rw + 100, data.data(), data.size()), 0);
  EXPECT_TRUE(f.all(f.rw, 100, 0x11));
  std::vector<uint8_t> back(data.size());
  ASSERT_EQ(fi_read(f.initiator.ep, back.data(), back.size(), nullptr, f.peer, 100, fi_mr_key(f.rw_mr), nullptr), 0);
  ASSERT_EQ(f.initiator.wait(), 0);
  EXPECT_EQ(back, data);
  // A read-only window can be read.
  ASSERT_EQ(fi_read(f.initiator.ep, back.data(), 512, nullptr, f.peer, 0, fi_mr_key(f.ro_mr), nullptr), 0);
  ASSERT_EQ(f.initiator.wait(), 0);
  EXPECT_TRUE(f.all(back.data(), 512, 0x22));
}

TEST(FiRma, AWrongKeyFailsWithEaccesAndChangesNothing) {
  Fixture f;
  const auto data = pattern(4096);
  const uint64_t wrong = fi_mr_key(f.rw_mr) ^ (uint64_t{1} << 40);
  ASSERT_EQ(fi_write(f.initiator.ep, data.data(), data.size(), nullptr, f.peer, 0, wrong, nullptr), 0);
  EXPECT_EQ(f.initiator.wait(), FI_EACCES);
  EXPECT_TRUE(f.all(f.rw, kWindow, 0x11));
}

TEST(FiRma, AWriteOutsideTheWindowFailsWithEaccesAndChangesNothing) {
  Fixture f;
  const auto data = pattern(40000);
  // Ten packets, the first seven inside the window, the rest past its end: refused whole.
  ASSERT_EQ(fi_write(f.initiator.ep, data.data(), data.size(), nullptr, f.peer, kWindow - 30000, fi_mr_key(f.rw_mr), nullptr), 0);
  EXPECT_EQ(f.initiator.wait(), FI_EACCES);
  EXPECT_TRUE(f.all(f.rw, kWindow, 0x11));
  EXPECT_TRUE(f.all(f.ro, kWindow, 0x22));
}

TEST(FiRma, AReadOnlyWindowWrittenFailsWithEaccesAndChangesNothing) {
  Fixture f;
  const auto data = pattern(4096);
  ASSERT_EQ(fi_write(f.initiator.ep, data.data(), data.size(), nullptr, f.peer, 0, fi_mr_key(f.ro_mr), nullptr), 0);
  EXPECT_EQ(f.initiator.wait(), FI_EACCES);
  EXPECT_TRUE(f.all(f.ro, kWindow, 0x22));
  uint32_t one = 1;
  ASSERT_EQ(fi_atomic(f.initiator.ep, &one, 1, nullptr, f.peer, 0, fi_mr_key(f.ro_mr), FI_UINT32, FI_SUM, nullptr), 0);
  EXPECT_EQ(f.initiator.wait(), FI_EACCES);
  EXPECT_TRUE(f.all(f.ro, kWindow, 0x22));
}

TEST(FiRma, AtomicsAddAndFetchOnTheFabric) {
  Fixture f;
  uint32_t start = 1000;
  std::memcpy(f.rw + 64, &start, 4);
  uint32_t five = 5, old = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(fi_atomic(f.initiator.ep, &five, 1, nullptr, f.peer, 64, fi_mr_key(f.rw_mr), FI_UINT32, FI_SUM, nullptr), 0);
    ASSERT_EQ(f.initiator.wait(), 0);
  }
  ASSERT_EQ(fi_fetch_atomic(f.initiator.ep, &five, 1, nullptr, &old, nullptr, f.peer, 64, fi_mr_key(f.rw_mr), FI_UINT32, FI_SUM,
                            nullptr),
            0);
  ASSERT_EQ(f.initiator.wait(), 0);
  EXPECT_EQ(old, 1015u);
  uint32_t now = 0;
  std::memcpy(&now, f.rw + 64, 4);
  EXPECT_EQ(now, 1020u);
}

// A provider address names a job-local endpoint: chip, core and endpoint index.
TEST(FiRma, AddressesNameTheChipCoreAndEndpoint) {
  Fixture f;
  char name[64];
  size_t len = sizeof name;
  ASSERT_EQ(fi_getname(&f.target.ep->fid, name, &len), 0);
  char text[64];
  size_t text_len = sizeof text;
  fi_av_straddr(f.initiator.av, name, text, &text_len);
  EXPECT_STREQ(text, "tt://M0D1.c0.e0");
  char back[64];
  size_t back_len = sizeof back;
  ASSERT_EQ(fi_av_lookup(f.initiator.av, f.peer, back, &back_len), 0);
  EXPECT_EQ(back_len, len);
  EXPECT_EQ(std::memcmp(back, name, len), 0);
  // Too small a buffer is refused with the size it needs.
  size_t small = 4;
  EXPECT_EQ(fi_getname(&f.target.ep->fid, name, &small), -FI_ETOOSMALL);
  EXPECT_EQ(small, len);
}

TEST(FiRma, WhatDoesNotMapIsRefusedByName) {
  Fixture f;
  uint32_t v = 2;
  size_t count = 0;
  EXPECT_EQ(fi_atomicvalid(f.initiator.ep, FI_UINT64, FI_SUM, &count), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_atomic(f.initiator.ep, &v, 1, nullptr, f.peer, 0, fi_mr_key(f.rw_mr), FI_UINT32, FI_PROD, nullptr), -FI_EOPNOTSUPP);
  EXPECT_EQ(fi_connect(f.initiator.ep, "x", nullptr, 0), -FI_ENOSYS);
  // A buffer outside chip memory cannot be a window: the fabric cannot reach it.
  std::vector<uint8_t> heap(4096);
  fid_mr* mr = nullptr;
  EXPECT_EQ(fi_mr_reg(f.target.domain, heap.data(), heap.size(), FI_REMOTE_WRITE, 0, 0, 0, &mr, nullptr), -FI_EINVAL);
  // A local-only registration of the same buffer is fine.
  ASSERT_EQ(fi_mr_reg(f.target.domain, heap.data(), heap.size(), FI_SEND | FI_RECV, 0, 0, 0, &mr, nullptr), 0);
  fi_close(&mr->fid);
}

// --- messages ---------------------------------------------------------------------------

fi_addr_t insert(Side& into, Side& peer) {
  char name[64];
  size_t len = sizeof name;
  EXPECT_EQ(fi_getname(&peer.ep->fid, name, &len), 0);
  fi_addr_t a = FI_ADDR_NOTAVAIL;
  EXPECT_EQ(fi_av_insert(into.av, name, 1, &a, 0, nullptr), 1);
  return a;
}

std::string address(Side& s) {
  char name[64], text[64];
  size_t len = sizeof name, text_len = sizeof text;
  EXPECT_EQ(fi_getname(&s.ep->fid, name, &len), 0);
  fi_av_straddr(s.av, name, text, &text_len);
  return text;
}

TEST(FiMsg, TwoEndpointsOfOneChipHoldCoresOfTheirOwn) {
  Side a("M0D0"), b("M0D0");
  EXPECT_EQ(address(a), "tt://M0D0.c0.e0");
  EXPECT_EQ(address(b), "tt://M0D0.c1.e0");
}

// Two senders' messages of several records each (3 MiB: 48 records of 64 KiB) interleave in
// one receiver; each arrives whole, byte for byte, under its own tag.
TEST(FiMsg, TwoSendersInterleaveLargeMessagesByteForByte) {
  Side a("M0D0"), b("M0D0"), r("M0D1");
  const fi_addr_t to_r_from_a = insert(a, r), to_r_from_b = insert(b, r);
  insert(r, a), insert(r, b);
  const size_t n = 3 << 20;
  std::vector<uint8_t> da(n), db(n), ga(n), gb(n);
  for (size_t i = 0; i < n; ++i) da[i] = static_cast<uint8_t>(i * 13 + 1), db[i] = static_cast<uint8_t>(i * 29 + 7);
  int ca = 0, cb = 0;
  ASSERT_EQ(fi_trecv(r.ep, ga.data(), n, nullptr, FI_ADDR_UNSPEC, 1, 0, &ca), 0);
  ASSERT_EQ(fi_trecv(r.ep, gb.data(), n, nullptr, FI_ADDR_UNSPEC, 2, 0, &cb), 0);
  ASSERT_EQ(fi_tsend(a.ep, da.data(), n, nullptr, to_r_from_a, 1, nullptr), 0);
  ASSERT_EQ(fi_tsend(b.ep, db.data(), n, nullptr, to_r_from_b, 2, nullptr), 0);
  // Every side's CQ is read in turn, which is what moves data (manual progress).
  int received = 0, sent = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((received < 2 || sent < 2) && std::chrono::steady_clock::now() < until) {
    for (Side* s : {&a, &b, &r}) {
      fi_cq_tagged_entry e{};
      const ssize_t got = fi_cq_read(s->cq, &e, 1);
      ASSERT_TRUE(got == 1 || got == -FI_EAGAIN) << got;
      if (got != 1) continue;
      if (s == &r) {
        ++received;
        EXPECT_EQ(e.len, n);
        EXPECT_EQ(e.tag, e.op_context == &ca ? 1u : 2u);
      } else {
        ++sent;
      }
    }
  }
  ASSERT_EQ(received, 2);
  ASSERT_EQ(sent, 2);
  EXPECT_EQ(ga, da);
  EXPECT_EQ(gb, db);
}

TEST(FiMsg, ATruncatedReceiveFailsWithEtruncAndSaysHowMuchDidNotFit) {
  Side s("M0D0"), r("M0D1");
  const fi_addr_t to_r = insert(s, r);
  const auto data = pattern(1000);
  std::vector<uint8_t> got(100);
  int ctx = 0;
  ASSERT_EQ(fi_recv(r.ep, got.data(), got.size(), nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  ASSERT_EQ(fi_send(s.ep, data.data(), data.size(), nullptr, to_r, nullptr), 0);
  ASSERT_EQ(s.wait(), 0);
  fi_cq_err_entry err{};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  ssize_t rc = -FI_EAGAIN;
  while (rc == -FI_EAGAIN && std::chrono::steady_clock::now() < until) {
    fi_cq_tagged_entry e{};
    rc = fi_cq_read(r.cq, &e, 1);
  }
  ASSERT_EQ(rc, -FI_EAVAIL);
  ASSERT_EQ(fi_cq_readerr(r.cq, &err, 0), 1);
  EXPECT_EQ(err.err, FI_ETRUNC);
  EXPECT_EQ(err.olen, 900u);
  EXPECT_EQ(err.op_context, &ctx);
  EXPECT_EQ(std::memcmp(got.data(), data.data(), got.size()), 0);
}

TEST(FiMsg, ACancelledReceiveCompletesWithEcanceled) {
  Side r("M0D1");
  std::vector<uint8_t> buf(64);
  int ctx = 0;
  ASSERT_EQ(fi_recv(r.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &ctx), 0);
  ASSERT_EQ(fi_cancel(&r.ep->fid, &ctx), 0);
  EXPECT_EQ(r.wait(), FI_ECANCELED);
  EXPECT_EQ(fi_cancel(&r.ep->fid, &ctx), -FI_ENOENT);  // nothing left to cancel
}

// fi_inject never completes but counts; FI_INJECT on fi_sendmsg frees the buffer at once and
// still completes.
TEST(FiMsg, InjectsCountWithoutCompletingAndSendmsgWithFiInjectCompletes) {
  Side s("M0D0", true), r("M0D1");
  const fi_addr_t to_r = insert(s, r);
  std::vector<uint8_t> msg(32, 0x5A), got(32);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(fi_inject(s.ep, msg.data(), msg.size(), to_r), 0);
  ASSERT_EQ(fi_cntr_wait(s.send_cntr, 3, 30000), 0);
  fi_cq_tagged_entry e{};
  EXPECT_EQ(fi_cq_read(s.cq, &e, 1), -FI_EAGAIN) << "an inject has no completion";
  iovec iov{msg.data(), msg.size()};
  int ctx = 0;
  fi_msg m{&iov, nullptr, 1, to_r, &ctx, 0};
  ASSERT_EQ(fi_sendmsg(s.ep, &m, FI_INJECT | FI_COMPLETION), 0);
  std::memset(msg.data(), 0, msg.size());  // the buffer is the caller's again
  ASSERT_EQ(s.wait(), 0);
  EXPECT_EQ(fi_cntr_read(s.send_cntr), 4u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(fi_recv(r.ep, got.data(), got.size(), nullptr, FI_ADDR_UNSPEC, nullptr), 0);
    ASSERT_EQ(r.wait(), 0);
    EXPECT_EQ(got, std::vector<uint8_t>(32, 0x5A)) << "message " << i;
  }
}

}  // namespace
