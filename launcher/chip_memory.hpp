// The control plane's side of a job's chip memory: it creates every chip's shared-memory
// segments (control block, L1, DRAM), initialises each control block, and writes each router's
// routing table into its ethernet core's L1 (spec 1.1.2: the control plane programs the
// routers through their memory, as over PCIe), again for every reload. The segments stay
// mapped for reading counters; remove() takes them all away.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_set.hpp"
#include "emulator/job/job.hpp"

namespace ttemu::launcher {

class ChipMemory {
 public:
  // Throws Error (a port beyond the chip's ethernet cores, no room in /dev/shm); what was
  // created before is removed by the destructor.
  // With shm_ring_capacity, each link also gets its segment of two datagram rings of that
  // capacity (--transport shm).
  // `here` (by node; empty: every chip) names the chips of this host when a system is spread
  // over several (a host agent's); the others have no memory here.
  ChipMemory(const job::JobId& job, const control::System& sys, const control::TableSet& tables,
             std::optional<size_t> dram_bytes, size_t shm_ring_capacity = 0, std::vector<bool> here = {});
  ~ChipMemory() { remove(); }
  ChipMemory(const ChipMemory&) = delete;
  ChipMemory& operator=(const ChipMemory&) = delete;

  bool here(int node) const { return here_.empty() || here_.at(static_cast<size_t>(node)); }
  // A chip's control block (by node, a chip here), mapped for as long as this lives.
  chip::ChipControl& control(int node) const { return *controls_.at(static_cast<size_t>(node)).as<chip::ChipControl>(); }
  // Writes `tables` into the routers' blocks of a chip's L1.
  void write_tables(int node, const control::TableSet& tables);
  // A chip's memory anew, for a restarted process: empty L1 and DRAM, a fresh control block,
  // the routers' blocks holding `tables`.
  void renew(int node, const control::TableSet& tables, uint32_t version);
  void remove();

 private:
  // The chip's segments; `first`: at launch (their names join those remove() unlinks).
  void create(int node, const control::TableSet& tables, uint32_t version, bool first);
  chip::Segment make(int node, chip::SegmentKind kind, size_t size, bool first);

  job::JobId job_;
  const control::System& sys_;
  std::optional<size_t> dram_bytes_;
  std::vector<bool> here_;
  std::vector<std::string> names_;       // every segment, for remove()
  std::vector<chip::Segment> controls_;  // by node
  std::vector<chip::Segment> l1s_;       // by node: where the routers' tables go
};

}  // namespace ttemu::launcher
