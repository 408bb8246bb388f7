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

#include "emulator/routing/address.hpp"

namespace boost::interprocess {
class mapped_region;
}

namespace ttemu::chip {

// A job: one launch. Its id embeds the launcher's pid, so stale jobs can be recognised.
struct JobId {
  int pid = 0;
  uint32_t nonce = 0;
  std::string text() const;  // "<pid>-<nonce hex>"
  uint64_t hash() const { return (static_cast<uint64_t>(pid) << 32) | nonce; }
  static JobId create();
  static std::optional<JobId> parse(const std::string& text);
};

enum class SegmentKind { kControl, kL1, kDram };
std::string segment_name(const JobId& job, routing::ChipId chip, SegmentKind kind);

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
// Every ttemu segment of this user, by name.
std::vector<std::string> list_segments();
// Removes the segments (and control sockets) of this user's jobs whose launcher is gone.
// Returns what it removed.
std::vector<std::string> clean_stale();

// Where a job's control socket lives: a private directory per user.
std::string runtime_dir();
std::string control_socket_path(const JobId& job);
bool process_alive(int pid);
// Removes a chip's three segments (control, L1, DRAM), whichever exist.
void unlink_chip_segments(const JobId& job, routing::ChipId chip);
// Whether the launcher of a job still runs: its pid is alive and is a ttemu process.
bool job_alive(const JobId& job);

}  // namespace ttemu::chip
