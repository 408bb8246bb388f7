// The provider's data path for one endpoint: messages (tagged or not) carried as records in the
// receivers' inbox rings (mailbox.hpp), RMA and atomics as the fabric's own RDMA writes, reads
// and atomics. Everything moves through the spec-3 API of one worker (tt_fabric.h); nothing
// here waits, except taking a slot in a new peer's inbox (one atomic's round trip, once per
// peer). progress() does the work: it sends what credits and staging room allow, frees staging
// the fabric has acknowledged, and reads the inbox; results go to a Sink.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "libfabric_tt/prov/mailbox.hpp"
#include "libfabric_tt/tt_fabric.h"

namespace ttemu::fi {

bool same_endpoint(const Addr& a, const Addr& b);
std::string to_string(const Addr& a);  // "M0D3.c1.e0"
size_t iov_bytes(const std::vector<iovec>& iov);

// Where an operation's outcome goes (the endpoint routes it to its CQs and counters).
struct Completion {
  void* context = nullptr;
  uint64_t flags = 0;  // FI_SEND / FI_RECV / FI_MSG / FI_TAGGED / FI_RMA ... as libfabric reports
  size_t len = 0;
  void* buf = nullptr;
  uint64_t data = 0, tag = 0;
  int err = 0;         // 0, or a positive FI_E* code
  size_t olen = 0;     // bytes that did not fit (FI_ETRUNC)
  std::optional<Addr> source;
  bool report = true;  // to the CQ (errors always are); counters count every operation
  bool counted = true; // (not a peek)
};
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void transmit(const Completion& c) = 0;  // sends, RMA, atomics
  virtual void receive(const Completion& c) = 0;
};

struct SendArgs {
  Addr to;
  std::vector<iovec> iov;
  uint64_t tag = 0, data = 0;
  bool tagged = false, has_data = false;
  bool inject = false;         // copy the bytes now (the caller's buffer is free at once)
  bool transmit_complete = false;  // complete once the fabric acknowledged, not once staged
  bool report = true;          // a completion is wanted (FI_SELECTIVE_COMPLETION)
  void* context = nullptr;
};
struct RecvArgs {
  std::vector<iovec> iov;
  std::optional<Addr> from;    // directed receive; none: any source
  uint64_t tag = 0, ignore = 0;
  bool tagged = false;
  bool peek = false;           // FI_PEEK: report a matching message without taking it
  bool report = true;          // a completion is wanted (FI_SELECTIVE_COMPLETION)
  void* context = nullptr;
};
struct RmaArgs {
  Addr peer;
  uint64_t remote_addr = 0, key = 0;
  std::vector<iovec> iov;
  enum Op { kWrite, kRead, kAtomicAdd, kFetchAdd } op = kWrite;
  uint32_t operand = 0;        // atomics
  void* result = nullptr;      // fetch: where the old value goes
  bool report = true;
  bool inject = false;         // copy the bytes now (the caller's buffer is free at once)
  void* context = nullptr;
  std::shared_ptr<std::vector<uint8_t>> keep;  // an inject's copy of its bytes
};

class Messenger {
 public:
  // `worker`: the endpoint's worker (its own core); `self`: its address; `region`: its region's
  // chip address (TT_FABRIC_DRAM | offset) and memory.
  Messenger(tt_fabric* worker, Addr self, uint64_t region, uint8_t* memory);
  ~Messenger();
  Messenger(const Messenger&) = delete;
  Messenger& operator=(const Messenger&) = delete;

  const Addr& self() const { return self_; }
  // Queue operations; 0 or a negative FI_E* code (nothing queued).
  int send(SendArgs a);
  int post_recv(RecvArgs a, Sink& sink);
  int rma(RmaArgs a);
  // Cancels a posted receive by its context: true if one was taken back.
  bool cancel(void* context, Sink& sink);
  // True when it moved anything (sent, freed, received).
  bool progress(Sink& sink);
  size_t queued_sends() const;
  // Anything still to send, or sent and not yet answered by the fabric.
  bool busy() const;

 private:
  struct Conn;
  struct Incoming;
  struct SendOp;
  struct Staged;
  struct Slot;
  struct RmaOp;

  Conn* connect(const Addr& to);
  bool emit(Conn& c, SendOp& op);
  static std::shared_ptr<std::vector<uint8_t>> keep(std::vector<iovec>& iov);
  template <typename Fill>
  bool put(const Addr& to, uint64_t key, uint64_t dst, uint64_t size, uint64_t room, Conn* conn, Fill fill);
  void poll_reasons();
  void warn_lost(const Conn& c) const;
  static Completion rma_completion(const RmaArgs& a, int err);
  std::optional<uint64_t> stage(uint64_t bytes);
  void free_staging(Sink& sink);
  void run_rma(Sink& sink);
  void read_inbox(Sink& sink);
  std::optional<RecordHeader> landed(const Slot& s, const uint8_t* p) const;
  void take_record(Slot& s, int index, const RecordHeader& h, const uint8_t* payload, Sink& sink);
  bool matches(const RecvArgs& r, const Incoming& m) const;
  void deliver(Incoming& m, Sink& sink);
  void report_credit(Slot& s);
  uint8_t* at(uint64_t offset) const { return memory_ + offset; }

  tt_fabric* worker_;
  Addr self_;
  uint64_t region_;
  uint8_t* memory_;
  std::map<std::tuple<uint16_t, uint16_t, uint16_t, uint16_t, uint64_t>, std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> conn_order_;
  std::deque<Staged> staged_;
  uint64_t staging_head_ = 0, staging_tail_ = 0;  // positions that only grow, modulo kStaging
  uint8_t next_txn_ = 0;
  std::deque<std::unique_ptr<RmaOp>> rma_queue_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::list<RecvArgs> posted_;                      // receives waiting for a message
  std::list<std::shared_ptr<Incoming>> unexpected_; // messages waiting for a receive
  uint64_t events_ = 0;
  size_t queued_ = 0;            // sends queued, over every connection
  uint16_t reasons_[16] = {};    // per transaction: the reason of its latest NACK  // things moved, counted to tell progress from an idle poll
};

}  // namespace ttemu::fi
