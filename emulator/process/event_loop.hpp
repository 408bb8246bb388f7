// A chip process's event loop: one thread, one epoll set with one timer descriptor in it;
// optionally a ring (the io_uring transport) that the loop waits in instead of the epoll set,
// with a timer of its own.
//
// Promises:
// - handlers run on the thread that called run(), one at a time;
// - the deadline (set_deadline) is handled on the first turn at or after it. A loop that is
//   awake anyway (traffic) handles it then; one that sleeps is woken by a timer (a timer
//   descriptor, or the waiter's) at most `slack` after it (set_timer_slack; 0: at it), so that
//   deadlines that can wait (a delayed acknowledgement, credits, a retransmission check) mostly
//   ride on wake-ups that traffic causes anyway instead of costing their own. The timer stays
//   armed across waits: it is set again only when the deadline plus the slack comes before the
//   time it is armed for, after it has fired, or (with a slack) when it would fire before the
//   deadline and so wake the loop for nothing; a deadline that moves later within the slack
//   costs nothing.
//   (A timeout per wait would arm and cancel a kernel timer per packet, and a timer earlier
//   than the scheduler's tick reprograms the processor's timer both times: on a virtual machine
//   each is a trap to the hypervisor, 4-5 us per forward measured.) The timer may wake the loop
//   before the deadline, never after the deadline plus the slack; before the deadline's handler
//   runs, what has already arrived is handled (one look), since that may move it;
// - while traffic flows the loop keeps polling, for at most `spin` after the last event, and
//   yields the processor between polls (many chips share few cores); after that, or with a
//   spin of zero, it sleeps in the kernel until something happens. Idle is free;
// - work that arrives through shared memory rather than a descriptor (on_shared_work) is
//   looked for on every turn, and once more after the loop has announced that it sleeps.
//   Its producers wake a sleeping loop through the bell (on_bell), which runs the shared work
//   at once and is read only when the loop next sleeps: off the path of a forwarded packet;
// - with a Waiter (wait_in), the loop sleeps in the waiter, which watches the epoll set as one
//   of its sources and says when it is ready; the waiter's own completions are shared work.
// - a wait that is interrupted (EINTR: a signal) goes round the loop.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace ttemu::process {

class EventLoop {
 public:
  using Time = std::chrono::nanoseconds;  // steady_clock since its epoch
  using Handler = std::function<void(uint32_t events)>;

  // Something the loop can sleep in instead of epoll: a ring whose completions the loop's
  // shared-work check finds (so `ready` must ask the waiter too), and which watches the
  // loop's epoll descriptor, so that sockets, signals and doorbells still wake the loop.
  class Waiter {
   public:
    virtual ~Waiter() = default;
    // From now on, watch epoll_fd for readability.
    virtual void watch(int epoll_fd) = 0;
    // Sleeps until a completion is ready or the timeout (nullptr: none) passes; a zero timeout
    // only looks. Returns whether some completion is ready.
    virtual bool wait(const timespec* timeout) = 0;
    // The epoll descriptor was seen readable since the last call (and is watched again at the
    // next wait, after the loop has looked).
    virtual bool take_epoll_ready() = 0;
    // A timer of the waiter's own (steady clock, absolute) that ends a wait at `at` or after
    // it; it replaces the one armed before, and stays armed across waits until it fires.
    virtual void arm_timer(std::chrono::nanoseconds at) = 0;
    // The armed timer fired since the last call.
    virtual bool take_timer_fired() = 0;
  };

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
  // Stops watching fd; any handler may call it, the fd's own included.
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
  // The descriptor that producers ring to wake the sleeping loop (the chip's doorbell), and
  // how to empty it. A ring only says "look at the shared work": it is watched edge-triggered,
  // makes the next turn run the shared work (rang() is then true), and is emptied just before
  // the loop next sleeps, so that nothing but the work stands between a wake-up and the work
  // (a forwarding chip's hop). A ring emptied before the last look for work cannot be lost:
  // its producer published the work before it rang.
  void on_bell(int fd, std::function<void()> empty);
  bool rang() const { return rang_; }
  // Output kept back for input that may follow at once (a chip packing fuller datagrams):
  // while `pending` says so, the loop looks at its sources once before it would sleep, and
  // calls `send` if nothing more has come. The owner bounds how long it keeps it.
  void on_open_output(std::function<bool()> pending, std::function<void()> send);

  void set_spin(std::chrono::nanoseconds spin) { spin_ = spin; }
  // How late a sleeping loop may be woken for its deadline (above).
  void set_timer_slack(std::chrono::nanoseconds slack) { slack_ = slack; }
  // Times the timer woke the loop with no deadline due (for tests and measurements).
  uint64_t empty_timer_fires() const { return empty_timer_fires_; }
  // Sleeps in `waiter` from now on (nullptr: in epoll again). The waiter outlives its use.
  void wait_in(Waiter* waiter);
  void run();   // until stop()
  void stop() { stopping_ = true; }

 private:
  int dispatch(const timespec* timeout);  // one epoll wait and its handlers; -1 on EINTR
  // Waits in the waiter (its completions are then shared work; the time is read after) or in
  // the epoll set (dispatching); true if something is ready or was handled.
  bool wait_for_sources(const timespec* timeout);

  // Arms the timer for `deadline` plus the slack, unless it is armed to fire within that
  // already (above).
  void arm_timer(Time deadline);

  int epoll_ = -1;
  int timer_ = -1;             // timerfd (CLOCK_MONOTONIC, the steady clock's), or the waiter's timer
  std::optional<Time> armed_;  // when the timer fires, if it is armed
  Waiter* waiter_ = nullptr;
  static constexpr int kMaxUnlooked = 16;
  int unlooked_ = 0;  // turns with work in a row that did not look at descriptors
  bool looked_ = false;  // the sources were looked at for the deadline that has passed
  // A watched descriptor's handler. epoll hands back the Watch itself with each event, so that
  // a wake-up finds its handler without a lookup (a hash table's buckets are cold by then).
  struct Watch {
    Handler handler;
    bool live = true;  // false once forgotten: an event fetched before is then ignored
  };
  std::unordered_map<int, std::unique_ptr<Watch>> watches_;  // by descriptor: change, forget
  std::vector<std::unique_ptr<Watch>> retired_;  // forgotten during a dispatch: kept until it ends
  std::optional<Time> deadline_;
  std::function<void(Time)> on_deadline_;
  std::function<void()> on_batch_end_;
  std::atomic<uint32_t>* asleep_ = nullptr;
  std::function<bool()> shared_ready_;
  std::function<void()> shared_run_;
  std::function<void()> empty_bell_;
  std::function<bool()> open_output_;
  std::function<void()> send_open_output_;
  bool rang_ = false;      // rung since the shared work last ran
  bool bell_full_ = false;  // rung since it was last emptied
  std::chrono::nanoseconds spin_;
  std::chrono::nanoseconds slack_{0};
  uint64_t empty_timer_fires_ = 0;
  Time last_event_{}, time_{};
  bool stopping_ = false;
};

}  // namespace ttemu::process
