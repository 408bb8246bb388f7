// One chip's fabric node without I/O: its router and its center, and what they exchange
// with the chip's TT-links (packets and credits as link payloads). Chip processes drive it
// from sockets and shared memory; the simulator drives it from a simulated clock. Both run
// exactly this code.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "emulator/common/buffer_pool.hpp"
#include "emulator/common/link_payload_view.hpp"
#include "emulator/common/fifo.hpp"
#include "emulator/routing/fabric_router.hpp"
#include "emulator/session/center.hpp"
#include "emulator/session/socket_layer.hpp"
#include "emulator/transport/credit_returns.hpp"
#include "emulator/transport/lanes.hpp"

namespace ttemu::session {

// A payload for a TT-link: Packet::kLinkRoom bytes of room for the frame header, then the
// payload (the layout TtLink::send_framed takes without a copy).
struct LinkPayload {
  uint32_t dest_addr;
  std::vector<uint8_t> bytes;
};

class FabricNode {
 public:
  // `sockets` is the chip's socket table (empty: no sockets here).
  FabricNode(routing::ChipId self, const routing::RouterConfig& config,
             std::vector<routing::RouterTable> tables, const std::vector<uint8_t>& ports,
             Center::Memory memory, BufferPool& buffers, std::span<SocketEndpoint> sockets = {});

  routing::ChipId self() const { return router_.self(); }
  routing::FabricRouter& router() { return router_; }
  // New routing tables (FabricRouter::set_tables); sockets whose peer they no longer reach
  // break (SocketLayer::peers_unreachable).
  void set_tables(std::vector<routing::RouterTable> tables);
  const routing::FabricRouter& router() const { return router_; }
  // The chip's packet buffers: a packet's buffer travels from here through the router to a
  // link's window and back.
  BufferPool& buffers() { return buffers_; }

  // A TT-link on `port` delivered a payload (a packet or credits for the router).
  void on_link_payload(uint8_t port, uint32_t dest_addr, std::span<const uint8_t> payload, routing::Time now);
  // The same payload in a buffer of the pool, after Packet::kLinkRoom bytes of room (a frame
  // the link held behind a gap): a packet keeps that buffer (Packet::adopt), with no copy.
  void on_link_buffer(uint8_t port, uint32_t dest_addr, std::vector<uint8_t>&& framed, routing::Time now);
  // The TT-link on `port` went down or came back up. While it is down the router drops what
  // it would send there (link_down, with a NACK to the source); requests already handed to
  // that port but not yet taken by the link are dropped the same way, while answers there
  // wait for the link's session (their loss could be told to nobody). Frames the link had
  // accepted stay with it and are delivered if it comes back. Returns whether anything changed.
  bool set_link_down(uint8_t port, bool down);
  // The chip on the far end of `port` restarted: `abandoned` are the link payloads its old
  // incarnation never acknowledged. Packets among them, and packets still waiting for that
  // port, are reported (link_down) and NACKed to their sources; credits owed to the old
  // incarnation are forgotten, and the router starts afresh with the new one (full credits).
  void peer_restarted(uint8_t port, std::span<const LinkPayloadView> abandoned);
  // The session layer's sockets (socket_layer.hpp): the intake opens, pokes and closes
  // endpoints for their owners and asks it what a sender may send.
  SocketLayer& sockets() { return sockets_; }
  Center& center() { return center_; }
  void socket_open(uint16_t ep);
  // The owner closed `ep` (SocketLayer::close); what it tells the peer goes out.
  void socket_close(uint16_t ep);
  // A socket control packet for the control FVC, queued behind the opens already made (a
  // socket closed before it connected: its close must not overtake its open).
  void socket_request(routing::Packet p) { socket_requests_.push_back(std::move(p)); }
  // A local worker's packet; false if its FVC's buffer is full.
  bool inject(routing::Packet packet, routing::Time now) { return router_.inject(std::move(packet), now); }
  // Sees every packet the router delivers to this chip, payload and all, before the center or
  // the socket layer takes it (the simulator's record of deliveries). Unset (chip processes):
  // one test per delivered packet.
  using DeliveryTap = std::function<void(const routing::Packet&)>;
  void set_delivery_tap(DeliveryTap tap) { delivery_tap_ = std::move(tap); }

  struct Output {
    std::vector<routing::Packet> for_workers;   // acks, NACKs, read responses
    std::vector<routing::RouterEvent> events;   // TTL expiry, timeouts, no route, link down
    std::vector<routing::PacketHeader> committed;  // packets this center handled
    void clear() { for_workers.clear(), events.clear(), committed.clear(); }
  };
  // Moves everything that can move; payloads for each link wait in backlog(port). Returns
  // whether anything moved (and so perhaps made room for local packets).
  bool poll(routing::Time now, Output& out);
  Fifo<LinkPayload>& backlog(uint8_t port) { return backlog_[rank(port)]; }
  const Fifo<LinkPayload>& backlog(uint8_t port) const { return backlog_[rank(port)]; }
  // Hands the payloads waiting for `port` to send(dest_addr, bytes) in order, while it takes
  // them (returns true): send may move the buffer away (into a link's window, no copy); what
  // it leaves goes back to the pool.
  template <class Send>
  void pass_backlog(uint8_t port, Send&& send) {
    auto& q = backlog(port);
    while (!q.empty() && send(q.front().dest_addr, q.front().bytes)) {
      buffers_.give(std::move(q.front().bytes));
      q.pop_front();
    }
  }
  // A datagram goes to `port` now: the credits owed to the router at its far end go into its
  // backlog to ride on it, due or not (transport/credit_returns.hpp).
  void ride_credits(uint8_t port);
  std::optional<routing::Time> next_deadline() const;
  bool idle() const;

 private:
  size_t rank(uint8_t port) const;  // the router's index of a wired port; throws for others
  void owe_credit(size_t rank, uint32_t lane, uint32_t n);  // queues a credit payload
  void owe_credit_slot(size_t slot, uint32_t n);           // the same, by credits_owed_'s slot
  struct LanePacket {
    uint8_t lane = 0;
    routing::PacketHeader header;
  };
  // The packet a link payload holds, if it is one (a packet lane's address, a header).
  std::optional<LanePacket> packet_at(const LinkPayloadView& v) const;
  // Requests waiting for `port` are reported and NACKed (bounced). In the same link session
  // (a link that went down), credit payloads and answers stay queued for when it is back;
  // for a new session (the peer restarted) answers are bounced and credits go too.
  void bounce_backlog(uint8_t port, bool same_session);

  routing::FabricRouter router_;
  Center center_;
  SocketLayer sockets_;
  SocketLayer::Out socket_out_;
  Fifo<routing::Packet> socket_requests_;  // opens waiting for room on the control FVC
  // Multicast copies for the neighbours (routing/multicast.hpp), by FVC, waiting for room in
  // the router; a multicast is delivered only while its FVC's queue has room for its copies.
  std::vector<Fifo<routing::Packet>> copies_;
  void replicate(const routing::Packet& p);
  // What the socket layer made: answers join the control FVC's answers, requests wait above.
  void take_socket_out();
  std::vector<Fifo<LinkPayload>> backlog_;   // by port index
  // Center answers by FVC, waiting for room in the router: at most reply_bound() each (the
  // router holds back requests meanwhile).
  std::vector<Fifo<routing::Packet>> replies_;
  size_t reply_bound() const { return static_cast<size_t>(config_.rb_packets); }
  size_t replies_waiting_ = 0;
  routing::FabricRouter::Actions actions_;
  Center::Result center_out_;
  routing::RouterConfig config_;
  transport::CreditReturns credits_owed_;  // by port index * lanes + lane
  BufferPool& buffers_;
  DeliveryTap delivery_tap_;
  void flush_credits(routing::Time now);
};

}  // namespace ttemu::session
