// What the fabric delivered, in a form two runs can be compared by: a pattern's run and the
// replay of its capture (docs/capture.md#replay), in the simulator (its delivery tap) or in chip
// processes (recorded while `ttemu traffic --replay` asks). Per (source,
// destination) chip pair: the requests the destination's router delivered to it (writes,
// multicast copies, reads, atomics; not answers: acks, NACKs, read responses), their payload
// bytes, and a digest of them.
//
// A packet's hash is the CRC-64/XZ of its command, dst_addr, size, arg (little-endian, in
// their header's widths) and payload; a pair's digest is the sum of its packets' hashes modulo
// 2^64. So the digest does not depend on
// the order of arrival (the fabric keeps order only along one FVC of one route, and automatic
// FVCs spread a pair's writes over several), and records add up: a run's is the sum of its
// patterns', and since() subtracts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "emulator/routing/packet.hpp"

namespace ttemu::session {

struct PairDeliveries {
  uint64_t packets = 0, bytes = 0, digest = 0;
  bool operator==(const PairDeliveries&) const = default;
};

class Deliveries {
 public:
  using Pair = std::pair<routing::ChipId, routing::ChipId>;  // source, destination

  // A packet delivered to chip `at` (answers are not counted).
  void add(routing::ChipId at, const routing::Packet& packet);
  // What was delivered since `before`, an earlier copy of this record.
  Deliveries since(const Deliveries& before) const;
  // Adds another record's pairs (chips' records make the system's).
  void add(const Deliveries& other);
  // Reads to_json()'s form back (its by_pair); throws Error naming what is wrong.
  static Deliveries from_json(const nlohmann::json& j);
  const std::map<Pair, PairDeliveries>& pairs() const { return pairs_; }
  uint64_t packets() const { return packets_; }  // over every pair
  bool operator==(const Deliveries&) const = default;

  // {"pairs", "packets", "bytes", "digest", "by_pair": [{"src", "dst", "packets", "bytes",
  // "digest"}, ...]}, pairs in chip order, digests as 16 hex digits; the whole record's digest
  // hashes the pairs' entries in that order.
  nlohmann::json to_json() const;

 private:
  uint64_t digest() const;
  std::map<Pair, PairDeliveries> pairs_;
  uint64_t packets_ = 0;
};

// A record's to_json() as one line: "deliveries: N pair(s), P packet(s), B B, digest D".
std::string delivery_line(const nlohmann::json& deliveries);

}  // namespace ttemu::session
