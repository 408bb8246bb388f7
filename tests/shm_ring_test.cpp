// The shared-memory datagram ring (--transport shm): order, bytes, a full ring, wrap-around,
// and a producer and a consumer on two threads.
#include "emulator/wire/shm_ring.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/eventually.hpp"

namespace ttemu::wire {
namespace {

// Datagram i: its index, then bytes derived from it.
std::vector<uint8_t> datagram_bytes(uint32_t i, size_t size) {
  std::vector<uint8_t> v(std::max<size_t>(size, 4));
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<uint8_t>(i * 31u + k * 7u);
  std::memcpy(v.data(), &i, 4);
  return v;
}

Datagram gathered(const std::vector<uint8_t>& bytes) {
  Datagram d;  // a header piece it owns, the rest borrowed: as a TT-link packs frames
  const size_t head = std::min<size_t>(bytes.size(), 16);
  d.append_copy({bytes.data(), head});
  d.append_borrowed({bytes.data() + head, bytes.size() - head});
  return d;
}

struct Region {
  explicit Region(size_t capacity) : mem(ShmRing::bytes_for(capacity) / 8 + 8) {}
  std::vector<uint64_t> mem;  // 8-byte aligned; the header wants 64 (aligned())
  void* aligned() {
    auto p = reinterpret_cast<uintptr_t>(mem.data());
    return reinterpret_cast<void*>((p + 63) & ~uintptr_t{63});
  }
};

TEST(ShmRing, DatagramsComeOutInOrderAndBitExactAcrossManyWraps) {
  Region r(1 << 16);
  ShmRing producer = ShmRing::create(r.aligned(), 1 << 16);
  ShmRing consumer = ShmRing::attach(r.aligned(), ShmRing::bytes_for(1 << 16));
  std::mt19937 rng(5);
  uint32_t sent = 0, got = 0;
  std::vector<size_t> sizes;
  while (got < 5000) {
    for (int k = 0; k < 8; ++k) {
      const size_t size = std::uniform_int_distribution<size_t>(1, 9000)(rng);
      if (!producer.push(gathered(datagram_bytes(sent, size)))) break;
      sizes.push_back(size);
      ++sent;
    }
    consumer.consume(5, [&](std::span<const uint8_t> b) {
      const auto want = datagram_bytes(got, sizes[got]);
      ASSERT_EQ(b.size(), want.size()) << "datagram " << got;
      ASSERT_EQ(std::memcmp(b.data(), want.data(), b.size()), 0) << "datagram " << got;
      ++got;
    });
  }
  EXPECT_GT(sent, 5000u - 8u);
  EXPECT_EQ(consumer.corrupt(), 0u);
}

TEST(ShmRing, AFullRingRefusesADatagramAndTakesItOnceRoomIsMade) {
  Region r(4096);
  ShmRing ring = ShmRing::create(r.aligned(), 4096);
  const auto big = datagram_bytes(0, 1500);
  int taken = 0;
  while (ring.push(gathered(big))) ++taken;
  EXPECT_EQ(taken, 2) << "1512 bytes each, 4096 in all";
  EXPECT_FALSE(ring.push(gathered(big)));
  EXPECT_EQ(ring.consume(1, [](std::span<const uint8_t>) {}), 1u);
  EXPECT_TRUE(ring.push(gathered(big))) << "room again, past the end of the ring (a pad record)";
  size_t n = ring.consume(10, [&](std::span<const uint8_t> b) { EXPECT_EQ(b.size(), big.size()); });
  EXPECT_EQ(n, 2u);
  EXPECT_TRUE(ring.empty());
  EXPECT_FALSE(ring.push(gathered(datagram_bytes(0, 5000)))) << "larger than the ring";
}

// A record header that cannot be one (scribbled over by a crashed or foreign writer) never
// becomes a datagram: what is published is dropped and counted, and the ring goes on.
TEST(ShmRing, ARecordThatCannotBeOneIsDroppedAndCountedAndTheRingGoesOn) {
  Region r(4096);
  ShmRing ring = ShmRing::create(r.aligned(), 4096);
  ASSERT_TRUE(ring.push(gathered(datagram_bytes(0, 100))));
  // The first record's length, just past the 192-byte header: far beyond the ring.
  const uint32_t huge = 1u << 30;
  std::memcpy(static_cast<uint8_t*>(r.aligned()) + 192, &huge, sizeof huge);
  size_t delivered = 0;
  EXPECT_EQ(ring.consume(10, [&](std::span<const uint8_t>) { ++delivered; }), 0u);
  EXPECT_EQ(delivered, 0u);
  EXPECT_EQ(ring.corrupt(), 1u);
  EXPECT_TRUE(ring.empty());
  ASSERT_TRUE(ring.push(gathered(datagram_bytes(1, 100))));
  EXPECT_EQ(ring.consume(10, [&](std::span<const uint8_t> b) { EXPECT_EQ(b.size(), 100u); }), 1u);
}

// A ring sized for a whole window of the largest frames (16 MiB) whose consumer keeps up stays
// in its first pages: every lap would otherwise touch cold memory (and fault it in first).
TEST(ShmRing, ARingWhoseConsumerKeepsUpReusesItsFirstPages) {
  constexpr size_t kCap = size_t{16} << 20;
  Region r(kCap);
  ShmRing ring = ShmRing::create(r.aligned(), kCap);
  const auto* data = static_cast<const uint8_t*>(r.aligned()) + 192;
  size_t furthest = 0, got = 0;
  for (uint32_t i = 0; i < 2000; ++i) {  // 120 MB through the ring: seven laps if it streamed
    const auto bytes = datagram_bytes(i, 60000);
    ASSERT_TRUE(ring.push(gathered(bytes)));
    if (i % 3 != 2) continue;  // the consumer takes three at a time
    ring.consume(3, [&](std::span<const uint8_t> b) {
      furthest = std::max(furthest, static_cast<size_t>(b.data() + b.size() - data));
      ASSERT_EQ(b.size(), 60000u);
      uint32_t index = 0;
      std::memcpy(&index, b.data(), 4);
      ASSERT_EQ(index, got++);
    });
  }
  EXPECT_EQ(got, 1998u);
  EXPECT_LT(furthest, size_t{512} << 10) << "the ring streamed on instead of going back to its start";
  // A consumer that falls behind still has the whole capacity: nothing is refused.
  for (uint32_t i = 0; i < 200; ++i) ASSERT_TRUE(ring.push(gathered(datagram_bytes(i, 60000)))) << i;
  EXPECT_EQ(ring.consume(1000, [](std::span<const uint8_t>) {}), 202u);
}

TEST(ShmRing, AttachRefusesMemoryThatIsNotARing) {
  std::vector<uint64_t> mem(1024, 0);
  EXPECT_THROW(ShmRing::attach(mem.data(), mem.size() * 8), std::runtime_error);
}

TEST(ShmRing, AProducerAndAConsumerOnTwoThreadsLoseAndReorderNothing) {
  Region r(1 << 14);
  ShmRing producer = ShmRing::create(r.aligned(), 1 << 14);
  ShmRing consumer = ShmRing::attach(r.aligned(), ShmRing::bytes_for(1 << 14));
  constexpr uint32_t kCount = 200000;
  std::atomic<bool> failed{false};
  std::thread t([&] {
    for (uint32_t i = 0; i < kCount && !failed;) {
      if (producer.push(gathered(datagram_bytes(i, 20 + i % 700)))) ++i;
      else std::this_thread::yield();
    }
  });
  uint32_t got = 0;
  const bool done = test::eventually([&] {
    consumer.consume(64, [&](std::span<const uint8_t> b) {
      const auto want = datagram_bytes(got, 20 + got % 700);
      if (b.size() != want.size() || std::memcmp(b.data(), want.data(), b.size()) != 0) failed = true;
      ++got;
    });
    return got == kCount || failed;
  }, std::chrono::seconds(60));
  failed = failed || !done;
  t.join();
  EXPECT_FALSE(failed) << "at datagram " << got;
  EXPECT_EQ(got, kCount);
}

}  // namespace
}  // namespace ttemu::wire
