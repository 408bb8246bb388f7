#include "emulator/chip/command_buffer.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

#include "emulator/chip/doorbell.hpp"
#include "emulator/common/futex.hpp"
#include "emulator/job/job.hpp"

namespace ttemu::chip {

namespace {

// This process's pid for the claims, kept right in a child of fork() (a claim with a parent's
// pid could be voided while the child still writes the slot).
uint32_t own_pid() {
  static std::atomic<uint32_t> pid{0};
  static const bool once = [] {
    pid = static_cast<uint32_t>(::getpid());
    return ::pthread_atfork(nullptr, nullptr, [] { pid = static_cast<uint32_t>(::getpid()); }) == 0;
  }();
  (void)once;
  return pid.load(std::memory_order_relaxed);
}

}  // namespace

CommandBufferClient::CommandBufferClient(ChipControl& control, uint16_t core, std::function<void()> ring)
    : ctl_(control), core_(core), ring_(std::move(ring)) {
  const uint64_t chip_ns = control.pid_namespace.load(std::memory_order_relaxed);
  visible_ = chip_ns == 0 || chip_ns == job::pid_namespace();
}

bool CommandBufferClient::try_submit(const CommandRequest& r) {
  auto& cb = ctl_.commands;
  for (;;) {
    // Take a ticket only when its slot is free: the router has served the ticket kCommandSlots
    // before it (slots come back in ticket order), so no taken ticket ever waits for a slot.
    uint32_t ticket = cb.next_ticket.load(std::memory_order_relaxed);
    do {
      if (ticket - cb.served.load(std::memory_order_acquire) >= kCommandSlots) return false;
    } while (!cb.next_ticket.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel));
    FabricCommand& slot = cb.slots[ticket % kCommandSlots];
    // Claimed with this process's pid, so that the router can tell a worker that died here
    // from a slow one. The claim fails only if the router voided the slot (this worker was
    // stopped right after its ticket for longer than the router waits): another ticket then.
    uint64_t free = slot_state(ticket, kSlotFree);
    const uint64_t mine = slot_state(ticket, kSlotFilling, visible_ ? own_pid() : 0);
    if (!slot.state.compare_exchange_strong(free, mine, std::memory_order_acq_rel)) continue;
    if (publish(slot, mine, r)) return true;
  }
}

// Writes the command into the claimed slot and marks it ready; false if the router voided the
// claim.
bool CommandBufferClient::publish(FabricCommand& slot, uint64_t mine, const CommandRequest& r) {
  auto& cb = ctl_.commands;
  slot.command = r.command;
  slot.fvc = r.fvc;
  slot.plane = r.plane;
  slot.txn_id = r.txn_id;
  slot.core = core_;
  slot.wrap = r.wrap;
  slot.ttl = r.ttl;
  slot.dst_mesh = r.dst_mesh;
  slot.dst_device = r.dst_device;
  slot.size = r.size;
  slot.arg = r.arg;
  slot.src_addr = r.src_addr;
  slot.dst_addr = r.dst_addr;
  slot.return_addr = r.return_addr;
  slot.status_addr = r.status_addr;
  slot.copies = r.copies;
  slot.key = r.key;
  // Counted before the command is ready: the router may answer it at once. Then the slot says
  // so, and the router takes the count back if this worker dies before the command is ready.
  // (Killed between the two, a few instructions, the count stays: a later worker on this core
  // would wait for it and time out, which is better than a take-back of what was never added
  // finishing that worker's barrier early.)
  auto& txn = cb.workers[core_ % kMaxWorkers].txn[r.txn_id % kTxnIds];
  const uint32_t packets = routing::packets_for(r.command, r.size) * r.copies;
  txn.fetch_add(packets);
  slot.counted = packets;
  slot.counted_ticket.store(slot_ticket(mine), std::memory_order_release);
  // The router voids a claim only once its pid is gone, so this cannot fail for a live worker;
  // if it did, the router has taken the count back.
  if (!slot.state.compare_exchange_strong(mine, slot_state(slot_ticket(mine), kSlotReady), std::memory_order_acq_rel)) {
    return false;
  }
  // The router looks for ready slots after it says it sleeps; ring only if it has said so.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (ring_ && should_ring(cb.router_asleep)) ring_();
  return true;
}

bool CommandBufferClient::submit(const CommandRequest& r, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!try_submit(r)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    wait_for_slot(std::min(left, std::chrono::milliseconds(100)));
  }
  return true;
}

void CommandBufferClient::wait_for_slot(std::chrono::milliseconds limit) {
  auto& cb = ctl_.commands;
  // Asleep until the router serves (it wakes only sleepers that said so).
  const uint32_t served = cb.served.load(std::memory_order_acquire);
  cb.served_waiters.fetch_add(1, std::memory_order_seq_cst);
  if (cb.next_ticket.load(std::memory_order_seq_cst) - cb.served.load(std::memory_order_seq_cst) >= kCommandSlots) {
    futex_wait(cb.served, served, limit);
  }
  cb.served_waiters.fetch_sub(1, std::memory_order_relaxed);
}

void CommandBufferClient::notify() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (ctl_.commands.router_asleep.load(std::memory_order_relaxed) && ring_) ring_();
}

size_t CommandBufferClient::poll(std::span<Completion> out) {
  auto& w = ctl_.commands.workers[core_ % kMaxWorkers];
  const uint32_t head = w.cq_head.load(std::memory_order_acquire);
  uint32_t tail = w.cq_tail.load(std::memory_order_relaxed);
  size_t n = 0;
  for (; tail != head && n < out.size(); ++tail, ++n) out[n] = w.cq[tail % kCompletionSlots];
  w.cq_tail.store(tail, std::memory_order_release);
  return n;
}

uint32_t CommandBufferClient::in_flight(uint8_t txn) const {
  return ctl_.commands.workers[core_ % kMaxWorkers].txn[txn % kTxnIds].load(std::memory_order_acquire);
}

uint32_t CommandBufferClient::nacked(uint8_t txn) const {
  return ctl_.commands.workers[core_ % kMaxWorkers].txn_nacks[txn % kTxnIds].load(std::memory_order_acquire);
}

void post_completion(WorkerState& w, const Completion& c) {
  const uint32_t head = w.cq_head.load(std::memory_order_relaxed);
  if (head - w.cq_tail.load(std::memory_order_acquire) >= kCompletionSlots) {
    w.cq_overflow.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  w.cq[head % kCompletionSlots] = c;
  w.cq_head.store(head + 1, std::memory_order_release);
}

}  // namespace ttemu::chip
