#include "emulator/node/command_intake.hpp"

#include <algorithm>
#include <cstring>

#include "emulator/chip/command_buffer.hpp"
#include "emulator/common/futex.hpp"

namespace ttemu::node {

using namespace chip;  // the command buffer's layout

using routing::Command;

bool CommandIntake::drain(session::FabricNode& node, routing::Time now) {
  auto& cb = ctl_.commands;
  bool took = false;
  waiting_ = false;
  if (ctl_.injection_paused.load(std::memory_order_relaxed)) {  // the control plane holds it
    head_since_.reset();  // (no look at the head meanwhile: its deadline would pass unheeded)
    return false;
  }
  took = take_pokes(node) || took;
  took = run_all_jobs(node, now) || took;  // earlier sockets' jobs go before newer commands
  uint32_t full = 0;  // FVCs found without room in this pass: their later commands wait too
  bool all_full = false;
  const uint32_t start = cb.served.load(std::memory_order_relaxed);
  const uint32_t end = cb.next_ticket.load(std::memory_order_acquire);
  for (uint32_t t = start; t != end && t - start < kCommandSlots; ++t) {
    const size_t i = t % kCommandSlots;
    FabricCommand& slot = cb.slots[i];
    blocked_[i] = false;
    if (slot.state.load(std::memory_order_acquire) != slot_state(t, kSlotReady)) continue;
    Progress& pr = progress_[i];
    const int fvc = pr.fvc >= 0 ? pr.fvc : slot.fvc;  // -1: chosen when it starts
    // An earlier command of its FVC waits; or an automatic choice found every data FVC full,
    // and then nothing else goes either (a pass over a long queue stays cheap).
    if (routing::is_socket(slot.command)) {  // taken at once (its sends run as the socket's jobs)
      took = take_socket(slot, node, now) || took;
      slot.state.store(slot_state(t, kSlotDone), std::memory_order_release);
      continue;
    }
    if (all_full || (fvc >= 0 && fvc < 32 && (full >> fvc) & 1u)) {
      blocked_[i] = waiting_ = true;
      continue;
    }
    int no_room = -1;
    if (!issue(slot, pr, node, now, no_room)) {
      if (no_room >= 0 && no_room < 32) full |= 1u << no_room;
      else if (no_room < 0) all_full = true;
      blocked_[i] = waiting_ = true;
      continue;
    }
    pr = {};
    slot.state.store(slot_state(t, kSlotDone), std::memory_order_release);
    took = true;
  }
  // Slots go back to the workers in ticket order, each free for the ticket that comes to it
  // next; a head slot whose worker died is voided on the way.
  uint32_t served = start;
  for (; served != end; ++served) {
    FabricCommand& slot = cb.slots[served % kCommandSlots];
    uint64_t state = slot.state.load(std::memory_order_acquire);
    if (state != slot_state(served, kSlotDone)) {
      if (!head_abandoned(state, served, now) ||
          !slot.state.compare_exchange_strong(state, slot_state(served, kSlotDone), std::memory_order_acq_rel)) {
        break;
      }
      // A worker that died after it counted the command's packets in its transaction: taken
      // back, or a later worker on its core would wait for them for ever.
      if (slot_phase(state) == kSlotFilling && slot.counted_ticket.load(std::memory_order_acquire) == served) {
        take_back(cb.workers[slot.core % kMaxWorkers], slot.txn_id, slot.counted);
      }
      cb.voided.fetch_add(1, std::memory_order_relaxed);
      head_since_.reset();
    }
    slot.state.store(slot_state(served + kCommandSlots, kSlotFree), std::memory_order_release);
  }
  if (served == end) head_since_.reset();
  if (served != start) {
    cb.served.store(served, std::memory_order_seq_cst);
    if (cb.served_waiters.load(std::memory_order_seq_cst) > 0) futex_wake(cb.served);
  }
  // Owners that are gone: their endpoints close behind what they left in the buffer, just taken.
  if (!gone_.empty()) took = close_for_gone_owners(node, now) || took;
  waiting_ = waiting_ || with_jobs_.any();
  return took;
}

bool CommandIntake::has_work() const {
  const auto& cb = ctl_.commands;
  if (ctl_.injection_paused.load(std::memory_order_relaxed)) return false;
  if (cb.socket_pokes.load(std::memory_order_acquire) != pokes_seen_) return true;
  const uint32_t start = cb.served.load(std::memory_order_relaxed);
  const uint32_t end = cb.next_ticket.load(std::memory_order_acquire);
  for (uint32_t t = start; t != end && t - start < kCommandSlots; ++t) {
    const FabricCommand& slot = cb.slots[t % kCommandSlots];
    if (slot.state.load(std::memory_order_acquire) == slot_state(t, kSlotReady) && !blocked_[t % kCommandSlots]) {
      return true;
    }
  }
  return false;
}

bool CommandIntake::head_abandoned(uint64_t state, uint32_t head, routing::Time now) {
  const SlotPhase phase = slot_phase(state);
  if (slot_ticket(state) != head || (phase != kSlotFree && phase != kSlotFilling)) {
    head_since_.reset();  // ready: the worker is done with it
    return false;
  }
  if (!head_since_ || head_ != head) {  // the head starts to wait: looked at again later
    head_ = head;
    head_since_ = now;
    head_look_ = now + kLookAgain;
    return false;
  }
  if (now < head_look_) return false;
  head_look_ = now + kLookAgain;
  // A live worker claims and fills its slot in microseconds, so after kGrace only a stopped or
  // dead one is still at it. A ticket taken (the head is behind next_ticket) and never claimed
  // is a worker that died between the two.
  if (now - *head_since_ < kGrace) return false;
  if (phase == kSlotFree) return true;
  const uint32_t pid = slot_pid(state);  // 0: a worker whose pid the chip cannot see
  return pid != 0 && alive_ && !alive_(pid);
}

bool CommandIntake::issue(const FabricCommand& c, Progress& pr, session::FabricNode& node, routing::Time now,
                          int& no_room) {
  auto& router = node.router();
  const int data_fvcs = router.fvcs() - 1;
  if (pr.fvc < 0) {
    int fvc = c.fvc;
    if (fvc < 0) {  // automatic: the data FVC with the most room here
      fvc = 0;
      for (int v = 1; v < data_fvcs; ++v) {
        if (router.inject_room(static_cast<uint8_t>(v)) > router.inject_room(static_cast<uint8_t>(fvc))) fvc = v;
      }
    }
    if (fvc >= data_fvcs) {
      refuse(c, kStatusBadFvc);
      return true;
    }
    if (routing::writes(c.command) && mem_(c.src_addr, c.size).size() != c.size) {
      refuse(c, kStatusBadAddress);
      return true;
    }
    if (router.inject_room(static_cast<uint8_t>(fvc)) == 0) {
      if (c.fvc >= 0) no_room = fvc;  // an explicit FVC that is full: its order holds
      return false;
    }
    pr.fvc = fvc;
    write_status(c, kStatusOk, fvc);
  }
  const uint32_t total = routing::moves_data(c.command) ? c.size : 0;
  do {
    if (router.inject_room(static_cast<uint8_t>(pr.fvc)) == 0) {  // before any copy into a packet
      no_room = pr.fvc;
      return false;
    }
    const uint32_t chunk = std::min(total - pr.offset, routing::kMaxPacketPayload);
    routing::Packet p;
    auto& h = p.header;
    h.src_mesh = self_.mesh;
    h.src_device = self_.device;
    h.dst_mesh = c.dst_mesh;
    h.dst_device = c.dst_device;
    h.dst_addr = c.dst_addr + pr.offset;
    // A multicast carries the number of devices it is to reach (its copies carry their
    // subtree's), so that a NACK of it counts them all.
    // A keyed write carries where the whole write ends (a write has no answer address), so
    // that the center refuses every packet of a write that leaves its window, not just the
    // packets outside it.
    h.return_addr = c.command == Command::kMcastWrite                 ? c.copies
                    : c.command == Command::kWrite && c.key != 0 ? c.dst_addr + total
                                                                   : c.return_addr + pr.offset;
    h.packet_id = packet_id_ + 1;
    h.command = c.command;
    h.fvc = static_cast<uint8_t>(pr.fvc);
    h.txn_id = c.txn_id;
    h.ttl = c.ttl;
    h.plane = c.plane;
    h.wrap = c.wrap;
    h.arg = c.arg;
    h.src_core = c.core;
    h.key = c.key;
    if (routing::writes(c.command)) {
      auto src = mem_(c.src_addr + pr.offset, chunk);  // the pull: straight from worker memory
      p.bytes = node.buffers().take();
      p.set_payload(src);  // the one copy on injection
      h.size = static_cast<uint32_t>(src.size());
    } else if (c.command == Command::kReadRequest) {
      h.size = chunk;
    }
    if (!node.inject(std::move(p), now)) {
      no_room = pr.fvc;
      return false;
    }
    ++packet_id_;
    ctl_.packets_injected.fetch_add(1, std::memory_order_relaxed);
    pr.offset += chunk;
  } while (pr.offset < total);
  return true;
}

bool CommandIntake::take_socket(const FabricCommand& c, session::FabricNode& node, routing::Time now) {
  auto& socks = node.sockets();
  const auto ep = static_cast<uint16_t>(c.dst_addr);
  session::SocketEndpoint* e = c.dst_addr < session::kSocketEndpoints ? socks.endpoint(ep) : nullptr;
  if (!e || e->core != c.core) {  // not an endpoint of this worker: nothing is done
    write_status(c, session::kSocketNoEndpoint, -1);
    return false;
  }
  if (c.arg != e->generation.load(std::memory_order_acquire)) return false;  // for an earlier claim of the entry: gone with it
  if (c.command == Command::kSocketOpen) {
    const uint32_t owner = e->owner.load(std::memory_order_relaxed);
    if (owner != 0 && std::find(new_owners_.begin(), new_owners_.end(), owner) == new_owners_.end()) new_owners_.push_back(owner);
    node.socket_open(ep);
    return true;
  }
  // Sends and closes become the endpoint's jobs: their slots go back at once (a send waiting
  // for credits holds no slot that other workers' commands would wait behind), and each
  // socket's jobs run in order as credits and FVC room allow.
  jobs_[ep].push_back({c.command, c.arg, c.src_addr, c.size, c.status_addr});
  with_jobs_.set(ep);
  run_jobs(ep, node, now);
  return true;
}

bool CommandIntake::run_jobs(uint16_t ep, session::FabricNode& node, routing::Time now) {
  auto& socks = node.sockets();
  auto& router = node.router();
  session::SocketEndpoint* e = socks.endpoint(ep);
  auto& jobs = jobs_[ep];
  bool moved = false;
  while (!jobs.empty() && e) {
    SocketJob& j = jobs.front();
    if (j.generation != e->generation.load(std::memory_order_acquire)) {  // the owner closed (and the entry was claimed again): dropped
      jobs.pop_front();
      continue;
    }
    const auto state = e->state.load(std::memory_order_acquire);
    if (j.command == Command::kSocketData) {
      if (state == session::kSocketOpening) return moved;  // (the library sends only once connected)
      if (state != session::kSocketConnected) {  // broken or closed meanwhile: its owner sees why
        jobs.pop_front();
        continue;
      }
      if (j.offset == 0 && j.chunk == 0 && mem_(j.src_addr, j.size).size() != j.size) {
        socks.break_endpoint(ep, kStatusBadAddress);
        jobs.pop_front();
        continue;
      }
      const size_t peers = socks.peers(ep);  // a multicast socket's packets go to each receiver
      while (j.offset < j.size) {
        if (j.chunk == 0) {  // the next packet: as large as the credit allows
          const uint64_t allowed = socks.may_send(ep);
          if (allowed == 0) return moved;  // waits for its consumer's credit (end-to-end)
          j.chunk = static_cast<uint32_t>(std::min<uint64_t>({j.size - j.offset, routing::kMaxPacketPayload, allowed}));
        }
        for (; j.peers_done < peers; ++j.peers_done) {
          if (router.inject_room(e->fvc) == 0) return moved;
          routing::Packet p;
          p.header = socks.data_header(ep, j.chunk, j.peers_done);
          p.header.packet_id = ++packet_id_;
          p.bytes = node.buffers().take();
          p.set_payload(mem_(j.src_addr + j.offset, j.chunk));  // the pull, straight from worker memory
          node.inject(std::move(p), now);  // there is room (checked above)
          ctl_.packets_injected.fetch_add(1, std::memory_order_relaxed);
          moved = true;
        }
        socks.sent(ep, j.chunk);
        j.offset += j.chunk;
        j.chunk = 0;
        j.peers_done = 0;
      }
      jobs.pop_front();
      continue;
    }
    // A close.
    if (e->direction == session::kSocketSend && (state == session::kSocketConnected || state == session::kSocketOpening ||
                                                 state == session::kSocketBroken)) {
      // Behind the socket's data, on its FVC: the receiver sees every byte before the close
      // (or, not yet connected, forgets the open that waits there), and an SSocket's
      // reservation is freed at every router it passes.
      const bool opening = state == session::kSocketOpening;
      for (const size_t peers = socks.peers(ep); j.peers_done < peers; ++j.peers_done) {
        if (!opening && router.inject_room(e->fvc) == 0) return moved;
        routing::Packet p;
        p.header = socks.close_header(ep, j.peers_done);
        p.header.packet_id = ++packet_id_;
        p.bytes = node.buffers().take();
        if (opening) {
          // Not connected yet: behind its open, in the same queue and on the control FVC, so
          // that it cannot overtake it (and frees what the open reserved).
          p.header.fvc = router.control_fvc();
          node.socket_request(std::move(p));
        } else {
          node.inject(std::move(p), now);
        }
        moved = true;
      }
    }
    node.socket_close(ep);
    if (j.release) session::free_endpoint(*e);  // (no owner will)
    if (j.status_addr) {
      auto st = mem_(j.status_addr, sizeof(FabricStatus));
      if (st.size() == sizeof(FabricStatus)) {
        const FabricStatus ok{kStatusOk, e->fvc};
        std::memcpy(st.data(), &ok, sizeof ok);
      }
    }
    jobs.pop_front();
    moved = true;
  }
  if (jobs.empty()) with_jobs_.reset(ep);
  return moved;
}

bool CommandIntake::owner_gone(uint32_t owner, session::FabricNode& node, routing::Time now) {
  if (owner == 0) return false;
  gone_.push_back(owner);
  return drain(node, now);  // its commands first, then its endpoints (unless injection is paused)
}

bool CommandIntake::close_for_gone_owners(session::FabricNode& node, routing::Time now) {
  bool moved = false;
  for (const uint32_t owner : std::exchange(gone_, {})) {
    for (uint16_t ep = 0; ep < session::kSocketEndpoints; ++ep) {
      session::SocketEndpoint& e = ctl_.sockets[ep];
      // The state first: an entry claimed again after its owner freed it has its owner cleared
      // (free_endpoint), so it never reads as the old owner's.
      const auto state = e.state.load(std::memory_order_acquire);
      if (state == session::kSocketFree || e.owner.load(std::memory_order_relaxed) != owner) continue;
      if (state == session::kSocketClaimed || state == session::kSocketClosed) {
        // Claimed and never opened, or closed and never freed: nothing to tell anyone.
        session::free_endpoint(e);
        moved = true;
        continue;
      }
      auto& jobs = jobs_[ep];
      const uint32_t generation = e.generation.load(std::memory_order_acquire);
      if (!jobs.empty() && jobs.back().command == Command::kSocketClose && jobs.back().generation == generation) {
        jobs.back().release = true;  // its own close is under way: it frees the entry too
      } else {
        jobs.push_back({.command = Command::kSocketClose, .generation = generation, .release = true});
      }
      with_jobs_.set(ep);
      moved = run_jobs(ep, node, now) || moved;
    }
  }
  return moved;
}

bool CommandIntake::run_all_jobs(session::FabricNode& node, routing::Time now) {
  bool moved = false;
  for (uint16_t ep = 0; with_jobs_.any() && ep < jobs_.size(); ++ep) {
    if (with_jobs_.test(ep)) moved = run_jobs(ep, node, now) || moved;
  }
  return moved;
}

bool CommandIntake::take_pokes(session::FabricNode& node) {
  // A worker that consumed data tells the chip through its endpoint (poked) and a counter it
  // bumps, not through a command slot: a poke never waits behind other commands.
  const uint32_t pokes = ctl_.commands.socket_pokes.load(std::memory_order_acquire);
  if (pokes == pokes_seen_) return false;
  pokes_seen_ = pokes;
  for (uint16_t ep = 0; ep < session::kSocketEndpoints; ++ep) {
    if (ctl_.sockets[ep].poked.exchange(0, std::memory_order_acq_rel)) node.sockets().poke(ep);
  }
  return true;
}

void CommandIntake::refuse(const FabricCommand& c, int32_t status) {
  // Nothing is sent; the packets the worker counted up come back as NACKs so its barrier returns.
  write_status(c, status, -1);
  count_down(c.core, c.txn_id, routing::packets_for(c.command, c.size) * c.copies, Command::kNack);
}

void CommandIntake::answer(const routing::Packet& packet) {
  const auto& h = packet.header;
  // Acks count their packets in arg; a multicast's NACK the devices it did not reach.
  uint32_t packets = 1;
  if (h.command == Command::kWriteAck) packets = std::max<uint32_t>(1, h.arg);
  if (h.command == Command::kNack && h.return_addr > 0) packets = static_cast<uint32_t>(h.return_addr);
  const uint16_t reason = h.command == Command::kNack ? h.wrap : 0;  // a NACK's reason travels in wrap
  count_down(h.src_core, h.txn_id, packets, h.command, reason);
}

void CommandIntake::count_down(uint16_t core, uint8_t txn_id, uint32_t packets, Command answer, uint16_t reason) {
  auto& ws = ctl_.commands.workers[core % kMaxWorkers];
  (answer == Command::kNack ? ws.nacks : ws.acks).fetch_add(packets);
  if (answer == Command::kNack) ws.txn_nacks[txn_id % kTxnIds].fetch_add(packets);
  if (answer == Command::kNack && reason == routing::kNackPermission) ws.permission_nacks.fetch_add(packets);
  post_completion(ws, {static_cast<uint8_t>(txn_id % kTxnIds), answer, reason, packets});
  take_back(ws, txn_id, packets);
}

void CommandIntake::take_back(WorkerState& ws, uint8_t txn_id, uint32_t packets) {
  auto& txn = ws.txn[txn_id % kTxnIds];
  for (uint32_t i = 0; i < packets; ++i) {
    // Never below zero, even racing the worker's barrier that takes what is left as lost
    // (exchange(0)): a late answer then counts nothing, and the next barrier is not wrapped.
    uint32_t v = txn.load(std::memory_order_seq_cst);
    do {
      if (v == 0) return;
    } while (!txn.compare_exchange_weak(v, v - 1, std::memory_order_seq_cst));
    // A worker that sleeps on the word said so first; one that spins will see the zero.
    if (v == 1 && ws.sleepers.load(std::memory_order_seq_cst) > 0) futex_wake(txn);
  }
}

void CommandIntake::write_status(const FabricCommand& c, int32_t status, int32_t fvc) {
  if (!c.status_addr) return;
  auto s = mem_(c.status_addr, sizeof(FabricStatus));
  if (s.size() != sizeof(FabricStatus)) return;
  FabricStatus st{status, fvc};
  std::memcpy(s.data(), &st, sizeof st);
}

}  // namespace ttemu::node
