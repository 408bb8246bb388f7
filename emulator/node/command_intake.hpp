// The router's side of the command buffer (pull model, spec 2.2.2.4): it takes workers'
// commands in ticket order, pulls each payload straight from the worker's L1 or DRAM into
// packets for the fabric node, fills in the worker's status (with the FVC it chose), and
// counts the answers (acks, NACKs, read responses) back to the worker's transaction counters.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

#include "emulator/chip/chip_control.hpp"
#include "emulator/session/fabric_node.hpp"

namespace ttemu::node {

class CommandIntake {
 public:
  // Bytes of this chip's memory at addr, or an empty span when out of range.
  using Memory = std::function<std::span<uint8_t>(uint64_t addr, size_t size)>;

  CommandIntake(routing::ChipId self, chip::ChipControl& control, Memory memory)
      : self_(self), ctl_(control), mem_(std::move(memory)) {}

  // Takes ready commands while the node has room for their packets; a command split across
  // calls resumes where it stopped. Returns whether any command was taken.
  bool drain(session::FabricNode& node, routing::Time now);
  // Whether a ready command waits that drain() has not already found blocked by a full router
  // (that one resumes when the router moves): what the chip looks for before it sleeps.
  bool has_work() const;
  // An answer for one of this chip's workers arrived from the fabric.
  void answer(const routing::Packet& packet);

 private:
  bool issue(const chip::FabricCommand& c, session::FabricNode& node, routing::Time now);
  void refuse(const chip::FabricCommand& c, int32_t status);
  void write_status(const chip::FabricCommand& c, int32_t status, int32_t fvc);
  void count_down(uint16_t core, uint8_t txn, uint32_t packets, bool nacked);

  routing::ChipId self_;
  chip::ChipControl& ctl_;
  Memory mem_;
  uint32_t offset_ = 0;  // bytes of the current command already sent
  int fvc_ = -1;         // the FVC chosen for the current command, -1 before it starts
  uint64_t packet_id_ = 0;
  std::optional<uint32_t> stalled_;  // the ticket last refused room by the router
};

}  // namespace ttemu::node
