// The chip's event loop with real descriptors: what it promises about deadlines, shared work
// and the "about to sleep" flag workers read.
#include "emulator/process/event_loop.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "emulator/chip/doorbell.hpp"
#include "emulator/job/job.hpp"
#include "tests/eventually.hpp"

namespace ttemu::process {
namespace {

using namespace std::chrono_literals;
using test::eventually;

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe(fd), 0); }
  ~Pipe() { ::close(fd[0]), ::close(fd[1]); }
};

// A deadline for a loop's run(): if the test has not called off() within `limit`, a thread
// writes to a pipe the loop watches, and the loop's handler fails the test and stops the loop.
// A loop blocked waiting for a wake-up that never comes then ends, failed, instead of hanging.
class Watchdog {
 public:
  Watchdog(EventLoop& loop, std::chrono::milliseconds limit) : loop_(loop) {
    loop.watch(pipe_.fd[0], EPOLLIN, [this, &loop, limit](uint32_t) {
      char c;
      EXPECT_EQ(::read(pipe_.fd[0], &c, 1), 1);
      ADD_FAILURE() << "the loop was still running after " << limit.count() << " ms";
      loop.stop();
    });
    thread_ = std::thread([this, limit] {
      std::unique_lock lock(mutex_);
      if (!cv_.wait_for(lock, limit, [this] { return off_; })) {
        EXPECT_EQ(::write(pipe_.fd[1], "x", 1), 1);
      }
    });
  }
  ~Watchdog() {
    off();
    loop_.forget(pipe_.fd[0]);
  }
  void off() {
    {
      std::lock_guard lock(mutex_);
      off_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  EventLoop& loop_;
  Pipe pipe_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool off_ = false;
  std::thread thread_;
};

// Runs the loop until it stops, or fails the test and stops it after `limit`.
void run_at_most(EventLoop& loop, std::chrono::milliseconds limit) {
  Watchdog watchdog(loop, limit);
  loop.run();
}

TEST(EventLoop, SharedWorkThatNeverEndsStillLetsDescriptorsAndDeadlinesIn) {
  EventLoop loop;
  Pipe p;
  ASSERT_EQ(::write(p.fd[1], "x", 1), 1);
  std::atomic<uint32_t> asleep{0};
  int runs = 0;
  bool read_it = false, deadline = false;
  loop.watch(p.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(p.fd[0], &c, 1), 1);
    read_it = true;
  });
  loop.set_deadline(EventLoop::now() + 1ms);
  loop.on_deadline([&](EventLoop::Time) { deadline = true; });
  // A producer that always has something (a worker submitting in a tight loop).
  loop.on_shared_work(&asleep, [] { return true; }, [&] {
    ++runs;
    if (read_it && deadline) loop.stop();
    if (runs == 1'000'000) {
      ADD_FAILURE() << "descriptors and deadlines starved";
      loop.stop();
    }
  });
  run_at_most(loop, 10s);
  EXPECT_TRUE(read_it);
  EXPECT_TRUE(deadline);
  EXPECT_EQ(asleep.load(), 0u) << "it never slept: there was always work";
}

// A chip forgets a descriptor from its own handler (a watched worker process that ended): the
// handler finishes with what it captured intact, is not called again although its descriptor
// stays readable, and the loop goes on serving the others.
TEST(EventLoop, AHandlerCanForgetItsOwnDescriptor) {
  EventLoop loop;
  Pipe ended, other;
  ASSERT_EQ(::write(ended.fd[1], "x", 1), 1);  // never read: it stays readable
  std::vector<std::string> calls;
  const std::string name(64, 'w');  // too large to be stored inside the handler's std::function
  loop.watch(ended.fd[0], EPOLLIN, [&loop, &calls, &ended, &other, name](uint32_t) {
    loop.forget(ended.fd[0]);
    calls.push_back(name);  // the handler's own capture, read after the forget
    EXPECT_EQ(::write(other.fd[1], "y", 1), 1);
  });
  loop.watch(other.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(other.fd[0], &c, 1), 1);
    calls.push_back("other");
    loop.stop();
  });
  run_at_most(loop, 10s);
  EXPECT_EQ(calls, (std::vector<std::string>{name, "other"}));
}

TEST(EventLoop, SaysItSleepsOnlyWhileBlockedAndIsWokenThroughADescriptor) {
  EventLoop loop;
  Pipe bell;
  std::atomic<uint32_t> asleep{0};
  std::atomic<bool> ready{false};
  int runs = 0;
  loop.watch(bell.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(bell.fd[0], &c, 1), 1);
  });
  loop.on_shared_work(&asleep, [&] { return ready.load(); }, [&] {
    ready = false;
    if (++runs == 1) loop.stop();
  });
  // A producer thread: waits until the loop says it sleeps, publishes, then rings.
  std::thread producer([&] {
    if (!eventually([&] { return asleep.load() != 0; }, 10s)) {
      ADD_FAILURE() << "the loop never said it sleeps";
      return;  // the watchdog ends the loop
    }
    ready = true;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (asleep.load()) {
      ASSERT_EQ(::write(bell.fd[1], "x", 1), 1);
    }
  });
  // Woken through the bell, or not at all: the watchdog fails the test after 10 s.
  run_at_most(loop, 10s);
  producer.join();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(asleep.load(), 0u) << "awake again after the wake-up";
}

// The chip's doorbell as the bell: a ring runs the shared work even when `ready` had nothing to
// say (a worker's ring is a reason to look), and every ring is read before the loop sleeps. A
// doorbell holds at most eleven rings (one more than net.unix.max_dgram_qlen): one left full
// refuses the next ring, and a loop that sleeps then is never woken.
void bell(EventLoop::Waiter* waiter) {
  EventLoop loop;
  loop.wait_in(waiter);
  const auto job = job::JobId::create();
  chip::DoorbellListener listener(job, {0, 7});
  chip::DoorbellRinger ringer(job, {0, 7});
  std::atomic<uint32_t> asleep{0};
  std::atomic<int> published{0}, rung_runs{0}, read{0};
  int seen = 0;
  loop.on_bell(listener.fd(), [&] { read += listener.drain(); });
  loop.on_shared_work(&asleep, [&] { return published.load() != seen; }, [&] {
    if (loop.rang()) ++rung_runs;
    seen = published.load();
    if (seen == 1) loop.stop();
  });
  std::thread producer([&] {
    // Twice: more rings than the doorbell holds, without work, to a sleeping loop; the loop
    // wakes, runs the shared work, and reads every ring before it sleeps again.
    int sent = 0;
    for (int round = 0; round < 2; ++round) {
      if (!eventually([&] { return asleep.load() != 0; }, 10s)) return ADD_FAILURE() << "the loop never slept";
      for (int i = 0; i < 20; ++i) sent += ringer.ring() ? 1 : 0;
      if (!eventually([&] { return read.load() == sent && asleep.load() != 0; }, 10s)) {
        return ADD_FAILURE() << "round " << round << ": " << read.load() << " of " << sent << " rings read, asleep "
                             << asleep.load();
      }
    }
    EXPECT_GE(rung_runs.load(), 2) << "each round's rings ran the shared work";
    // Then work, published and rung as a worker does.
    published = 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (chip::should_ring(asleep)) ringer.ring();
  });
  run_at_most(loop, 10s);
  producer.join();
  loop.wait_in(nullptr);
  EXPECT_EQ(seen, 1) << "the work published with the last ring was done";
}

// A chip that did not run for a while (many chips share few cores) finds its retransmission
// deadline passed and the acknowledgement that makes it moot already in its socket. What has
// arrived is handled first: the acknowledgement moves the deadline, and the old one never fires
// (it fired first, and a clean Galaxy run counted hundreds of timeouts, five times as many over
// io_uring, each resending frames the peer had).
TEST(EventLoop, WhatHasArrivedIsHandledBeforeADeadlineThatPassedMeanwhile) {
  EventLoop loop;
  Pipe ack;
  std::atomic<uint32_t> asleep{0};
  bool busy = true, acknowledged = false;
  std::vector<bool> fired_after_ack;
  loop.watch(ack.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(ack.fd[0], &c, 1), 1);
    acknowledged = true;
    loop.set_deadline(EventLoop::now() + 5ms);  // progress: the timeout starts again
  });
  loop.on_deadline([&](EventLoop::Time) {
    fired_after_ack.push_back(acknowledged);
    loop.stop();
  });
  // One turn of work during which the deadline passes and the acknowledgement arrives.
  loop.on_shared_work(&asleep, [&] { return busy; }, [&] {
    busy = false;
    loop.set_deadline(EventLoop::now());
    ASSERT_EQ(::write(ack.fd[1], "x", 1), 1);
  });
  run_at_most(loop, 10s);
  ASSERT_EQ(fired_after_ack.size(), 1u);
  EXPECT_TRUE(fired_after_ack[0]) << "the deadline fired before the acknowledgement waiting for the loop was read";
}

// A waiter like the io_uring transport, minus the ring: it sleeps in poll(2) on the loop's
// epoll descriptor and counts its waits.
class PollWaiter final : public EventLoop::Waiter {
 public:
  void watch(int epoll_fd) override { fd_ = epoll_fd; }
  bool wait(const timespec* timeout) override {
    ++waits;
    pollfd p{fd_, POLLIN, 0};
    int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + timeout->tv_nsec / 1'000'000) : -1;
    if (timer_) {  // rounded up: a timer never ends the wait early
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*timer_ - EventLoop::now()).count();
      const int to_timer = static_cast<int>(std::max<int64_t>(left, 0));
      ms = ms < 0 ? to_timer : std::min(ms, to_timer);
    }
    if (::poll(&p, 1, ms) == 1) ready_ = true;
    if (timer_ && *timer_ <= EventLoop::now()) {
      timer_.reset();
      fired_ = true;
    }
    return false;  // no completions of its own
  }
  bool take_epoll_ready() override { return std::exchange(ready_, false); }
  void arm_timer(std::chrono::nanoseconds at) override {
    timer_ = at;
    fired_ = false;
  }
  bool take_timer_fired() override { return std::exchange(fired_, false); }
  int waits = 0;

 private:
  int fd_ = -1;
  bool ready_ = false;
  std::optional<std::chrono::nanoseconds> timer_;
  bool fired_ = false;
};

TEST(EventLoop, WithAWaiterItSleepsThereAndStillServesDescriptorsDeadlinesAndEndlessWork) {
  EventLoop loop;
  PollWaiter waiter;
  loop.wait_in(&waiter);
  Pipe p;
  std::atomic<uint32_t> asleep{0};
  bool read_it = false, deadline = false;
  int runs = 0;
  loop.watch(p.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(p.fd[0], &c, 1), 1);
    read_it = true;
  });
  loop.on_deadline([&](EventLoop::Time) { deadline = true; });
  // First idle: the loop must sleep in the waiter until the pipe is written.
  std::atomic<bool> endless{false};
  loop.on_shared_work(&asleep, [&] { return endless.load(); }, [&] {
    ++runs;
    if (read_it && deadline) loop.stop();
    if (runs == 1'000'000) {
      ADD_FAILURE() << "descriptors and deadlines starved";
      loop.stop();
    }
  });
  std::thread writer([&] {
    if (!eventually([&] { return asleep.load() != 0; }, 10s)) ADD_FAILURE() << "the loop never slept";
    ASSERT_EQ(::write(p.fd[1], "x", 1), 1);
  });
  // Once the pipe is read, work never ends and a deadline is due: both must still get in.
  loop.on_batch_end([&] {
    if (read_it && !endless) {
      endless = true;
      loop.set_deadline(EventLoop::now() + 1ms);
    }
  });
  run_at_most(loop, 10s);
  writer.join();
  EXPECT_TRUE(read_it);
  EXPECT_TRUE(deadline);
  EXPECT_GT(waiter.waits, 0) << "it never waited in the waiter";
  loop.wait_in(nullptr);
}

// The timer stays armed across waits and is armed again only for an earlier deadline (or, with
// a slack, one it would fire before): a deadline moved later must not fire when the timer
// armed for the old one does, and one moved earlier than the armed timer must fire at its own
// time, not the timer's.
void deadline_moved_later_then_earlier(EventLoop::Waiter* waiter) {
  EventLoop loop;
  loop.wait_in(waiter);
  Pipe p;
  std::atomic<uint32_t> asleep{0};
  loop.on_shared_work(&asleep, [] { return false; }, [] {});
  std::atomic<int> phase{0};  // 0: first deadline armed; 1: moved later; 2: far one armed; 3: moved earlier
  EventLoop::Time later_at{}, earlier_at{};
  std::vector<EventLoop::Time> fired;
  loop.watch(p.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(p.fd[0], &c, 1), 1);
    if (c == 'L') {
      later_at = loop.time() + 150ms;
      loop.set_deadline(later_at);
      phase = 1;
    } else {
      earlier_at = loop.time() + 20ms;
      loop.set_deadline(earlier_at);
      phase = 3;
    }
  });
  loop.on_deadline([&](EventLoop::Time t) {
    fired.push_back(t);
    if (phase == 1) {
      loop.set_deadline(t + 60s);  // armed when the loop next sleeps; moved earlier below
      phase = 2;
    } else {
      loop.stop();
    }
  });
  loop.set_deadline(EventLoop::now() + 30ms);
  std::thread writer([&] {
    if (!eventually([&] { return asleep.load() != 0; }, 10s)) ADD_FAILURE() << "the loop never slept";
    ASSERT_EQ(::write(p.fd[1], "L", 1), 1);
    if (!eventually([&] { return phase.load() == 2 && asleep.load() != 0; }, 10s)) ADD_FAILURE() << "no far deadline";
    ASSERT_EQ(::write(p.fd[1], "E", 1), 1);
  });
  run_at_most(loop, 20s);
  writer.join();
  loop.wait_in(nullptr);
  ASSERT_EQ(fired.size(), 2u) << "a deadline fired that no longer stood, or one never fired";
  EXPECT_GE(fired[0], later_at) << "the deadline moved later fired when the old one would have";
  EXPECT_GE(fired[1], earlier_at);
  EXPECT_LT(fired[1], earlier_at + 10s) << "the deadline moved earlier waited for the timer armed before";
}

TEST(EventLoop, ADeadlineMovedLaterDoesNotFireEarlyAndOneMovedEarlierFiresOnTime) {
  deadline_moved_later_then_earlier(nullptr);
}

TEST(EventLoop, WithAWaiterADeadlineMovedLaterDoesNotFireEarlyAndOneMovedEarlierFiresOnTime) {
  PollWaiter waiter;
  deadline_moved_later_then_earlier(&waiter);
}

// With a timer slack, a deadline rides on a wake-up that comes anyway: one that passed while
// the loop slept is handled when a descriptor wakes it, not by a timer of its own. A loop that
// nothing else wakes is still woken for its deadline, by the timer, the slack after it.
void deadline_with_slack(EventLoop::Waiter* waiter) {
  EventLoop loop;
  loop.wait_in(waiter);
  loop.set_timer_slack(60s);  // phase 0: the timer cannot be what serves the deadline
  Pipe p;
  std::atomic<uint32_t> asleep{0};
  loop.on_shared_work(&asleep, [] { return false; }, [] {});
  std::atomic<int> phase{0};
  EventLoop::Time first_at = EventLoop::now() + 20ms, second_at{};
  std::atomic<int64_t> written_at{0};
  bool woken = false;
  std::vector<EventLoop::Time> fired;
  loop.watch(p.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(p.fd[0], &c, 1), 1);
    woken = true;
  });
  loop.on_deadline([&](EventLoop::Time t) {
    fired.push_back(t);
    if (phase == 0) {
      loop.set_timer_slack(30ms);
      second_at = t + 1ms;
      loop.set_deadline(second_at);  // nothing else will wake the loop for it
      phase = 1;
    } else {
      loop.stop();
    }
  });
  loop.set_deadline(first_at);
  std::thread writer([&] {
    // Well after the deadline, with the loop asleep: a timer without the slack would have
    // served it by now.
    if (!eventually([&] { return EventLoop::now() >= first_at + 50ms && asleep.load() != 0; }, 10s)) {
      ADD_FAILURE() << "the loop never slept";
    }
    written_at = EventLoop::now().count();
    ASSERT_EQ(::write(p.fd[1], "w", 1), 1);
  });
  run_at_most(loop, 20s);
  writer.join();
  loop.wait_in(nullptr);
  ASSERT_EQ(fired.size(), 2u) << "a deadline was never served";
  EXPECT_GE(fired[0].count(), written_at.load()) << "the passed deadline was served by a timer of its own, not by the wake-up";
  EXPECT_TRUE(woken) << "the descriptor's wake-up was never handled";
  EXPECT_GE(fired[1], second_at + 30ms) << "a sleeping loop was woken for a deadline before its slack";
}

TEST(EventLoop, ADeadlineWithSlackRidesOnAWakeUpThatComesAnywayAndASleepingLoopIsStillWokenForIt) {
  deadline_with_slack(nullptr);
}

TEST(EventLoop, WithAWaiterADeadlineWithSlackRidesOnAWakeUpThatComesAnywayAndASleepingLoopIsStillWokenForIt) {
  PollWaiter waiter;
  deadline_with_slack(&waiter);
}

// A deadline moved later while the loop was awake anyway (as a chip that sends a held
// acknowledgement along with traffic moves its next one) leaves the timer armed for a time
// before the new deadline: the loop sets it again rather than be woken for nothing (on a 6-hop
// route such fires woke each one-way chip 0.18 times per round trip, a sixth of its wake-ups).
void moved_past_its_timer(EventLoop::Waiter* waiter) {
  EventLoop loop;
  loop.wait_in(waiter);
  loop.set_timer_slack(10ms);
  Pipe p;
  std::atomic<uint32_t> asleep{0};
  loop.on_shared_work(&asleep, [] { return false; }, [] {});
  const EventLoop::Time first = EventLoop::now() + 1s, later = first + 300ms;
  bool moved = false;
  std::vector<EventLoop::Time> fired;
  loop.watch(p.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(p.fd[0], &c, 1), 1);
    moved = EventLoop::now() < first;  // (else the test proves nothing: see below)
    loop.set_deadline(later);
  });
  loop.on_deadline([&](EventLoop::Time t) {
    fired.push_back(t);
    loop.stop();
  });
  loop.set_deadline(first);
  std::thread writer([&] {
    // Asleep, with the timer armed for the first deadline: traffic moves it later.
    if (!eventually([&] { return asleep.load() != 0; }, 10s)) ADD_FAILURE() << "the loop never slept";
    ASSERT_EQ(::write(p.fd[1], "w", 1), 1);
  });
  run_at_most(loop, 20s);
  writer.join();
  loop.wait_in(nullptr);
  ASSERT_TRUE(moved) << "the writer came after the first deadline (a second late)";
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_GE(fired[0], later) << "the deadline was served before it was due";
  EXPECT_EQ(loop.empty_timer_fires(), 0u) << "the timer woke the loop with nothing due";
}

TEST(EventLoop, ADeadlineMovedPastItsTimerSetsTheTimerAgainInsteadOfWakingForNothing) {
  moved_past_its_timer(nullptr);
}

TEST(EventLoop, WithAWaiterADeadlineMovedPastItsTimerSetsTheTimerAgainInsteadOfWakingForNothing) {
  PollWaiter waiter;
  moved_past_its_timer(&waiter);
}

TEST(EventLoop, TheBellRunsTheSharedWorkAndIsEmptiedBeforeTheLoopSleeps) { bell(nullptr); }

TEST(EventLoop, WithAWaiterTheBellRunsTheSharedWorkAndIsEmptiedBeforeTheLoopSleeps) {
  PollWaiter waiter;
  bell(&waiter);
}

// A chip that keeps output open for more input (fuller datagrams): before the loop would
// sleep it looks once more, so input that came meanwhile is handled first, and the output
// goes once nothing more has come, before the loop sleeps.
// (And a loop that spins after traffic sends it as soon as a look finds nothing, not when
// the spin ends.)
class OpenOutput : public ::testing::TestWithParam<std::chrono::nanoseconds> {};

TEST_P(OpenOutput, WaitsForInputThatCameMeanwhileAndGoesBeforeTheLoopSleeps) {
  EventLoop loop(GetParam());
  Pipe p;
  ASSERT_EQ(::write(p.fd[1], "x", 1), 1);
  std::vector<std::string> calls;
  bool open = false;
  loop.watch(p.fd[0], EPOLLIN, [&](uint32_t) {
    char c;
    ASSERT_EQ(::read(p.fd[0], &c, 1), 1);
    calls.push_back("read");
    if (calls.size() == 1) {
      EXPECT_EQ(::write(p.fd[1], "y", 1), 1);  // more arrives meanwhile
    }
    open = true;
  });
  loop.on_open_output([&] { return open; },
                      [&] {
                        calls.push_back("send");
                        open = false;
                        // Sent before the loop sleeps: the next wait would block for good.
                        loop.set_deadline(EventLoop::now() + 1ms);
                      });
  loop.on_deadline([&](EventLoop::Time) {
    calls.push_back("deadline");
    loop.stop();
  });
  const auto start = std::chrono::steady_clock::now();
  run_at_most(loop, 60s);
  EXPECT_EQ(calls, (std::vector<std::string>{"read", "read", "send", "deadline"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "sent when the look found nothing";
}

INSTANTIATE_TEST_SUITE_P(EventLoop, OpenOutput, ::testing::Values(std::chrono::nanoseconds{0}, std::chrono::nanoseconds{30s}),
                         [](const auto& p) { return p.param.count() == 0 ? std::string("Sleeping") : std::string("Spinning"); });

}  // namespace
}  // namespace ttemu::process
