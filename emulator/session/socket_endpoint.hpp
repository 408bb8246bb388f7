// A socket's endpoint (spec 2.4.2-2.4.4, 4; the DTU seed's send and receive endpoints): one
// entry of a chip's socket table, in the chip's control block (chip/chip_control.hpp), so that
// the worker that owns the socket and the chip's session layer (socket_layer.hpp) both reach
// it, across processes as in the simulator.
//
// Who writes what: the worker claims a free entry and fills in what it opens (socket id,
// epoch, type, direction, remote, FVC, handshake, buffers), then asks its chip to open it; from
// then on the session layer owns the state and the positions it advances (l1_head, sent,
// credit_limit), the worker those it advances (l1_tail, queued). Positions are byte counts
// from the start of the stream that only grow, so a ring's fill is head - tail.
//
// The receive side is the spec's consumer interface block: an L1 circular buffer (L1CB) in
// the owner's L1, and behind it, for end-to-end handshake, a DRAM spill circular buffer (DSCB)
// that takes what L1CB has no room for; while the DSCB holds data, arrivals go behind it, so
// order holds (2.4.4's flowchart).
#pragma once

#include <algorithm>
#include <atomic>
#include <bitset>
#include <cstddef>
#include <cstdint>

namespace ttemu::session {

inline constexpr int kSocketEndpoints = 128;  // per chip
inline constexpr uint16_t kAnyDevice = 0xFFFF;  // a receiver's remote: any sender
inline constexpr int kMaxGroup = 16;  // receivers of a multicast socket

using EndpointSet = std::bitset<kSocketEndpoints>;  // a set of endpoints of one chip

enum SocketState : uint32_t {
  kSocketFree = 0,
  kSocketClaimed = 1,    // a worker is filling it in
  kSocketOpening = 2,    // opened here, waiting for the peer (and the handshake)
  kSocketConnected = 3,  // the session is active: data may flow
  kSocketPeerClosed = 4, // receive side: the sender closed; what arrived can still be read
  kSocketClosed = 5,     // send side: closed, its close sent behind its data
  kSocketBroken = 6,     // an error ended it; `status` says which
};
const char* to_string(SocketState s);

enum SocketType : uint8_t { kDSocket = 0, kSSocket = 1 };
enum SocketDirection : uint8_t { kSocketSend = 0, kSocketReceive = 1 };
// 2.4.4: local handshake (the producer handshakes only with its router; a full consumer backs
// up the FVC) or end-to-end (the producer holds credits from the consumer and never injects
// what it has no room for).
enum Handshake : uint8_t { kLocalHandshake = 0, kEndToEnd = 1 };

// Errors a socket reports, named so a user can act on them (mirrored by tt_fabric.h).
enum SocketStatus : int32_t {
  kSocketOk = 0,
  kSocketEpochMismatch = -12,  // the receiver is open for this socket id in another epoch
  kSocketNoEndpoint = -13,     // no such socket at the far end (or not a socket of this kind)
  kSocketNoCredits = -14,      // non-blocking: the consumer has no room now; try again
  kSocketClosedStatus = -15,   // the socket was closed (by the peer, or here)
  kSocketDataLost = -16,       // the fabric dropped the stream's data (a NACK, or a gap seen)
  kSocketOpenError = -17,      // no free endpoint (or, for SSockets, no reservable FVC)
};

struct SocketEndpoint {
  std::atomic<uint32_t> state{kSocketFree};  // futex word: connect and close wait on it
  std::atomic<int32_t> status{kSocketOk};
  uint32_t socket_id = 0, epoch = 0;
  uint8_t type = kDSocket, direction = kSocketSend, handshake = kEndToEnd, fvc = 0;
  uint8_t plane = 0, reserved0 = 0;
  uint16_t core = 0;  // the owner
  // Who the owner is beyond its core: its process's pid (a simulated worker's number; 0: not
  // known). When that owner is gone without closing, the chip closes the endpoint as the owner
  // would and frees it.
  std::atomic<uint32_t> owner{0};
  uint16_t remote_mesh = 0, remote_device = 0;  // the peer device (receiver: kAnyDevice for any)
  uint16_t peer_endpoint = 0;  // the peer's entry in its chip's table, once connected
  // Counts the claims of this entry (worker): the chip drops a command of an earlier claim
  // still queued when the entry is reused.
  std::atomic<uint32_t> generation{0};
  // A multicast sender (spec 2.4.2): the devices of remote_mesh it sends to (`remote_device` is
  // the group's origin); 0: a unicast socket to remote_device.
  uint16_t group_size = 0;
  uint16_t group[kMaxGroup] = {};
  // Receive side: the buffers, in this chip's memory.
  uint64_t l1cb_addr = 0, dscb_addr = 0;
  uint32_t l1cb_size = 0, dscb_size = 0;
  std::atomic<uint64_t> l1_head{0};  // bytes put into L1CB (session layer)
  std::atomic<uint64_t> l1_tail{0};  // bytes the owner has consumed (worker)
  uint64_t dscb_head = 0, dscb_tail = 0;  // bytes into and out of the DSCB (session layer)
  uint64_t received = 0;      // stream bytes accepted: the offset the next data packet must carry
  uint64_t credit_given = 0;  // end-to-end: the limit last granted to the sender
  std::atomic<uint32_t> arrivals{0};  // futex word: bumped when data lands or the peer closes
  std::atomic<uint32_t> wants_poke{0};  // 1: data waits (DSCB, fabric); the owner pokes its chip after consuming
  std::atomic<uint32_t> poked{0};       // the owner's poke: set by it, taken by the chip's command intake
  std::atomic<uint64_t> spilled{0};     // bytes that went through the DSCB
  std::atomic<uint32_t> backed_up{0};   // 1 while an arrival waits in the fabric for room (local handshake)
  std::atomic<uint32_t> sleepers{0};    // owner threads asleep on arrivals or sent_word: wake them
  // Send side.
  std::atomic<uint64_t> queued{0};        // bytes the owner asked to send (worker)
  std::atomic<uint64_t> sent{0};          // bytes put into packets (session layer)
  std::atomic<uint32_t> sent_word{0};     // futex word: bumped as `sent` grows
  std::atomic<uint64_t> credit_limit{0};  // end-to-end: `sent` never passes it
};

// Frees an entry (its owner's release, or its chip's for an owner that is gone). The owner is
// cleared before the state says free, so that whoever claims the entry next is never taken for
// the old owner by a chip that reads the state first.
inline void free_endpoint(SocketEndpoint& e) {
  e.owner.store(0, std::memory_order_relaxed);
  e.state.store(kSocketFree, std::memory_order_release);
}

// The contiguous pieces of the n bytes at stream position `pos` of a ring of `size` bytes:
// visit(offset in the ring, length, offset within the n) for each, in order, while it returns
// true. Every copy into or out of an L1CB or DSCB goes through here.
template <class Visit>
bool ring_pieces(uint32_t size, uint64_t pos, size_t n, Visit&& visit) {
  for (size_t done = 0; done < n;) {
    const auto at = static_cast<uint32_t>((pos + done) % size);
    const size_t k = std::min<size_t>(n - done, size - at);
    if (!visit(at, k, done)) return false;
    done += k;
  }
  return true;
}

}  // namespace ttemu::session
