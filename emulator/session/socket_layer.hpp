// One chip's TT-session layer for sockets (spec 2.4.2-2.4.4, 4), as a state machine without
// I/O: it matches senders and receivers by socket id, epoch and type, places arriving stream
// data in the consumer's L1CB or DSCB, and keeps end-to-end credits. The endpoints it serves
// live in the chip's socket table (socket_endpoint.hpp), which the owning workers share.
//
// The handshake (all on the control FVC): a sender's open goes to the receiver's chip; if a
// receive endpoint there is open for the same socket id, type and epoch (and this sender, or
// any), the session becomes active and an accept goes back with the first credit limit;
// otherwise the open waits at the receiver until one is opened (a receiver ready for another
// epoch says so with a non-final reject: the sender keeps waiting, and knows why). Several
// senders may wait for one socket id; the receiver connects with the one whose epoch it is
// ready for. There are no transfers across epochs: data whose tag does not match its
// receiving endpoint is refused, and its sender's socket breaks with the reason.
//
// Data travels in the socket's FVC in order. On arrival (spec 2.4.4's flowchart): into L1CB
// while the DSCB is empty and L1CB has room; else into the DSCB while it has room; else it is
// held back in the fabric (the router's gate: local handshake's back-pressure). Whenever the
// DSCB holds data, it moves into L1CB first, so order holds. End-to-end, the sender may send
// only up to the credit limit: bytes freed from the DSCB's accounting plus its size (or, with
// no DSCB, bytes consumed plus L1CB's size), so an arrival always finds room and never waits
// in the fabric.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "emulator/common/buffer_pool.hpp"
#include "emulator/routing/packet.hpp"
#include "emulator/session/center.hpp"
#include "emulator/session/socket_endpoint.hpp"

namespace ttemu::session {

class SocketLayer {
 public:
  // `table` is the chip's socket table (empty: the chip has none, and every socket packet is
  // refused); packets it makes take their buffers from `buffers`.
  SocketLayer(ChipId self, int data_fvcs, std::span<SocketEndpoint> table, Center::Memory memory, BufferPool& buffers);

  // Packets the layer made: requests (opens) for the control FVC, answers (accepts, credits,
  // rejects) for the control FVC's answer lanes.
  struct Out {
    std::vector<Packet> requests;
    std::vector<Packet> answers;
  };

  // The owner of endpoint `ep` opened it (state kSocketOpening): a sender's open leaves, a
  // receiver takes a waiting sender that matches. An endpoint that is not opening is ignored.
  void open(uint16_t ep, Out& out);
  // The owner of `ep` consumed data or closed: room may have been made.
  void poke(uint16_t ep) { dirty_.set(ep % kSocketEndpoints); }
  // Whether a socket data packet can be taken now: false while its consumer has no room.
  // (A packet for no valid endpoint is taken, and refused by on_packet.)
  // Admitting one reserves its room until it is placed.
  bool accepts(const routing::PacketHeader& h);
  // A delivered socket packet, or a NACK of one (txn_id kSocketTxn).
  void on_packet(Packet& packet, Out& out);
  // Moves DSCB data into L1CB where the consumer made room, and grants credits.
  void pump(Out& out);
  bool busy() const { return dirty_.any(); }

  // The sending side, for the command intake: bytes `ep` may put into packets now (0 while
  // it waits for credits), and the header of its next data or close packet.
  uint64_t may_send(uint16_t ep) const;
  void sent(uint16_t ep, uint32_t size);
  routing::PacketHeader close_header(uint16_t ep, size_t peer) const;
  // A sender's receivers: one for a unicast socket, the group for a multicast one; the intake
  // sends each data packet, and the close, to every one of them.
  size_t peers(uint16_t ep) const { return ep < peers_.size() ? peers_[ep].size() : 0; }
  routing::PacketHeader data_header(uint16_t ep, uint32_t size, size_t peer) const;
  // Sends nothing more on `ep`; its owner hears `status`.
  void break_endpoint(uint16_t ep, int32_t status);
  // The routes changed: sockets whose peer chip can no longer be reached (it died, or is cut
  // off) break with kSocketDataLost, and the opens of such senders waiting here are forgotten:
  // neither end would ever hear from the other again.
  void peers_unreachable(const std::function<bool(ChipId)>& reachable);
  // The owner closed `ep` (a sender's close packet has left behind its data): it ends here,
  // in state kSocketClosed, for the owner to free. Whatever arrives for it later is refused;
  // a connected receiver's sender is told at once (a reject: kSocketClosedStatus), so that a
  // sender waiting for credits does not wait for good.
  void close(uint16_t ep, Out& out);

  SocketEndpoint* endpoint(uint16_t ep) { return ep < table_.size() ? &table_[ep] : nullptr; }
  size_t waiting_opens() const { return waiting_.size(); }

 private:
  Packet make(routing::Command c, ChipId to, uint8_t fvc) const;
  void reply(const routing::PacketHeader& h, routing::Command c, uint64_t value, uint16_t receiver, Out& out) const;
  // The receive endpoint a sender's open matches, or -1; `other_epoch` is set when one is open
  // for that socket id in another epoch.
  int match(const routing::PacketHeader& open, bool& other_epoch) const;
  void connect(uint16_t ep, const routing::PacketHeader& open, Out& out);
  void on_data(Packet& p, Out& out);
  void on_close(const routing::PacketHeader& h, Out& out);
  void on_answer(const routing::PacketHeader& h);
  // The receive endpoint a data or close packet names, if its tag and source match it.
  SocketEndpoint* receiver_of(const routing::PacketHeader& h, int32_t& why) const;
  // Copies bytes into a ring at byte position `pos` (wrapping at its size).
  bool ring_put(uint64_t base, uint32_t size, uint64_t pos, std::span<const uint8_t> data) const;
  bool ring_get(uint64_t base, uint32_t size, uint64_t pos, std::span<uint8_t> out) const;
  uint64_t credit_limit(const SocketEndpoint& e) const;
  void grant(uint16_t ep, bool force, Out& out);
  // An answer from receive endpoint `ep` to the sender it is connected with.
  void tell_sender(uint16_t ep, routing::Command c, uint64_t value, Out& out) const;
  void arrived(SocketEndpoint& e);

  ChipId self_;
  uint8_t control_fvc_;
  std::span<SocketEndpoint> table_;
  Center::Memory mem_;
  BufferPool& buffers_;
  EndpointSet dirty_;  // endpoints to pump
  std::deque<routing::PacketHeader> waiting_;  // senders' opens no receiver has matched yet
  std::vector<uint64_t> reserved_;      // by endpoint: bytes admitted by accepts(), not yet placed
  std::vector<uint8_t> close_pending_;  // by endpoint: the sender closed; the DSCB still drains
  // A sender's receivers, by endpoint: each one's chip, endpoint and credit limit once it accepted.
  struct Peer {
    ChipId chip;
    uint16_t endpoint = 0;
    bool accepted = false;
    uint64_t limit = 0;
  };
  std::vector<std::vector<Peer>> peers_;
  // The sender's credit limit: the least of its receivers' (published in the endpoint).
  void update_limit(SocketEndpoint& e, uint16_t ep);
  std::vector<uint8_t> scratch_;
};

}  // namespace ttemu::session
