// TT-link frames (spec 2.1): the 16-byte TT-link header, the payload, and a CRC32 trailer
// standing in for the Ethernet FCS. Several frames may share one datagram (opportunistic
// packing, SUE seed): each is self-delimiting. Layout in docs/frame-format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "emulator/wire/datagram.hpp"

namespace ttemu::link {

enum class FrameType : uint8_t {
  kData = 1,   // payload for the receiver's routing layer at dest_addr
  kAck = 2,    // no payload: rx_seq acknowledges; flag kNack asks to go back
  kHello = 3,  // bring-up handshake; payload is a HelloBody
};

enum FrameFlags : uint8_t {
  kFlagNack = 0x01,  // the receiver saw a gap: resend from rx_seq
  // On an ACK: held on purpose and sent without waking the peer (wire::Datagram::lazy), so
  // the peer may read it late: its round trip says nothing of the wire's.
  kFlagHeld = 0x02,
  // On a DATA frame: sent again (after a NACK or a timeout). Its sender is recovering and may
  // sleep until it hears back: the receiver acknowledges at once, waking it.
  kFlagResent = 0x04,
  // On a DATA or ACK frame: its rx_seq answers a frame flagged kFlagResent, at once. The
  // sender takes no round trip from it: timed from the first sending of the frames it covers
  // (which may have waited at the receiver behind the gap the resend filled) it is far too
  // long, timed from the resend too short.
  kFlagAnswer = 0x08,
};

// All fields little-endian on the wire.
struct FrameHeader {
  uint32_t dest_addr = 0;  // destination address in the receiver's TT-routing layer
  uint16_t tx_seq = 0;     // this frame's sequence number (data frames)
  uint16_t rx_seq = 0;     // cumulative acknowledgement: the next sequence number expected
  FrameType type = FrameType::kData;
  uint8_t flags = 0;
  uint16_t length = 0;     // payload bytes
  uint32_t session = 0;    // link session agreed at bring-up; 0 in hellos
};
static_assert(sizeof(FrameHeader) == 16, "spec 2.1: the TT-link header is 16 bytes");

inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kCrcBytes = 4;
inline constexpr size_t kFrameOverhead = kHeaderBytes + kCrcBytes;
inline constexpr size_t kMaxPayload = 8192;
inline constexpr size_t kMaxDatagram = 65000;  // below the 65507-byte UDP limit

// The hello body: who is speaking, whom it expects, and the nonces that make a session.
struct HelloBody {
  uint64_t job = 0;
  uint16_t mesh = 0, device = 0;  // the sender's chip
  uint8_t port = 0;               // the sender's port
  uint8_t flags = 0;              // kHelloUp: the sender's end of the link is up; kHelloAsk: answer
  uint8_t ask = 0;     // with kHelloAsk: a token (1-255) the answer echoes
  uint8_t answer = 0;  // the token of the last asking hello heard from the receiver, 0 if none
  uint32_t nonce = 0;       // the sender's
  uint32_t peer_nonce = 0;  // the last nonce heard from the receiver, 0 if none yet
};
static_assert(sizeof(HelloBody) == 24);
inline constexpr uint8_t kHelloUp = 0x01;
inline constexpr uint8_t kHelloAsk = 0x02;  // answer me even if we are both up (TtLink::verify)

// The sequence extension of a data or ack frame: not sent, but folded into its CRC. Both ends
// track 64-bit sequence numbers of which the header carries the low 16 bits; the extension is
// the number of times each has wrapped (the upper 48 bits). A frame from an earlier pass of
// the sequence space, delayed or replayed, then fails its CRC at the receiver instead of being
// taken for a current one (the stale-packet problem of the TNet seed; TCP's timestamps and
// QUIC's packet-number expansion solve it the same way). Hellos have none.
struct SeqExtension {
  uint64_t tx_wraps = 0;  // data frames: tx_seq's full value >> 16; 0 in acks
  uint64_t rx_wraps = 0;  // rx_seq's full value >> 16
  bool operator==(const SeqExtension&) const = default;
};

// The CRC a frame carries: the CRC32 of its header and payload (body_crc), continued over the
// 16 bytes of the extension unless the extension is zero (so frames before the first wrap, and
// hellos, carry the plain CRC of their bytes).
uint32_t frame_crc(uint32_t body_crc, const SeqExtension& ext);

// Appends one encoded frame (header, payload, CRC) to a datagram being packed, the payload
// copied (acks, hellos, frames built whole on purpose; see append_framed for the rest).
void append_frame(wire::Datagram& out, const FrameHeader& header, std::span<const uint8_t> payload,
                  const SeqExtension& ext);
// Room a payload buffer keeps in front of its payload for the frame header, so the frame goes
// on the wire where it lies (TtLink::send_framed).
inline constexpr size_t kFrameRoom = kHeaderBytes;
// Appends one frame whose payload lies in `framed` after kFrameRoom bytes of room: the header
// is written into the room, the CRC computed in one pass, and header and payload are borrowed
// as one piece (they must stay put until the datagram is sent).
void append_framed(wire::Datagram& out, const FrameHeader& header, std::span<uint8_t> framed,
                   const SeqExtension& ext);
// The same frame appended to plain bytes (tests and tools that forge frames).
void append_frame(std::vector<uint8_t>& out, const FrameHeader& header,
                  std::span<const uint8_t> payload, const SeqExtension& ext = {});

// A frame as framed by its length: its CRC is not checked yet, because the check needs the
// receiver's sequence state (crc_ok).
struct ParsedFrame {
  FrameHeader header;
  std::span<const uint8_t> payload;
  uint32_t body_crc = 0;  // CRC32 of header and payload
  uint32_t crc = 0;       // the CRC the frame carries
};
inline bool crc_ok(const ParsedFrame& f, const SeqExtension& ext) {
  return frame_crc(f.body_crc, ext) == f.crc;
}
// The frame type if it is one we know, after a good CRC.
inline bool known_type(FrameType t) {
  return t == FrameType::kData || t == FrameType::kAck || t == FrameType::kHello;
}

// Walks a datagram frame by frame. It stops at the first frame that cannot be framed at all
// (too short, or a length that is impossible or runs past the end): a corrupted length is
// indistinguishable from garbage. If a frame's length field was hit, the frames after it fail
// their CRCs.
struct ParseResult {
  size_t frames = 0;
  bool malformed = false;
};
template <class OnFrame>
ParseResult parse_datagram(std::span<const uint8_t> datagram, OnFrame&& on_frame);

// Frames the frame at offset and advances past it; false (result marked malformed) when it
// cannot be framed.
bool decode_frame(std::span<const uint8_t> bytes, size_t& offset, ParsedFrame& frame,
                  ParseResult& result);

template <class OnFrame>
ParseResult parse_datagram(std::span<const uint8_t> datagram, OnFrame&& on_frame) {
  ParseResult result;
  size_t offset = 0;
  ParsedFrame frame;
  while (offset < datagram.size() && decode_frame(datagram, offset, frame, result)) {
    ++result.frames;
    on_frame(frame);
  }
  return result;
}

// CRC-32 of `bytes` (the Ethernet FCS, as zlib's crc32), continuing `crc` (0 to start). Unlike
// ISA-L's crc32_gzip_refl, it leaves the vector registers' upper halves clean
// (emulator/common/vector_state.hpp): the benchmarks' raw baselines use it too.
uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc = 0);

}  // namespace ttemu::link
