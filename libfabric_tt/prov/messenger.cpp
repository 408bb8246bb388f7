#include "libfabric_tt/prov/messenger.hpp"

#include "libfabric_tt/prov/core_access.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <random>

#include <fmt/format.h>


namespace ttemu::fi {

bool same_endpoint(const Addr& a, const Addr& b) {
  return a.mesh == b.mesh && a.device == b.device && a.core == b.core && a.index == b.index;
}

std::string to_string(const Addr& a) { return fmt::format("M{}D{}.c{}.e{}", a.mesh, a.device, a.core, a.index); }

size_t iov_bytes(const std::vector<iovec>& iov) {
  size_t n = 0;
  for (const auto& v : iov) n += v.iov_len;
  return n;
}

namespace {

constexpr uint8_t kControlTxn = 15;  // slot allocations; writes use 0-14 in turn
constexpr uint64_t kMaxWrite = TT_FABRIC_MAX_SIZE;

uint64_t load64(const uint8_t* p) { return std::atomic_ref<const uint64_t>(*reinterpret_cast<const uint64_t*>(p)).load(std::memory_order_acquire); }
uint32_t load32(const uint8_t* p) { return std::atomic_ref<const uint32_t>(*reinterpret_cast<const uint32_t*>(p)).load(std::memory_order_acquire); }

// Calls piece(iov bytes, k, done) for the iovs' bytes [offset, offset + n), in order; returns
// how many there were (fewer than n when the iovs end first).
template <typename Piece>
size_t walk(const std::vector<iovec>& iov, size_t offset, size_t n, Piece piece) {
  size_t done = 0;
  for (const auto& v : iov) {
    if (done == n) break;
    if (offset >= v.iov_len) {
      offset -= v.iov_len;
      continue;
    }
    const size_t k = std::min(v.iov_len - offset, n - done);
    piece(static_cast<uint8_t*>(v.iov_base) + offset, k, done);
    done += k;
    offset = 0;
  }
  return done;
}
// Copies up to n bytes into the iovs from byte `offset` on; returns how many fitted.
size_t copy_to(const std::vector<iovec>& iov, size_t offset, const uint8_t* src, size_t n) {
  return walk(iov, offset, n, [src](uint8_t* p, size_t k, size_t done) { std::memcpy(p, src + done, k); });
}
void copy_from(const std::vector<iovec>& iov, size_t offset, uint8_t* dst, size_t n) {
  walk(iov, offset, n, [dst](const uint8_t* p, size_t k, size_t done) { std::memcpy(dst + done, p, k); });
}

// A chip address in a peer's region: an offset under its key, else the address itself.
uint64_t in_region(const Addr& a, uint64_t offset) { return a.key ? offset : a.region + offset; }

}  // namespace

// The key this worker's next fabric calls name, for one call's length.
class KeyScope {
 public:
  KeyScope(tt_fabric* f, uint64_t key) : f_(f), key_(key) {
    if (key_) tt_fabric_set_key(f_, key_);
  }
  ~KeyScope() {
    if (key_) tt_fabric_set_key(f_, 0);
  }
  KeyScope(const KeyScope&) = delete;
  KeyScope& operator=(const KeyScope&) = delete;

 private:
  tt_fabric* f_;
  uint64_t key_;
};

struct Messenger::RmaOp {
  std::shared_ptr<const RmaArgs> a;
  size_t issued = 0;
  std::shared_ptr<int> err;
};

struct Messenger::SendOp {
  SendArgs a;
  std::shared_ptr<std::vector<uint8_t>> owned;  // an inject's bytes
  size_t len = 0, done = 0;
  bool finished = false;
};

struct Messenger::Conn {
  Addr peer;
  int slot = -1;     // ours in the peer's inbox
  int credit = 0;    // our credit word for this peer
  uint64_t tail = 0, seq = 0;
  uint64_t nonce = 0;
  bool header_sent = false;  // the slot header goes before any record
  int error = 0;     // the peer cannot be reached, or a write to it was lost (FI_E*): sends fail
  std::deque<std::unique_ptr<SendOp>> queue;
};

struct Messenger::Staged {
  uint64_t end;    // staging position after this write
  uint8_t txn;
  uint32_t nacks_before;  // the transaction's NACK count when it was issued
  Conn* conn = nullptr;   // a message write: losing it breaks the connection
  std::function<void(Sink&, int)> on_done;  // once the fabric answered every packet
};

struct Messenger::Incoming {
  Addr from;
  uint64_t msg_len = 0, tag = 0, data = 0, got = 0;
  uint32_t flags = 0;
  std::optional<RecvArgs> target;
  std::vector<uint8_t> buffer;  // while no receive has taken it
  bool complete = false;
};

struct Messenger::Slot {
  uint64_t head = 0, seq = 0, reported = 0;
  uint64_t nonce = 0;  // 0 until the sender's slot header is complete
  Addr from;
  uint64_t credit_offset = 0;  // in the sender's region (`from`, under its key)
  std::shared_ptr<Incoming> current;
};

Messenger::Messenger(tt_fabric* worker, Addr self, uint64_t region, uint8_t* memory)
    : worker_(worker), self_(self), region_(region), memory_(memory) {
  // A new endpoint on this core: whatever an earlier one left is not ours.
  std::memset(memory_, 0, kInboxOffset);
  std::memset(memory_ + kInboxOffset, 0, kSlots * kRing);
  tt_fabric_set_nonblocking(worker_, 1);
}

Messenger::~Messenger() = default;

bool Messenger::busy() const { return queued_ > 0 || !staged_.empty() || !rma_queue_.empty(); }

size_t Messenger::queued_sends() const { return queued_; }

Messenger::Conn* Messenger::connect(const Addr& to) {
  // A peer is an endpoint under its key: one that opened again on the same core is a new peer.
  const auto id = std::make_tuple(to.mesh, to.device, to.core, to.index, to.key);
  if (auto it = conns_.find(id); it != conns_.end()) return it->second.get();
  auto c = std::make_unique<Conn>();
  c->peer = to;
  c->credit = static_cast<int>(conns_.size());
  if (c->credit >= kSlots) {
    c->error = FI_ENOSPC;
  } else {
    // Take a slot in the peer's inbox: one atomic, answered by the peer's chip, not the peer.
    const uint64_t answer = region_ + kControlOffset + 64 + 8 * static_cast<uint64_t>(c->credit);
    tt_fabric_set_nonblocking(worker_, 0);
    const uint32_t nacks = txn_nacks(worker_, kControlTxn);
    int rc = TT_FABRIC_OK;
    {
      KeyScope scope(worker_, to.key);
      rc = fabric_async_atomic_read_inc(worker_, 0, answer, {to.mesh, to.device}, in_region(to, kControlOffset), 1, 31, 0,
                                        kControlTxn, nullptr);
    }
    if (rc == TT_FABRIC_OK) rc = fabric_async_read_barrier(worker_, kControlTxn);
    tt_fabric_set_nonblocking(worker_, 1);
    const uint32_t slot = load32(at(answer - region_));
    if (rc != TT_FABRIC_OK || txn_nacks(worker_, kControlTxn) != nacks) {
      c->error = FI_EHOSTUNREACH;
    } else if (slot >= kSlots) {
      c->error = FI_ENOSPC;  // the peer's inbox has a slot for kSlots senders
    } else {
      c->slot = static_cast<int>(slot);
      thread_local std::random_device seed;
      c->nonce = (uint64_t{seed()} << 32 | seed()) | 1;
    }
  }
  Conn* raw = c.get();
  conns_.emplace(id, std::move(c));
  conn_order_.push_back(raw);
  return raw;
}

// The bytes of an inject, kept until they are staged: the caller may reuse its buffer at once.
std::shared_ptr<std::vector<uint8_t>> Messenger::keep(std::vector<iovec>& iov) {
  auto copy = std::make_shared<std::vector<uint8_t>>(iov_bytes(iov));
  copy_from(iov, 0, copy->data(), copy->size());
  iov = {iovec{copy->data(), copy->size()}};
  return copy;
}

int Messenger::send(SendArgs a) {
  auto op = std::make_unique<SendOp>();
  op->len = iov_bytes(a.iov);
  if (a.inject) op->owned = keep(a.iov);
  op->a = std::move(a);
  Conn* c = connect(op->a.to);
  c->queue.push_back(std::move(op));
  ++queued_;
  return 0;
}

std::optional<uint64_t> Messenger::stage(uint64_t bytes) {
  bytes = (bytes + 63) & ~uint64_t{63};
  const uint64_t pos = staging_head_ % kStaging;
  const uint64_t skip = kStaging - pos < bytes ? kStaging - pos : 0;
  if (staging_head_ + skip + bytes - staging_tail_ > kStaging) return std::nullopt;
  const uint64_t start = staging_head_ + skip;
  staging_head_ = start + bytes;
  return start % kStaging;
}

// Takes `room` bytes of staging, lets `fill` write the first `size` of them, and writes those
// to `dst` at `to`. False, with nothing taken, when staging or the command buffer is full.
template <typename Fill>
bool Messenger::put(const Addr& to, uint64_t key, uint64_t dst, uint64_t size, uint64_t room, Conn* conn, Fill fill) {
  const uint64_t mark = staging_head_;
  const auto s = stage(room);
  if (!s) return false;
  fill(at(kStagingOffset + *s));
  const uint8_t txn = next_txn_;
  const uint32_t nacks = txn_nacks(worker_, txn);
  int rc = TT_FABRIC_OK;
  {
    KeyScope scope(worker_, key);
    rc = fabric_async_write(worker_, 0, region_ + kStagingOffset + *s, {to.mesh, to.device}, dst, static_cast<uint32_t>(size), 0,
                            txn, nullptr);
  }
  if (rc != TT_FABRIC_OK) {
    staging_head_ = mark;
    return false;
  }
  next_txn_ = static_cast<uint8_t>((next_txn_ + 1) % kControlTxn);
  staged_.push_back({staging_head_, txn, nacks, conn, {}});
  return true;
}

// Emits the slot header (once), then records of op until it is all sent or credits or staging
// run out.
bool Messenger::emit(Conn& c, SendOp& op) {
  if (!c.header_sent) {
    SlotHeader h{};
    h.mesh = self_.mesh, h.device = self_.device, h.core = self_.core, h.index = self_.index;
    h.credit_key = self_.key;
    h.credit_offset = kCreditsOffset + 8 * static_cast<uint64_t>(c.credit);
    h.region = self_.region;
    h.nonce = c.nonce;  // its last word, which lands last
    const uint64_t dst = in_region(c.peer, kSlotsOffset + 64 * static_cast<uint64_t>(c.slot));
    if (!put(c.peer, c.peer.key, dst, sizeof h, sizeof h, &c, [&](uint8_t* p) { std::memcpy(p, &h, sizeof h); })) return false;
    c.header_sent = true;
  }
  while (!op.finished) {
    const uint64_t chunk = std::min<uint64_t>(kMaxRecordPayload, op.len - op.done);
    const uint64_t bytes = record_bytes(chunk);
    const uint64_t pos = c.tail % kRing;
    const uint64_t to_end = kRing - pos;
    const bool wrap = to_end < bytes;
    const uint64_t credit = load64(at(kCreditsOffset + 8 * static_cast<uint64_t>(c.credit)));
    if (c.tail + bytes + (wrap ? to_end : 0) - credit > kRing) return false;
    const uint64_t ring = kInboxOffset + static_cast<uint64_t>(c.slot) * kRing;
    RecordHeader h{};
    h.seq = c.seq + 1;
    const uint64_t t = trailer(c.nonce, h.seq);
    if (wrap) {
      h.flags = kWrap;
      const bool ok = put(c.peer, c.peer.key, in_region(c.peer, ring + pos), trailer_offset(0) + 8, 64, &c, [&](uint8_t* p) {
        std::memcpy(p, &h, sizeof h);
        std::memcpy(p + trailer_offset(0), &t, 8);
      });
      if (!ok) return false;
      ++c.seq;
      c.tail += to_end;
      continue;
    }
    h.len = static_cast<uint32_t>(chunk);
    h.flags = (op.done == 0 ? kFirst : 0u) | (op.done + chunk == op.len ? kLast : 0u) | (op.a.tagged ? kTagged : 0u) |
              (op.a.has_data ? kCqData : 0u);
    h.msg_len = op.len, h.tag = op.a.tag, h.data = op.a.data;
    // The write ends at the trailer: its last word, which the receiving center commits last.
    const bool ok = put(c.peer, c.peer.key, in_region(c.peer, ring + pos), trailer_offset(chunk) + 8, bytes, &c, [&](uint8_t* p) {
      std::memcpy(p, &h, sizeof h);
      copy_from(op.a.iov, op.done, p + sizeof h, chunk);
      std::memcpy(p + trailer_offset(chunk), &t, 8);
    });
    if (!ok) return false;
    ++c.seq;
    c.tail += bytes;
    op.done += chunk;
    op.finished = op.done == op.len;
  }
  return true;
}

int Messenger::rma(RmaArgs a) {
  if (a.inject) a.keep = keep(a.iov);
  auto op = std::make_unique<RmaOp>();
  op->a = std::make_shared<const RmaArgs>(std::move(a));
  op->err = std::make_shared<int>(0);
  rma_queue_.push_back(std::move(op));
  return 0;
}

// Issues queued RMA operations in order, in pieces as staging room allows; an op completes
// with its last piece, failed if any piece was.
void Messenger::run_rma(Sink& sink) {
  while (!rma_queue_.empty()) {
    RmaOp& op = *rma_queue_.front();
    const RmaArgs& a = *op.a;
    const bool moves = a.op == RmaArgs::kWrite || a.op == RmaArgs::kRead;
    const size_t len = moves ? iov_bytes(a.iov) : 4;
    if (len == 0) {  // nothing to move: done at once
      sink.transmit(rma_completion(a, 0));
      rma_queue_.pop_front();
      continue;
    }
    const uint64_t piece = std::min<uint64_t>(kMaxWrite, kStaging / 4);
    do {
      const uint64_t n = std::min<uint64_t>(piece, len - op.issued);
      const uint64_t mark = staging_head_;
      auto s = stage(std::max<uint64_t>(n, 8));
      if (!s) return;
      const uint64_t local = region_ + kStagingOffset + *s;
      const uint64_t remote = a.remote_addr + op.issued;
      const uint8_t txn = next_txn_;
      const uint32_t nacks = txn_nacks(worker_, txn);
      const tt_fabric_device dev{a.peer.mesh, a.peer.device};
      KeyScope scope(worker_, a.key);
      int rc = TT_FABRIC_EARG;
      switch (a.op) {
        case RmaArgs::kWrite:
          copy_from(a.iov, op.issued, at(kStagingOffset + *s), n);
          rc = fabric_async_write(worker_, 0, local, dev, remote, static_cast<uint32_t>(n), 0, txn, nullptr);
          break;
        case RmaArgs::kRead:
          rc = fabric_async_read(worker_, 0, dev, remote, local, static_cast<uint32_t>(n), 0, txn, nullptr);
          break;
        case RmaArgs::kAtomicAdd:
          rc = fabric_async_atomic_inc(worker_, 0, dev, a.remote_addr, a.operand, 31, 0, txn, nullptr);
          break;
        case RmaArgs::kFetchAdd:
          rc = fabric_async_atomic_read_inc(worker_, 0, local, dev, a.remote_addr, a.operand, 31, 0, txn, nullptr);
          break;
      }
      if (rc == TT_FABRIC_EAGAIN) {
        staging_head_ = mark;
        return;
      }
      next_txn_ = static_cast<uint8_t>((next_txn_ + 1) % kControlTxn);
      const uint64_t offset = op.issued, staged_at = *s;
      const bool last = op.issued + n >= len;
      auto args = op.a;
      auto err = op.err;
      if (rc != TT_FABRIC_OK && !*err) *err = rc == TT_FABRIC_EADDR ? FI_EINVAL : FI_EIO;
      Staged st{staging_head_, txn, nacks, nullptr, [this, args, err, offset, staged_at, n, last](Sink& out, int e) {
                  if (e && !*err) *err = e;
                  if (!*err && args->op == RmaArgs::kRead) copy_to(args->iov, offset, at(kStagingOffset + staged_at), n);
                  if (!*err && args->op == RmaArgs::kFetchAdd && args->result) std::memcpy(args->result, at(kStagingOffset + staged_at), 4);
                  if (last) out.transmit(rma_completion(*args, *err));
                }};
      staged_.push_back(std::move(st));
      op.issued += n;
    } while (op.issued < len);
    rma_queue_.pop_front();
  }
}

// The answers' reasons: why the fabric NACKed the latest refused packet of each transaction.
void Messenger::poll_reasons() {
  tt_fabric_completion done[64];
  for (int n; (n = tt_fabric_poll_completions(worker_, done, 64)) > 0;) {
    for (int i = 0; i < n; ++i) {
      if (done[i].kind == TT_FABRIC_NACKED) reasons_[done[i].transaction_id] = done[i].reason;
    }
  }
}

// Frees staging the fabric has answered, in order. A write whose transaction was NACKed since
// it was issued failed (FI_EACCES when refused for its key): its op fails, and a lost message
// write breaks its connection (the receiver would wait for that record for good).
void Messenger::free_staging(Sink& sink) {
  bool polled = false;
  while (!staged_.empty() && tt_fabric_pending(worker_, staged_.front().txn) == 0) {
    if (!polled) poll_reasons(), polled = true;  // (a NACK is queued before its count goes down)
    Staged st = std::move(staged_.front());
    staged_.pop_front();
    staging_tail_ = st.end;
    int err = 0;
    if (txn_nacks(worker_, st.txn) != st.nacks_before) err = reasons_[st.txn] == TT_FABRIC_NACK_PERMISSION ? FI_EACCES : FI_EIO;
    if (err && st.conn && !st.conn->error) {
      st.conn->error = err;
      warn_lost(*st.conn);
    }
    if (st.on_done) st.on_done(sink, err);
  }
}

bool Messenger::matches(const RecvArgs& r, const Incoming& m) const {
  if (r.tagged != ((m.flags & kTagged) != 0)) return false;
  if (r.tagged && ((r.tag ^ m.tag) & ~r.ignore) != 0) return false;
  return !r.from || same_endpoint(*r.from, m.from);
}

void Messenger::deliver(Incoming& m, Sink& sink) {
  const RecvArgs& r = *m.target;
  const size_t cap = iov_bytes(r.iov);
  Completion c;
  c.context = r.context;
  c.flags = FI_RECV | (r.tagged ? FI_TAGGED : FI_MSG) | ((m.flags & kCqData) ? FI_REMOTE_CQ_DATA : 0);
  c.len = std::min<size_t>(cap, m.msg_len);
  c.buf = r.iov.empty() ? nullptr : r.iov[0].iov_base;
  c.data = m.data, c.tag = m.tag;
  c.source = m.from;
  c.report = r.report;
  if (m.msg_len > cap) c.err = FI_ETRUNC, c.olen = m.msg_len - cap;
  sink.receive(c);
}

int Messenger::post_recv(RecvArgs a, Sink& sink) {
  if (a.peek) {
    Completion c;
    c.context = a.context;
    c.flags = FI_RECV | (a.tagged ? FI_TAGGED : FI_MSG);
    c.err = FI_ENOMSG;
    c.counted = false;
    for (const auto& m : unexpected_) {
      if (m->complete && matches(a, *m)) {
        c.err = 0, c.len = m->msg_len, c.tag = m->tag, c.data = m->data, c.source = m->from;
        break;
      }
    }
    sink.receive(c);
    return 0;
  }
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    Incoming& m = **it;
    if (!matches(a, m)) continue;
    m.target = std::move(a);
    copy_to(m.target->iov, 0, m.buffer.data(), m.got);
    m.buffer.clear();
    m.buffer.shrink_to_fit();
    if (m.complete) deliver(m, sink);
    unexpected_.erase(it);
    return 0;
  }
  posted_.push_back(std::move(a));
  return 0;
}

bool Messenger::cancel(void* context, Sink& sink) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (it->context != context) continue;
    Completion c;
    c.context = context;
    c.flags = FI_RECV | (it->tagged ? FI_TAGGED : FI_MSG);
    c.err = FI_ECANCELED;
    posted_.erase(it);
    sink.receive(c);
    return true;
  }
  return false;
}

void Messenger::take_record(Slot& s, int index, const RecordHeader& h, const uint8_t* payload, Sink& sink) {
  (void)index;
  if (h.flags & kFirst) {
    auto m = std::make_shared<Incoming>();
    m->from = s.from;
    m->msg_len = h.msg_len, m->tag = h.tag, m->data = h.data, m->flags = h.flags;
    for (auto it = posted_.begin(); it != posted_.end(); ++it) {
      if (!matches(*it, *m)) continue;
      m->target = std::move(*it);
      posted_.erase(it);
      break;
    }
    if (!m->target) {
      m->buffer.resize(m->msg_len);
      unexpected_.push_back(m);
    }
    s.current = m;
  }
  Incoming* m = s.current.get();
  if (!m) return;  // (a protocol error: a continuation without its first record)
  if (m->target) {
    copy_to(m->target->iov, m->got, payload, h.len);
  } else {
    std::memcpy(m->buffer.data() + m->got, payload, std::min<uint64_t>(h.len, m->msg_len - m->got));
  }
  m->got += h.len;
  if (h.flags & kLast) {
    m->complete = true;
    if (m->target) deliver(*m, sink);
    s.current.reset();
  }
}

// After reading a ring: how far it has read goes back to the sender once that is a sixteenth
// of the ring or more (a sender waits for credit only with more than half the ring unreported:
// its largest need is a record and a wrap, under half a ring).
void Messenger::report_credit(Slot& s) {
  if (s.head - s.reported < kRing / 16) return;
  const uint64_t head = s.head, before = s.reported;
  if (!put(s.from, s.from.key, in_region(s.from, s.credit_offset), 8, 8, nullptr, [&](uint8_t* p) { std::memcpy(p, &head, 8); })) {
    return;
  }
  s.reported = head;
  // A lost report is made again: without it the sender could wait for credit for good.
  staged_.back().on_done = [&s, before, head](Sink&, int e) {
    if (e && s.reported == head) s.reported = before;
  };
}

// The record at the slot's head if it has all landed: its trailer is there, found at the
// offset its header gives (read again once the trailer says the header is whole).
std::optional<RecordHeader> Messenger::landed(const Slot& s, const uint8_t* p) const {
  RecordHeader h;
  std::memcpy(&h, p, sizeof h);
  if (h.seq != s.seq + 1 || h.len > kMaxRecordPayload) return std::nullopt;
  if (load64(p + trailer_offset(h.len)) != trailer(s.nonce, h.seq)) return std::nullopt;
  RecordHeader again;
  std::memcpy(&again, p, sizeof again);
  if (std::memcmp(&again, &h, sizeof h) != 0) return std::nullopt;  // it was torn: look again later
  return h;
}

void Messenger::read_inbox(Sink& sink) {
  const uint32_t n = std::min<uint32_t>(load32(at(kControlOffset)), kSlots);
  while (slots_.size() < n) slots_.push_back(std::make_unique<Slot>());
  for (uint32_t i = 0; i < n; ++i) {
    Slot& s = *slots_[i];
    const uint8_t* header = at(kSlotsOffset + 64 * uint64_t{i});
    if (!s.nonce) {
      const uint64_t nonce = load64(header + offsetof(SlotHeader, nonce));
      if (!nonce) continue;  // the sender's slot header has not all landed yet
      SlotHeader h;
      std::memcpy(&h, header, sizeof h);
      s.from = Addr{kAddrMagic, h.mesh, h.device, h.core, h.index, 0, h.region, h.credit_key};
      s.credit_offset = h.credit_offset;
      s.nonce = nonce;
    }
    const uint8_t* ring = at(kInboxOffset + uint64_t{i} * kRing);
    for (;;) {
      const uint8_t* p = ring + s.head % kRing;
      const auto h = landed(s, p);
      if (!h) break;
      ++s.seq;
      ++events_;
      if (h->flags & kWrap) {
        s.head += kRing - s.head % kRing;
        continue;
      }
      take_record(s, static_cast<int>(i), *h, p + sizeof *h, sink);
      s.head += record_bytes(h->len);
    }
    report_credit(s);
  }
}

bool Messenger::progress(Sink& sink) {
  const uint64_t before = events_ + staging_tail_ + staging_head_;
  free_staging(sink);
  for (Conn* c : conn_order_) {
    while (!c->queue.empty()) {
      SendOp& op = *c->queue.front();
      Completion k;
      k.context = op.a.context;
      k.flags = FI_SEND | (op.a.tagged ? FI_TAGGED : FI_MSG);
      k.len = op.len;
      k.report = op.a.report;
      if (c->error) {
        k.err = c->error;
        sink.transmit(k);  // errors are reported even without FI_COMPLETION
      } else {
        if (!emit(*c, op)) break;
        if (op.a.transmit_complete && !staged_.empty()) {
          staged_.back().on_done = [k](Sink& out, int e) mutable {
            k.err = e;
            out.transmit(k);
          };
        } else {
          sink.transmit(k);
        }
      }
      c->queue.pop_front();
      --queued_;
    }
  }
  run_rma(sink);
  read_inbox(sink);
  return events_ + staging_tail_ + staging_head_ != before;
}

void Messenger::warn_lost(const Conn& c) const {
  std::fprintf(stderr, "libtt-fi: %s: a write to %s was lost (%s): its messages fail from now on\n", to_string(self_).c_str(),
               to_string(c.peer).c_str(), fi_strerror(c.error));
}

Completion Messenger::rma_completion(const RmaArgs& a, int err) {
  Completion c;
  c.context = a.context;
  c.flags = a.op == RmaArgs::kWrite  ? (FI_RMA | FI_WRITE)
            : a.op == RmaArgs::kRead ? (FI_RMA | FI_READ)
                                     : (FI_ATOMIC | (a.op == RmaArgs::kFetchAdd ? FI_READ : FI_WRITE));
  c.len = a.op == RmaArgs::kWrite || a.op == RmaArgs::kRead ? iov_bytes(a.iov) : 0;
  c.err = err;
  c.report = a.report;
  return c;
}

}  // namespace ttemu::fi
