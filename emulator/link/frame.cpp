#include "emulator/link/frame.hpp"

#include <bit>
#include <cstring>

#include <zlib.h>

namespace ttemu::link {

static_assert(std::endian::native == std::endian::little,
              "frames are little-endian on the wire; big-endian hosts need byte swaps here");

uint32_t crc32(std::span<const uint8_t> bytes) {
  return static_cast<uint32_t>(::crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));
}

void append_frame(std::vector<uint8_t>& out, const FrameHeader& header,
                  std::span<const uint8_t> payload) {
  size_t at = out.size();
  out.resize(at + kFrameOverhead + payload.size());
  FrameHeader h = header;
  h.length = static_cast<uint16_t>(payload.size());
  std::memcpy(out.data() + at, &h, kHeaderBytes);
  if (!payload.empty()) std::memcpy(out.data() + at + kHeaderBytes, payload.data(), payload.size());
  uint32_t crc = crc32({out.data() + at, kHeaderBytes + payload.size()});
  std::memcpy(out.data() + at + kHeaderBytes + payload.size(), &crc, kCrcBytes);
}

bool decode_frame(std::span<const uint8_t> bytes, size_t& offset, ParsedFrame& frame,
                  ParseResult& result) {
  size_t left = bytes.size() - offset;
  if (left < kFrameOverhead) {
    result.malformed = true;
    return false;
  }
  std::memcpy(&frame.header, bytes.data() + offset, kHeaderBytes);
  size_t length = frame.header.length;
  if (length > kMaxPayload || length + kFrameOverhead > left) {
    // A corrupted length is indistinguishable from garbage; either way, stop here.
    result.malformed = true;
    return false;
  }
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + offset + kHeaderBytes + length, kCrcBytes);
  if (crc32(bytes.subspan(offset, kHeaderBytes + length)) != stored) {
    result.crc_error = true;
    return false;
  }
  uint8_t type = static_cast<uint8_t>(frame.header.type);
  if (type < static_cast<uint8_t>(FrameType::kData) || type > static_cast<uint8_t>(FrameType::kHello)) {
    result.malformed = true;
    return false;
  }
  frame.payload = bytes.subspan(offset + kHeaderBytes, length);
  offset += kFrameOverhead + length;
  return true;
}

}  // namespace ttemu::link
