// The fabric node status queue (spec 1.1.2.1): order, overwriting the oldest when the control
// plane falls behind (counted, never blocking), and a producer and a consumer running at once.
#include "emulator/chip/status_queue.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

namespace ttemu::chip {
namespace {

StatusEntry numbered(uint64_t i) {
  StatusEntry e;
  e.kind = StatusKind::kDropped;
  e.packet_id = i;
  e.time_ns = static_cast<int64_t>(i * 3);
  return e;
}

std::vector<uint64_t> drain_ids(StatusQueue& q, uint64_t& lost) {
  std::vector<uint64_t> ids;
  lost = q.drain([&](const StatusEntry& e) {
    EXPECT_EQ(static_cast<uint64_t>(e.time_ns), e.packet_id * 3) << "an entry arrives whole";
    ids.push_back(e.packet_id);
  });
  return ids;
}

TEST(StatusQueue, EntriesComeOutInOrderEachOnce) {
  auto q = std::make_unique<StatusQueue>();
  uint64_t lost = 0;
  EXPECT_TRUE(drain_ids(*q, lost).empty());
  for (uint64_t i = 0; i < 10; ++i) q->push(numbered(i));
  EXPECT_EQ(drain_ids(*q, lost), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(lost, 0u);
  EXPECT_TRUE(drain_ids(*q, lost).empty()) << "nothing twice";
  q->push(numbered(10));
  EXPECT_EQ(drain_ids(*q, lost), (std::vector<uint64_t>{10}));
}

TEST(StatusQueue, AFullQueueLosesTheOldestAndCountsThem) {
  auto q = std::make_unique<StatusQueue>();
  const uint64_t n = StatusQueue::kSlots + 100;
  for (uint64_t i = 0; i < n; ++i) q->push(numbered(i));  // never blocks
  uint64_t lost = 0;
  const auto ids = drain_ids(*q, lost);
  EXPECT_EQ(lost, 100u);
  EXPECT_EQ(q->lost(), 100u);
  ASSERT_EQ(ids.size(), StatusQueue::kSlots);
  EXPECT_EQ(ids.front(), 100u) << "the newest are kept";
  EXPECT_EQ(ids.back(), n - 1);
}

TEST(StatusQueue, TheProducerHearsOfADrainOncePerDrain) {
  auto q = std::make_unique<StatusQueue>();
  q->push(numbered(0));
  EXPECT_TRUE(q->drained_before()) << "the first push after a drain tells the consumer";
  q->push(numbered(1));
  EXPECT_FALSE(q->drained_before()) << "later pushes do not";
  uint64_t lost = 0;
  drain_ids(*q, lost);
  q->push(numbered(2));
  EXPECT_TRUE(q->drained_before());
}

// A chip pushes while the control plane drains, on two threads: whatever the interleaving,
// every entry is either delivered, in order and whole, or counted lost.
TEST(StatusQueue, AConcurrentProducerAndConsumerLoseNothingUncounted) {
  auto q = std::make_unique<StatusQueue>();
  constexpr uint64_t kEntries = 2'000'000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kEntries; ++i) q->push(numbered(i));
  });
  uint64_t seen = 0, lost = 0, last = 0;
  bool first = true, ordered = true;
  auto take = [&] {
    lost += q->drain([&](const StatusEntry& e) {
      if (static_cast<uint64_t>(e.time_ns) != e.packet_id * 3 || (!first && e.packet_id <= last)) ordered = false;
      first = false;
      last = e.packet_id;
      ++seen;
    });
  };
  while (q->pushed() < kEntries) take();
  producer.join();
  take();
  EXPECT_TRUE(ordered);
  EXPECT_EQ(seen + lost, kEntries);
  EXPECT_GT(seen, 0u);
}

}  // namespace
}  // namespace ttemu::chip
