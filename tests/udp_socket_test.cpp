// A link endpoint's UDP socket on the loopback: what a chip's reads and sends rely on, whether
// datagrams go one at a time (a hop on a latency path) or in batches (a stream).
#include "emulator/wire/udp_socket.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "emulator/wire/datagram.hpp"

namespace ttemu::wire {
namespace {

Datagram text(const std::string& s) {
  Datagram d;
  auto bytes = d.append_owned(s.size());
  std::copy(s.begin(), s.end(), bytes.begin());
  return d;
}

std::string text(std::span<const uint8_t> bytes) { return {bytes.begin(), bytes.end()}; }

Address address_of(const UdpSocket& s) { return make_address("127.0.0.1", s.local_port()); }

// (On the loopback a datagram is in the receiver's queue once its send returns: no waiting.)
TEST(UdpSocket, ReadOneAtATimeOrInABatchEveryDatagramArrivesOnceInOrderWithItsSender) {
  UdpSocket a, b;
  a.set_peer(address_of(b));
  b.set_peer(address_of(a));
  const std::vector<Datagram> one{text("first")};
  ASSERT_EQ(a.send(one), 1u);  // a single datagram (sendmsg)
  const std::vector<Datagram> three{text("second"), text("third"), text("fourth")};
  ASSERT_EQ(a.send(three), 3u);  // a batch (sendmmsg)

  auto got = b.receive(/*one=*/true);
  ASSERT_EQ(got.size(), 1u);  // however many wait
  EXPECT_EQ(text(got[0].bytes), "first");
  EXPECT_TRUE(b.accepts(*got[0].from));
  got = b.receive(/*one=*/true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(text(got[0].bytes), "second");
  EXPECT_TRUE(b.accepts(*got[0].from));  // the sender's address is read again for each

  got = b.receive();  // the rest, in one batch
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(text(got[0].bytes), "third");
  EXPECT_EQ(text(got[1].bytes), "fourth");
  EXPECT_TRUE(b.accepts(*got[1].from));
  EXPECT_TRUE(b.receive(true).empty());
  EXPECT_TRUE(b.receive().empty());
}

TEST(UdpSocket, ADatagramReadAloneFromAStrangerIsNotThePeers) {
  UdpSocket a, b, stranger;
  b.set_peer(address_of(a));
  stranger.set_peer(address_of(b));
  ASSERT_EQ(stranger.send(std::vector<Datagram>{text("stray")}), 1u);
  auto got = b.receive(/*one=*/true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(text(got[0].bytes), "stray");
  EXPECT_FALSE(b.accepts(*got[0].from));
  EXPECT_EQ(*got[0].from, address_of(stranger));
}

}  // namespace
}  // namespace ttemu::wire
