// The worker side of the read/write API: validates a call, takes a ticket in the chip's
// router command buffer, writes the command and rings the doorbell if the router sleeps;
// barriers sleep on the transaction counters the router decrements as acknowledgements arrive.
#include "libfabric_tt/tt_fabric.h"
#include "libfabric_tt/tt_fabric_internal.hpp"

#include <chrono>
#include <cstring>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include <sys/random.h>
#include <unistd.h>

#include <fmt/format.h>

#include "emulator/chip/address_space.hpp"
#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/command_buffer.hpp"
#include "emulator/chip/doorbell.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/chip/window_client.hpp"
#include "emulator/common/error.hpp"
#include "emulator/common/futex.hpp"
#include "emulator/job/description.hpp"

using namespace ttemu;
using ttemu::client::chip_alive;
using ttemu::client::lookup;
using ttemu::client::Request;

static_assert(sizeof(tt_fabric_status) == sizeof(chip::FabricStatus));
static_assert(TT_FABRIC_DRAM == chip::kDramBit);
static_assert(int{TT_FABRIC_EDEVICE} == int{chip::kStatusBadDevice} && int{TT_FABRIC_EPLANE} == int{chip::kStatusBadPlane});
static_assert(TT_FABRIC_ACKED == static_cast<int>(routing::Command::kWriteAck) && TT_FABRIC_NACKED == static_cast<int>(routing::Command::kNack) &&
              TT_FABRIC_READ_DONE == static_cast<int>(routing::Command::kReadResponse));
static_assert(sizeof(tt_fabric_completion) == sizeof(chip::Completion));
static_assert(TT_FABRIC_MCAST_NOC == routing::kMcastNoc);
static_assert(TT_FABRIC_REMOTE_READ == session::kRemoteRead && TT_FABRIC_REMOTE_WRITE == session::kRemoteWrite);
static_assert(int{TT_FABRIC_NACK_PERMISSION} == int{routing::kNackPermission});
static_assert(int{TT_FABRIC_EARG} == int{chip::kStatusBadArgument} && int{TT_FABRIC_ENOWINDOW} == int{chip::kStatusNoWindow} &&
              int{TT_FABRIC_ESIZE} == int{chip::kStatusBadSize} && int{TT_FABRIC_EADDR} == int{chip::kStatusBadAddress});

namespace {

std::chrono::milliseconds barrier_limit() {
  const char* env = std::getenv("TTEMU_BARRIER_TIMEOUT_MS");
  char* end = nullptr;
  long ms = env ? std::strtol(env, &end, 10) : 0;
  return std::chrono::milliseconds(env && end && *end == 0 && ms > 0 ? ms : 60000);
}

// Open workers. A handle given to the caller is not a pointer to its tt_fabric but a key: the
// number of a slot here and the count of opens when it was opened. Every call looks its key up,
// so a handle used after tt_fabric_close (or made up) finds its slot empty or holding another
// key, and the call fails with TT_FABRIC_EARG instead of touching freed memory. The lookup is
// two loads; only open and close take the lock.
constexpr uintptr_t kSlotBits = 12;
constexpr size_t kSlots = (size_t{1} << kSlotBits) - 1;  // slot numbers 1..kSlots; 0 is no slot

struct Slot {
  std::atomic<uintptr_t> key{0};  // 0: free
  std::atomic<tt_fabric*> worker{nullptr};
};
Slot g_slots[kSlots];
std::mutex g_slots_lock;
uintptr_t g_opens = 0;

}  // namespace

tt_fabric* ttemu::client::lookup(tt_fabric* handle) {
  const auto key = reinterpret_cast<uintptr_t>(handle);
  const uintptr_t slot = key & kSlots;
  if (slot == 0) return nullptr;
  Slot& s = g_slots[slot - 1];
  if (s.key.load(std::memory_order_acquire) != key) return nullptr;
  return s.worker.load(std::memory_order_relaxed);
}

namespace {

tt_fabric* add_handle(std::unique_ptr<tt_fabric> f) {
  std::lock_guard lock(g_slots_lock);
  for (size_t i = 0; i < kSlots; ++i) {
    if (g_slots[i].key.load(std::memory_order_relaxed) != 0) continue;
    const uintptr_t key = (++g_opens << kSlotBits) | (i + 1);
    g_slots[i].worker.store(f.release(), std::memory_order_relaxed);
    g_slots[i].key.store(key, std::memory_order_release);
    return reinterpret_cast<tt_fabric*>(key);
  }
  throw Error(fmt::format("too many open workers in this process ({})", kSlots));
}

// The worker of a live handle, which is then no longer valid; nullptr for anything else.
std::unique_ptr<tt_fabric> remove_handle(tt_fabric* handle) {
  std::lock_guard lock(g_slots_lock);
  tt_fabric* f = lookup(handle);
  if (!f) return nullptr;
  Slot& s = g_slots[(reinterpret_cast<uintptr_t>(handle) & kSlots) - 1];
  s.key.store(0, std::memory_order_release);
  s.worker.store(nullptr, std::memory_order_relaxed);
  return std::unique_ptr<tt_fabric>(f);
}

int fail(tt_fabric_status* status, int code) {
  if (status) *status = {code, -1};
  return code;
}

// What the chip knows this process by, as its sockets' owner (SocketEndpoint::owner): our pid,
// if the chip's process sees our pid namespace (and may look at it); 0 otherwise (a worker in
// another container's namespace, or another user's: its sockets are then not watched).
uint32_t owner_for(const chip::ChipControl& c) {
  char mine[64] = {}, chips[64] = {};
  const std::string theirs = fmt::format("/proc/{}/ns/pid", c.pid.load(std::memory_order_relaxed));
  if (::readlink("/proc/self/ns/pid", mine, sizeof mine - 1) <= 0 || ::readlink(theirs.c_str(), chips, sizeof chips - 1) <= 0) return 0;
  return std::strcmp(mine, chips) == 0 ? static_cast<uint32_t>(::getpid()) : 0;
}


}  // namespace

bool ttemu::client::chip_alive(const tt_fabric* f) { return chip::chip_running(*f->block); }

namespace {

// Checks the call and hands it to the chip's command buffer; `block`: wait for a slot.
int submit_checked(tt_fabric* f, const Request& r, tt_fabric_status* status, bool block) {
  if (!f) return fail(status, TT_FABRIC_EARG);
  if (r.plane >= f->planes) return fail(status, TT_FABRIC_EPLANE);
  if (r.txn >= chip::kTxnIds) return fail(status, TT_FABRIC_ETXN);
  if (r.fvc < -1 || r.fvc >= f->data_fvcs) return fail(status, TT_FABRIC_EFVC);
  auto t = f->targets.find({r.dst.mesh, r.dst.device});
  if (t == f->targets.end()) return fail(status, TT_FABRIC_EDEVICE);
  const bool moves_data = routing::moves_data(r.command);
  if (moves_data && (r.size == 0 || r.size > TT_FABRIC_MAX_SIZE)) return fail(status, TT_FABRIC_ESIZE);
  const uint32_t span = moves_data ? r.size : 4;
  // With a key, dst_addr is an offset into a window that the remote center checks.
  if (r.key == 0 && !chip::in_range(r.dst_addr, span, t->second.l1_bytes, t->second.dram_bytes)) return fail(status, TT_FABRIC_EADDR);
  if (routing::writes(r.command) && !chip::in_range(r.src_addr, r.size, f->l1.size(), f->dram.size())) {
    return fail(status, TT_FABRIC_EADDR);
  }
  const bool answers = routing::answered_with_data(r.command);
  if (answers && !chip::in_range(r.return_addr, span, f->l1.size(), f->dram.size())) return fail(status, TT_FABRIC_EADDR);

  // A status inside chip memory is the router's to fill (it knows the FVC it picks).
  uint64_t status_addr = 0;
  auto* sp = reinterpret_cast<uint8_t*>(status);
  auto* l1 = f->l1.as<uint8_t>();
  auto* dram = f->dram.as<uint8_t>();
  if (sp >= l1 && sp + sizeof(*status) <= l1 + f->l1.size()) status_addr = static_cast<uint64_t>(sp - l1);
  else if (sp >= dram && sp + sizeof(*status) <= dram + f->dram.size()) status_addr = TT_FABRIC_DRAM | static_cast<uint64_t>(sp - dram);
  if (status) *status = {TT_FABRIC_OK, r.fvc};
  const chip::CommandRequest request{.command = r.command, .fvc = static_cast<int8_t>(r.fvc), .plane = r.plane,
                                     .txn_id = r.txn, .wrap = r.wrap, .ttl = routing::kDefaultTtl,
                                     .dst_mesh = r.dst.mesh, .dst_device = r.dst.device, .size = r.size, .arg = r.arg,
                                     .src_addr = r.src_addr, .dst_addr = r.dst_addr, .return_addr = r.return_addr,
                                     .status_addr = status_addr, .copies = r.copies, .key = r.key};
  if (f->commands->try_submit(request)) return TT_FABRIC_OK;  // no clock, no syscall when a slot is free
  bool alive = chip_alive(f), sent = false;
  // Blocking: waits for a slot in steps, looking between them whether the chip still runs.
  if (block) {
    for (const auto deadline = std::chrono::steady_clock::now() + f->limit; alive && !sent; alive = sent || chip_alive(f)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      sent = f->commands->submit(request, std::min(left, std::chrono::milliseconds(100)));
    }
  }
  if (!sent) return fail(status, !alive ? TT_FABRIC_ECHIPDOWN : block ? TT_FABRIC_ETIMEDOUT : TT_FABRIC_EAGAIN);
  return TT_FABRIC_OK;
}

// The key a worker's writes, reads and atomics name (none for a handle that is not open).
uint64_t key_of(const tt_fabric* f) { return f ? f->key : 0; }

// submit_checked, and in retry mode the write kept for its barrier.
int submit(tt_fabric* f, const Request& r, tt_fabric_status* status) {
  const bool journal = f && f->retry_rounds > 0 && r.command == routing::Command::kWrite && r.txn < chip::kTxnIds;
  // The transaction's NACKs count from before its first write: the source's own router may
  // NACK the write (a down link, no route) before this call returns, and a count taken after
  // it would hide that NACK from the barrier.
  if (journal && f->journal[r.txn].writes.empty()) f->begin_journal(r.txn);
  const int rc = submit_checked(f, r, status, f && !f->nonblocking);
  if (rc == TT_FABRIC_OK && journal) f->journal[r.txn].writes.push_back(r);
  return rc;
}

// Waits until every packet of the transaction is answered. In retry mode (`lost` given), once
// the control plane has loaded new tables since the writes left, packets that stay unanswered
// for the retry wait are taken as lost with a failed chip (no router is left to NACK them):
// the count is cleared and *lost set, and the barrier writes them again.
int wait_answers(tt_fabric* f, uint8_t txn, bool* lost = nullptr) {
  auto& ws = f->block->commands.workers[f->core];
  auto& counter = ws.txn[txn];
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + f->limit;
  auto progress = start;
  uint32_t last = counter.load(std::memory_order_acquire);
  if (lost) *lost = false;
  for (int spin = 0;; ++spin) {
    uint32_t v = counter.load(std::memory_order_acquire);
    if (v == 0) return TT_FABRIC_OK;
    if (spin < 2000) continue;  // a short, bounded spin while traffic flows
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) return TT_FABRIC_ETIMEDOUT;
    if (!chip_alive(f)) return TT_FABRIC_ECHIPDOWN;  // nobody will answer
    if (v != last) last = v, progress = now;
    if (lost && now - progress >= f->retry_wait &&
        f->block->tables_version.load(std::memory_order_acquire) != f->journal[txn].tables_version) {
      f->lost += counter.exchange(0);  // (answers may have come since v was read)
      *lost = true;
      return TT_FABRIC_OK;
    }
    ws.sleepers.fetch_add(1, std::memory_order_seq_cst);  // the router wakes only sleepers
    v = counter.load(std::memory_order_seq_cst);
    if (v != 0) futex_wait(counter, v, std::chrono::milliseconds(100));
    ws.sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

// The control plane gives new tables to one chip after another, so a source can hold tables
// that a router on the way has not loaded yet: writes sent again then meet the old routes and
// are NACKed where those end, a round lost. Before writing again, this waits, until
// `deadline`, for every running chip of this host to hold `version` or later. Not waited for: a
// chip of another host (it cannot be seen from here), one whose block is being made anew (a
// restart: it starts with the tables in force) or not yet claimed by its process (pid 0).
void await_tables_everywhere(const tt_fabric* f, uint32_t version, std::chrono::steady_clock::time_point deadline) {
  for (const auto& [id, target] : f->targets) {
    const routing::ChipId chip{id.first, id.second};
    if (chip == f->self) continue;
    chip::Segment seg;
    try {
      seg = chip::Segment::open(chip::segment_name(f->job, chip, chip::SegmentKind::kControl));
    } catch (const std::exception&) {
      continue;
    }
    if (seg.size() < sizeof(chip::ChipControl)) continue;
    auto& c = *seg.as<chip::ChipControl>();
    if (c.magic != chip::kControlMagic || c.version != chip::kControlVersion || c.pid.load() == 0) continue;
    for (uint32_t v = c.tables_version.load(std::memory_order_acquire); v < version && chip::chip_running(c);
         v = c.tables_version.load(std::memory_order_acquire)) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds::zero()) return;
      futex_wait(c.tables_version, v, std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(100)));
    }
  }
}

int barrier(tt_fabric* f, uint8_t txn) {
  if (!f) return TT_FABRIC_EARG;
  if (txn >= chip::kTxnIds) return TT_FABRIC_ETXN;
  auto& j = f->journal[txn];
  auto& nacks = f->block->commands.workers[f->core].txn_nacks[txn];
  auto& version = f->block->tables_version;
  bool lost = false;
  const bool retrying = !j.writes.empty();
  int rc = wait_answers(f, txn, retrying ? &lost : nullptr);
  for (int round = 0; rc == TT_FABRIC_OK && retrying; ++round) {
    if (!lost && nacks.load(std::memory_order_acquire) == j.nacks_before) break;  // nothing NACKed or lost
    if (round == f->retry_rounds) {
      rc = TT_FABRIC_ENACKED;
      break;
    }
    // Again over new routes, waited for: a NACK may come before the reload it causes, and a
    // reload may follow another (a chip that comes back is routed through again only by the
    // next). The first round writes again without them too; a later round that waits in vain
    // gives up, for the same routes would fail the same way.
    const auto until = std::chrono::steady_clock::now() + f->retry_wait;
    for (uint32_t v = version.load(std::memory_order_acquire); v == j.tables_version; v = version.load(std::memory_order_acquire)) {
      const auto left = until - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds::zero()) break;
      futex_wait(version, v, std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(100)));
    }
    if (round > 0 && version.load(std::memory_order_acquire) == j.tables_version) {
      rc = TT_FABRIC_ENACKED;
      break;
    }
    await_tables_everywhere(f, version.load(std::memory_order_acquire), std::chrono::steady_clock::now() + f->retry_wait);
    std::vector<Request> again = std::move(j.writes);
    j.writes.clear();
    f->begin_journal(txn);
    for (const Request& r : again) {
      tt_fabric_status st;
      // Blocking even for a non-blocking worker: a write the barrier drops would be lost unsaid.
      if ((rc = submit_checked(f, r, &st, /*block=*/true)) != TT_FABRIC_OK) break;
      j.writes.push_back(r);
      ++f->retried;
    }
    if (rc == TT_FABRIC_OK) rc = wait_answers(f, txn, &lost);
  }
  j.writes.clear();
  return rc;
}

}  // namespace

std::span<uint8_t> ttemu::client::memory(tt_fabric* f, uint64_t addr, size_t size) {
  return chip::locate(addr, size, {f->l1.as<uint8_t>(), f->l1.size()}, {f->dram.as<uint8_t>(), f->dram.size()});
}

extern "C" {

tt_fabric* tt_fabric_open(const char* job, uint16_t mesh, uint16_t device, uint16_t core, char* error,
                          size_t error_len) {
  auto set_error = [&](const std::string& e) {
    if (error && error_len) {
      std::snprintf(error, error_len, "%s", e.c_str());
    }
  };
  try {
    // The system as its launcher published it: no request to the launcher, no guessing.
    const job::SystemDescription d = job::read_description(job::find_job(job ? std::optional<std::string>(job) : std::nullopt));
    auto f = std::make_unique<tt_fabric>();
    f->job = d.job;
    f->self = {mesh, device};
    f->planes = d.planes;
    f->data_fvcs = d.data_fvcs;
    bool found = false;
    for (const auto& c : d.chips) {
      f->targets[{c.mesh, c.device}] = {c.l1_bytes, c.dram_bytes, c.row, c.col, c.mesh_rows, c.mesh_cols};
      if (c.mesh == mesh && c.device == device) {
        found = true;
        f->tensix_cores = c.tensix_cores;
        f->tensix_l1 = c.tensix_l1;
      }
    }
    if (!found) throw Error(fmt::format("device M{}D{} is not in the running system", mesh, device));
    f->core = core;
    f->ctl = chip::Segment::open(chip::segment_name(f->job, f->self, chip::SegmentKind::kControl));
    f->l1 = chip::Segment::open(chip::segment_name(f->job, f->self, chip::SegmentKind::kL1));
    f->dram = chip::Segment::open(chip::segment_name(f->job, f->self, chip::SegmentKind::kDram));
    f->block = f->ctl.as<chip::ChipControl>();
    if (f->block->magic != chip::kControlMagic || f->block->version != chip::kControlVersion) {
      throw Error(fmt::format("device M{}D{}: its control block is not one this library knows", mesh, device));
    }
    f->doorbell = std::make_unique<chip::DoorbellRinger>(f->job, f->self);
    f->limit = barrier_limit();
    auto* ringer = f->doorbell.get();
    f->commands = std::make_unique<chip::CommandBufferClient>(*f->block, core, [ringer] { ringer->ring(); });
    auto* raw = f.get();
    f->sockets = std::make_unique<chip::SocketClient>(*f->block, *f->commands, core, [raw](uint64_t addr, size_t size) {
      return ttemu::client::memory(raw, addr, size);
    }, owner_for(*f->block));  // the chip closes this process's sockets if it ends without
    // A worker is a Tensix core: its own L1 and its own transaction counters.
    const int cores = std::min(f->tensix_cores, chip::kMaxWorkers);
    if (core >= cores) throw Error(fmt::format("core {} out of range: a worker is a Tensix core, 0-{}", core, cores - 1));
    return add_handle(std::move(f));
  } catch (const std::exception& e) {
    set_error(e.what());
    return nullptr;
  }
}

void tt_fabric_close(tt_fabric* handle) {
  std::unique_ptr<tt_fabric> f = remove_handle(handle);
  if (!f) return;
  for (uint64_t key : f->windows) chip::deregister_window(*f->block, f->core, key);
}

void* tt_fabric_memory(tt_fabric* handle, uint64_t addr, size_t size) {
  tt_fabric* f = lookup(handle);
  if (!f) return nullptr;
  return ttemu::client::memory(f, addr, size).data();
}

uint64_t tt_fabric_core_l1(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  if (!f) return 0;
  if (f->core < f->tensix_cores) return static_cast<uint64_t>(f->core) * f->tensix_l1;
  return 0;
}

uint64_t tt_fabric_core_l1_size(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  return f ? f->tensix_l1 : 0;
}

int tt_fabric_devices(tt_fabric* handle, tt_fabric_device* out, int max) {
  tt_fabric* f = lookup(handle);
  if (!f) return 0;
  int n = 0;
  for (const auto& [key, t] : f->targets) {
    if (out && n < max) out[n] = {key.first, key.second};
    ++n;
  }
  return n;
}

int tt_fabric_device_position(tt_fabric* handle, tt_fabric_device d, int* row, int* col) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  auto t = f->targets.find({d.mesh, d.device});
  if (t == f->targets.end()) return TT_FABRIC_EDEVICE;
  if (row) *row = t->second.row;
  if (col) *col = t->second.col;
  return TT_FABRIC_OK;
}

int tt_fabric_data_fvcs(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  return f ? f->data_fvcs : 0;
}

int tt_fabric_set_nonblocking(tt_fabric* handle, int on) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  f->nonblocking = on != 0;
  return TT_FABRIC_OK;
}

int tt_fabric_poll_completions(tt_fabric* handle, tt_fabric_completion* out, int max) {
  tt_fabric* f = lookup(handle);
  if (!f || max < 0 || (max > 0 && !out)) return TT_FABRIC_EARG;
  chip::Completion got[64];
  int n = 0;
  while (n < max) {
    const size_t k = f->commands->poll({got, std::min<size_t>(64, static_cast<size_t>(max - n))});
    for (size_t i = 0; i < k; ++i, ++n) {
      out[n] = {got[i].txn_id, static_cast<uint8_t>(got[i].command), got[i].reason, got[i].packets};
    }
    if (k == 0) break;
  }
  return n;
}

uint32_t tt_fabric_completions_lost(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  return f ? f->block->commands.workers[f->core].cq_overflow.load() : 0;
}

int64_t tt_fabric_pending(tt_fabric* handle, uint8_t txn) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  if (txn >= chip::kTxnIds) return TT_FABRIC_ETXN;
  return f->commands->in_flight(txn);
}

uint32_t tt_fabric_nacks(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  return f ? f->block->commands.workers[f->core].nacks.load() : 0;
}

uint32_t tt_fabric_permission_nacks(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  return f ? f->block->commands.workers[f->core].permission_nacks.load() : 0;
}

int tt_fabric_mr_register(tt_fabric* handle, uint64_t addr, uint64_t size, uint32_t access, uint64_t* key) {
  tt_fabric* f = lookup(handle);
  if (!f || !key) return TT_FABRIC_EARG;
  // The key's upper bits from the kernel: no worker can guess another's keys.
  uint64_t random = 0;
  if (getrandom(&random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
    std::random_device rd;
    random = uint64_t{rd()} << 32 | rd();
  }
  const chip::WindowRegistration r = chip::register_window(*f->block, f->core, addr, size, access, f->l1.size(), f->dram.size(), random);
  if (r.status != chip::kStatusOk) return r.status;
  f->windows.push_back(r.key);
  *key = r.key;
  return TT_FABRIC_OK;
}

int tt_fabric_mr_deregister(tt_fabric* handle, uint64_t key) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  const int rc = chip::deregister_window(*f->block, f->core, key);
  if (rc == TT_FABRIC_OK) std::erase(f->windows, key);
  return rc;
}

int tt_fabric_set_key(tt_fabric* handle, uint64_t key) {
  tt_fabric* f = lookup(handle);
  if (!f) return TT_FABRIC_EARG;
  f->key = key;
  return TT_FABRIC_OK;
}

const char* tt_fabric_strerror(int code) {
  switch (code) {
    case TT_FABRIC_OK: return "success";
    case TT_FABRIC_EDEVICE: return "no such device";
    case TT_FABRIC_EADDR: return "address outside L1 or DRAM";
    case TT_FABRIC_ESIZE: return "size is 0 or too large";
    case TT_FABRIC_ETXN: return "transaction id outside 0-15";
    case TT_FABRIC_EFVC: return "no such FVC";
    case TT_FABRIC_EPLANE: return "no such routing plane";
    case TT_FABRIC_ETIMEDOUT: return "barrier timed out";
    case TT_FABRIC_ECHIPDOWN: return "this worker's chip is not running";
    case TT_FABRIC_ENACKED: return "writes still NACKed after every retry";
    case TT_FABRIC_EARG: return "bad argument";
    case TT_FABRIC_EAGAIN: return "the command buffer is full: try again";
    case TT_FABRIC_EEPOCH: return "the receiver is open for this socket in another epoch";
    case TT_FABRIC_ENOENDPOINT: return "no such socket (here or at the far end)";
    case TT_FABRIC_ENOCREDITS: return "the consumer has no room now: try again";
    case TT_FABRIC_ECLOSED: return "the socket was closed";
    case TT_FABRIC_ELOST: return "the fabric dropped the stream's data: the stream is broken";
    case TT_FABRIC_ESOCKETOPEN: return "socket open error: no free endpoint or socket type not available";
    case TT_FABRIC_ENOPERM: return "the socket belongs to another worker";
    case TT_FABRIC_ENOWINDOW: return "no free memory window on this chip";
  }
  return "unknown error";
}

int fabric_async_write(tt_fabric* handle, uint8_t plane, uint64_t src_addr, tt_fabric_device dst, uint64_t dst_addr,
                       uint32_t size, int fvc, uint8_t txn, tt_fabric_status* status) {
  tt_fabric* f = lookup(handle);
  return submit(f, {.command = routing::Command::kWrite, .plane = plane, .dst = dst, .src_addr = src_addr,
                    .dst_addr = dst_addr, .size = size, .fvc = fvc, .txn = txn, .key = key_of(f)}, status);
}

int fabric_async_write_multicast(tt_fabric* handle, uint8_t plane, tt_fabric_device origin, uint8_t e, uint8_t w,
                                 uint8_t n, uint8_t s, uint64_t src_addr, uint64_t dst_addr, uint32_t size,
                                 int fvc, uint8_t txn, uint32_t mcast_flags, tt_fabric_status* status) {
  tt_fabric* f = lookup(handle);
  if (!f) return fail(status, TT_FABRIC_EARG);
  auto o = f->targets.find({origin.mesh, origin.device});
  if (o == f->targets.end()) return fail(status, TT_FABRIC_EDEVICE);
  if (mcast_flags & ~uint32_t{TT_FABRIC_MCAST_NOC}) return fail(status, TT_FABRIC_EARG);
  const bool noc = (mcast_flags & TT_FABRIC_MCAST_NOC) != 0;
  // Check every destination first, so that an error sends nothing. The group is the origin's
  // mesh within the depths, as the fabric's copies cover it (routing/multicast.hpp).
  size_t group = 0;
  for (const auto& [key, t] : f->targets) {
    if (key.first != origin.mesh) continue;
    const int dr = t.row - o->second.row, dc = t.col - o->second.col;
    if (dr < -n || dr > s || dc < -w || dc > e) continue;
    ++group;
    // NOC multicast: dst_addr is an offset inside each Tensix core's L1 (same arch throughout).
    const bool in = noc ? dst_addr + size <= f->tensix_l1 : chip::in_range(dst_addr, size, t.l1_bytes, t.dram_bytes);
    if (!in) return fail(status, TT_FABRIC_EADDR);
  }
  // One command: the fabric carries one packet to the origin and copies it from there; every
  // device acknowledges, so the barrier means every one committed.
  Request r{.command = routing::Command::kMcastWrite, .plane = plane, .dst = origin, .src_addr = src_addr,
            .dst_addr = dst_addr, .size = size, .arg = routing::McastDepths{e, w, n, s}.pack(),
            .wrap = static_cast<uint8_t>(mcast_flags), .fvc = fvc, .txn = txn};
  r.copies = static_cast<uint16_t>(group);
  return submit(f, r, status);
}

int tt_fabric_set_retry(tt_fabric* handle, int rounds, uint32_t wait_ms) {
  tt_fabric* f = lookup(handle);
  if (!f || rounds < 0 || rounds > 1000) return TT_FABRIC_EARG;
  f->retry_rounds = rounds;
  f->retry_wait = std::chrono::milliseconds(wait_ms);
  if (rounds == 0) {
    for (auto& j : f->journal) j.writes.clear();
  }
  return TT_FABRIC_OK;
}

uint64_t tt_fabric_retried(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  return f ? f->retried : 0;
}

uint64_t tt_fabric_lost(tt_fabric* handle) {
  tt_fabric* f = lookup(handle);
  return f ? f->lost : 0;
}

int fabric_async_write_barrier(tt_fabric* handle, uint8_t txn) { return barrier(lookup(handle), txn); }
int fabric_async_read_barrier(tt_fabric* handle, uint8_t txn) { return barrier(lookup(handle), txn); }

int fabric_async_read(tt_fabric* handle, uint8_t plane, tt_fabric_device src, uint64_t src_addr, uint64_t return_addr,
                      uint32_t size, int fvc, uint8_t txn, tt_fabric_status* status) {
  tt_fabric* f = lookup(handle);
  return submit(f, {.command = routing::Command::kReadRequest, .plane = plane, .dst = src, .dst_addr = src_addr,
                    .return_addr = return_addr, .size = size, .fvc = fvc, .txn = txn, .key = key_of(f)}, status);
}

int fabric_async_atomic_inc(tt_fabric* handle, uint8_t plane, tt_fabric_device dst, uint64_t dst_addr, uint32_t inc,
                            uint8_t wrap, int fvc, uint8_t txn, tt_fabric_status* status) {
  tt_fabric* f = lookup(handle);
  return submit(f, {.command = routing::Command::kAtomicInc, .plane = plane, .dst = dst, .dst_addr = dst_addr,
                    .arg = inc, .wrap = wrap, .fvc = fvc, .txn = txn, .key = key_of(f)}, status);
}

int fabric_async_atomic_read_inc(tt_fabric* handle, uint8_t plane, uint64_t return_addr, tt_fabric_device dst,
                                 uint64_t dst_addr, uint32_t inc, uint8_t wrap, int fvc, uint8_t txn,
                                 tt_fabric_status* status) {
  tt_fabric* f = lookup(handle);
  return submit(f, {.command = routing::Command::kAtomicReadInc, .plane = plane, .dst = dst, .dst_addr = dst_addr,
                    .return_addr = return_addr, .arg = inc, .wrap = wrap, .fvc = fvc, .txn = txn, .key = key_of(f)}, status);
}

}  // extern "C"
