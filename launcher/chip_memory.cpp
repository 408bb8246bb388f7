#include "launcher/chip_memory.hpp"

#include <fmt/format.h>

#include "emulator/chip/arch.hpp"
#include "emulator/common/error.hpp"
#include "emulator/process/shm_transport.hpp"

namespace ttemu::launcher {

ChipMemory::ChipMemory(const job::JobId& job, const control::System& sys, const control::TableSet& tables,
                       std::optional<size_t> dram_bytes, size_t shm_ring_capacity, std::vector<bool> here)
    : job_(job), sys_(sys), dram_bytes_(dram_bytes), here_(std::move(here)) {
  try {
    controls_.resize(sys.chips.size());
    l1s_.resize(sys.chips.size());
    for (int v = 0; v < sys.node_count(); ++v) {
      if (this->here(v)) create(v, tables, 1, /*first=*/true);
    }
    for (const auto& l : sys.links) {
      if (shm_ring_capacity == 0) break;
      if (!this->here(*sys.node(l.a.chip)) || !this->here(*sys.node(l.b.chip))) continue;
      names_.push_back(chip::link_segment_name(job, l.a, l.b));
      chip::Segment seg = chip::Segment::create(names_.back(), process::shm_link_bytes(shm_ring_capacity));
      process::create_shm_link(seg.data(), shm_ring_capacity);
    }
  } catch (...) {
    remove();
    throw;
  }
}

void ChipMemory::create(int v, const control::TableSet& tables, uint32_t version, bool first) {
  const auto& chip = sys_.chips[static_cast<size_t>(v)];
  const chip::ArchSpec arch = chip::arch_spec(sys_.spec_of(v).arch);
  for (uint8_t port : sys_.wired_ports(v)) {
    if (port >= arch.eth_cores) {
      throw Error(fmt::format("{} port P{}: a {} chip has {} ethernet cores", routing::to_string(chip.id), port,
                              arch.name, arch.eth_cores));
    }
  }
  controls_[static_cast<size_t>(v)] = make(v, chip::SegmentKind::kControl, sizeof(chip::ChipControl), first);
  auto* block = new (controls_[static_cast<size_t>(v)].data()) chip::ChipControl();
  block->mesh = chip.id.mesh;
  block->device = chip.id.device;
  block->tables_version.store(version);
  block->magic = chip::kControlMagic;
  make(v, chip::SegmentKind::kDram, dram_bytes_.value_or(arch.dram), first);
  l1s_[static_cast<size_t>(v)] = make(v, chip::SegmentKind::kL1, arch.l1_total(), first);
  write_tables(v, tables);
}

chip::Segment ChipMemory::make(int v, chip::SegmentKind kind, size_t size, bool first) {
  const std::string name = chip::segment_name(job_, sys_.chips[static_cast<size_t>(v)].id, kind);
  chip::Segment s = chip::Segment::create(name, size);
  if (first) names_.push_back(name);  // (a renewed chip's names are there already)
  return s;
}

void ChipMemory::write_tables(int v, const control::TableSet& tables) {
  const chip::ArchSpec arch = chip::arch_spec(sys_.spec_of(v).arch);
  const chip::Segment& l1 = l1s_[static_cast<size_t>(v)];
  for (uint8_t port : sys_.wired_ports(v)) {
    auto* rc = l1.as<chip::RouterL1Block>(arch.eth_l1_offset(port));
    rc->plane = static_cast<uint16_t>(sys_.links[static_cast<size_t>(sys_.link_at(v, port))].plane);
    rc->port = port;
    rc->table = tables.at(rc->plane, v).pack();
    rc->magic = chip::kRouterMagic;
  }
}

void ChipMemory::renew(int v, const control::TableSet& tables, uint32_t version) {
  const auto& chip = sys_.chips[static_cast<size_t>(v)];
  controls_[static_cast<size_t>(v)] = chip::Segment();
  l1s_[static_cast<size_t>(v)] = chip::Segment();
  chip::unlink_chip_segments(job_, chip.id);
  create(v, tables, version, /*first=*/false);
}

void ChipMemory::remove() {
  controls_.clear();
  l1s_.clear();
  for (const auto& n : names_) chip::unlink_segment(n);
  names_.clear();
}

}  // namespace ttemu::launcher
