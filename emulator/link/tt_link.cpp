#include "emulator/link/tt_link.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "emulator/common/deadline.hpp"
#include "emulator/link/planted_defect.hpp"

namespace ttemu::link {

namespace {

// Both ends count in 64 bits; a header carries the low 16. A received number is taken to be
// the one nearest to what this end expects (within half the 16-bit space): a window is at most
// 32768 frames, so every current frame is that near.
uint64_t expand(uint16_t low, uint64_t near) {
  const uint64_t c = (near & ~uint64_t{0xffff}) | low;
  if (c + 0x8000 <= near) return c + 0x10000;
  if (c > near + 0x7fff && c >= 0x10000) return c - 0x10000;
  return c;
}

// How many wraps back a frame that failed its CRC is looked for, to count it as stale rather
// than corrupted; older ones count as CRC errors (either way they are dropped).
constexpr uint64_t kStaleWrapsChecked = 4;

bool from_earlier_wrap(const ParsedFrame& f, const SeqExtension& now) {
  for (uint64_t dt = 0; dt <= std::min(kStaleWrapsChecked, now.tx_wraps); ++dt) {
    for (uint64_t dr = 0; dr <= std::min(kStaleWrapsChecked, now.rx_wraps); ++dr) {
      if ((dt || dr) && crc_ok(f, {now.tx_wraps - dt, now.rx_wraps - dr})) return true;
    }
  }
  return false;
}

}  // namespace

const char* to_string(LinkState s) {
  switch (s) {
    case LinkState::kHandshake: return "handshake";
    case LinkState::kUp: return "up";
    case LinkState::kDown: return "down";
  }
  return "?";
}

TtLink::TtLink(const LinkConfig& config, const LinkIdentity& self, const LinkIdentity& peer,
               uint32_t nonce, LinkCounters& counters)
    : cfg_(config),
      self_(self),
      peer_(peer),
      nonce_(nonce ? nonce : 1),
      c_(counters),
      rto_(config.initial_rto),
      hello_backoff_(config.hello_interval) {
  if (cfg_.window == 0 || cfg_.window > 32768) throw std::invalid_argument("TT-link window must be 1-32768");
  held_.resize(cfg_.window);
}

void TtLink::start(Time now) {
  started_ = now;
  set_state(LinkState::kHandshake);
  hello_now(now);
}

void TtLink::set_state(LinkState s) {
  state_ = s;
  c_.state.store(static_cast<uint32_t>(s), std::memory_order_relaxed);
}

void TtLink::hello_now(Time now) {
  hello_due_ = true;
  hello_backoff_ = cfg_.hello_interval;
  hello_deadline_ = now + hello_backoff_;
}

size_t TtLink::send_room() const {
  if (state_ != LinkState::kUp) return 0;
  if (cfg_.window_bytes > 0 && unacked_bytes_ >= cfg_.window_bytes) return 0;
  return cfg_.window - (next_ - base_);
}

bool TtLink::send(uint32_t dest_addr, std::span<const uint8_t> payload) {
  if (payload.size() > kMaxPayload) throw std::invalid_argument("TT-link payload larger than kMaxPayload");
  if (send_room() == 0) return false;
  std::vector<uint8_t> copy = pool_->take();
  copy.resize(kFrameRoom);
  copy.insert(copy.end(), payload.begin(), payload.end());
  return accept(dest_addr, std::move(copy));
}

bool TtLink::send_framed(uint32_t dest_addr, std::vector<uint8_t>&& framed) {
  if (framed.size() < kFrameRoom || framed.size() - kFrameRoom > kMaxPayload) {
    throw std::invalid_argument("TT-link payload buffer without frame room, or larger than kMaxPayload");
  }
  if (send_room() == 0) return false;
  return accept(dest_addr, std::move(framed));
}

bool TtLink::accept(uint32_t dest_addr, std::vector<uint8_t>&& framed) {
  const size_t payload = framed.size() - kFrameRoom;
  add(c_.frames_tx);
  add(c_.bytes_tx, payload);
  unacked_bytes_ += payload;
  unacked_.push_back(Outgoing{next_, dest_addr, std::move(framed), Time{}, 0});
  ++next_;
  // The window closed on this frame: what the sender has next waits for acknowledgements.
  // (Counted here, not when a send is refused: callers ask send_room() first.)
  if (send_room() == 0) add(c_.window_stalls);
  return true;
}

void TtLink::on_datagram(std::span<const uint8_t> datagram, Time now) {
  deliver_released();  // a caller that did not: what was released goes before what arrives
  add(c_.datagrams_rx);
  uint64_t frames = 0;  // counted once per datagram, not per frame
  ParseResult r = parse_datagram(datagram, [&](const ParsedFrame& f) {
    ++frames;
    on_frame(f, now);
  });
  add(c_.frames_in, frames);
  if (r.malformed) add(c_.malformed);
}

void TtLink::on_frame(const ParsedFrame& f, Time now) {
  if (f.header.type == FrameType::kHello) {
    if (!crc_ok(f, {})) {
      add(c_.crc_errors);
      return;
    }
    on_hello(f, now);
    return;
  }
  // Data and ack frames are checked with the sequence numbers they must be near.
  const bool data = f.header.type == FrameType::kData;
  const uint64_t tx = data ? expand(f.header.tx_seq, expected_) : 0;
  const uint64_t rx = expand(f.header.rx_seq, base_);
  const SeqExtension ext{tx >> 16, rx >> 16};
  const bool ours = f.header.session != 0 && f.header.session == (nonce_ ^ peer_nonce_) && peer_nonce_ != 0;
  if (!crc_ok(f, ext) && !(data && skips_crc_check(self_.mesh, self_.device, self_.port))) {
    // Intact but from an earlier pass of the sequence space: stale if it is of this session.
    const bool earlier = from_earlier_wrap(f, ext);
    add(!earlier ? c_.crc_errors : ours ? c_.stale : c_.foreign);
    return;
  }
  if (!known_type(f.header.type)) {
    add(c_.malformed);
    return;
  }
  if (!ours) {
    add(c_.foreign);
    return;
  }
  heard_ = now;
  // A data or ack frame of our session proves the peer heard our hello, even if its own last
  // hello was lost; after a down period it proves the peer is back.
  if (state_ != LinkState::kUp) come_up(now);
  on_ack(rx, (f.header.flags & kFlagNack) != 0, !data && (f.header.flags & kFlagHeld) != 0,
         (f.header.flags & kFlagAnswer) != 0, now);
  if (!data) return;
  const uint64_t seq = tx;
  if (seq == expected_) {
    if (expected_ - delivered_ >= held_.size()) deliver_released();  // no slot left for it
    if (delivered_ == expected_) {
      accept_in_order(f.header.dest_addr, f.payload);
    } else {
      hold(seq, f.header.dest_addr, f.payload);  // behind released frames not yet delivered
      accept_held();
    }
    // Frames held since the gap this one filled follow it, in order: delivered now, or, with
    // deliver_after_ack, acknowledged now and delivered by deliver_released().
    while (holding_ > expected_ - delivered_) {
      Held& h = held_[expected_ % held_.size()];
      if (!h.valid || h.seq != expected_) break;
      accept_held();
      if (!cfg_.deliver_after_ack) deliver_released();
    }
    // The gap is closed; frames still held lie behind a new one, to be asked for at once.
    nack_pending_ = nack_urgent_ = holding_ > expected_ - delivered_;
    ack_pending_ = true;
    // A frame sent again (a gap filled, a tail resent after a timeout): its sender waits to hear.
    if (f.header.flags & kFlagResent) {
      ack_now_ = answers_resend_ = true;
    } else {
      fresh_since_ack_ = true;
    }
  } else if (seq < expected_) {
    add(c_.duplicates);
    // A frame sent again asks where we are (a timeout, or a NACK's echo): answer at once.
    ack_pending_ = ack_now_ = true;
    if ((f.header.flags & kFlagResent) && !fresh_since_ack_) answers_resend_ = true;
  } else {
    // A gap: ask for the missing frame with every acknowledgement until it is filled (the
    // sender tells echoes from news), and hold this frame meanwhile, so that the sender need
    // resend only what is missing. Only a gap's first NACK is urgent, and one after another
    // quarter window came in past it (that NACK, or the resend it asked for, was lost); the
    // rest ride on what goes anyway or wait out the ack delay. Each urgent one is a datagram
    // and a wake-up of the sender: with one per batch, twelve per loss at 4 KiB frames (now
    // about three).
    add(c_.out_of_order);
    nack_pending_ = ack_pending_ = true;
    if (nacked_gap_ != expected_ || ++past_nack_ >= cfg_.window / 4u) nack_urgent_ = true;
    // Sequence numbers within a window of the oldest frame not yet delivered map one to one
    // onto the slots, and a held frame is delivered as soon as that reaches it: a valid slot
    // holds this very frame.
    if (seq - delivered_ < held_.size() && !held_[seq % held_.size()].valid) hold(seq, f.header.dest_addr, f.payload);
  }
}

void TtLink::hold(uint64_t seq, uint32_t dest_addr, std::span<const uint8_t> payload) {
  Held& h = held_[seq % held_.size()];
  h.valid = true;
  h.seq = seq;
  h.dest_addr = dest_addr;
  h.bytes = pool_->take();
  h.bytes.resize(kFrameRoom);
  h.bytes.insert(h.bytes.end(), payload.begin(), payload.end());  // the loss path's copy
  ++holding_;
}

void TtLink::accept_held() {
  const size_t bytes = held_[expected_ % held_.size()].bytes.size() - kFrameRoom;
  ++expected_;
  ++unacked_rx_;
  unacked_rx_bytes_ += bytes;
  add(c_.frames_rx);
  add(c_.bytes_rx, bytes);
}

void TtLink::deliver_released() {
  for (; delivered_ != expected_; ++delivered_) {
    Held& h = held_[delivered_ % held_.size()];
    h.valid = false;
    --holding_;
    if (deliver_held_) {
      deliver_held_(h.dest_addr, std::move(h.bytes));
      h.bytes = {};  // (moved from: the next hold takes a buffer of the pool)
      continue;
    }
    if (deliver_) deliver_(h.dest_addr, std::span(h.bytes).subspan(kFrameRoom));
    pool_->give(std::move(h.bytes));
  }
}

void TtLink::accept_in_order(uint32_t dest_addr, std::span<const uint8_t> payload) {
  if (deliver_) deliver_(dest_addr, payload);
  ++expected_;
  ++delivered_;
  ++unacked_rx_;
  unacked_rx_bytes_ += payload.size();
  add(c_.frames_rx);
  add(c_.bytes_rx, payload.size());
}

void TtLink::on_hello(const ParsedFrame& f, Time now) {
  HelloBody body;
  if (f.payload.size() != sizeof(body)) {
    add(c_.malformed);
    return;
  }
  std::memcpy(&body, f.payload.data(), sizeof(body));
  const bool left = std::find(left_nonces_.begin(), left_nonces_.end(), body.nonce) != left_nonces_.end();
  if (body.job != peer_.job || body.mesh != peer_.mesh || body.device != peer_.device ||
      body.port != peer_.port || body.nonce == 0 || left) {
    // Another job, chip or port, or a session the peer has left (a late hello of its past).
    add(c_.foreign);
    return;
  }
  if (peer_nonce_ != 0 && body.nonce != peer_nonce_) new_peer_session(now);
  peer_nonce_ = body.nonce;
  if (body.peer_nonce == nonce_) {
    heard_ = now;
    session_ = nonce_ ^ peer_nonce_;
    if (state_ != LinkState::kUp) come_up(now);
  }
  // Answer while either end is not up yet, so both get the proof they need.
  if (body.flags & kHelloAsk) answer_ = body.ask;
  if (!(body.flags & kHelloUp) || (body.flags & kHelloAsk) || state_ != LinkState::kUp) hello_due_ = true;
  // The answer to our asking hello: the wire carried it both ways.
  if (state_ == LinkState::kUp && body.peer_nonce == nonce_ && ask_token_ != 0 && body.answer == ask_token_) proved();
}

bool TtLink::verify(Time now) {
  if (state_ != LinkState::kUp || verify_deadline_ || base_ != next_) return false;
  ask_ = hello_due_ = true;
  verify_deadline_ = now + rto_;
  return true;
}

void TtLink::proved() {
  if (!verify_deadline_) return;
  verify_deadline_.reset();
  if (base_ == next_) {  // (with frames in flight, only their acknowledgement is progress)
    consecutive_timeouts_ = wire_timeouts_ = 0;
    rto_ = fresh_rto();
  }
}

void TtLink::new_peer_session(Time now) {
  deliver_released();  // acknowledged to the old session: the routing layer gets them
  drop_open();
  std::rotate(left_nonces_.rbegin(), left_nonces_.rbegin() + 1, left_nonces_.rend());
  left_nonces_[0] = peer_nonce_;
  add(c_.peer_restarts);
  // What the old session never acknowledged is reported, not resent: the peer that would have
  // acknowledged it is gone with whatever it held.
  std::vector<Abandoned> abandoned;
  abandoned.reserve(unacked_.size());
  for (size_t i = 0; i < unacked_.size(); ++i) {
    const Outgoing& o = unacked_[i];
    abandoned.push_back({o.dest_addr, std::span(o.framed).subspan(kFrameRoom)});
  }
  add(c_.abandoned, abandoned.size());
  if (restarted_) restarted_(abandoned);
  while (!unacked_.empty()) {  // datagrams still lent may borrow them: retired, not freed
    retired_.push_back(std::move(unacked_.front().framed));
    unacked_.pop_front();
  }
  base_ = next_ = cursor_ = 0;
  unacked_bytes_ = 0;
  rto_deadline_.reset();
  verify_deadline_.reset();
  ask_ = false;
  answer_ = 0;
  probe_end_.reset();
  last_nacked_base_.reset();
  resend_base_ = false;
  consecutive_timeouts_ = wire_timeouts_ = 0;
  srtt_ = rttvar_ = min_rtt_ = Duration{0};
  rto_ = cfg_.initial_rto;
  for (Held& h : held_) {
    if (h.valid) pool_->give(std::move(h.bytes));
    h.valid = false;
  }
  holding_ = 0;
  expected_ = delivered_ = 0;
  nacked_gap_ = ~uint64_t{0};
  past_nack_ = 0;
  ack_pending_ = nack_pending_ = nack_urgent_ = ack_now_ = answers_resend_ = fresh_since_ack_ = false;
  unacked_rx_ = 0;
  unacked_rx_bytes_ = 0;
  ack_deadline_.reset();
  delayed_.clear();  // packed for the old session
  session_ = 0;  // the caller takes the new nonce
  if (state_ == LinkState::kUp) set_state(LinkState::kHandshake);
  hello_now(now);
}

void TtLink::on_ack(uint64_t ack, bool nack, bool held, bool answer, Time now) {
  if (ack < base_ || ack > next_) return;  // not within what we sent
  if (ack != base_) {
    const Outgoing& newest = unacked_[ack - base_ - 1];
    // Karn: time only frames sent once, and never an answer to a resend (a probe after a
    // timeout, a frame a NACK asked for; the receiver flags it). The frames an answer covers
    // may have waited at the receiver behind the gap the resend filled: timed from their
    // sending, the sample counts the whole time the gap was open, the timeout grows by as
    // much and the next gap lasts as long (at 10 % frame errors a stream crept at 0.2 MB/s,
    // its timeouts at 500 ms). Timed from the resend, it is a lone frame's round trip, which
    // skips the backlog the oldest frame's acknowledgement waits behind: under load the
    // timeout shrank below that and links all over a Galaxy timed out onto their fallback
    // channels. Another acknowledgement after a resend answers the frames' first sending (a
    // busy receiver took them late) or follows answers that were lost: timed from the resend
    // unless it came faster than any round trip yet, which only the first can.
    if (newest.transmissions == 1 && !answer) {
      Duration sample = now - newest.sent;
      if (last_resent_ > newest.sent && now - last_resent_ >= min_rtt_) sample = now - last_resent_;
      // A held acknowledgement may have waited for us to wake, up to this timeout: taken as
      // it comes, each would raise the next timeout by as much, without bound. It may lower
      // the estimate, never raise it (the peer's hold is in peer_ack_delay already); a first
      // one counts as at most that hold.
      if (held && !srtt_.count()) sample = std::min(sample, std::max(cfg_.peer_ack_delay, Duration{1}));
      if (!(held && srtt_.count() && sample > srtt_)) {
        min_rtt_ = min_rtt_.count() ? std::min(min_rtt_, sample) : sample;
        if (srtt_.count() == 0) {
          srtt_ = sample;
          rttvar_ = sample / 2;
        } else {
          Duration err = sample > srtt_ ? sample - srtt_ : srtt_ - sample;
          rttvar_ = (3 * rttvar_ + err) / 4;
          srtt_ = (7 * srtt_ + sample) / 8;
        }
      }
    }
    const uint64_t old_base = base_;
    while (base_ != ack) {
      unacked_bytes_ -= unacked_.front().framed.size() - kFrameRoom;
      retired_.push_back(std::move(unacked_.front().framed));
      unacked_.pop_front();
      ++base_;
    }
    if (cursor_ < base_) cursor_ = base_;
    if (probe_end_) {
      if (base_ >= *probe_end_) {
        probe_end_.reset();  // the timeout was a late acknowledgement
      } else if (ack == old_base + 1) {
        // The answer to the resent frame, and nothing the receiver had after it: what follows
        // was lost (the tail of a burst, with no later frame to reveal the gap). Go back over it.
        cursor_ = base_;
        probe_end_.reset();
      } else {
        // Part of what was sent, and more than the resent frame: an acknowledgement sent before
        // that frame arrived, most likely, with the rest on its way. Ask again with the oldest
        // frame alone; its answer tells.
        resend_base_ = true;
      }
    }
    consecutive_timeouts_ = wire_timeouts_ = 0;
    rto_ = fresh_rto();  // progress ends any timeout backoff
    rto_deadline_.reset();
    if (base_ != next_) arm_rto(now);
  }
  if (nack && base_ != next_) {
    // Resend for a new gap, or for the same gap once the resent frame has had time to arrive
    // (it was lost again); other NACKs for it are echoes of the first.
    const Outgoing& first = unacked_.front();
    Duration settle = srtt_ + srtt_ / 2 + 50us;
    if (!last_nacked_base_ || *last_nacked_base_ != base_ || (cursor_ != base_ && now - first.sent > settle)) {
      // The receiver holds what arrived after the gap: resend the missing frame alone; its
      // acknowledgement then covers what was held, and what is still missing is asked for
      // in turn.
      resend_base_ = true;
      last_nacked_base_ = base_;
    }
  }
}

void TtLink::on_timer(Time now) {
  deliver_released();
  if (const auto k = keepalive_deadline(); k && now >= *k) verify(now);
  if (state_ != LinkState::kUp && hello_deadline_ && now >= *hello_deadline_) {
    hello_due_ = true;
    hello_backoff_ = std::min(hello_backoff_ * 2, cfg_.max_hello_interval);
    hello_deadline_ = now + hello_backoff_;
  }
  // A verification and frames in flight may time out together: one timeout, counted once.
  const bool rto_due = state_ == LinkState::kUp && rto_deadline_ && now >= *rto_deadline_;
  if (rto_due && still_up_after_timeout(now)) {
    // Resend the oldest frame alone: on a busy host a timeout is mostly an acknowledgement
    // that is late, not lost, and the answer to this one frame says which it was.
    resend_base_ = true;
    if (!probe_end_) probe_end_ = next_;
    rto_deadline_ = now + rto_;
  }
  if (state_ == LinkState::kUp && verify_deadline_ && now >= *verify_deadline_ && (rto_due || still_up_after_timeout(now))) {
    ask_ = hello_due_ = true;
    verify_deadline_ = now + rto_;
  }
}

bool TtLink::still_up_after_timeout(Time now) {
  add(c_.timeouts);
  ++wire_timeouts_;
  if (++consecutive_timeouts_ > cfg_.max_retries) {
    go_down(now);
    return false;
  }
  rto_ = std::min(rto_ * 2, cfg_.max_rto);
  return true;
}

std::optional<Time> TtLink::keepalive_deadline() const {
  if (state_ != LinkState::kUp || cfg_.keepalive <= Duration{0} || verify_deadline_ || base_ != next_) return std::nullopt;
  return heard_ + cfg_.keepalive;
}

std::optional<Time> TtLink::next_deadline() const {
  std::optional<Time> t = state_ == LinkState::kUp
                              ? earlier(earlier(earlier(rto_deadline_, ack_deadline_), verify_deadline_), keepalive_deadline())
                              : hello_deadline_;
  if (!delayed_.empty()) t = earlier(t, delayed_.front().first);
  return t;
}

void TtLink::come_up(Time now) {
  set_state(LinkState::kUp);
  heard_ = now;
  verify_deadline_.reset();
  ask_ = false;
  add(c_.up_transitions);
  session_ = nonce_ ^ peer_nonce_;
  hello_deadline_.reset();
  hello_backoff_ = cfg_.hello_interval;
  consecutive_timeouts_ = wire_timeouts_ = 0;
  ack_pending_ = true;  // tell the peer where we are
  rto_deadline_.reset();
  if (base_ != next_) {
    cursor_ = base_;
    rto_ = cfg_.initial_rto;
    arm_rto(now);
  }
}

void TtLink::peer_lost(Time now) {
  if (state_ != LinkState::kDown) go_down(now);
}

void TtLink::go_down(Time now) {
  drop_open();
  set_state(LinkState::kDown);
  add(c_.down_transitions);
  rto_deadline_.reset();
  verify_deadline_.reset();
  ask_ = false;
  probe_end_.reset();
  cursor_ = base_;
  answers_resend_ = false;  // what comes back up is no answer to a resend of before
  hello_now(now);
}

void TtLink::rewire(Time now, bool lost) {
  // Datagrams held back by an injected delay were packed for the old wire (its prefix or
  // none): go-back-N resends what they held. So it does an open datagram's (the chip node
  // sends that before it moves the link, ChipNode::move_wire).
  delayed_.clear();
  drop_open();
  if (!lost) return;
  if (state_ == LinkState::kUp) {
    wire_timeouts_ = 0;
    probe_end_.reset();
    rto_deadline_.reset();
    cursor_ = base_;  // resend at once, over the new wire...
    // ...but keep the timeout's backoff: resetting it at every move made max_retries come in
    // tens of milliseconds, and a peer that merely paused was declared down.
    ack_pending_ = true;  // tell the peer where we are, over the new wire
  } else {
    hello_now(now);
  }
}

Duration TtLink::fresh_rto() const {
  if (!srtt_.count()) return cfg_.initial_rto;
  // The floor is the wire's and the scheduler's; the far end's hold comes on top of it.
  return std::min(std::max(srtt_ + 4 * rttvar_, cfg_.min_rto) + cfg_.peer_ack_delay, cfg_.max_rto);
}

void TtLink::arm_rto(Time now) {
  if (!rto_deadline_) rto_deadline_ = now + rto_;
}

void TtLink::emit(const FrameHeader& header, std::span<const uint8_t> payload,
                  const SeqExtension& ext, Time now, std::span<uint8_t> framed) {
  const size_t size = kFrameOverhead + payload.size();
  if (!packing_.empty() && (packing_.size() + size > cfg_.max_datagram ||
                            packing_.pieces() + 3 > wire::Datagram::kMaxPieces)) {
    flush_datagram(now);
  }
  FaultInjector::Verdict verdict;
  if (faults_) verdict = faults_->on_frame(size, now - started_);
  if (verdict.drop) {
    add(c_.injected_drop);
    return;
  }
  if (packing_.empty()) {
    packing_.append_copy(prefix_);  // a fallback header, if any
    packing_data_only_ = true;
  }
  if (header.type != FrameType::kData) packing_data_only_ = false;
  if (verdict.corrupt) {
    // Corrupt a copy: the window's payload must stay intact for the retransmission.
    const auto mark = packing_.mark();
    append_frame(packing_, header, payload, ext);
    faults_->corrupt(packing_.owned_since(mark));
    add(c_.injected_corrupt);
    return;
  }
  if (!framed.empty()) append_framed(packing_, header, framed, ext);
  else append_frame(packing_, header, payload, ext);
}

void TtLink::flush_datagram(Time now) {
  open_ = false;
  if (packing_.empty()) return;
  if (faults_ && faults_->delay().count() > 0) {
    packing_.own();  // held back: it must not borrow from the window meanwhile
    delayed_.emplace_back(now + faults_->delay(), std::move(packing_));
  } else {
    out_->push_back(std::move(packing_));
    ++lent_;
    add(c_.datagrams_tx);
  }
  packing_ = {};
  if (!spare_datagrams_.empty()) {
    packing_ = std::move(spare_datagrams_.back());
    spare_datagrams_.pop_back();
  }
  packing_.clear();
}

void TtLink::recycle(std::vector<wire::Datagram>& sent) {
  lent_ -= std::min(lent_, sent.size());
  for (auto& d : sent) {
    if (spare_datagrams_.size() >= 64) break;
    spare_datagrams_.push_back(std::move(d));
  }
  sent.clear();
  if (lent_ > 0) return;
  // Nothing handed out borrows from acknowledged payloads any more; an open datagram may (a
  // frame resent into it whose first transmission was acknowledged since): those wait.
  if (open_) {
    size_t kept = 0;
    for (size_t i = 0; i < retired_.size(); ++i) {
      if (!packing_.borrows(retired_[i].data())) {
        pool_->give(std::move(retired_[i]));
      } else if (kept++ != i) {
        retired_[kept - 1] = std::move(retired_[i]);
      }
    }
    retired_.resize(kept);
    return;
  }
  for (auto& b : retired_) pool_->give(std::move(b));
  retired_.clear();
}

bool TtLink::ack_urgent() const {
  // The quarter counts bytes too: where the byte bound is the tighter one (8 KiB frames fill
  // 1 MiB at 128 of 256), a quarter of the frames would let the sender refill only half its
  // window at a time.
  const bool quarter = unacked_rx_ >= cfg_.window / 4u ||
                       (cfg_.window_bytes > 0 && unacked_rx_bytes_ >= cfg_.window_bytes / 4);
  return nack_urgent_ || ack_now_ || cfg_.ack_delay.count() == 0 || quarter;
}

bool TtLink::ack_due(Time now) const {
  return state_ == LinkState::kUp && ack_pending_ && (ack_urgent() || (ack_deadline_ && now >= *ack_deadline_));
}

void TtLink::poll_transmit(Time now, std::vector<wire::Datagram>& out, bool keep_open) {
  out_ = &out;
  while (!delayed_.empty() && delayed_.front().first <= now) {
    out.push_back(std::move(delayed_.front().second));
    ++lent_;
    delayed_.pop_front();
    add(c_.datagrams_tx);
  }
  if (hello_due_) {
    HelloBody body;
    body.job = self_.job;
    body.mesh = self_.mesh;
    body.device = self_.device;
    body.port = self_.port;
    body.flags = static_cast<uint8_t>((state_ == LinkState::kUp ? kHelloUp : 0) | (ask_ ? kHelloAsk : 0));
    if (ask_) body.ask = ask_token_ = static_cast<uint8_t>(ask_token_ % 255 + 1);
    body.answer = answer_;
    ask_ = false;
    body.nonce = nonce_;
    body.peer_nonce = peer_nonce_;
    FrameHeader h;
    h.type = FrameType::kHello;
    emit(h, {reinterpret_cast<const uint8_t*>(&body), sizeof(body)}, {}, now);
    hello_due_ = false;
  }
  if (state_ == LinkState::kUp) {
    bool sent = false;
    auto transmit = [&](Outgoing& o) {
      FrameHeader h;
      h.dest_addr = o.dest_addr;
      h.tx_seq = static_cast<uint16_t>(o.seq);
      h.rx_seq = static_cast<uint16_t>(expected_);
      h.type = FrameType::kData;
      h.flags = static_cast<uint8_t>((!sent && nack_pending_ ? kFlagNack : 0) | (o.transmissions > 0 ? kFlagResent : 0) |
                                     (answers_resend_ ? kFlagAnswer : 0));
      h.session = session_;
      // The frame goes on the wire from the window, its header written into the buffer's
      // room; a retransmission while an earlier datagram may still hold the frame is copied
      // instead (rewriting the header would change that datagram).
      const bool in_place = o.transmissions == 0 || (lent_ == 0 && !open_);
      if (o.transmissions++ > 0) {
        add(c_.retransmits);
        last_resent_ = now;
      }
      o.sent = now;
      const std::span<uint8_t> framed(o.framed);
      emit(h, framed.subspan(kFrameRoom), {o.seq >> 16, expected_ >> 16}, now,
           in_place ? framed : std::span<uint8_t>());
      sent = true;
    };
    if (resend_base_ && base_ != next_ && cursor_ > base_) transmit(unacked_.front());
    resend_base_ = false;
    while (cursor_ != next_) {
      transmit(unacked_[cursor_ - base_]);
      ++cursor_;
    }
    bool hold = false, lazy = false, acked = false;
    if (ack_pending_ && !sent) {
      // Let a pure acknowledgement wait briefly for data to ride on: one wake-up less for
      // the peer per exchange. Never when urgent, or past the delay. Where the wire lets it
      // reach the peer without waking it (lazy_acks), it need not wait at all.
      const bool urgent = ack_urgent();
      if (!urgent && !ack_deadline_) ack_deadline_ = now + (cfg_.lazy_acks ? Duration{0} : cfg_.ack_delay);
      hold = !urgent && now < *ack_deadline_;
      if (!hold) {
        FrameHeader h;
        h.rx_seq = static_cast<uint16_t>(expected_);
        h.type = FrameType::kAck;
        // A held acknowledgement alone in its datagram need not wake the peer: it reads it
        // when it wakes anyway, at the latest before its retransmission timeout fires.
        lazy = !urgent && packing_.empty();
        h.flags = static_cast<uint8_t>((nack_pending_ ? kFlagNack : 0) | (lazy ? kFlagHeld : 0) | (answers_resend_ ? kFlagAnswer : 0));
        h.session = session_;
        emit(h, {}, {0, expected_ >> 16}, now);
        acked = true;
        if (lazy && !packing_.empty()) packing_.lazy = true;
      }
    }
    // A NACK waits with a held acknowledgement (only an urgent one never waits).
    if (nack_pending_ && (sent || acked)) {
      add(c_.nacks_tx);
      nacked_gap_ = expected_;
      past_nack_ = 0;
      nack_pending_ = nack_urgent_ = false;
    }
    if (!hold) {
      ack_pending_ = ack_now_ = answers_resend_ = fresh_since_ack_ = false;
      ack_deadline_.reset();
      // What the peer may not have read yet still counts toward the quarter window: a peer
      // asleep on a full window is woken by the next urgent acknowledgement. Only an
      // acknowledgement that wakes it (a data frame's, or a pure one not lazy) starts it afresh.
      if (sent || (acked && !lazy)) unacked_rx_ = 0, unacked_rx_bytes_ = 0;
    }
    if (base_ != next_) arm_rto(now);
  }
  // (A datagram that a fault plan delays is never kept open: it is copied out of the window.)
  const bool keep = keep_open && !packing_.empty() && packing_data_only_ && !packing_.lazy &&
                    packing_.size() < cfg_.max_datagram / 4 * 3 && !(faults_ && faults_->delay().count() > 0);
  if (keep) {
    open_ = true;
  } else {
    flush_datagram(now);
  }
  out_ = nullptr;
}

void TtLink::drop_open() {
  if (!open_) return;
  // Its frames stay in the window: a link that comes back up resends from its base, a moved
  // one resends what was lost, and a new session abandons them.
  packing_.clear();
  open_ = false;
}

}  // namespace ttemu::link
