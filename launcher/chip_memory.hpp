// The control plane's side of a job's chip memory: it creates every chip's shared-memory
// segments (control block, L1, DRAM), initialises each control block, and writes each router's
// routing table into its ethernet core's L1 (spec 1.1.2: the control plane programs the
// routers through their memory, as over PCIe). The segments stay mapped for reading counters;
// remove() takes them all away.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_set.hpp"

namespace ttemu::launcher {

class ChipMemory {
 public:
  // Throws Error (a port beyond the chip's ethernet cores, no room in /dev/shm); what was
  // created before is removed by the destructor.
  // With shm_ring_capacity, each link also gets its segment of two datagram rings of that
  // capacity (--transport shm).
  ChipMemory(const job::JobId& job, const control::System& sys, const control::TableSet& tables,
             std::optional<size_t> dram_bytes, size_t shm_ring_capacity = 0);
  ~ChipMemory() { remove(); }
  ChipMemory(const ChipMemory&) = delete;
  ChipMemory& operator=(const ChipMemory&) = delete;

  // A chip's control block (by node), mapped for as long as this lives.
  chip::ChipControl& control(int node) const { return *controls_.at(static_cast<size_t>(node)).as<chip::ChipControl>(); }
  void remove();

 private:
  std::vector<std::string> names_;
  std::vector<chip::Segment> controls_;
};

}  // namespace ttemu::launcher
