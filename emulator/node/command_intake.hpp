// The router's side of the command buffer (pull model, spec 2.2.2.4): it takes workers'
// commands, pulls each payload straight from the worker's L1 or DRAM into packets for the
// fabric node, fills in the worker's status (with the FVC it chose), and counts the answers
// (acks, NACKs, read responses) back to the worker's transaction counters.
//
// FVCs make independent progress (spec 2.3.1, 5.3): commands are taken in ticket order within
// an FVC, but a command whose FVC is full waits without holding back later commands on other
// FVCs. Slots go back to workers in ticket order.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "emulator/chip/chip_control.hpp"
#include "emulator/session/fabric_node.hpp"

namespace ttemu::node {

class CommandIntake {
 public:
  using Memory = session::Center::Memory;  // bytes of this chip's memory, empty when out of range

  CommandIntake(routing::ChipId self, chip::ChipControl& control, Memory memory)
      : self_(self), ctl_(control), mem_(std::move(memory)) {}

  // Takes ready commands whose FVC has room for their packets; a command split across calls
  // resumes where it stopped. Returns whether any command was taken.
  bool drain(session::FabricNode& node, routing::Time now);
  // Whether a ready command waits that drain() has not already found blocked by a full FVC
  // (those resume when the router moves): what the chip looks for before it sleeps.
  bool has_work() const;
  // Whether the last drain() left commands blocked by a full FVC.
  bool waiting() const { return waiting_; }
  // Tells whether a worker's process (by pid) still runs; without it (the simulator, whose
  // workers do not die) a slot a worker claimed is never voided.
  void set_liveness(std::function<bool(uint32_t pid)> alive) { alive_ = std::move(alive); }
  // When drain() looks again at a head slot that waits for its worker (none: no such slot).
  std::optional<routing::Time> next_deadline() const {
    return head_since_ ? std::optional<routing::Time>(head_look_) : std::nullopt;
  }
  // An answer for one of this chip's workers arrived from the fabric.
  void answer(const routing::Packet& packet);
  // The owners (SocketEndpoint::owner: worker processes' pids) of the sockets opened since
  // the last call, each once: the chip's process watches them for their end.
  std::vector<uint32_t> take_new_owners() { return std::exchange(new_owners_, {}); }
  // `owner` is gone (a worker process died): the commands it left in the buffer are taken first
  // (what it queued still goes: its bytes are in the chip's memory), then each endpoint it
  // owned is closed as its own close would (a sender's close behind its data, freeing its
  // SSocket's reservations at every router it passes; a receiver tells its sender, whose
  // socket breaks) and freed, as the owner would have freed it. While the control plane holds
  // injection, all of that waits for it to resume. Whether anything moved.
  bool owner_gone(uint32_t owner, session::FabricNode& node, routing::Time now);

 private:
  // A command's progress across calls: bytes already sent, and its FVC once chosen.
  struct Progress {
    uint32_t offset = 0;
    int fvc = -1;
  };
  // A socket's send or close, taken from the command buffer, with its progress.
  struct SocketJob {
    routing::Command command;  // kSocketData or kSocketClose
    uint32_t generation = 0;   // the endpoint's claim it belongs to
    uint64_t src_addr = 0;
    uint32_t size = 0;
    uint64_t status_addr = 0;
    uint32_t offset = 0;
    uint32_t chunk = 0;         // the packet under way (a multicast's goes to each receiver)
    uint16_t peers_done = 0;
    bool release = false;       // a close for an owner that is gone: the entry is freed after it
  };
  // Sends what the FVC has room for; false when it ran out of room (progress kept; no_room
  // names the FVC that is full, -1 for an automatic choice that found none). A refused command
  // counts as sent.
  bool issue(const chip::FabricCommand& c, Progress& progress, session::FabricNode& node, routing::Time now,
             int& no_room);
  // A socket command (open, send, close) for an endpoint of the chip's socket table: an open
  // goes at once, a send or close becomes one of the endpoint's jobs. Whether anything moved.
  bool take_socket(const chip::FabricCommand& c, session::FabricNode& node, routing::Time now);
  // Runs the endpoint's jobs in order while credits and FVC room allow (a multicast socket's
  // packet goes to each receiver); whether anything moved.
  bool run_jobs(uint16_t ep, session::FabricNode& node, routing::Time now);
  bool run_all_jobs(session::FabricNode& node, routing::Time now);
  // Closes and frees the endpoints of the owners in gone_ (owner_gone), after drain() has taken
  // their commands.
  bool close_for_gone_owners(session::FabricNode& node, routing::Time now);
  // Endpoints whose owners consumed data since the last look (their `poked` flags).
  bool take_pokes(session::FabricNode& node);
  // Whether the head slot (ticket `head`, in `state`) was left by a worker that died after it
  // took the ticket: after kGrace of waiting, a claim whose pid is gone, or a ticket nobody
  // claimed (a worker that died between its ticket and its claim; a stopped one finds the slot
  // voided when it claims, and takes another ticket). Looked at every kLookAgain while the
  // head waits, so a slow worker costs no system call per pass. Without this a dead worker
  // would hold every slot behind its own for good, and the chip would take no command again.
  bool head_abandoned(uint64_t state, uint32_t head, routing::Time now);
  void refuse(const chip::FabricCommand& c, int32_t status);
  void write_status(const chip::FabricCommand& c, int32_t status, int32_t fvc);
  // Counts answered packets down in the worker's transaction and posts a completion.
  void count_down(uint16_t core, uint8_t txn, uint32_t packets, routing::Command answer, uint16_t reason = 0);
  // Counts packets down in a transaction (not below zero), waking its sleepers at zero.
  static void take_back(chip::WorkerState& worker, uint8_t txn, uint32_t packets);

  routing::ChipId self_;
  chip::ChipControl& ctl_;
  Memory mem_;
  std::array<Progress, chip::kCommandSlots> progress_{};  // by slot
  std::array<bool, chip::kCommandSlots> blocked_{};      // by slot: found blocked by the last drain
  uint64_t packet_id_ = 0;
  bool waiting_ = false;
  std::array<std::deque<SocketJob>, session::kSocketEndpoints> jobs_;  // by endpoint
  session::EndpointSet with_jobs_;  // endpoints whose jobs wait (for credit or FVC room)
  uint32_t pokes_seen_ = 0;    // ChipControl's socket_pokes when last looked
  std::vector<uint32_t> new_owners_;  // owners of endpoints opened since take_new_owners()
  std::vector<uint32_t> gone_;        // owners gone whose endpoints drain() closes next
  static constexpr routing::Time kLookAgain = std::chrono::milliseconds(100);
  static constexpr routing::Time kGrace = std::chrono::seconds(1);
  std::function<bool(uint32_t)> alive_;  // set_liveness
  uint32_t head_ = 0;                    // the head slot's ticket, while it waits
  std::optional<routing::Time> head_since_;  // since when it waits (none: it does not)
  routing::Time head_look_{};               // when it is looked at next
};

}  // namespace ttemu::node
