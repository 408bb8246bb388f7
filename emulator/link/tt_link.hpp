// One end of a TT-link (spec 2.1) as a state machine without I/O: the caller hands it
// datagrams and the time, asks it for datagrams to send and for its next deadline. It owns no
// socket, thread or clock, so the same code runs over UDP between chip processes and inside
// one deterministic, seeded simulation.
//
// What it promises: a payload accepted by send() is delivered to the peer's routing layer
// exactly once, in order, bit-exact (go-back-N ARQ over CRC-checked frames, whose receiver
// holds frames after a gap so that a NACK costs the sender one frame, not a window), or the link is
// declared down after max_retries timeouts without progress (an idle link finds a cut with
// its keepalive, if it has one); it keeps probing and resumes
// where it stopped when the peer answers again. A peer that restarts (a hello naming the same
// job, chip and port with a new nonce) starts a new session: the old session's unacknowledged
// payloads are handed to the abandon callback (never silently dropped) and both directions
// start again from sequence 0; hellos of a session left behind stay foreign. Frames from any
// other job, chip, port or session, and frames of this session from an earlier pass of the 16-bit sequence space
// (delayed or replayed), are dropped and counted, never delivered.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "emulator/common/buffer_pool.hpp"
#include "emulator/common/link_payload_view.hpp"
#include "emulator/common/fifo.hpp"
#include "emulator/link/fault_injector.hpp"
#include "emulator/link/frame.hpp"
#include "emulator/link/link_counters.hpp"
#include "emulator/wire/datagram.hpp"

namespace ttemu::link {

using Time = std::chrono::nanoseconds;  // monotonic, from any fixed origin
using namespace std::chrono_literals;

struct LinkIdentity {
  uint64_t job = 0;
  uint16_t mesh = 0, device = 0;
  uint8_t port = 0;
  bool operator==(const LinkIdentity&) const = default;
};

struct LinkConfig {
  uint16_t window = 64;  // data frames in flight (64 x 4 KiB covers a loopback round trip)
  // ... and payload bytes in flight: no frame is sent while this many are (0: no bound). What
  // is in flight stays in the sender's buffers, and in a shm ring, until acknowledged: more
  // than a core's cache holds is fetched from memory again (docs/fabric.md#defaults-from-measurements).
  size_t window_bytes = size_t{1} << 20;
  Duration initial_rto = 20ms;
  Duration min_rto = 2ms;
  Duration max_rto = 500ms;
  int max_retries = 12;  // retransmission rounds without progress; the next timeout is down
  Duration hello_interval = 5ms;
  Duration max_hello_interval = 500ms;
  size_t max_datagram = kMaxDatagram;
  // A pure acknowledgement waits this long for data to ride on (0: never waits), unless a
  // quarter window (in frames, or in window_bytes) is unacknowledged; gaps are reported at once.
  Duration ack_delay{0};
  // How long the far end may hold a pure acknowledgement: its ack_delay, plus how late its
  // timer may wake it (a chip process's timer slack). The retransmission timeout adds it to
  // what the round trips measured (at least min_rto), as QUIC's adds max_ack_delay, so that
  // an acknowledgement held on purpose is not taken for a loss (a spurious timeout and a
  // resend). The round trips measured include such holds only now and then, too seldom to
  // cover them.
  Duration peer_ack_delay{0};
  // The wire delivers a lazy datagram without waking the peer (wire::Transport::defers_lazy):
  // a pure acknowledgement that may wait goes at once, lazily, instead of after ack_delay.
  bool lazy_acks = false;
  // An up link with nothing in flight that has heard nothing from its peer for this long
  // proves its wire (verify()), so that a cut is found even while no traffic flows: for
  // links whose wire crosses a network that can fail silently (between hosts). 0: never
  // (idle is free).
  Duration keepalive{0};
  // The frames held behind a gap are acknowledged as soon as the resend fills it, and handed
  // to the delivery callback only when the caller calls deliver_released(), once it has put
  // that acknowledgement on the wire: the sender, whose window those frames held full, refills
  // it meanwhile on its own CPU, instead of waiting until about a window's worth has been
  // delivered (false: delivered at once, before the acknowledgement). Anything released is
  // delivered before the next datagram or timer is handled, whatever the caller does.
  bool deliver_after_ack = false;
};

enum class LinkState : uint32_t { kHandshake = 0, kUp = 1, kDown = 2 };
const char* to_string(LinkState s);

class TtLink {
 public:
  using Delivery = std::function<void(uint32_t dest_addr, std::span<const uint8_t> payload)>;

  TtLink(const LinkConfig& config, const LinkIdentity& self, const LinkIdentity& peer,
         uint32_t nonce, LinkCounters& counters);

  void set_delivery(Delivery d) { deliver_ = std::move(d); }
  // Frames held behind a gap lie in buffers of their own, kFrameRoom bytes of room and then
  // the payload (the layout of a payload buffer that goes on to another link). With this set,
  // each is handed over in its buffer, which the callee keeps (and gives back to the pool),
  // instead of being delivered by Delivery from it: the loss path then copies a frame once, as
  // the in-order path does. In order with what Delivery delivers.
  using HeldDelivery = std::function<void(uint32_t dest_addr, std::vector<uint8_t>&& framed)>;
  void set_held_delivery(HeldDelivery d) { deliver_held_ = std::move(d); }
  // The peer restarted: `abandoned` holds the payloads this end had accepted and the old
  // session never acknowledged (the peer's new incarnation will never see them). Called
  // before the new session's handshake goes on.
  using Abandoned = LinkPayloadView;
  using PeerRestart = std::function<void(std::span<const Abandoned> abandoned)>;
  void set_peer_restart(PeerRestart r) { restarted_ = std::move(r); }
  // Where payload buffers come from and go back to once acknowledged (the chip node's, shared
  // with its router); by default the link's own.
  void set_buffer_pool(BufferPool& pool) { pool_ = &pool; }
  // Faults of the wire this end transmits into (not owned: they belong to the wire, and move
  // with the link's traffic when it takes another wire); nullptr for none.
  void set_faults(FaultInjector* f) { faults_ = f; }
  // Bytes every datagram starts with from now on (a fallback header while the link's traffic
  // travels another port's wire, efc.hpp); empty for none.
  // (An open datagram keeps the prefix it began with: send it first, poll_transmit.)
  void set_prefix(std::span<const uint8_t> prefix) { prefix_.assign(prefix.begin(), prefix.end()); }
  // The link's traffic now travels another wire (datagrams held back by a delay fault are
  // dropped: they were packed for the old one). With `lost`, what is in flight on the old
  // one is taken as lost: the sender goes back to its oldest unacknowledged frame at once,
  // with a fresh timeout, and a handshake in progress says hello again at once. Timeouts
  // count afresh for the EFC (wire_timeouts()), but not toward max_retries: a link whose
  // traffic fails on every wire it tries goes down as it would on its own.
  void rewire(Time now, bool lost);
  // Makes an up link prove its wire even with nothing to send (a passenger's traffic failed
  // on it): a hello that asks for an answer, repeated with the retransmission timeout and its
  // backoff; the peer's answer echoing the hello's token is the proof (a frame from the peer
  // is not: a cut may take one direction only), and max_retries timeouts without one take the
  // link down. With frames in flight their timeout already tells: nothing starts. True if a
  // verification started.
  bool verify(Time now);
  void start(Time now);

  LinkState state() const { return state_; }
  bool up() const { return state_ == LinkState::kUp; }
  // Frames the window has room for now; 0 while the link is not up or while the window's bound
  // in bytes is reached. Ask again after each frame: the byte bound may close the room first.
  size_t send_room() const;
  // Queues one payload for dest_addr, copied into the retransmission window; false when there
  // is no room. A frame that fills the window (in frames or bytes) counts a window stall.
  bool send(uint32_t dest_addr, std::span<const uint8_t> payload);
  // The same, taking the buffer itself into the window (no copy): kFrameRoom bytes of room,
  // then the payload. Left untouched on false.
  bool send_framed(uint32_t dest_addr, std::vector<uint8_t>&& framed);
  // True when a gap was seen and its NACK should leave without waiting for the rest of a
  // receive batch.
  bool nack_pending() const { return nack_urgent_; }
  // Frames acknowledged and not yet delivered (deliver_after_ack): deliver_released() hands
  // them to the delivery callback, in order.
  bool released() const { return delivered_ != expected_; }
  void deliver_released();
  // True when every frame sent has been acknowledged.
  bool drained() const { return base_ == next_; }
  size_t unacked_bytes() const { return unacked_bytes_; }  // payload bytes sent and not acknowledged
  // Retransmission and verification timeouts since the last progress, proof of the wire or
  // change of wire (the EFC's cue, before max_retries).
  int wire_timeouts() const { return wire_timeouts_; }

  void on_datagram(std::span<const uint8_t> datagram, Time now);
  void on_timer(Time now);
  // The control plane knows the far end is gone (its process died): the link goes down now,
  // as it would after its retries, even if nothing was in flight to notice with.
  void peer_lost(Time now);
  std::optional<Time> next_deadline() const;
  // True when an acknowledgement is due now (a gap, a quarter window, a duplicate, or the
  // ack delay past): poll_transmit sends one, alone if no data frame carries it.
  bool ack_due(Time now) const;
  // True when an acknowledgement is pending that may not wait (see ack_due).
  bool ack_urgent_now() const { return state_ == LinkState::kUp && ack_pending_ && ack_urgent(); }
  // Appends the datagrams to put on the wire now (frames packed up to max_datagram). Their
  // data frames borrow their payloads from the window (no copy): the caller hands them back
  // with recycle() once the wire has taken them, and until then acknowledged payloads are kept.
  //
  // keep_open: a last datagram that carries data frames only and is less than three quarters
  // full is kept open instead (datagram_open()), for the frames of the next call to join it:
  // a caller that expects more of them at once (a chip with more input waiting) sends fewer,
  // fuller datagrams. The next call without it sends the open one. Its frames are in the
  // window as sent; an acknowledgement of them keeps their buffers until the datagram has gone.
  void poll_transmit(Time now, std::vector<wire::Datagram>& out, bool keep_open = false);
  // poll_transmit(keep_open) kept a datagram open.
  bool datagram_open() const { return open_; }
  // Takes back datagrams the wire has taken (their storage is reused); every datagram from
  // poll_transmit comes back here.
  void recycle(std::vector<wire::Datagram>& sent);

  const LinkCounters& counters() const { return c_; }

 private:
  struct Outgoing {
    uint64_t seq;
    uint32_t dest_addr;
    std::vector<uint8_t> framed;  // kFrameRoom bytes of room, then the payload
    Time sent{};
    int transmissions = 0;
  };

  void on_frame(const ParsedFrame& f, Time now);
  void on_hello(const ParsedFrame& f, Time now);
  // A restarted peer (a new nonce): abandon the old session and start afresh.
  void new_peer_session(Time now);
  void set_state(LinkState s);
  // Say hello now, and then at the first backoff interval.
  void hello_now(Time now);
  // held, answer: the acknowledgement came in a frame flagged kFlagHeld, kFlagAnswer.
  void on_ack(uint64_t ack, bool nack, bool held, bool answer, Time now);
  // A pending acknowledgement may not wait for data: a gap, a quarter window (in frames or
  // bytes) unacknowledged, a duplicate, or no ack delay.
  bool ack_urgent() const;
  void accept_in_order(uint32_t dest_addr, std::span<const uint8_t> payload);
  // Keeps a frame in its slot (a copy, after kFrameRoom of room), until it is delivered.
  void hold(uint64_t seq, uint32_t dest_addr, std::span<const uint8_t> payload);
  // Accepts the held frame at expected_ (acknowledged from now on), to be delivered later.
  void accept_held();
  void come_up(Time now);
  void go_down(Time now);
  // The peer answered: a verify() in progress ends.
  void proved();
  // A retransmission or verify timeout: counted, and past max_retries the link goes down;
  // else the timeout backs off. True while the link stays up.
  bool still_up_after_timeout(Time now);
  // Packs one frame, its payload copied; or, given `framed` (a window buffer), in place.
  void emit(const FrameHeader& header, std::span<const uint8_t> payload, const SeqExtension& ext,
            Time now, std::span<uint8_t> framed = {});
  bool accept(uint32_t dest_addr, std::vector<uint8_t>&& framed);
  void flush_datagram(Time now);
  // Forgets an open datagram (the link went down or moved, or the peer is a new session).
  void drop_open();
  void arm_rto(Time now);
  // The timeout from the round trips seen (no backoff): initial_rto before any.
  Duration fresh_rto() const;
  void add(std::atomic<uint64_t>& c, uint64_t n = 1) { c_.add(c, n); }

  LinkConfig cfg_;
  LinkIdentity self_, peer_;
  uint32_t nonce_, peer_nonce_ = 0, session_ = 0;
  LinkCounters& c_;
  Delivery deliver_;
  HeldDelivery deliver_held_;
  PeerRestart restarted_;
  std::array<uint32_t, 4> left_nonces_{};  // the peer's earlier sessions: their hellos are foreign
  FaultInjector* faults_ = nullptr;
  std::vector<uint8_t> prefix_;
  LinkState state_ = LinkState::kHandshake;
  Time started_{};

  // Sequence numbers are 64-bit here and never wrap; frames carry the low 16 bits and fold the
  // rest into their CRC (SeqExtension).
  // Sender: frames base_..next_-1 are unacknowledged; cursor_ is the next to (re)transmit.
  Fifo<Outgoing> unacked_;  // keeps its storage: no allocation per frame
  size_t unacked_bytes_ = 0;  // their payloads' bytes
  BufferPool own_pool_{256};
  BufferPool* pool_ = &own_pool_;
  // Acknowledged payloads that datagrams not yet handed back may still borrow.
  std::vector<std::vector<uint8_t>> retired_;
  size_t lent_ = 0;  // datagrams handed out by poll_transmit and not yet back
  bool open_ = false;  // packing_ is a datagram a poll_transmit kept open (keep_open)
  bool packing_data_only_ = true;  // packing_ holds data frames only (or nothing)
  uint64_t base_ = 0, next_ = 0, cursor_ = 0;
  std::optional<Time> rto_deadline_;
  Duration rto_, srtt_{0}, rttvar_{0};
  int consecutive_timeouts_ = 0;  // since the last progress: max_retries takes the link down
  int wire_timeouts_ = 0;         // the same, since the last change of wire too
  std::optional<Time> verify_deadline_;  // verify(): a hello asking for an answer is out
  bool ask_ = false;                     // the next hello asks for an answer
  uint8_t ask_token_ = 0;                // the token of our last asking hello
  uint8_t answer_ = 0;                   // the peer's last token, echoed in our hellos
  std::optional<uint64_t> last_nacked_base_;  // the gap the last NACK resent
  bool resend_base_ = false;  // a NACK or a timeout asks for the oldest unacknowledged frame again
  // A timeout resent only the oldest frame; frames before this had been sent when it fired.
  // The acknowledgements that follow tell a late ack (one covers them: nothing more to
  // resend) from a loss (one covers the resent frame and nothing after it: go back from
  // there); one in between resends the new oldest frame to ask again.
  std::optional<uint64_t> probe_end_;
  Time last_resent_{};  // when a frame was last sent again
  Duration min_rtt_{0};  // the shortest round trip sampled (0: none yet)

  // Receiver. Frames that arrive after a gap are held (up to a window's worth) until the gap
  // is filled, then delivered in order: the sender resends only what is missing.
  struct Held {
    bool valid = false;
    uint64_t seq = 0;
    uint32_t dest_addr = 0;
    std::vector<uint8_t> bytes;
  };
  std::vector<Held> held_;  // by seq % size
  size_t holding_ = 0;
  uint64_t expected_ = 0;
  uint64_t delivered_ = 0;  // frames delivered; those from here to expected_ are held, released
  bool ack_pending_ = false, nack_pending_ = false;
  bool nack_urgent_ = false;            // the pending NACK may not wait (ack_urgent)
  uint64_t nacked_gap_ = ~uint64_t{0};  // expected_ when the last NACK went
  uint32_t past_nack_ = 0;              // frames held since that NACK
  bool ack_now_ = false;  // a duplicate came: the sender is asking, the acknowledgement waits for nothing
  // A resent frame came, and no frame sent once came in order before it since our last
  // acknowledgement: the next acknowledgement answers the resend (kFlagAnswer). One that also
  // covers frames a sleeping receiver took late answers their first sending, not the resend.
  bool answers_resend_ = false;
  bool fresh_since_ack_ = false;  // a frame sent once came in order since our last acknowledgement
  uint32_t unacked_rx_ = 0;  // data frames accepted since our last acknowledgement
  size_t unacked_rx_bytes_ = 0;  // and their payload bytes
  std::optional<Time> ack_deadline_;

  // Handshake and probing.
  bool hello_due_ = false;
  std::optional<Time> hello_deadline_;
  Time heard_{};  // when a frame of this session last came from the peer (the keepalive's clock)
  std::optional<Time> keepalive_deadline() const;
  Duration hello_backoff_;

  // Datagram being packed, and datagrams held back by an injected delay.
  wire::Datagram packing_;
  std::vector<wire::Datagram> spare_datagrams_;
  std::vector<wire::Datagram>* out_ = nullptr;
  std::deque<std::pair<Time, wire::Datagram>> delayed_;  // own their bytes
};

}  // namespace ttemu::link
