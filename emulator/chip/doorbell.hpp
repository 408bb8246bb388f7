// A chip's doorbell: how a worker wakes a sleeping router, with no thread in between.
//
// The chip binds a datagram socket in Linux's abstract UNIX namespace, named after the user,
// job and chip; it is in the chip's epoll set and disappears with the chip (nothing to clean
// up). A worker rings it with an empty datagram, but only when the router has said in shared
// memory that it is going to sleep (CommandBuffer::router_asleep): a busy router is never
// rung, so a burst of commands costs no system calls on either side.
//
// The handshake that makes this safe (no lost wake-up): the worker marks its slot ready, then
// reads router_asleep; the router sets router_asleep, then looks for ready slots once more
// before it blocks. With a full fence on each side, at least one of them sees the other.
// The first waker takes the flag (should_ring), so a sleeping chip is rung once, not once per
// worker or neighbour that has something for it: the chip looks at all of its shared work
// when it wakes, and says it sleeps again before it next blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "emulator/chip/segments.hpp"
#include "emulator/routing/address.hpp"

namespace ttemu::chip {

// After publishing work and a full fence: true if the chip said it sleeps and no one else has
// taken that on to wake it since; the caller then rings.
inline bool should_ring(std::atomic<uint32_t>& router_asleep) {
  return router_asleep.load(std::memory_order_relaxed) != 0 && router_asleep.exchange(0, std::memory_order_seq_cst) != 0;
}

// The chip's end: readable when rung.
class DoorbellListener {
 public:
  DoorbellListener(const JobId& job, routing::ChipId chip);  // throws Error if the name is taken
  ~DoorbellListener();
  DoorbellListener(const DoorbellListener&) = delete;
  DoorbellListener& operator=(const DoorbellListener&) = delete;

  int fd() const { return fd_; }
  int drain();  // reads every ring so far (one system call per 16); returns how many

 private:
  int fd_ = -1;
};

// A worker's end.
class DoorbellRinger {
 public:
  DoorbellRinger(const JobId& job, routing::ChipId chip);  // throws Error if no chip listens
  ~DoorbellRinger();
  DoorbellRinger(const DoorbellRinger&) = delete;
  DoorbellRinger& operator=(const DoorbellRinger&) = delete;

  bool ring();  // false: not sent (the chip has rings it has not read: it wakes anyway)

 private:
  int fd_ = -1;
};

}  // namespace ttemu::chip
