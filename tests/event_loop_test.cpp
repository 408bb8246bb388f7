// The chip's event loop with real descriptors: what it promises about deadlines, shared work
// and the "about to sleep" flag workers read.
#include "emulator/process/event_loop.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace ttemu::process {
namespace {

using namespace std::chrono_literals;

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() { EXPECT_EQ(::pipe(fd), 0); }
  ~Pipe() { ::close(fd[0]), ::close(fd[1]); }
};

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
  loop.run();
  EXPECT_TRUE(read_it);
  EXPECT_TRUE(deadline);
  EXPECT_EQ(asleep.load(), 0u) << "it never slept: there was always work";
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
    while (asleep.load() == 0) std::this_thread::sleep_for(1ms);
    ready = true;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (asleep.load()) {
      ASSERT_EQ(::write(bell.fd[1], "x", 1), 1);
    }
  });
  loop.run();
  producer.join();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(asleep.load(), 0u) << "awake again after the wake-up";
}

}  // namespace
}  // namespace ttemu::process
