// The worker's side of a chip's router command buffer (the pull model, spec 2.2.2.4): take a
// ticket, write the command into its slot, mark it ready, and ring the doorbell only if the
// router has said it sleeps; read the completions the router leaves. The client library (a
// worker process over shared memory) and the simulator's workers both use it, so simulated
// workers go through the very protocol the router serves.
//
// Never blocks unless asked to: try_submit() refuses when every slot is taken; submit() waits
// for a slot (asleep on the `served` futex word) up to a limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>

#include "emulator/chip/chip_control.hpp"

namespace ttemu::chip {

// What a worker asks for; the fields of a FabricCommand a worker fills in.
struct CommandRequest {
  routing::Command command = routing::Command::kWrite;
  int8_t fvc = -1;  // -1: the router chooses
  uint8_t plane = 0, txn_id = 0;
  uint8_t wrap = 31;
  uint8_t ttl = routing::kDefaultTtl;
  uint16_t dst_mesh = 0, dst_device = 0;
  uint32_t size = 0, arg = 0;
  uint64_t src_addr = 0, dst_addr = 0, return_addr = 0;
  uint64_t status_addr = 0;  // a FabricStatus in this chip's memory the router fills in; 0: none
  uint16_t copies = 1;  // a multicast: the devices it writes (each acknowledges its packets)
  uint64_t key = 0;     // the remote memory window's key (0: none); dst_addr is then its offset
};

class CommandBufferClient {
 public:
  // `ring` wakes the router (its doorbell); called only when the router has said it sleeps.
  CommandBufferClient(ChipControl& control, uint16_t core, std::function<void()> ring);

  // Puts the command in the buffer and counts its packets in its transaction; false, with
  // nothing done, when every slot is taken (try again once the router has served some).
  bool try_submit(const CommandRequest& request);
  // The same, waiting for a slot up to `limit`; false if none came free in time.
  bool submit(const CommandRequest& request, std::chrono::milliseconds limit);
  // Sleeps until the router serves a command (a slot may have come free), at most `limit`;
  // returns at once if one is free already.
  void wait_for_slot(std::chrono::milliseconds limit);
  // Rings the router's doorbell if it has said it sleeps: after a worker changed something the
  // router looks at besides its slots (a socket's poke).
  void notify();
  // Moves up to out.size() completions, oldest first, into out; returns how many.
  size_t poll(std::span<Completion> out);
  // Packets of the transaction not answered yet.
  uint32_t in_flight(uint8_t txn) const;
  // Packets of the transaction NACKed so far (counted up, never reset).
  uint32_t nacked(uint8_t txn) const;

 private:
  bool publish(FabricCommand& slot, uint64_t claim, const CommandRequest& request);

  ChipControl& ctl_;
  uint16_t core_;
  std::function<void()> ring_;
  bool visible_ = true;  // the chip sees this process's pid (same pid namespace): claims carry it
};

// The router's side of a completion: appended to the worker's queue, or counted as overflow.
void post_completion(WorkerState& worker, const Completion& completion);

}  // namespace ttemu::chip
