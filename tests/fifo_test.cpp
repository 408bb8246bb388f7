// The queue of the routers' buffers and the links' backlogs: first in, first out through
// wrap-arounds and growth, and no allocation once it has been as deep as it gets.
#include "emulator/common/fifo.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace ttemu {
namespace {

TEST(Fifo, KeepsOrderThroughWrapAroundAndGrowth) {
  Fifo<std::unique_ptr<int>> q;  // move-only, as packets are
  int next_in = 0, next_out = 0;
  // Depths that rise and fall, so the head wraps before, while and after the ring grows.
  for (int depth : {3, 7, 2, 9, 30, 1, 17, 64, 0}) {
    while (static_cast<int>(q.size()) < depth) q.push_back(std::make_unique<int>(next_in++));
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(*q[i], next_out + static_cast<int>(i));
    while (static_cast<int>(q.size()) > depth / 2) {
      ASSERT_EQ(*q.front(), next_out++);
      q.pop_front();
    }
  }
  while (!q.empty()) {
    ASSERT_EQ(*q.front(), next_out++);
    q.pop_front();
  }
  EXPECT_EQ(next_out, next_in);
  EXPECT_GT(next_in, 64);
}

TEST(Fifo, StopsAllocatingOnceAsDeepAsItGets) {
  Fifo<std::vector<int>> q;
  for (int i = 0; i < 20; ++i) q.emplace_back(std::vector<int>{i});
  const size_t warm = q.capacity();
  EXPECT_GE(warm, 20u);
  // A steady stream at that depth: push one, pop one, a million times round the ring.
  for (int i = 20; i < 1'000'000; ++i) {
    q.emplace_back(std::vector<int>{i});
    ASSERT_EQ(q.front().at(0), i - 20);
    q.pop_front();
  }
  EXPECT_EQ(q.capacity(), warm) << "the ring grew although it never held more than before";
}

TEST(Fifo, APoppedSlotLetsGoOfWhatItHeld) {
  Fifo<std::shared_ptr<int>> q;
  auto held = std::make_shared<int>(1);
  q.push_back(std::shared_ptr<int>(held));
  EXPECT_EQ(held.use_count(), 2);
  q.pop_front();
  EXPECT_EQ(held.use_count(), 1) << "the queue still owns a popped element";
}

}  // namespace
}  // namespace ttemu
