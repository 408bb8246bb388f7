// `ttemu sim --replay FILE.pcapng`: the workers' injections recovered from a capture that
// `ttemu sim --capture` wrote (docs/capture.md#replay), to inject again.
//
// An injection is a fabric request (write, multicast write, read, atomic) as the capture shows
// it the first time: on the first captured hop it crossed. It is known by its source chip,
// packet id, command, core, transaction, destination address and size, so its copies on later
// hops, its go-back-N retransmissions and the copies of a multicast that the fabric makes
// (other destinations, the same packet) are the same injection. Answers (acks, NACKs, read
// responses), credits, hellos and the links' test traffic are made by the fabric and are not
// injections. A data frame whose CRC fails is skipped: it was corrupted on the wire, and the
// copy sent again is the one that counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emulator/control/system.hpp"
#include "emulator/routing/packet.hpp"

namespace ttemu::tools {

struct Injection {
  uint64_t ns = 0;  // when the capture first shows it: nanoseconds after the capture's first datagram
  // Its header as first seen, with the TTL it was injected with when that was on a link of its
  // source chip (the first hop has taken one off), else kDefaultTtl; and its payload.
  routing::Packet packet;
};

struct Replay {
  std::vector<Injection> injections;  // in capture-time order
  size_t link_ends = 0;               // the system's link ends ...
  size_t link_ends_captured = 0;      // ... and those the capture has an interface for
  uint64_t bad_frames = 0;            // data frames whose CRC failed, skipped
  // The memory every chip needs for the addresses the injections touch: where writes, reads
  // and atomics land at their destinations, where read responses land at their sources.
  uint64_t l1_bytes = 0, dram_bytes = 0;
  // Every link end is captured: every injection that crossed a link is there (one delivered
  // on its own chip never crosses one).
  bool complete() const { return link_ends_captured == link_ends; }
};

// Reads the capture at `path` for the system `sys`. Throws Error, one line naming the culprit,
// for a file that is not a pcapng capture (or is malformed); a capture with no fabric request;
// a chip or a link end that `sys` does not have; and what a replay cannot reproduce: socket
// packets (a socket is a session between two endpoints, which a replay does not open) and
// requests with a memory key (it names a window of the captured run's chips).
Replay read_replay(const std::string& path, const control::System& sys);

}  // namespace ttemu::tools
