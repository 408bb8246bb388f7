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
  }
  return "?";
}

void Packet::encode_into(std::vector<uint8_t>& out) const {
  out.resize(sizeof(PacketHeader) + payload.size());
  std::memcpy(out.data(), &header, sizeof(PacketHeader));
  if (!payload.empty()) std::memcpy(out.data() + sizeof(PacketHeader), payload.data(), payload.size());
}

bool Packet::decode(std::span<const uint8_t> bytes, Packet& out) {
  if (bytes.size() < sizeof(PacketHeader)) return false;
  std::memcpy(&out.header, bytes.data(), sizeof(PacketHeader));
  const size_t body = bytes.size() - sizeof(PacketHeader);
  const bool carries = out.header.command != Command::kReadRequest;
  if (carries ? body != out.header.size : body != 0) return false;
  out.payload.assign(bytes.begin() + sizeof(PacketHeader), bytes.end());
  return true;
}

}  // namespace ttemu::routing
