#include "emulator/chip/segments.hpp"

#include <algorithm>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::chip {

namespace bip = boost::interprocess;

std::string segment_name(const JobId& job, routing::ChipId chip, SegmentKind kind) {
  const char* suffix = kind == SegmentKind::kControl ? "ctl" : kind == SegmentKind::kL1 ? "l1" : "dram";
  return fmt::format("{}{}.{}", job::segment_prefix(job), routing::to_string(chip), suffix);
}

std::string link_segment_name(const JobId& job, routing::PortId a, routing::PortId b) {
  return fmt::format("{}{}.link", job::segment_prefix(job), routing::to_string(std::min(a, b)));
}

Segment::Segment(std::string name, std::unique_ptr<bip::mapped_region> region)
    : name_(std::move(name)), region_(std::move(region)) {}
Segment::Segment() = default;
Segment::Segment(Segment&&) noexcept = default;
Segment& Segment::operator=(Segment&&) noexcept = default;
Segment::~Segment() = default;
void* Segment::data() const { return region_ ? region_->get_address() : nullptr; }
size_t Segment::size() const { return region_ ? region_->get_size() : 0; }

Segment Segment::create(const std::string& name, size_t size) {
  try {
    bip::permissions owner_only(0600);
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, owner_only);
    shm.truncate(static_cast<bip::offset_t>(size));  // sparse: pages appear when touched
    return Segment(name, std::make_unique<bip::mapped_region>(shm, bip::read_write));
  } catch (const bip::interprocess_exception& e) {
    throw Error(fmt::format("shared memory {}: cannot create {} bytes: {}", name, size, e.what()));
  }
}

Segment Segment::open(const std::string& name) {
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
    return Segment(name, std::make_unique<bip::mapped_region>(shm, bip::read_write));
  } catch (const bip::interprocess_exception& e) {
    throw Error(fmt::format("shared memory {}: cannot open: {}", name, e.what()));
  }
}

bool unlink_segment(const std::string& name) { return bip::shared_memory_object::remove(name.c_str()); }

void unlink_chip_segments(const JobId& job, routing::ChipId chip) {
  for (auto kind : {SegmentKind::kControl, SegmentKind::kL1, SegmentKind::kDram}) unlink_segment(segment_name(job, chip, kind));
}

}  // namespace ttemu::chip
