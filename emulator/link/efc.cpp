#include "emulator/link/efc.hpp"

#include <algorithm>
#include <cstring>

namespace ttemu::link {

const char* to_string(EfcReason r) {
  switch (r) {
    case EfcReason::kNone: return "none";
    case EfcReason::kTimeouts: return "timeouts";
    case EfcReason::kLinkDown: return "link_down";
    case EfcReason::kErrorRate: return "error_rate";
    case EfcReason::kPeer: return "peer";
    case EfcReason::kProbed: return "probed";
    case EfcReason::kPeerReturned: return "peer_returned";
    case EfcReason::kNoCarrier: return "no_carrier";
  }
  return "?";
}

void encode(const FallbackHeader& h, std::span<uint8_t, kFallbackHeaderBytes> out) {
  std::memset(out.data(), 0, out.size());
  std::memcpy(out.data(), &kFallbackMagic, 4);
  out[4] = h.tx_port;
  out[5] = h.rx_port;
  out[6] = static_cast<uint8_t>(h.kind);
  out[7] = h.flags;
  out[8] = kFallbackMarker;
  std::memcpy(out.data() + 12, &h.probe, 4);
}

std::optional<FallbackHeader> decode_fallback(std::span<const uint8_t> d) {
  if (d.size() < kFallbackHeaderBytes || d[8] != kFallbackMarker) return std::nullopt;
  uint32_t magic;
  std::memcpy(&magic, d.data(), 4);
  if (magic != kFallbackMagic || d[6] < static_cast<uint8_t>(FallbackKind::kData) ||
      d[6] > static_cast<uint8_t>(FallbackKind::kReturned)) {
    return std::nullopt;
  }
  FallbackHeader h;
  h.tx_port = d[4];
  h.rx_port = d[5];
  h.kind = static_cast<FallbackKind>(d[6]);
  h.flags = d[7];
  std::memcpy(&h.probe, d.data() + 12, 4);
  return h;
}

namespace {
// The receiver's evidence of what the wire did: frames that failed their CRC, and gaps (a
// frame lost, or corrupted beyond framing). Not retransmissions: on a busy host most of those
// answer acknowledgements that were late, not frames that were lost.
uint64_t errors(const LinkCounters& c) {
  return c.crc_errors.load(std::memory_order_relaxed) + c.nacks_tx.load(std::memory_order_relaxed);
}
uint64_t frames(const LinkCounters& c) {
  return c.frames_rx.load(std::memory_order_relaxed) + c.crc_errors.load(std::memory_order_relaxed);
}
}  // namespace

void PortEfc::restart_interval(const LinkCounters& c, Time now) {
  interval_start_ = now;
  errors_at_start_ = errors(c);
  frames_at_start_ = frames(c);
}

EfcReason PortEfc::judge(const LinkCounters& c, int wire_timeouts, bool down, Time now) {
  if (!cfg_.enabled || on_fallback_) return EfcReason::kNone;
  // Just back: the link gets a handshake's or a timeout's worth of time on its own wire
  // before it is judged again (a link down on the channel must not fall back at once).
  if (grace_until_ && now < *grace_until_) return EfcReason::kNone;
  if (down) return EfcReason::kLinkDown;
  if (timed_out(wire_timeouts, now)) return EfcReason::kTimeouts;
  if (cfg_.error_rate <= 0) return EfcReason::kNone;
  if (!interval_start_) {
    restart_interval(c, now);
    return EfcReason::kNone;
  }
  if (now - *interval_start_ < cfg_.interval) return EfcReason::kNone;
  const uint64_t e = errors(c) - errors_at_start_, f = frames(c) - frames_at_start_;
  restart_interval(c, now);
  if (f >= cfg_.min_frames && static_cast<double>(e) > cfg_.error_rate * static_cast<double>(f)) {
    return EfcReason::kErrorRate;
  }
  return EfcReason::kNone;
}

bool PortEfc::timed_out(int wire_timeouts, Time now) {
  if (wire_timeouts == 0) first_timeout_.reset();
  else if (!first_timeout_) first_timeout_ = now;
  return wire_timeouts >= cfg_.timeouts || (wire_timeouts >= 2 && now - *first_timeout_ >= cfg_.stall);
}

bool PortEfc::carrier_failing(int wire_timeouts, Time now) {
  if (!on_fallback_ || !timed_out(wire_timeouts, now)) return false;
  first_timeout_.reset();
  return true;
}

void PortEfc::fell_back(EfcReason why, Time now) {
  on_fallback_ = true;
  why_ = why;
  first_timeout_.reset();
  gap_ = cfg_.probe_interval;
  next_round_ = now + gap_;
  answered_ = 0;
  passed_ = 0;
}

void PortEfc::returned(const LinkCounters& c, Time now) {
  on_fallback_ = false;
  why_ = EfcReason::kNone;
  next_round_.reset();
  first_timeout_.reset();
  grace_until_ = now + cfg_.stall;
  restart_interval(c, now);
}

bool PortEfc::round_due(Time now) {
  if (!on_fallback_ || !next_round_ || now < *next_round_) return false;
  if (round_ > 0 && answered_ != all()) {
    // A probe or its reply was lost: the wire still fails. Probe less often while it does.
    passed_ = 0;
    gap_ = std::min(gap_ * 2, cfg_.max_probe_interval);
  }
  round_ = (round_ + 1) & 0xFFFFFF;
  if (round_ == 0) round_ = 1;
  answered_ = 0;
  next_round_ = now + gap_;
  return true;
}

bool PortEfc::on_reply(uint32_t probe, Time now) {
  if (!on_fallback_ || (probe >> 8) != round_) return false;  // an earlier round's, late
  const uint32_t index = probe & 0xFF;
  if (index >= static_cast<uint32_t>(cfg_.probes) || (answered_ & (1u << index))) return false;
  answered_ |= 1u << index;
  if (answered_ != all()) return false;
  const int needed = why_ == EfcReason::kErrorRate ? cfg_.rounds_after_errors : cfg_.rounds;
  if (++passed_ >= needed) return true;
  // The wire answers again: the next round follows at once, not after the backoff.
  gap_ = cfg_.probe_interval;
  next_round_ = now + gap_;
  return false;
}

}  // namespace ttemu::link
