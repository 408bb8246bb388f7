// A chip's fabric router (spec 2.2.2) as a state machine without I/O: packets arrive from
// ethernet ports or from the center (local workers), wait in a routing buffer per input and
// FVC, and move on when the next hop's buffer has room (credit-based flow control: a full
// buffer back-pressures its producer; nothing is dropped for lack of space). Next hops come
// from the L0/L1 tables (2.2.3) of the packet's routing plane.
//
// Failures it handles: TTL (5.4) - a packet that arrives with TTL 0 short of its destination
// is dropped; timeout (5.5) - a head of buffer that cannot advance for `timeout` is dropped;
// link down - a request whose next hop is a port whose TT-link is down is dropped at once; an
// answer waits up to `answer_down_wait` first (nobody could be told of its loss, and a link
// whose session moves onto a fallback channel is down for a moment only).
// Either way an event reports the router, the packet and its source and destination, and if
// the packet was a request its source gets a NACK on the control FVC (answers are not NACKed:
// their source is the chip that answered).
//
// FVCs 0 .. data_fvcs-1 carry data; FVC data_fvcs is the control FVC (2.3.2). Each has its
// own buffers and credits, so a stalled FVC never blocks another (2.3.1). Each FVC has four
// lanes: lane class 0 while a packet is in its source mesh, class 1 once it has entered
// another mesh (an inter-mesh virtual channel, as tt-metal keeps one), each for requests and
// for answers. Traffic passing through a mesh so never waits behind that mesh's own outbound
// traffic, which is what keeps rings of meshes deadlock-free (see check_plane's channel
// classes, docs/routing.md); and answers never wait behind requests (the SUE seed's VC0/VC1),
// so the center may hold back requests while its answers cannot leave without any deadlock.
//
// The center's side: requests are delivered to it only while it has room for their answers
// (set_center_room); until then they wait in their buffers, under the timeout like any other.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "emulator/common/fifo.hpp"
#include "emulator/routing/packet.hpp"
#include "emulator/routing/routing_table.hpp"
#include "emulator/transport/lanes.hpp"

namespace ttemu::routing {

using Time = std::chrono::nanoseconds;
using Duration = std::chrono::nanoseconds;

struct RouterConfig {
  int data_fvcs = 2;
  int rb_packets = 8;  // routing buffer depth per input per FVC, in packets
  Duration timeout = std::chrono::milliseconds(3000);
  // How long an answer waits for the down link of its next hop before it is dropped: long
  // enough for a link's session to come back over a fallback channel (a handshake, about a
  // millisecond across processes), short enough that answers queued behind one for a dead
  // chip are not held for long.
  Duration answer_down_wait = std::chrono::milliseconds(100);
  // Freed slots go back to the upstream router once half a buffer is free or after this long
  // (0: at once): fewer credit frames, fewer wake-ups of the upstream chip.
  Duration credit_delay{0};
  // This chip's mesh, rows by columns (devices numbered row-major), for multicast's copies to
  // its neighbours; 0: unknown, and a multicast is committed at its origin only.
  int mesh_rows = 0, mesh_cols = 0;
};

struct RouterEvent {
  enum Kind : uint8_t { kTtlExpired, kTimeout, kNoRoute, kLinkDown };
  Kind kind;
  ChipId at;
  PacketHeader packet;
  const char* name() const;
};
const char* to_string(RouterEvent::Kind kind);

class FabricRouter {
 public:
  static constexpr uint8_t kCenter = 0xFF;  // the local device, as an input or output

  // tables[plane] is this chip's table on that plane; ports are the wired ethernet ports.
  FabricRouter(ChipId self, const RouterConfig& config, std::vector<RouterTable> tables,
               const std::vector<uint8_t>& ports);

  ChipId self() const { return self_; }
  int fvcs() const { return cfg_.data_fvcs + 1; }
  int lanes() const { return transport::lanes_for(fvcs()); }
  uint8_t control_fvc() const { return transport::control_fvc(cfg_.data_fvcs); }
  // Wired ports are numbered 0..wired_ports()-1 in ascending port order; -1 for any other port.
  size_t wired_ports() const { return credits_.size() / static_cast<size_t>(lanes()); }
  int port_index(uint8_t port) const { return port == kCenter ? -1 : port_rank_[port]; }

  // A packet from the link on `port` into a lane; its producer held a credit, so there is room.
  void on_arrival(uint8_t port, uint8_t lane, Packet packet, Time now);
  // The router on the far end of `port` freed n slots of its buffer for `lane`.
  void on_credit(uint8_t port, uint8_t lane, uint32_t n);
  // A packet from a local worker or the center; false when the buffer of its FVC and kind
  // (request or answer) is full.
  bool inject(Packet packet, Time now);
  size_t inject_room(uint8_t fvc, bool answer = false) const;
  // The center can take requests whose answers need n more places on answer_fvc (answer_fvc()
  // of packet.hpp); each request delivered takes one. Unlimited until first set.
  void set_center_room(uint8_t answer_fvc, size_t n) { center_room_.at(answer_fvc) = n; }
  // While stalled, the center takes no deliveries on this FVC (a stalled consumer).
  void stall_center(uint8_t fvc, bool stalled);
  // Socket data and multicast writes are delivered only once `gate` says the center has room
  // for them (socket data: its consumer, local handshake's back-pressure, spec 2.4.4; a
  // multicast: room for its copies); until then they wait at the head of their buffer, under
  // the timeout like any other.
  void set_center_gate(std::function<bool(const PacketHeader&)> gate) { center_gate_ = std::move(gate); }

  // Streaming sockets' FVC reservations (spec 2.4.2): an SSocket's open (kSocketOpen of type
  // SSocket, the FVC in dst_addr) reserves that FVC toward its next hop (or the center) at
  // every router it passes; it waits where another socket holds it. While reserved, requests
  // on that FVC toward that output pass only if they are the owner's, or come from the input
  // the reservation came in by (they were on their way before it: they must not block the
  // owner's data behind them); others wait, without timing out, until the owner's close
  // passes and frees it. Other FVCs and other outputs are untouched; answers are never held.
  struct ReservationState {
    uint8_t port;  // or kCenter
    uint8_t fvc;
    ChipId owner;
    uint16_t endpoint;  // the owner's socket endpoint
  };
  std::vector<ReservationState> reservations() const;
  uint64_t reservations_changed() const { return reservations_changed_; }  // counts changes
  // The TT-link on a wired port went down (or came back). While it is down, packets whose next
  // hop is that port are dropped with kLinkDown at the next poll instead of waiting for credits.
  void set_port_down(uint8_t port, bool down);
  bool port_down(uint8_t port) const;
  // A packet this router sent toward `port` on `lane` never left the chip (its link went down
  // first): report it, NACK its source, and take back the credit it held.
  void bounce(uint8_t port, uint8_t lane, const PacketHeader& h);

  // The router on the far end of `port` restarted with empty buffers: every lane toward it
  // has its full credit again, and the packets still waiting here that came from it return no
  // credit when they leave (its new incarnation never spent one on them).
  void peer_restarted(uint8_t port);
  // The tables of every plane, from the next packet on: a packet is routed when it reaches the
  // head of its buffer, so a switch happens between packets, never during one.
  // New routing tables, from the next packet on. A reservation whose owner or receiver they no
  // longer route to (its chip died, or is cut off) is freed: the owner's close could never come
  // to free it (or never get past the gap).
  void set_tables(std::vector<RouterTable> tables);
  // Whether some plane's table routes to `chip` (this chip included).
  bool reachable(ChipId chip) const;

  struct Actions {
    struct Send {
      uint8_t port;
      uint8_t lane;  // the buffer it goes to on the far end
      Packet packet;
    };
    struct Credit {
      uint8_t port;  // send to the router on the far end of this port
      uint8_t lane;
      uint32_t n;
    };
    std::vector<Send> sends;
    std::vector<Credit> credits;
    std::vector<Packet> delivered;  // for the center to commit
    std::vector<RouterEvent> events;
    void clear() { sends.clear(), credits.clear(), delivered.clear(), events.clear(); }
  };
  // What a snapshot shows (ttemu snapshot, a campaign's hung run): each routing buffer that
  // holds packets, with its head packet and since when that head has waited.
  struct BufferState {
    uint8_t port;  // or kCenter
    uint8_t lane;
    size_t packets;
    PacketHeader head;
    Time head_since;
  };
  std::vector<BufferState> buffers() const;
  // Free slots this router may still fill in the buffer of `lane` on the far end of `port`.
  uint32_t credits(uint8_t port, uint8_t lane) const;
  bool center_stalled(uint8_t fvc) const { return center_stalled_.at(fvc); }

  // Moves every packet that can move now.
  void poll(Time now, Actions& out);
  // When a blocked head would time out; nullopt when nothing waits.
  std::optional<Time> next_deadline() const;
  bool idle() const;

 private:
  struct Waiting {
    Packet packet;
    Time head_since;
  };
  struct Input {
    uint8_t port;  // or kCenter
    uint8_t lane;
    Fifo<Waiting> q;  // keeps its storage: no allocation per packet
    uint32_t unowed = 0;  // packets leaving that return no credit (peer_restarted)
    bool answer_waits = false;  // its head is an answer waiting for a down link (answer_down_wait)
  };

  // How long an answer waits for a down link: answer_down_wait, never past the timeout.
  Duration answer_wait() const { return std::min(cfg_.answer_down_wait, cfg_.timeout); }
  // Index into inputs_ (or credits_) of (port, lane); -1 when the port is not wired.
  int slot(uint8_t port, uint8_t lane) const;
  void drop(Input& in, RouterEvent::Kind why, Time now, Actions& out);
  void nack(const PacketHeader& h);
  void pop(Input& in, Time now, Actions& out);
  void push(Input& in, Waiting w);
  // The first input at or after `from` with packets waiting, or inputs_.size().
  size_t next_busy(size_t from) const;

  ChipId self_;
  RouterConfig cfg_;
  std::vector<RouterTable> tables_;
  // Flat and in a fixed order (ports ascending, then the center): the per-packet path walks
  // these on every wake-up of a chip process, so they stay small and contiguous.
  std::vector<int16_t> port_rank_;  // port -> rank among wired ports (the center: last)
  std::vector<Input> inputs_;       // ports' lanes, then the center's class-0 lanes
  std::vector<uint64_t> busy_;      // a bit per input with packets waiting: a poll reads
                                    // only the queues that hold something
  std::vector<int16_t> input_of_;   // rank * lanes + lane -> index into inputs_
  std::vector<uint32_t> credits_;   // rank * lanes + lane -> free slots downstream
  std::vector<bool> center_stalled_;
  std::function<bool(const PacketHeader&)> center_gate_;
  struct Reservation {
    bool active = false;
    ChipId owner{};
    uint16_t endpoint = 0;
    uint8_t in_port = 0;
    ChipId to{};  // the receiver's chip
  };
  std::vector<Reservation> reserved_;  // (port rank, or the center last) * fvcs() + fvc
  uint64_t reservations_changed_ = 0;
  // Whether a head packet may take output `out` (a port rank, or the center's) now; an SSocket's
  // open takes the reservation as it passes, the owner's close frees it.
  bool reservation_allows(const Input& in, const Packet& p, size_t out);
  std::vector<size_t> center_room_;  // by answer FVC
  std::vector<bool> port_down_;  // by rank
  std::vector<Packet> pending_nacks_;
  std::vector<RouterEvent> pending_events_;  // from bounce(), reported by the next poll
  size_t queued_ = 0;  // packets in all inputs
  size_t rr_ = 0;      // round-robin start among inputs (kept below their count: no division)
};

}  // namespace ttemu::routing
