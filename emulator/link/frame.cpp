#include "emulator/link/frame.hpp"

#include <bit>
#include <cstring>

#include <isa-l/crc.h>

#include "emulator/common/vector_state.hpp"

namespace ttemu::link {

static_assert(std::endian::native == std::endian::little,
              "frames are little-endian on the wire; big-endian hosts need byte swaps here");

// The Ethernet FCS polynomial (CRC-32/ISO-HDLC, as zlib's crc32), computed by Intel ISA-L
// with carry-less multiplication: about ten times faster than a table.
uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc) {
  crc = crc32_gzip_refl(crc, bytes.data(), bytes.size());
  clear_upper_vector_state();  // ISA-L's AVX-512 kernel leaves them dirty: 11 % of a link's time
  return crc;
}

uint32_t frame_crc(uint32_t body_crc, const SeqExtension& ext) {
  if (ext.tx_wraps == 0 && ext.rx_wraps == 0) return body_crc;
  const uint64_t bytes[2] = {ext.tx_wraps, ext.rx_wraps};  // little-endian, as on the wire
  return crc32({reinterpret_cast<const uint8_t*>(bytes), sizeof bytes}, body_crc);
}

void append_frame(wire::Datagram& out, const FrameHeader& header, std::span<const uint8_t> payload,
                  const SeqExtension& ext) {
  FrameHeader h = header;
  h.length = static_cast<uint16_t>(payload.size());
  const auto* hb = reinterpret_cast<const uint8_t*>(&h);
  // The CRC runs over the header, then continues over the payload where it lies.
  uint32_t body = crc32({hb, kHeaderBytes});
  if (!payload.empty()) body = crc32(payload, body);
  const uint32_t crc = frame_crc(body, ext);
  out.append_copy({hb, kHeaderBytes});
  out.append_copy(payload);
  out.append_copy({reinterpret_cast<const uint8_t*>(&crc), kCrcBytes});
}

void append_framed(wire::Datagram& out, const FrameHeader& header, std::span<uint8_t> framed,
                   const SeqExtension& ext) {
  FrameHeader h = header;
  h.length = static_cast<uint16_t>(framed.size() - kFrameRoom);
  std::memcpy(framed.data(), &h, kHeaderBytes);
  const uint32_t crc = frame_crc(crc32(framed), ext);
  out.append_borrowed(framed);
  out.append_copy({reinterpret_cast<const uint8_t*>(&crc), kCrcBytes});
}

void append_frame(std::vector<uint8_t>& out, const FrameHeader& header,
                  std::span<const uint8_t> payload, const SeqExtension& ext) {
  wire::Datagram d;
  append_frame(d, header, payload, ext);
  d.for_each_piece([&](std::span<const uint8_t> s) { out.insert(out.end(), s.begin(), s.end()); });
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
  std::memcpy(&frame.crc, bytes.data() + offset + kHeaderBytes + length, kCrcBytes);
  frame.body_crc = crc32(bytes.subspan(offset, kHeaderBytes + length));
  frame.payload = bytes.subspan(offset + kHeaderBytes, length);
  offset += kFrameOverhead + length;
  return true;
}

}  // namespace ttemu::link
