// A link endpoint's UDP socket on the loopback: what a chip's reads and sends rely on, whether
// datagrams go one at a time (a hop on a latency path) or in batches (a stream).
#include "emulator/wire/udp_socket.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <utility>
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

// Reads until the socket is seen empty: what came before a connection is then behind it.
void drain(UdpSocket& s) {
  while (!s.receive().empty()) {
  }
}

// Two sockets, each the other's peer, with what the connection left behind read.
void pair_up(UdpSocket& a, UdpSocket& b) {
  a.set_peer(address_of(b));
  b.set_peer(address_of(a));
  drain(a);
  drain(b);
}

TEST(UdpSocket, ReadOneAtATimeOrInABatchEveryDatagramArrivesOnceInOrderWithItsSender) {
  UdpSocket a, b;
  pair_up(a, b);
  ASSERT_TRUE(a.connected() && b.connected());
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
  EXPECT_TRUE(b.accepts(*got[0].from));

  got = b.receive();  // the rest, in one batch
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(text(got[0].bytes), "third");
  EXPECT_EQ(text(got[1].bytes), "fourth");
  EXPECT_TRUE(b.accepts(*got[1].from));
  EXPECT_TRUE(b.receive(true).empty());
  EXPECT_TRUE(b.receive().empty());
}

// A connected socket takes its peer's datagrams only: a stranger's go to the twin, where they
// are read with the stranger's name, and nothing of them reaches the link's own reads.
TEST(UdpSocket, AStrangersDatagramGoesToTheTwinWithItsName) {
  UdpSocket a, b, stranger;
  pair_up(a, b);
  ASSERT_GE(b.strays_fd(), 0);
  stranger.set_peer(address_of(b));
  ASSERT_EQ(stranger.send(std::vector<Datagram>{text("stray")}), 1u);
  ASSERT_EQ(a.send(std::vector<Datagram>{text("peer")}), 1u);

  auto got = b.receive(/*one=*/true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(text(got[0].bytes), "peer");
  EXPECT_TRUE(b.accepts(*got[0].from));
  EXPECT_TRUE(b.receive(true).empty());

  const auto stray = b.receive_stray();
  ASSERT_TRUE(stray.has_value());
  EXPECT_EQ(text(stray->bytes), "stray");
  EXPECT_FALSE(b.accepts(*stray->from));
  EXPECT_EQ(*stray->from, address_of(stranger));
  EXPECT_FALSE(b.receive_stray().has_value());
}

// What waited in the socket before it was connected, or connected again to a restarted peer,
// may be anyone's: it is read with its sender's name, never taken for the new peer's.
TEST(UdpSocket, DatagramsFromBeforeAConnectionAreToldFromThePeers) {
  UdpSocket a, b, c;
  pair_up(a, b);
  c.set_peer(address_of(b));
  ASSERT_EQ(a.send(std::vector<Datagram>{text("old peer")}), 1u);
  b.set_peer(address_of(c));  // a restarted elsewhere: c now
  ASSERT_EQ(c.send(std::vector<Datagram>{text("new peer")}), 1u);

  std::vector<std::pair<std::string, bool>> seen;  // read one at a time, as a quiet hop does
  for (int i = 0; i < 4; ++i) {
    for (const auto& d : b.receive(/*one=*/true)) seen.emplace_back(text(d.bytes), b.accepts(*d.from));
  }
  const std::vector<std::pair<std::string, bool>> want{{"old peer", false}, {"new peer", true}};
  EXPECT_EQ(seen, want);
}

// A lazy datagram goes to the peer's inbox by name, past the connection; the rest to the peer.
TEST(UdpSocket, ALazyDatagramGoesToThePeersInboxTheRestToThePeer) {
  UdpSocket a, b, inbox;
  pair_up(a, b);
  a.set_inbox(address_of(inbox));
  std::vector<Datagram> two{text("lazy"), text("urgent")};
  two[0].lazy = true;
  ASSERT_EQ(a.send(two), 2u);
  auto got = inbox.receive();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(text(got[0].bytes), "lazy");
  EXPECT_EQ(*got[0].from, address_of(a));
  got = b.receive(true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(text(got[0].bytes), "urgent");
}

// A peer whose socket is gone makes the kernel refuse what is sent to it; the refusal comes
// back to a connected socket as an error, which reads absorb: nothing is taken for a datagram,
// and the socket goes on once the peer is back.
TEST(UdpSocket, APeerThatIsGoneCostsNothingButTheDatagramsSentToIt) {
  UdpSocket a;
  auto gone = std::make_unique<UdpSocket>();
  const Address where = address_of(*gone);
  a.set_peer(where);
  gone.reset();
  drain(a);
  for (int i = 0; i < 3; ++i) a.send(std::vector<Datagram>{text("lost")});
  EXPECT_TRUE(a.receive(true).empty());
  EXPECT_TRUE(a.receive().empty());
  UdpSocket back;
  back.set_peer(address_of(a));
  a.set_peer(address_of(back));
  drain(a);
  ASSERT_EQ(back.send(std::vector<Datagram>{text("back")}), 1u);
  const auto got = a.receive(true);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(text(got[0].bytes), "back");
}

}  // namespace
}  // namespace ttemu::wire
