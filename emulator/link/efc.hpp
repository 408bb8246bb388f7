// The Ethernet Fallback Channel (spec 2.2.5): when a port's TT-link becomes unreliable or
// dysfunctional, its traffic moves onto the wire of a live parallel link to the same
// neighbour, behind a layer-2 fallback header that names the original link, so that on the
// far side it enters the broken link's own receiver. The broken port's TtLink keeps its
// go-back-N state (what it accepted is still delivered exactly once, in order), and the
// routers keep their FVCs and credits: only the wire under the link changes.
//
// This file holds the two pieces without I/O: the fallback header (the bytes on the wire,
// docs/frame-format.md) and PortEfc, one port's judgement (when to leave its wire, when its
// wire works again). The chip node (emulator/node/chip_node.cpp) chooses carriers and moves
// the datagrams.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include "emulator/link/link_counters.hpp"

namespace ttemu::link {

using Time = std::chrono::nanoseconds;
using Duration = std::chrono::nanoseconds;

struct EfcConfig {
  bool enabled = true;
  // A port leaves its wire after this many retransmission timeouts in a row (before the
  // link's own max_retries would declare it down: a pause of tens of milliseconds, not seconds).
  int timeouts = 4;
  // ... or after two, once this long has passed since the first: a link whose timeout has
  // grown long (a busy host, a lossy wire) must not hold its traffic for seconds.
  Duration stall = std::chrono::milliseconds(200);
  // ... or when the errors its receiver sees (CRC errors and gaps reported) exceed this share
  // of the frames it received over an interval with at least min_frames of them; 0 turns the
  // rate test off. (The far end, which sends into the bad wire, follows: see lease.)
  double error_rate = 0.05;
  uint64_t min_frames = 32;
  Duration interval = std::chrono::milliseconds(100);
  // On the fallback channel, the port probes its own wire: `probes` probes per round, every
  // probe_interval (doubling up to max_probe_interval while rounds fail); the port returns
  // after `rounds` rounds in a row whose every probe was answered over its own wire.
  int probes = 8;  // 1-32 (a round's answers are bits of a word)
  int rounds = 3;
  // A wire that lost frames now and then passes a few probes easily: after an error rate, it
  // must pass this many rounds in a row.
  int rounds_after_errors = 16;
  Duration probe_interval = std::chrono::milliseconds(5);
  Duration max_probe_interval = std::chrono::milliseconds(200);
  // Traffic for a port that arrives over the fallback channel (the far end judged the link
  // broken) takes this port's own traffic there too, until the far end says it is back on
  // its wire (FallbackKind::kReturned), or none has come for this long.
  Duration lease = std::chrono::seconds(1);
};

// Why a port's traffic moved, one way or the other.
enum class EfcReason : uint8_t {
  kNone = 0,
  kTimeouts = 1,   // retransmission timeouts in a row
  kLinkDown = 2,   // the link is down
  kErrorRate = 3,  // errors over an interval crossed the threshold
  kPeer = 4,       // the far end sends this link's traffic over the fallback channel
  kProbed = 5,     // back: the port's own wire answered its probes
  kPeerReturned = 6, // back: the far end no longer uses the fallback channel
  kNoCarrier = 7,  // back: no live parallel link is left to carry it
};
const char* to_string(EfcReason r);

// The fallback header: 16 bytes in front of a datagram that travels another port's wire (or
// of a probe on a port's own wire). Byte 8, where a frame header has its type, holds a value
// no frame type has, so a receiver tells the two apart from the first frame's bytes.
enum class FallbackKind : uint8_t {
  kData = 1,        // a datagram of the link named, over another port's wire
  kProbe = 2,       // on the port's own wire: is it back?
  kProbeReply = 3,  // on the port's own wire: it is, this way
  kReturned = 4,    // on the port's own wire: the sender is back on it; follow
};
inline constexpr size_t kFallbackHeaderBytes = 16;
inline constexpr uint32_t kFallbackMagic = 0x42465454;  // "TTFB"
inline constexpr uint8_t kFallbackMarker = 0xFB;

inline constexpr uint8_t kFallbackJudged = 0x01;  // the sender judged the link broken itself

struct FallbackHeader {
  uint8_t tx_port = 0;  // the sending end of the link the contents belong to
  uint8_t rx_port = 0;  // the receiving end of that link
  FallbackKind kind = FallbackKind::kData;
  // kFallbackJudged: the far end should follow (its traffic for the link takes the channel
  // too). Without it the sender is only following: a lease that renewed itself would keep
  // both ends on the channel for good.
  uint8_t flags = 0;
  uint32_t probe = 0;  // probes and replies: round << 8 | index; 0 for data
};

void encode(const FallbackHeader& h, std::span<uint8_t, kFallbackHeaderBytes> out);
// The header a datagram starts with, if it starts with one (a known kind, marker and magic).
std::optional<FallbackHeader> decode_fallback(std::span<const uint8_t> datagram);

// One port's judgement. The node asks judge() whenever it serves a port not on a fallback
// channel of its own (on its own wire, or following its far end on a lease); once the port
// has fallen back, it probes on the schedule below until its wire answers.
class PortEfc {
 public:
  explicit PortEfc(const EfcConfig& config) : cfg_(config) {}

  // Whether the port should leave its own wire now, and why (kNone: it should not).
  EfcReason judge(const LinkCounters& c, int wire_timeouts, bool down, Time now);
  // On a fallback channel: whether the link times out there as judge() would call broken (the
  // carrier's wire fails too, and the carrier may not know it: it may carry nothing itself).
  bool carrier_failing(int wire_timeouts, Time now);
  // The port moved onto a fallback channel for `why` at `now`: probing starts.
  void fell_back(EfcReason why, Time now);
  // The port is back on its own wire: judging starts afresh.
  void returned(const LinkCounters& c, Time now);
  bool on_fallback() const { return on_fallback_; }
  EfcReason why() const { return why_; }

  std::optional<Time> next_deadline() const { return on_fallback_ ? next_round_ : std::nullopt; }
  // A new probe round if one is due: the probe numbers to send are round() << 8 | 0..probes-1.
  bool round_due(Time now);
  uint32_t round() const { return round_; }
  // A reply came back over the port's own wire; true when the port may return now.
  bool on_reply(uint32_t probe, Time now);

 private:
  void restart_interval(const LinkCounters& c, Time now);
  bool timed_out(int wire_timeouts, Time now);
  uint32_t all() const { return cfg_.probes >= 32 ? ~0u : (1u << cfg_.probes) - 1; }

  EfcConfig cfg_;
  bool on_fallback_ = false;
  EfcReason why_ = EfcReason::kNone;
  // The error-rate interval: where it started and the counts then.
  std::optional<Time> interval_start_;
  std::optional<Time> first_timeout_;  // of the current run of timeouts
  std::optional<Time> grace_until_;    // not judged before: just back on its wire
  uint64_t errors_at_start_ = 0, frames_at_start_ = 0;
  // Probing.
  std::optional<Time> next_round_;
  Duration gap_{};
  uint32_t round_ = 0;
  uint32_t answered_ = 0;  // bit i: probe i of this round was answered
  int passed_ = 0;         // rounds in a row with every probe answered
};

}  // namespace ttemu::link
