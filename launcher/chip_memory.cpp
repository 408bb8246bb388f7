#include "launcher/chip_memory.hpp"

#include <fmt/format.h>

#include "emulator/chip/arch.hpp"
#include "emulator/common/error.hpp"
#include "emulator/process/shm_transport.hpp"

namespace ttemu::launcher {

ChipMemory::ChipMemory(const job::JobId& job, const control::System& sys, const control::TableSet& tables,
                       std::optional<size_t> dram_bytes, size_t shm_ring_capacity) {
  try {
    for (int v = 0; v < sys.node_count(); ++v) {
      const auto& chip = sys.chips[static_cast<size_t>(v)];
      const chip::ArchSpec arch = chip::arch_spec(sys.spec_of(v).arch);
      names_.push_back(chip::segment_name(job, chip.id, chip::SegmentKind::kControl));
      controls_.push_back(chip::Segment::create(names_.back(), sizeof(chip::ChipControl)));
      auto* block = new (controls_.back().data()) chip::ChipControl();
      block->mesh = chip.id.mesh;
      block->device = chip.id.device;
      block->magic = chip::kControlMagic;
      names_.push_back(chip::segment_name(job, chip.id, chip::SegmentKind::kDram));
      chip::Segment::create(names_.back(), dram_bytes.value_or(arch.dram));
      names_.push_back(chip::segment_name(job, chip.id, chip::SegmentKind::kL1));
      chip::Segment l1 = chip::Segment::create(names_.back(), arch.l1_total());
      // The control plane writes each router's table into its ethernet core's L1.
      for (uint8_t port : sys.wired_ports(v)) {
        const int link = sys.link_at(v, port);
        if (port >= arch.eth_cores) {
          throw Error(fmt::format("{} port P{}: a {} chip has {} ethernet cores", routing::to_string(chip.id), port,
                                  arch.name, arch.eth_cores));
        }
        auto* rc = l1.as<chip::RouterL1Block>(arch.eth_l1_offset(port));
        rc->plane = static_cast<uint16_t>(sys.links[static_cast<size_t>(link)].plane);
        rc->port = static_cast<uint8_t>(port);
        rc->table = tables.at(rc->plane, v).pack();
        rc->magic = chip::kRouterMagic;
      }
    }
    for (const auto& l : sys.links) {
      if (shm_ring_capacity == 0) break;
      names_.push_back(chip::link_segment_name(job, l.a, l.b));
      chip::Segment seg = chip::Segment::create(names_.back(), process::shm_link_bytes(shm_ring_capacity));
      process::create_shm_link(seg.data(), shm_ring_capacity);
    }
  } catch (...) {
    remove();
    throw;
  }
}

void ChipMemory::remove() {
  controls_.clear();
  for (const auto& n : names_) chip::unlink_segment(n);
  names_.clear();
}

}  // namespace ttemu::launcher
