// The shared-memory segments that are a chip (design brief: "shared memory is the chip"):
// its L1 (every core's), its DRAM, and a small control block the control plane reads.
// POSIX shared memory, owner-only, sparse (untouched pages cost nothing), named per job so
// two jobs on one host never collide: /ttemu.<uid>.<job>.<MxDy>.<kind>.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "emulator/job/job.hpp"
#include "emulator/routing/address.hpp"

namespace boost::interprocess {
class mapped_region;
}

namespace ttemu::chip {

using job::JobId;  // segments are named per job

enum class SegmentKind { kControl, kL1, kDram };
std::string segment_name(const JobId& job, routing::ChipId chip, SegmentKind kind);
// The segment of the link between ends a and b, two chips of one host (--transport shm), named
// after the link's lower end whichever end asks: /ttemu.<uid>.<job>.<MxDyPz>.link.
std::string link_segment_name(const JobId& job, routing::PortId a, routing::PortId b);

// A mapping of one segment. Creating truncates to size (sparse); opening maps what exists.
class Segment {
 public:
  static Segment create(const std::string& name, size_t size);
  static Segment open(const std::string& name);
  Segment();
  Segment(Segment&&) noexcept;
  Segment& operator=(Segment&&) noexcept;
  ~Segment();

  void* data() const;
  size_t size() const;
  const std::string& name() const { return name_; }
  template <class T>
  T* as(size_t offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(data()) + offset);
  }

 private:
  Segment(std::string name, std::unique_ptr<boost::interprocess::mapped_region> region);
  std::string name_;
  std::unique_ptr<boost::interprocess::mapped_region> region_;
};

// Removes a segment by name; true if it existed.
bool unlink_segment(const std::string& name);
// Removes a chip's three segments (control, L1, DRAM), whichever exist.
void unlink_chip_segments(const JobId& job, routing::ChipId chip);

}  // namespace ttemu::chip
