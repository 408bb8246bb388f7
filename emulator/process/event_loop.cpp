#include "emulator/process/event_loop.hpp"

#include <sched.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include "emulator/common/error.hpp"

namespace ttemu::process {

namespace {

[[noreturn]] void fail(const char* what) {
  throw Error(std::string("event loop: ") + what + ": " + std::strerror(errno));
}

}  // namespace

EventLoop::EventLoop(std::chrono::nanoseconds spin) : spin_(spin) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) fail("epoll_create1");
  timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (timer_ < 0) fail("timerfd_create");
  watch(timer_, EPOLLIN, [this](uint32_t) {
    uint64_t expirations = 0;
    if (::read(timer_, &expirations, sizeof expirations) < 0 && errno != EAGAIN) fail("read timerfd");
    armed_.reset();
    if (!deadline_ || *deadline_ > time_) ++empty_timer_fires_;
  });
}

EventLoop::~EventLoop() {
  ::close(timer_);
  ::close(epoll_);
}

void EventLoop::arm_timer(Time deadline) {
  if (waiter_ && waiter_->take_timer_fired()) armed_.reset();
  const Time at = deadline + slack_;
  // A timer armed for no later than `at` stays (setting it costs a system call, and a trap on
  // a virtual machine), unless it would fire before the deadline: it would find nothing due,
  // and waking the chip for nothing costs more than setting the timer again. That is what a
  // deadline handled while the chip was awake for traffic leaves behind (an acknowledgement's
  // delay): the next one is later than the timer. Without a slack the timer stays even so: a
  // deadline that moves later with every packet would otherwise set it on every sleep.
  if (armed_ && *armed_ <= at && (*armed_ >= deadline || slack_.count() == 0)) return;
  armed_ = at;
  if (waiter_) {
    waiter_->arm_timer(at);
    return;
  }
  itimerspec spec{};
  spec.it_value = {static_cast<time_t>(at.count() / 1'000'000'000), static_cast<long>(at.count() % 1'000'000'000)};
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;  // (0 disarms)
  if (timerfd_settime(timer_, TFD_TIMER_ABSTIME, &spec, nullptr) != 0) fail("timerfd_settime");
}

EventLoop::Time EventLoop::now() {
  return std::chrono::duration_cast<Time>(std::chrono::steady_clock::now().time_since_epoch());
}

void EventLoop::watch(int fd, uint32_t events, Handler handler) {
  auto w = std::make_unique<Watch>(Watch{std::move(handler)});
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = w.get();
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl add");
  watches_[fd] = std::move(w);
}

void EventLoop::change(int fd, uint32_t events) {
  const auto it = watches_.find(fd);
  if (it == watches_.end()) throw Error("event loop: a descriptor that is not watched cannot change");
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = it->second.get();
  if (epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev) != 0) fail("epoll_ctl mod");
}

void EventLoop::forget(int fd) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  const auto it = watches_.find(fd);
  if (it == watches_.end()) return;
  it->second->live = false;
  retired_.push_back(std::move(it->second));  // it may be the handler running now
  watches_.erase(it);
}

void EventLoop::on_shared_work(std::atomic<uint32_t>* asleep, std::function<bool()> ready,
                               std::function<void()> run) {
  asleep_ = asleep;
  shared_ready_ = std::move(ready);
  shared_run_ = std::move(run);
}

void EventLoop::on_bell(int fd, std::function<void()> empty) {
  empty_bell_ = std::move(empty);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;  // one event per ring, read or not
  ev.data.ptr = nullptr;          // (the bell has no Watch)
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl add");
}

void EventLoop::on_open_output(std::function<bool()> pending, std::function<void()> send) {
  open_output_ = std::move(pending);
  send_open_output_ = std::move(send);
}

void EventLoop::wait_in(Waiter* waiter) {
  waiter_ = waiter;
  armed_.reset();  // the new place to sleep has no timer armed yet
  if (waiter_) waiter_->watch(epoll_);
}

int EventLoop::dispatch(const timespec* timeout) {
  std::array<epoll_event, 64> events;
  const int n = epoll_pwait2(epoll_, events.data(), static_cast<int>(events.size()), timeout, nullptr);
  time_ = now();
  if (n < 0) {
    if (errno == EINTR) return -1;
    fail("epoll_pwait2");
  }
  if (n == 0) return 0;
  last_event_ = time_;
  bool handled = false;
  for (int i = 0; i < n && !stopping_; ++i) {
    auto* w = static_cast<Watch*>(events[static_cast<size_t>(i)].data.ptr);
    if (!w) {
      rang_ = bell_full_ = true;  // the shared work runs next turn
      continue;
    }
    if (w->live) w->handler(events[static_cast<size_t>(i)].events);
    handled = true;
  }
  retired_.clear();
  if (handled && on_batch_end_) on_batch_end_();
  return n;
}

bool EventLoop::wait_for_sources(const timespec* timeout) {
  if (!waiter_) return dispatch(timeout) > 0;  // (dispatch reads the time)
  const bool got = waiter_->wait(timeout);
  time_ = now();
  return got;
}

void EventLoop::run() {
  static constexpr timespec kLook{};
  Time t = time_ = now();
  while (!stopping_) {
    // Shared work runs first, then a deadline that has passed, so that what arrived while the
    // chip was not running (a waiter's completions: acknowledgements, say) is seen before a
    // timeout that it makes moot; descriptors (below) still get their turn under a steady
    // stream of commands.
    bool worked = false;
    if (shared_ready_ && (rang_ || shared_ready_())) {
      shared_run_();
      rang_ = false;
      worked = true;
      t = time_ = now();
      last_event_ = t;
    }
    // A waiter's timer fired: its completion was just handled with the shared work.
    if (waiter_ && waiter_->take_timer_fired()) {
      armed_.reset();
      if (!deadline_ || *deadline_ > t) ++empty_timer_fires_;
    }
    // t may be behind by the time the last handlers took; a deadline is then late by as much.
    if (deadline_ && *deadline_ <= t) {
      // A deadline that passed while the chip did not run (many chips share few cores) is
      // mostly a retransmission timeout whose acknowledgement is already waiting: one look at
      // the sources first (it may move the deadline), then the deadline if it still stands.
      if (!looked_) {
        looked_ = true;
        wait_for_sources(&kLook);
        t = time_;
        continue;
      }
      looked_ = false;
      deadline_.reset();
      if (on_deadline_) on_deadline_(t);
      t = time_ = now();
      continue;
    }
    if (waiter_ && waiter_->take_epoll_ready()) {  // the ring saw the epoll set ready: look
      dispatch(&kLook);
      t = time_;
      continue;
    }
    const bool spinning = spin_.count() > 0 && t - last_event_ < spin_;
    // After work the loop goes round again instead of looking at descriptors: if no more
    // work is found, the wait it then blocks in returns at once for a ready descriptor, so
    // the look would be a system call spent twice. Only a run of kMaxUnlooked turns that all
    // find work looks, so that descriptors are not starved.
    if (worked && !spinning && ++unlooked_ < kMaxUnlooked) continue;
    unlooked_ = 0;
    if (!worked && open_output_ && open_output_()) {
      // One look first: what came meanwhile joins the open output (its handlers run now, or
      // a waiter's completions as shared work next turn); if nothing came, the output goes
      // before the loop sleeps (or spins on: a spinning loop's polls find nothing either).
      if (!wait_for_sources(&kLook)) send_open_output_();
      t = time_;
      continue;
    }
    timespec ts{}, *timeout = nullptr;
    if (worked || spinning) {
      timeout = &ts;  // poll
    } else if (deadline_) {
      arm_timer(*deadline_);  // the wait itself has no timeout: the timer wakes it
    }
    const bool blocking = !worked && !spinning && asleep_ && shared_ready_;
    if (blocking) {
      if (bell_full_ && empty_bell_) {  // (before the last look: see on_bell)
        bell_full_ = false;
        empty_bell_();
      }
      asleep_->store(1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (shared_ready_()) {
        asleep_->store(0, std::memory_order_relaxed);
        continue;
      }
    }
    // A waiter's completions are shared work, and an epoll set it found ready is looked at
    // next turn; without one, the loop's own epoll dispatches (and reads the time).
    const bool got = wait_for_sources(timeout);
    if (blocking) asleep_->store(0, std::memory_order_relaxed);
    t = time_;
    looked_ = false;  // a deadline that passes from here on gets its own look
    if (!got && spinning && !worked) sched_yield();  // let the chip we just sent to run
  }
}

}  // namespace ttemu::process
