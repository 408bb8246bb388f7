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
#pragma once

#include <string>

#include "emulator/chip/segments.hpp"
#include "emulator/routing/address.hpp"

namespace ttemu::chip {

// The chip's end: readable when rung.
class DoorbellListener {
 public:
  DoorbellListener(const JobId& job, routing::ChipId chip);  // throws Error if the name is taken
  ~DoorbellListener();
  DoorbellListener(const DoorbellListener&) = delete;
  DoorbellListener& operator=(const DoorbellListener&) = delete;

  int fd() const { return fd_; }
  void drain();  // reads every ring so far

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

  void ring();

 private:
  int fd_ = -1;
};

}  // namespace ttemu::chip
