// The layout of a chip's memory as the control plane sees it.
//
// Control segment: a ChipControl block the chip updates and the launcher reads (per-port link
// counters, the UDP port each link is bound to, stream-check results, the status queue the
// router pushes its messages into) - the spec's status reporting (1.1.2, 1.1.2.1), reached
// through shared memory as the control plane reaches DRAM over PCIe.
// L1 segment: Tensix cores' L1 then ethernet cores' L1; each ethernet core (one per port)
// starts with its router's configuration (the routing table of the port's plane, written by
// the control plane before the chip starts) followed by its receive buffer.
#pragma once

#include <atomic>
#include <cstdint>

#include "emulator/chip/status_queue.hpp"
#include "emulator/job/job.hpp"
#include "emulator/link/link_counters.hpp"
#include "emulator/routing/address.hpp"
#include "emulator/routing/packet.hpp"
#include "emulator/routing/routing_table.hpp"
#include "emulator/session/memory_windows.hpp"
#include "emulator/session/socket_endpoint.hpp"

namespace ttemu::chip {

inline constexpr uint64_t kControlMagic = 0x4c5254434d455454ull;  // "TTEMCTRL"
inline constexpr uint64_t kRouterMagic = 0x52544f524d455454ull;   // "TTEMROTR"
inline constexpr uint32_t kControlVersion = 16;  // bumped whenever the layout below changes

// How the chip's links move datagrams, as the chip found it could (ChipControl::transport_mode).
enum TransportMode : uint32_t {
  kTransportUdp = 0,
  kTransportShm = 1,
  kTransportUringMultishot = 2,
  kTransportUringSingleShot = 3,
  kTransportUdpNoUring = 4,  // io_uring was the default, and this kernel (or a seccomp filter) refused it
};
inline const char* to_string(TransportMode m) {
  switch (m) {
    case kTransportUdp: return "udp: a socket per port, sendmmsg/recvmmsg (sendmsg/recvmsg for one)";
    case kTransportShm: return "shm: datagram rings in shared memory";
    case kTransportUringMultishot: return "uring: multishot receives into a provided buffer ring";
    case kTransportUringSingleShot: return "uring: single-shot receives (no multishot or buffer ring here)";
    case kTransportUdpNoUring: return "udp: io_uring is refused here, so the default fell back to sockets";
  }
  return "?";
}

inline constexpr int kMaxReservableFvcs = 8;  // data FVCs (--fvcs) at most
// An SSocket reservation's owner as the control block shows it: its chip and socket endpoint.
inline uint64_t pack_reservation(routing::ChipId owner, uint16_t endpoint) {
  return uint64_t{1} << 63 | uint64_t{owner.mesh} << 32 | uint64_t{owner.device} << 16 | endpoint;
}
inline routing::ChipId reservation_owner(uint64_t v) {
  return {static_cast<uint16_t>(v >> 32 & 0x7FFF), static_cast<uint16_t>(v >> 16)};
}

struct PortStatus {
  link::LinkCounters counters;
  std::atomic<uint32_t> udp_port{0};        // bound UDP port, 0 when the port is not wired
  std::atomic<uint64_t> stream_verified{0}; // stream payloads that arrived bit-exact, in order
  std::atomic<uint64_t> stream_errors{0};   // stream payloads that arrived wrong
  // The port whose wire carries this port's traffic: its own number, or a parallel link's
  // while the Ethernet Fallback Channel carries it (efc.hpp), for fallback_reason.
  std::atomic<uint32_t> wire{0};
  std::atomic<uint32_t> fallback_reason{0};  // link::EfcReason
  // Streaming sockets' reservations of this port's data FVCs (spec 2.4.2), as the router holds
  // them: pack_reservation() of the owner, 0 when free.
  std::atomic<uint64_t> reserved[kMaxReservableFvcs];
};

// The router command buffer of the pull model (spec 2.2.2.4): a worker takes a ticket only
// when its slot is free (command_buffer.hpp), writes its command there and marks it ready; the
// router takes commands in ticket order within each FVC and pulls the payload straight from
// the worker's L1 or DRAM, and frees slots in ticket order. A worker rings the chip's doorbell (doorbell.hpp) only when the router
// has said it sleeps; waiting workers sleep on futex words here. Idle, nobody spins.
inline constexpr uint32_t kCommandSlots = 256;
inline constexpr int kMaxWorkers = 128;  // cores that may issue, per chip
inline constexpr int kTxnIds = 16;       // spec 3.1

// A slot is free for a ticket, being filled by the worker that took the ticket, ready (the
// command is written), or done (the router took it, perhaps before an earlier ticket's
// command: FVCs are served independently, or voided it); the router frees done slots, and
// advances `served`, in ticket order.
//
// The state is one word: the ticket, the phase and, while a worker fills the slot, that
// worker's pid. A worker claims its ticket's slot, and the router voids the slot of a worker
// that died before its command was ready, each by one compare-and-swap, so that neither
// half-happens: a worker stopped after taking its ticket for so long that the router voided
// the slot finds out when it claims, and takes another ticket; a slot a worker claimed is
// voided only once that worker is gone, so nobody writes into a slot that went on to another.
enum SlotPhase : uint32_t { kSlotFree = 0, kSlotFilling = 1, kSlotReady = 2, kSlotDone = 3 };
constexpr uint64_t slot_state(uint32_t ticket, SlotPhase phase, uint32_t pid = 0) {
  return uint64_t{ticket} | uint64_t{phase} << 32 | uint64_t{pid} << 34;  // (pids < 2^22)
}
constexpr SlotPhase slot_phase(uint64_t state) { return static_cast<SlotPhase>(state >> 32 & 3); }
constexpr uint32_t slot_ticket(uint64_t state) { return static_cast<uint32_t>(state); }
constexpr uint32_t slot_pid(uint64_t state) { return static_cast<uint32_t>(state >> 34); }

struct FabricCommand {
  std::atomic<uint64_t> state{0};  // slot_state(); slot i starts free for ticket i
  routing::Command command = routing::Command::kWrite;
  int8_t fvc = -1;  // -1: the router chooses
  uint8_t plane = 0, txn_id = 0;
  uint16_t core = 0;
  uint8_t wrap = 31;
  uint8_t ttl = routing::kDefaultTtl;
  uint16_t dst_mesh = 0, dst_device = 0;
  uint32_t size = 0, arg = 0;
  uint64_t src_addr = 0;     // local: what the router pulls (writes)
  uint64_t dst_addr = 0;     // at the destination
  uint64_t return_addr = 0;  // local: where read answers land
  uint64_t status_addr = 0;  // local: a FabricStatus the router fills in; 0 for none
  uint16_t copies = 1;       // a multicast write: the devices that acknowledge each packet
  uint64_t key = 0;          // the remote memory window's key (0: none); dst_addr is then its offset
  // Written by the worker once it has counted the command's packets in its transaction (how
  // many, then the ticket): a slot voided after that has its count taken back.
  uint32_t counted = 0;
  std::atomic<uint32_t> counted_ticket{~0u};
};

enum FabricStatusCode : int32_t {  // mirrored by libfabric_tt/tt_fabric.h
  kStatusOk = 0,
  kStatusBadDevice = -1,
  kStatusBadAddress = -2,
  kStatusBadSize = -3,
  kStatusBadTxn = -4,
  kStatusBadFvc = -5,
  kStatusBadPlane = -6,
  kStatusBadArgument = -8,
  kStatusNoWindow = -19,  // the chip's memory-window table is full
};

struct FabricStatus {  // spec 3.1's tt_fabric_status, as the router writes it
  int32_t status;
  int32_t fvc;
};

// One answer to a worker (libfabric's CQ entry, in spirit): which transaction, how many of its
// packets, and how they ended.
struct Completion {
  uint8_t txn_id = 0;
  routing::Command command = routing::Command::kWriteAck;  // ack, NACK or read response
  uint16_t reason = 0;  // a NACK's routing::NackReason; 0 otherwise
  uint32_t packets = 0;
};
inline constexpr uint32_t kCompletionSlots = 256;  // per worker

struct WorkerState {
  std::atomic<uint32_t> txn[kTxnIds];  // packets in flight per transaction id (futex words)
  std::atomic<uint32_t> nacks{0};      // packets NACKed: dropped by the fabric (TTL, timeout, link down) or refused
  std::atomic<uint32_t> txn_nacks[kTxnIds];  // the same, per transaction id (counted up, never reset)
  std::atomic<uint32_t> permission_nacks{0};  // of those, refused by a center for their memory key
  std::atomic<uint32_t> provider_pid{0};  // the process whose libfabric endpoint drives this core (libfabric_tt/prov), 0: none
  std::atomic<uint32_t> acks{0};
  std::atomic<uint32_t> sleepers{0};   // threads asleep on a txn word: the router wakes them
  // Completions: the router writes at cq_head, the worker reads from cq_tail. When the worker
  // does not poll and the queue is full, new completions are counted in cq_overflow instead
  // (the transaction counters above still count every answer).
  Completion cq[kCompletionSlots];
  std::atomic<uint32_t> cq_head{0}, cq_tail{0}, cq_overflow{0};
};

struct CommandBuffer {
  std::atomic<uint32_t> next_ticket{0};     // workers take tickets here
  std::atomic<uint32_t> served{0};          // tickets whose slots the router has freed, in order (futex word)
  std::atomic<uint32_t> served_waiters{0};  // workers asleep on `served` (all slots taken)
  std::atomic<uint32_t> router_asleep{0};   // 1: ring the doorbell after marking a slot ready
  std::atomic<uint32_t> socket_pokes{0};    // bumped by a worker that set an endpoint's `poked` flag
  FabricCommand slots[kCommandSlots];
  WorkerState workers[kMaxWorkers];
  // Slots the router voided because their worker died after taking the ticket (counted up).
  std::atomic<uint64_t> voided{0};

  CommandBuffer() {
    for (uint32_t i = 0; i < kCommandSlots; ++i) slots[i].state.store(slot_state(i, kSlotFree), std::memory_order_relaxed);
  }
};

struct ChipControl {
  uint64_t magic = 0;
  uint32_t version = kControlVersion;
  std::atomic<uint32_t> pid{0};
  // The chip's pid namespace (job::pid_namespace(); 0: unknown). A worker in another one claims
  // command slots without its pid, which the chip could not check (CommandBufferClient).
  std::atomic<uint64_t> pid_namespace{0};
  std::atomic<uint32_t> running{0};
  uint16_t mesh = 0, device = 0;
  uint64_t l1_bytes = 0, dram_bytes = 0;
  PortStatus ports[routing::kMaxPorts];
  CommandBuffer commands;
  std::atomic<uint64_t> packets_injected{0}, packets_delivered{0}, router_events{0};
  std::atomic<uint32_t> transport_mode{kTransportUdp};  // TransportMode
  // The routing tables the router runs (1: the first; the control plane's reloads count on),
  // for clients that retry NACKed writes once the routes have changed.
  std::atomic<uint32_t> tables_version{1};
  // 1 while the control plane holds workers' injection (ttemu injection pause): the router
  // takes no new commands; what is in the fabric moves on.
  std::atomic<uint32_t> injection_paused{0};
  // The chip's lazy inbox (wire/lazy_inbox.hpp; 0: none, as over shm): its UDP port, and the
  // datagrams it read from anyone but a peer (dropped).
  std::atomic<uint32_t> inbox_udp{0};
  std::atomic<uint64_t> inbox_foreign{0};
  StatusQueue status;  // the fabric node status queue (spec 1.1.2.1): the router's messages
  uint32_t data_fvcs = 0;  // the router's (FVCs 1 .. data_fvcs-1 are reservable by SSockets)
  std::atomic<uint64_t> center_reserved[kMaxReservableFvcs];  // reservations of deliveries here
  // The socket table (spec 2.4.2-2.4.4, 4): endpoints the chip's workers own and its session
  // layer serves (session/socket_endpoint.hpp, chip/socket_client.hpp).
  session::SocketEndpoint sockets[session::kSocketEndpoints];
  // The memory windows the chip's workers registered, which its center checks keyed packets
  // against (session/memory_windows.hpp, chip/window_client.hpp).
  session::MemoryWindows windows;
};

// Whether the chip's process runs: one killed with SIGKILL leaves its block as it was, and its
// pid is the witness (true before the chip has written it).
inline bool chip_running(const ChipControl& c) {
  const auto pid = static_cast<int>(c.pid.load(std::memory_order_relaxed));
  return pid == 0 || job::process_alive(pid);
}

// The router's block at the start of its ethernet core's L1: the routing table of the port's
// plane, written by the control plane before the chip starts and again for every reload (not
// the router's settings, which are routing::RouterConfig).
struct RouterL1Block {
  uint64_t magic = 0;
  uint16_t plane = 0;
  uint8_t port = 0;
  uint8_t reserved[5] = {};
  routing::PackedRouterTable table;
};

// Where an ethernet core's receive buffer starts inside its L1.
inline constexpr size_t kRouterBufferOffset = 4096;
static_assert(sizeof(RouterL1Block) <= kRouterBufferOffset);

// Destination addresses the chip's test traffic uses in the TT-link header.
inline constexpr uint32_t kStreamAddr = 0x5354'0000;  // a checked stream (ttemu link test)
inline constexpr uint32_t kEchoAddr = 0x4543'0000;    // reply with the same payload
inline constexpr uint32_t kEchoReplyAddr = 0x4543'0001;

}  // namespace ttemu::chip
