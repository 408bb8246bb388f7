#include "emulator/session/deliveries.hpp"

#include <cstring>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include <isa-l/crc64.h>

#include "emulator/common/error.hpp"
#include "emulator/common/vector_state.hpp"

namespace ttemu::session {

namespace {

// CRC-64/XZ (ECMA-182, reflected) continued over `value`'s bytes: ISA-L's, as fast as memory.
uint64_t crc64(uint64_t crc, std::span<const uint8_t> bytes) {
  crc = crc64_ecma_refl(crc, bytes.data(), bytes.size());
  clear_upper_vector_state();
  return crc;
}

template <class T>
uint64_t crc64(uint64_t crc, T value) {
  uint8_t b[sizeof value];
  std::memcpy(b, &value, sizeof value);
  return crc64(crc, std::span<const uint8_t>(b));
}

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

}  // namespace

void Deliveries::add(routing::ChipId at, const routing::Packet& packet) {
  const auto& h = packet.header;
  if (routing::is_answer(h.command)) return;
  uint64_t hash = crc64(0, static_cast<uint8_t>(h.command));
  hash = crc64(hash, h.dst_addr);
  hash = crc64(hash, h.size);
  hash = crc64(hash, h.arg);
  hash = crc64(hash, packet.payload());
  auto& d = pairs_[{h.src(), at}];
  ++d.packets;
  ++packets_;
  d.bytes += packet.payload().size();
  d.digest += hash;
}

Deliveries Deliveries::since(const Deliveries& before) const {
  Deliveries out;
  for (const auto& [pair, now] : pairs_) {
    PairDeliveries d = now;
    if (auto it = before.pairs_.find(pair); it != before.pairs_.end()) {
      d.packets -= it->second.packets, d.bytes -= it->second.bytes, d.digest -= it->second.digest;
    }
    if (d.packets > 0) out.pairs_[pair] = d;
    out.packets_ += d.packets;
  }
  return out;
}

void Deliveries::add(const Deliveries& other) {
  for (const auto& [pair, d] : other.pairs_) {
    auto& mine = pairs_[pair];
    mine.packets += d.packets, mine.bytes += d.bytes, mine.digest += d.digest;
  }
  packets_ += other.packets_;
}

Deliveries Deliveries::from_json(const nlohmann::json& j) {
  Deliveries out;
  try {
    for (const auto& p : j.at("by_pair")) {
      const auto src = routing::parse_chip(p.at("src").get<std::string>());
      const auto dst = routing::parse_chip(p.at("dst").get<std::string>());
      if (!src || !dst) throw Error(fmt::format("deliveries: {} is not a pair of chips", p.dump()));
      PairDeliveries d{.packets = p.at("packets").get<uint64_t>(), .bytes = p.at("bytes").get<uint64_t>(),
                       .digest = std::stoull(p.at("digest").get<std::string>(), nullptr, 16)};
      out.pairs_[{*src, *dst}] = d;
      out.packets_ += d.packets;
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("deliveries: {}", e.what()));
  } catch (const std::logic_error& e) {  // stoull
    throw Error(fmt::format("deliveries: a digest is not hexadecimal ({})", e.what()));
  }
  return out;
}

uint64_t Deliveries::digest() const {
  uint64_t h = 0;
  for (const auto& [pair, d] : pairs_) {
    for (uint64_t v : {uint64_t{pair.first.mesh}, uint64_t{pair.first.device}, uint64_t{pair.second.mesh},
                       uint64_t{pair.second.device}, d.packets, d.bytes, d.digest}) {
      h = crc64(h, v);
    }
  }
  return h;
}

nlohmann::json Deliveries::to_json() const {
  nlohmann::json by_pair = nlohmann::json::array();
  uint64_t packets = 0, bytes = 0;
  for (const auto& [pair, d] : pairs_) {
    by_pair.push_back({{"src", routing::to_string(pair.first)}, {"dst", routing::to_string(pair.second)},
                       {"packets", d.packets}, {"bytes", d.bytes}, {"digest", hex(d.digest)}});
    packets += d.packets, bytes += d.bytes;
  }
  return {{"pairs", pairs_.size()}, {"packets", packets}, {"bytes", bytes}, {"digest", hex(digest())},
          {"by_pair", std::move(by_pair)}};
}

std::string delivery_line(const nlohmann::json& deliveries) {
  return fmt::format("deliveries: {} pair(s), {} packet(s), {} B, digest {}", deliveries.at("pairs").get<size_t>(),
                     deliveries.at("packets").get<uint64_t>(), deliveries.at("bytes").get<uint64_t>(),
                     deliveries.at("digest").get<std::string>());
}

}  // namespace ttemu::session
