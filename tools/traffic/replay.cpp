#include "tools/traffic/replay.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "emulator/chip/address_space.hpp"
#include "emulator/common/error.hpp"
#include "emulator/link/efc.hpp"
#include "emulator/link/frame.hpp"
#include "emulator/transport/lanes.hpp"
#include "emulator/wire/pcapng.hpp"

namespace ttemu::tools {

using routing::ChipId;
using routing::PacketHeader;
using routing::PortId;

namespace {

constexpr uint32_t kPacketLanes = 0x100;  // packet lanes' frame addresses (as the dissector reads them)

// A data frame's CRC folds in how often its sequence numbers have wrapped, which is never sent:
// try the wraps that last matched on this interface, then one more of either, then any of 0-7
// (as the dissector does). `last` becomes the match.
bool crc_good(const link::ParsedFrame& f, link::SeqExtension& last) {
  if (link::crc_ok(f, last)) return true;
  std::vector<link::SeqExtension> tries = {{last.tx_wraps + 1, last.rx_wraps}, {last.tx_wraps, last.rx_wraps + 1},
                                           {last.tx_wraps + 1, last.rx_wraps + 1}};
  for (uint64_t tx = 0; tx < 8; ++tx) {
    for (uint64_t rx = 0; rx < 8; ++rx) tries.push_back({tx, rx});
  }
  for (const auto& ext : tries) {
    if (!link::crc_ok(f, ext)) continue;
    last = ext;
    return true;
  }
  return false;
}

// What tells one injection from another (replay.hpp).
using Key = std::tuple<ChipId, uint64_t, routing::Command, uint16_t, uint8_t, uint64_t, uint32_t>;
Key key_of(const PacketHeader& h) { return {h.src(), h.packet_id, h.command, h.src_core, h.txn_id, h.dst_addr, h.size}; }

// The memory an access of `size` bytes at `addr` (L1, or DRAM by bit 63) needs.
void reach(Replay& r, uint64_t addr, uint64_t size) {
  uint64_t& need = addr & chip::kDramBit ? r.dram_bytes : r.l1_bytes;
  need = std::max(need, (addr & ~chip::kDramBit) + size);
}

// The packet as a one-line name in errors: "write M0D0->M0D31 id 7".
std::string named(const PacketHeader& h) {
  return fmt::format("{} {}->{} id {}", routing::to_string(h.command), routing::to_string(h.src()),
                     routing::to_string(h.dst()), h.packet_id);
}

}  // namespace

Replay read_replay(const std::string& path, const control::System& sys) {
  wire::Capture c;
  try {
    c = wire::read_pcapng(path);
  } catch (const std::runtime_error& e) {
    throw Error(fmt::format("--replay: {}", e.what()));
  }
  auto fail = [&](const std::string& why) { return Error(fmt::format("--replay {}: {}", path, why)); };
  auto check_chip = [&](ChipId chip) {
    if (!sys.node(chip)) throw fail(fmt::format("chip {} is not in {}", routing::to_string(chip), sys.source));
  };
  // Each interface is a link end of the system.
  std::vector<PortId> ends;
  for (const auto& i : c.interfaces) {
    const auto end = routing::parse_port(i.name);
    if (!end) throw fail(fmt::format("interface '{}' is not a link end (a capture of ttemu sim --capture?)", i.name));
    check_chip(end->chip);
    ends.push_back(*end);
  }
  Replay r;
  r.link_ends = 2 * sys.links.size();
  for (const auto& end : std::set<PortId>(ends.begin(), ends.end())) {
    if (!sys.peer(end)) throw fail(fmt::format("link end {} is not a wired port of {}", routing::to_string(end), sys.source));
    ++r.link_ends_captured;
  }
  // Datagrams in capture-time order (the file's order, as sent).
  std::vector<const wire::CapturedDatagram*> order;
  for (const auto& d : c.datagrams) order.push_back(&d);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->ns < b->ns; });
  // Times count from the first datagram: a live capture's are wall-clock times (ttemu capture).
  const uint64_t epoch = order.empty() ? 0 : order.front()->ns;
  std::vector<link::SeqExtension> wraps(c.interfaces.size());
  std::set<Key> seen;
  for (const auto* d : order) {
    const PortId sender = ends[d->interface];
    std::span<const uint8_t> bytes(d->bytes);
    if (link::decode_fallback(bytes)) bytes = bytes.subspan(link::kFallbackHeaderBytes);
    link::parse_datagram(bytes, [&](const link::ParsedFrame& f) {
      const auto& fh = f.header;
      if (fh.type != link::FrameType::kData || fh.dest_addr - transport::kLinkPacketAddr >= kPacketLanes) return;
      if (!crc_good(f, wraps[d->interface])) {
        ++r.bad_frames;
        return;
      }
      PacketHeader h;
      if (!routing::Packet::peek(f.payload, h) || routing::is_answer(h.command)) return;
      if (!seen.insert(key_of(h)).second) return;
      if (routing::is_socket(h.command)) throw fail(fmt::format("{}: socket packets cannot be replayed", named(h)));
      if (h.key != 0) throw fail(fmt::format("{}: it names a memory window by key (--memory protected), which a replay has not", named(h)));
      check_chip(h.src());
      check_chip(h.dst());
      Injection in{.ns = d->ns - epoch, .packet = {}};
      if (!routing::Packet::decode(f.payload, in.packet)) throw fail(fmt::format("{}: a malformed packet", named(h)));
      // The first hop took one off; seen only further on, how many hops it had made is unknown.
      in.packet.header.ttl = sender.chip == h.src() ? static_cast<uint8_t>(h.ttl + 1) : routing::kDefaultTtl;
      // (Read responses carry the size read; an atomic's counter is at most 8 bytes.)
      const uint64_t span = routing::moves_data(h.command) ? h.size : 8;
      reach(r, h.dst_addr, span);
      if (routing::answered_with_data(h.command)) reach(r, h.return_addr, span);
      r.injections.push_back(std::move(in));
    });
  }
  if (r.injections.empty()) {
    throw fail(fmt::format("no fabric request in {} datagram(s) on {} link end(s): nothing to replay", c.datagrams.size(),
                           c.interfaces.size()));
  }
  return r;
}

}  // namespace ttemu::tools
