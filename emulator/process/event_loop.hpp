// A chip process's event loop: one thread, one epoll set, no timer descriptor.
//
// Promises:
// - handlers run on the thread that called run(), one at a time;
// - the deadline (set_deadline) is honoured to the nanosecond by the epoll wait's own timeout
//   (epoll_pwait2), so moving it costs no system call;
// - while traffic flows the loop keeps polling, for at most `spin` after the last event, and
//   yields the processor between polls (many chips share few cores); after that, or with a
//   spin of zero, it sleeps in the kernel until something happens. Idle is free;
// - work that arrives through shared memory rather than a descriptor (on_shared_work) is
//   looked for on every turn, and once more after the loop has announced that it sleeps.
// - a wait that is interrupted (EINTR: a signal, or io_uring task work queued for this thread)
//   goes round the loop, so shared work is looked for again: the io_uring transport's
//   completions arrive this way (uring_transport.hpp).
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>

namespace ttemu::process {

class EventLoop {
 public:
  using Time = std::chrono::nanoseconds;  // steady_clock since its epoch
  using Handler = std::function<void(uint32_t events)>;

  explicit EventLoop(std::chrono::nanoseconds spin = {});
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  static Time now();
  // The time read when the loop last woke: what handlers use as "now" (one clock read per
  // wake-up; clock reads are not free on a virtual machine).
  Time time() const { return time_; }

  // Level-triggered interest in fd (EPOLLIN and/or EPOLLOUT); the handler gets the events.
  void watch(int fd, uint32_t events, Handler handler);
  void change(int fd, uint32_t events);
  void forget(int fd);

  void set_deadline(std::optional<Time> at) { deadline_ = at; }
  void on_deadline(std::function<void(Time)> handler) { on_deadline_ = std::move(handler); }
  // Runs after the handlers of all descriptors that were ready at once: work that gains from
  // seeing everything that arrived together (one pass of the router for all ports).
  void on_batch_end(std::function<void()> handler) { on_batch_end_ = std::move(handler); }

  // Work published in shared memory (workers' commands): `ready` says whether some waits, `run`
  // does it. Before blocking, the loop stores 1 in *asleep and asks `ready` once more (with a
  // full fence between): a producer that publishes, fences and then reads *asleep == 0 knows the
  // loop will find its work; reading 1, it must wake the loop through one of its descriptors.
  void on_shared_work(std::atomic<uint32_t>* asleep, std::function<bool()> ready, std::function<void()> run);

  void set_spin(std::chrono::nanoseconds spin) { spin_ = spin; }
  void run();   // until stop()
  void stop() { stopping_ = true; }

 private:
  int epoll_ = -1;
  std::unordered_map<int, Handler> handlers_;
  std::optional<Time> deadline_;
  std::function<void(Time)> on_deadline_;
  std::function<void()> on_batch_end_;
  std::atomic<uint32_t>* asleep_ = nullptr;
  std::function<bool()> shared_ready_;
  std::function<void()> shared_run_;
  std::chrono::nanoseconds spin_;
  Time last_event_{}, time_{};
  bool stopping_ = false;
};

}  // namespace ttemu::process
