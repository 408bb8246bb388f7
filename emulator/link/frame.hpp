// TT-link frames (spec 2.1): the 16-byte TT-link header, the payload, and a CRC32 trailer
// standing in for the Ethernet FCS. Several frames may share one datagram (opportunistic
// packing, SUE seed): each is self-delimiting. Layout in docs/frame-format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ttemu::link {

enum class FrameType : uint8_t {
  kData = 1,   // payload for the receiver's routing layer at dest_addr
  kAck = 2,    // no payload: rx_seq acknowledges; flag kNack asks to go back
  kHello = 3,  // bring-up handshake; payload is a HelloBody
};

enum FrameFlags : uint8_t {
  kFlagNack = 0x01,  // the receiver saw a gap: resend from rx_seq
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
  uint8_t flags = 0;              // kHelloUp: the sender's end of the link is up
  uint8_t reserved[2] = {};
  uint32_t nonce = 0;       // the sender's
  uint32_t peer_nonce = 0;  // the last nonce heard from the receiver, 0 if none yet
};
static_assert(sizeof(HelloBody) == 24);
inline constexpr uint8_t kHelloUp = 0x01;

// Appends one encoded frame (header, payload, CRC) to out.
void append_frame(std::vector<uint8_t>& out, const FrameHeader& header,
                  std::span<const uint8_t> payload);

struct ParsedFrame {
  FrameHeader header;
  std::span<const uint8_t> payload;
};

// Walks a datagram frame by frame. A frame that fails its CRC is skipped and counted; if its
// length field was hit, the frames after it fail their CRCs too. It stops at the first frame
// that cannot be framed at all (too short, impossible length, unknown type).
struct ParseResult {
  size_t frames = 0;
  size_t crc_errors = 0;
  bool malformed = false;
};
template <class OnFrame>
ParseResult parse_datagram(std::span<const uint8_t> datagram, OnFrame&& on_frame);

// Decodes the frame at offset and advances past it. False when it cannot be framed (result
// marked malformed); a CRC failure advances, counts, and returns true without a frame.
bool decode_frame(std::span<const uint8_t> bytes, size_t& offset, ParsedFrame& frame,
                  ParseResult& result);

template <class OnFrame>
ParseResult parse_datagram(std::span<const uint8_t> datagram, OnFrame&& on_frame) {
  ParseResult result;
  size_t offset = 0;
  ParsedFrame frame;
  while (offset < datagram.size() && !result.malformed) {
    size_t crc_before = result.crc_errors;
    if (!decode_frame(datagram, offset, frame, result)) continue;
    if (result.crc_errors != crc_before) continue;
    ++result.frames;
    on_frame(frame);
  }
  return result;
}

uint32_t crc32(std::span<const uint8_t> bytes);

}  // namespace ttemu::link
