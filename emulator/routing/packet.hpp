// The TT-Fabric packet (spec 2.2.1: "a packet header appended to a payload"): the fabric
// header every router reads, in one definition with its size asserted. Layout in
// docs/packet-format.md.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "emulator/routing/address.hpp"

namespace ttemu::routing {

enum class Command : uint8_t {
  kWrite = 1,          // commit payload at dst_addr
  kReadRequest = 2,    // read size bytes at dst_addr, answer to return_addr
  kReadResponse = 3,   // payload for return_addr
  kAtomicInc = 4,      // add arg at dst_addr, wrapping at 2^(wrap+1)
  kAtomicReadInc = 5,  // same, answering the old value
  kWriteAck = 6,       // a write (or atomic) was committed
  kNack = 7,           // a packet was dropped (TTL, timeout) or refused; sent to its source, with its reason
  // Sockets (spec 2.4.2-2.4.4, 4; session/socket_layer.hpp). Their fields: see SocketTag.
  kSocketOpen = 8,     // a sender's session asks the receiver's for socket `arg` in an epoch
  kSocketAccept = 9,   // the receiver matched it: the session is active; dst_addr: credit limit
  kSocketCredit = 10,  // end-to-end handshake: the sender may have sent up to dst_addr bytes
  kSocketData = 11,    // stream bytes at offset dst_addr (the address is not an address here)
  kSocketClose = 12,   // the sender closed after dst_addr bytes (behind its data, on its FVC)
  kSocketReject = 13,  // the receiver's session refuses: dst_addr holds a SocketStatus
  // (14: unused)
  // A write to every device of a rectangle of its origin's mesh (spec 3.2): it travels to the
  // origin (dst), where the fabric node commits it and sends a copy to each neighbour that
  // still has depth to cover; `arg` holds the depths left (mcast_depths), `wrap` the flags.
  kMcastWrite = 15,
};
// A multicast's depths left around the chip a copy is bound for: east, west, north, south.
struct McastDepths {
  uint8_t e = 0, w = 0, n = 0, s = 0;
  uint32_t pack() const { return uint32_t{e} | uint32_t{w} << 8 | uint32_t{n} << 16 | uint32_t{s} << 24; }
  static McastDepths unpack(uint32_t v) {
    return {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24)};
  }
};
inline constexpr uint8_t kMcastNoc = 1;  // a multicast's flag: write dst_addr's offset in every Tensix core's L1
const char* to_string(Command c);

inline constexpr uint8_t kDefaultTtl = 64;

// Why a NACK was sent; it travels in the NACK's `wrap` (an answer has no wrap boundary).
enum NackReason : uint8_t {
  kNackDropped = 0,     // dropped by a router (TTL, timeout, no route, link down), or out of range
  kNackPermission = 1,  // refused by the destination's center: the key, its window or its rights
};

// What a TT-link frame carries between fabric routers is told apart by the frame's destination
// address (transport/lanes.hpp: kLinkPacketAddr, kLinkCreditAddr).
inline constexpr uint32_t kMaxPacketPayload = 4096;  // larger transfers are split

struct PacketHeader {
  uint16_t src_mesh = 0, src_device = 0;
  uint16_t dst_mesh = 0, dst_device = 0;
  uint64_t dst_addr = 0;     // target memory address at the destination
  uint64_t return_addr = 0;  // reads: where the answer lands at the source
  uint64_t packet_id = 0;    // unique per source: for tracing and NACKs
  uint32_t size = 0;         // payload bytes (reads: bytes requested)
  uint32_t arg = 0;          // atomics: increment
  Command command = Command::kWrite;
  uint8_t fvc = 0;           // fabric virtual channel
  uint8_t txn_id = 0;        // 0-15 (spec 3.1)
  uint8_t ttl = kDefaultTtl; // decremented per hop (spec 5.4)
  uint8_t plane = 0;         // routing plane (2.2.4)
  uint8_t wrap = 31;         // atomics: wrap boundary
  uint16_t src_core = 0;     // the worker that issued it
  uint64_t key = 0;          // RDMA requests: the memory window's key (0: none); dst_addr is then its offset

  ChipId src() const { return {src_mesh, src_device}; }
  ChipId dst() const { return {dst_mesh, dst_device}; }
};
static_assert(sizeof(PacketHeader) == 56 && alignof(PacketHeader) == 8, "the fabric header is 56 bytes, no padding");

// A packet and its bytes. `bytes` holds room for the link's frame header, room for the packet
// header, then the payload: the layout of a TT-link frame, so that a link puts it on the wire
// where it lies (as a kernel's socket buffer keeps headroom for the headers below). Routers
// move the buffer from owner to owner (routing buffer, link window) and rewrite only the
// header room (seal), so a forwarding hop copies the payload once: when it arrives (decode).
struct Packet {
  static constexpr size_t kLinkRoom = 16;  // a TT-link frame header (node/chip_node.cpp checks)
  static constexpr size_t kPayloadAt = kLinkRoom + sizeof(PacketHeader);

  PacketHeader header;
  std::vector<uint8_t> bytes;  // link room, header room, payload (or empty: no payload)

  std::span<const uint8_t> payload() const { return std::span(bytes).subspan(std::min(bytes.size(), kPayloadAt)); }
  std::span<uint8_t> payload() { return std::span(bytes).subspan(std::min(bytes.size(), kPayloadAt)); }
  // The packet as a link carries it (header and payload), after seal().
  std::span<const uint8_t> on_link() const { return std::span(bytes).subspan(std::min(bytes.size(), kLinkRoom)); }
  // The payload becomes a copy of p (reusing the buffer's storage).
  void set_payload(std::span<const uint8_t> p);
  // The payload becomes n bytes to be written in place.
  std::span<uint8_t> resize_payload(size_t n);
  // Writes the header into its room: `bytes` is then a link payload with its link room.
  void seal();

  // Copies a packet as a link carried it into out, after link room (reusing out.bytes'
  // storage). False if the bytes are not a well-formed packet (short, or a size disagreeing
  // with the payload).
  static bool decode(std::span<const uint8_t> bytes, Packet& out);
  // The same check of a packet that already lies after link room in `framed` (a frame a link
  // held behind a gap): on success `out.bytes` takes that buffer, with no copy; on failure
  // `framed` is left as it was.
  static bool adopt(std::vector<uint8_t>&& framed, Packet& out);
  // Reads only the header of a packet as a link carries it; false if too short.
  static bool peek(std::span<const uint8_t> bytes, PacketHeader& out);
};

// The header of an answer (ack, NACK, read response) from chip `self` to the source of h: it
// names the same packet, transaction, core and plane, and carries no key (a NACK's reason in
// `wrap` starts as kNackDropped).
inline PacketHeader answer_to(ChipId self, const PacketHeader& h, Command c, uint8_t fvc) {
  PacketHeader a;
  a.wrap = kNackDropped;
  a.src_mesh = self.mesh;
  a.src_device = self.device;
  a.dst_mesh = h.src_mesh;
  a.dst_device = h.src_device;
  a.command = c;
  a.packet_id = h.packet_id;
  a.txn_id = h.txn_id;
  a.src_core = h.src_core;
  a.plane = h.plane;
  a.fvc = fvc;
  return a;
}

// Writes and reads move `size` bytes in packets of at most kMaxPacketPayload; other commands
// are one packet. The worker counts these up and the router counts its answers down, so both
// sides use this.
inline bool moves_data(Command c) { return c == Command::kWrite || c == Command::kReadRequest || c == Command::kMcastWrite; }
// Commits its payload at the destination and is acknowledged.
inline bool writes(Command c) { return c == Command::kWrite || c == Command::kMcastWrite; }
// Answers (acks, NACKs, read responses) end at a worker and cause nothing further; requests
// cause answers. They travel in separate lanes, so answers never wait behind requests.
inline bool is_socket_answer(Command c);
inline bool is_answer(Command c) {
  return c == Command::kWriteAck || c == Command::kNack || c == Command::kReadResponse || is_socket_answer(c);
}
// Requests answered with data (a read response to return_addr).
inline bool answered_with_data(Command c) { return c == Command::kReadRequest || c == Command::kAtomicReadInc; }
// The FVC a request's answer travels on: acks and NACKs on the control FVC, read responses on
// the request's own FVC (in its answer lanes).
inline uint8_t answer_fvc(const PacketHeader& h, uint8_t control_fvc) {
  return answered_with_data(h.command) ? h.fvc : control_fvc;
}
inline bool is_socket(Command c) { return c >= Command::kSocketOpen && c <= Command::kSocketReject; }
// Answers never wait behind requests; a socket's accepts, credits and rejects go back to the
// sender in answer lanes too, so a stream's credits always flow.
inline bool is_socket_answer(Command c) {
  return c == Command::kSocketAccept || c == Command::kSocketCredit || c == Command::kSocketReject;
}
// A worker counts the packets of its transaction: socket commands are not counted (a socket
// reports through its endpoint).
inline uint32_t packets_for(Command c, uint32_t size) {
  if (is_socket(c)) return 0;
  return moves_data(c) ? (size + kMaxPacketPayload - 1) / kMaxPacketPayload : 1;
}

// Where a socket packet's session fields travel (docs/packet-format.md): `arg` is the socket
// id, `return_addr` packs the epoch and both ends' endpoints, `wrap` the socket's type and
// handshake (opens), `txn_id` is kSocketTxn and `src_core` the sender's endpoint, so that a
// NACK of a socket packet names the endpoint whose stream broke.
inline constexpr uint8_t kSocketTxn = 0xFF;
inline constexpr uint8_t kSocketTypeStreaming = 1;  // an open's wrap & 0xF: an SSocket (session::kSSocket)
struct SocketTag {
  uint32_t epoch = 0;
  uint16_t sender = 0, receiver = 0;  // endpoints in their chips' socket tables
  uint64_t pack() const { return uint64_t{epoch} | uint64_t{sender} << 32 | uint64_t{receiver} << 48; }
  static SocketTag unpack(uint64_t v) {
    return {static_cast<uint32_t>(v), static_cast<uint16_t>(v >> 32), static_cast<uint16_t>(v >> 48)};
  }
};

}  // namespace ttemu::routing
