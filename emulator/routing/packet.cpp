#include "emulator/routing/packet.hpp"

#include <cstring>

namespace ttemu::routing {

const char* to_string(Command c) {
  switch (c) {
    case Command::kWrite: return "write";
    case Command::kReadRequest: return "read";
    case Command::kReadResponse: return "read_response";
    case Command::kAtomicInc: return "atomic_inc";
    case Command::kAtomicReadInc: return "atomic_read_inc";
    case Command::kWriteAck: return "ack";
    case Command::kNack: return "nack";
    case Command::kSocketOpen: return "socket_open";
    case Command::kSocketAccept: return "socket_accept";
    case Command::kSocketCredit: return "socket_credit";
    case Command::kSocketData: return "socket_data";
    case Command::kSocketClose: return "socket_close";
    case Command::kSocketReject: return "socket_reject";
    case Command::kMcastWrite: return "mcast_write";
  }
  return "?";
}

void Packet::set_payload(std::span<const uint8_t> p) {
  bytes.resize(kPayloadAt);
  bytes.insert(bytes.end(), p.begin(), p.end());  // no zero fill first
}

std::span<uint8_t> Packet::resize_payload(size_t n) {
  bytes.resize(kPayloadAt + n);
  return payload();
}

void Packet::seal() {
  if (bytes.size() < kPayloadAt) bytes.resize(kPayloadAt);
  std::memcpy(bytes.data() + kLinkRoom, &header, sizeof header);
}

bool Packet::peek(std::span<const uint8_t> b, PacketHeader& out) {
  if (b.size() < sizeof(PacketHeader)) return false;
  std::memcpy(&out, b.data(), sizeof(PacketHeader));
  return true;
}

namespace {

// A packet as a link carries it: a header, and a payload as long as the header says (none for
// a read request).
bool well_formed(std::span<const uint8_t> b, PacketHeader& header) {
  if (!Packet::peek(b, header)) return false;
  const size_t body = b.size() - sizeof(PacketHeader);
  const bool carries = header.command != Command::kReadRequest;
  return carries ? body == header.size : body == 0;
}

}  // namespace

bool Packet::decode(std::span<const uint8_t> b, Packet& out) {
  if (!well_formed(b, out.header)) return false;
  out.bytes.resize(kLinkRoom);
  out.bytes.insert(out.bytes.end(), b.begin(), b.end());  // the one copy of a forwarding hop
  return true;
}

bool Packet::adopt(std::vector<uint8_t>&& framed, Packet& out) {
  if (framed.size() < kLinkRoom || !well_formed(std::span(framed).subspan(kLinkRoom), out.header)) return false;
  out.bytes = std::move(framed);
  return true;
}

}  // namespace ttemu::routing
