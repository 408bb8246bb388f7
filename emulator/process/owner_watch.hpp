// The worker processes a chip serves, watched for their end: a pidfd each in the chip's event
// loop, so that a worker that dies without closing its sockets is noticed when it dies, with
// no polling (an idle chip stays asleep). What to do then is the chip node's
// (ChipNode::owner_gone); this only says when.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "emulator/process/event_loop.hpp"

namespace ttemu::process {

class OwnerWatch {
 public:
  using Gone = std::function<void(uint32_t pid)>;
  using Unwatchable = std::function<void(uint32_t pid, int error)>;  // errno of pidfd_open
  OwnerWatch(EventLoop& loop, Gone gone, Unwatchable unwatchable)
      : loop_(loop), gone_(std::move(gone)), unwatchable_(std::move(unwatchable)) {}
  ~OwnerWatch();
  OwnerWatch(const OwnerWatch&) = delete;
  OwnerWatch& operator=(const OwnerWatch&) = delete;

  // Watches process `pid` until it ends (already watched: nothing more). The pid is one of
  // this process's pid namespace (the client library records 0 otherwise). A process that is
  // already gone is reported as gone at once; one that cannot be watched (out of descriptors,
  // say) is reported as unwatchable, and never as gone.
  void watch(uint32_t pid);

 private:
  void ended(uint32_t pid);

  EventLoop& loop_;
  Gone gone_;
  Unwatchable unwatchable_;
  std::unordered_map<uint32_t, int> fds_;  // pid -> its pidfd
};

}  // namespace ttemu::process
