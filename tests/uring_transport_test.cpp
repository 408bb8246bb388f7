// The io_uring transport between two rings on the loopback: what a TT-link relies on when
// small sends wait for the chip's next call into the ring, a lone one and large ones go at
// once.
#include "emulator/process/uring_transport.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "emulator/wire/datagram.hpp"
#include "emulator/wire/udp_socket.hpp"

namespace ttemu::process {
namespace {

using namespace std::chrono_literals;

// Datagram i: its index in the first four bytes, then bytes derived from it.
wire::Datagram numbered(uint32_t i, size_t size) {
  wire::Datagram d;
  auto bytes = d.append_owned(size);
  for (size_t k = 0; k < size; ++k) bytes[k] = static_cast<uint8_t>(k < 4 ? i >> (8 * k) : i * 7 + k);
  return d;
}

bool intact(std::span<const uint8_t> bytes, uint32_t& index) {
  if (bytes.size() < 4) return false;
  index = uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24;
  for (size_t k = 4; k < bytes.size(); ++k) {
    if (bytes[k] != static_cast<uint8_t>(index * 7 + k)) return false;
  }
  return true;
}

// Two rings, each with port 0 on the loopback, peers of each other, started.
struct LinkedRings {
  UringTransport a, b;
  LinkedRings() {
    const uint16_t pa = a.add(0, "127.0.0.1");
    const uint16_t pb = b.add(0, "127.0.0.1");
    a.udp(0).set_peer(wire::make_address("127.0.0.1", pb));
    b.udp(0).set_peer(wire::make_address("127.0.0.1", pa));
    a.start();
    b.start();
  }
};

TEST(UringTransport, SmallAndLargeSendsArriveInOrderAndIntactAcrossManyStagedBatches) {
  LinkedRings rings;
  UringTransport &a = rings.a, &b = rings.b;

  // Small datagrams (staged until a's next call into its ring, but for a lone one when nothing
  // is staged, which goes at once), in single sends and in spans of several: first 200 of them
  // between two of a's calls, more than it has staging slots; then with a large one (sent at
  // once) every so often.
  constexpr uint32_t kCount = 400;
  std::vector<size_t> sizes;
  for (uint32_t i = 0; i < kCount; ++i) sizes.push_back(i >= 200 && i % 37 == 5 ? 9000 : 60 + i % 200);
  size_t sent = 0;
  for (uint32_t i = 0; i < kCount;) {
    const uint32_t n = std::min<uint32_t>(1 + i % 5, kCount - i);
    std::vector<wire::Datagram> batch;
    for (uint32_t k = 0; k < n; ++k) batch.push_back(numbered(i + k, sizes[i + k]));
    sent += a.send(0, batch);
    const uint32_t before = i;
    i += n;
    if (before / 200 != i / 200) {
      const timespec look{};
      a.wait(&look);  // what was staged goes out
    }
  }
  ASSERT_EQ(sent, kCount);  // nothing refused: the socket buffers hold all of it
  const timespec look{};
  a.wait(&look);

  std::vector<uint32_t> got;
  size_t bad = 0, dropped = 0, stray = 0;
  const UringTransport::Handlers hb{
      [&](uint8_t, std::span<const uint8_t> bytes) {
        uint32_t index = 0;
        if (intact(bytes, index) && index < kCount && bytes.size() == sizes[index]) {
          got.push_back(index);
        } else {
          ++bad;
        }
      },
      [](uint8_t) {}, [&](uint8_t) { ++stray; }, [&](uint8_t) { ++dropped; }};
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (got.size() + bad < kCount && std::chrono::steady_clock::now() < end) {
    const timespec slice{0, 100'000'000};
    b.wait(&slice);
    b.poll(hb);
  }
  const UringTransport::Handlers ha{[](uint8_t, std::span<const uint8_t>) {}, [](uint8_t) {}, [](uint8_t) {},
                                    [&](uint8_t) { ++dropped; }};
  a.wait(&look);
  a.poll(ha);

  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(stray, 0u);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(got.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], i) << "datagram " << i << " out of order";
}

// A staged send that the kernel refuses (here: to the broadcast address without
// SO_BROADCAST, EACCES) posts a completion although successes post none, and the chip counts
// it as a wire drop, for the TT-link to resend: nothing is lost silently, and the ring goes on.
TEST(UringTransport, AStagedSendTheKernelRefusesIsReportedAsDropped) {
  UringTransport a;
  a.add(0, "127.0.0.1");
  a.udp(0).set_peer(wire::make_address("255.255.255.255", 9));
  a.start();
  std::vector<wire::Datagram> batch;
  for (uint32_t i = 0; i < 3; ++i) batch.push_back(numbered(i, 100));
  ASSERT_EQ(a.send(0, batch), 3u);  // staged: taken, to go out with the next call
  size_t dropped = 0;
  const UringTransport::Handlers h{[](uint8_t, std::span<const uint8_t>) {}, [](uint8_t) {}, [](uint8_t) {},
                                   [&](uint8_t port) { EXPECT_EQ(port, 0); ++dropped; }};
  const auto end = std::chrono::steady_clock::now() + 10s;
  auto until_dropped = [&](size_t n) {
    while (dropped < n && std::chrono::steady_clock::now() < end) {
      const timespec slice{0, 10'000'000};
      a.wait(&slice);  // submits what is staged, and waits for completions
      a.poll(h);
    }
  };
  until_dropped(3);
  EXPECT_EQ(dropped, 3u);
  // The ring is not stuck: the next send (a lone datagram: sent at once, not staged) is
  // refused and reported the same way.
  batch.resize(1);
  ASSERT_EQ(a.send(0, batch), 1u);
  until_dropped(4);
  EXPECT_EQ(dropped, 4u);
  // And staged sends after it, the same.
  batch.push_back(numbered(4, 100));
  ASSERT_EQ(a.send(0, batch), 2u);
  until_dropped(6);
  EXPECT_EQ(dropped, 6u);
}

// A lone small datagram with nothing staged goes at once (the far end gets it before the
// sender's next call into its ring); one sent while others wait staged waits with them and
// arrives after them, in order.
TEST(UringTransport, ALoneSmallDatagramGoesAtOnceAndNeverOvertakesStagedOnes) {
  LinkedRings rings;
  UringTransport &a = rings.a, &b = rings.b;
  std::vector<uint32_t> got;
  const UringTransport::Handlers hb{[&](uint8_t, std::span<const uint8_t> bytes) {
                                      uint32_t index = 0;
                                      if (intact(bytes, index)) got.push_back(index);
                                    },
                                    [](uint8_t) {}, [](uint8_t) {}, [](uint8_t) {}};
  auto receive = [&](size_t n, std::chrono::milliseconds within) {
    const auto end = std::chrono::steady_clock::now() + within;
    while (got.size() < n && std::chrono::steady_clock::now() < end) {
      const timespec slice{0, 10'000'000};
      b.wait(&slice);
      b.poll(hb);
    }
  };
  std::vector<wire::Datagram> one;
  one.push_back(numbered(0, 100));
  ASSERT_EQ(a.send(0, one), 1u);
  receive(1, 10s);  // a makes no call into its ring meanwhile
  ASSERT_EQ(got, std::vector<uint32_t>{0}) << "the lone datagram went at once";
  std::vector<wire::Datagram> two;
  two.push_back(numbered(1, 100));
  two.push_back(numbered(2, 100));
  ASSERT_EQ(a.send(0, two), 2u);  // staged
  one.clear();
  one.push_back(numbered(3, 100));
  ASSERT_EQ(a.send(0, one), 1u);  // staged behind them
  const timespec look{};
  a.wait(&look);  // what was staged goes out
  receive(4, 10s);
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 1, 2, 3}));
}

// The loop's timer moved later (a deadline that moved while the chip slept) is moved in place:
// nothing completes until the new time, so the chip's next wait is not ended for nothing (a
// timer removed and added again posted the old one's cancellation at once), and the timer
// fires once, at the new time, not the old.
TEST(UringTransport, ATimerMovedLaterPostsNothingAndFiresAtItsNewTime) {
  UringTransport t;
  const UringTransport::Handlers h{[](uint8_t, std::span<const uint8_t>) {}, [](uint8_t) {}, [](uint8_t) {}, [](uint8_t) {}};
  const auto start = EventLoop::now();
  t.arm_timer(start + 100ms);
  const timespec look{};
  t.wait(&look);  // the timer is in the ring
  const auto moved_to = start + 1500ms;
  t.arm_timer(moved_to);
  const timespec slice{0, 500'000'000};
  EXPECT_FALSE(t.wait(&slice)) << "a completion came before the timer's new time";
  t.poll(h);
  EXPECT_FALSE(t.take_timer_fired()) << "the timer fired at its old time";
  const auto end = std::chrono::steady_clock::now() + 10s;
  bool fired = false;
  while (!fired && std::chrono::steady_clock::now() < end) {
    t.wait(&slice);
    t.poll(h);
    fired = t.take_timer_fired();
  }
  EXPECT_TRUE(fired);
  EXPECT_GE(EventLoop::now(), moved_to);
}

}  // namespace
}  // namespace ttemu::process
