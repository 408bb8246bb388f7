// A link endpoint's UDP socket on the loopback: what a chip's reads and sends rely on, whether
// datagrams go one at a time (a hop on a latency path) or in batches (a stream).
#include "emulator/wire/udp_socket.hpp"

#include <gtest/gtest.h>
#include <poll.h>

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

// Waits (up to 10 s) until the descriptor reports one of `events`: a loopback datagram is
// usually queued by the time its send returns, but a busy machine may hand it to the kernel's
// softirq thread.
bool ready(int fd, short events = POLLIN) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, 10'000) == 1 && (p.revents & events) != 0;
}

// Reads, one datagram at a time as a quiet hop does, until `n` have come (each waited for),
// with whether each is the peer's.
std::vector<std::pair<std::string, bool>> read_one_by_one(UdpSocket& s, size_t n) {
  std::vector<std::pair<std::string, bool>> seen;
  while (seen.size() < n && ready(s.fd())) {
    for (const auto& d : s.receive(/*one=*/true)) seen.emplace_back(text(d.bytes), s.accepts(*d.from));
  }
  return seen;
}

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

  const std::vector<std::pair<std::string, bool>> first_two{{"first", true}, {"second", true}};
  EXPECT_EQ(read_one_by_one(b, 2), first_two);  // one per read, however many wait

  std::vector<std::string> rest;  // the rest in batches (one, unless the kernel was slow)
  while (rest.size() < 2 && ready(b.fd())) {
    for (const auto& d : b.receive()) {
      rest.push_back(text(d.bytes));
      EXPECT_TRUE(b.accepts(*d.from));
    }
  }
  EXPECT_EQ(rest, (std::vector<std::string>{"third", "fourth"}));
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

  const std::vector<std::pair<std::string, bool>> peer{{"peer", true}};
  EXPECT_EQ(read_one_by_one(b, 1), peer);
  ASSERT_TRUE(ready(b.strays_fd()));
  const auto stray = b.receive_stray();
  ASSERT_TRUE(stray.has_value());
  EXPECT_EQ(text(stray->bytes), "stray");
  EXPECT_FALSE(b.accepts(*stray->from));
  EXPECT_EQ(*stray->from, address_of(stranger));
  EXPECT_FALSE(b.receive_stray().has_value());
  EXPECT_TRUE(b.receive(true).empty());  // the stray never reached the link's socket
}

// What waited in the socket before it was connected, or connected again to a restarted peer,
// may be anyone's: it is read with its sender's name, never taken for the new peer's.
TEST(UdpSocket, DatagramsFromBeforeAConnectionAreToldFromThePeers) {
  UdpSocket a, b, c;
  pair_up(a, b);
  c.set_peer(address_of(b));
  ASSERT_EQ(a.send(std::vector<Datagram>{text("old peer")}), 1u);
  ASSERT_TRUE(ready(b.fd()));  // queued before the new connection
  b.set_peer(address_of(c));   // a restarted elsewhere: c now
  ASSERT_EQ(c.send(std::vector<Datagram>{text("new peer")}), 1u);

  const std::vector<std::pair<std::string, bool>> want{{"old peer", false}, {"new peer", true}};
  EXPECT_EQ(read_one_by_one(b, 2), want);
}

// A lazy datagram goes to the peer's inbox by name, past the connection; the rest to the peer.
TEST(UdpSocket, ALazyDatagramGoesToThePeersInboxTheRestToThePeer) {
  UdpSocket a, b, inbox;
  pair_up(a, b);
  a.set_inbox(address_of(inbox));
  std::vector<Datagram> two{text("lazy"), text("urgent")};
  two[0].lazy = true;
  ASSERT_EQ(a.send(two), 2u);
  ASSERT_TRUE(ready(inbox.fd()));
  auto got = inbox.receive();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(text(got[0].bytes), "lazy");
  EXPECT_EQ(*got[0].from, address_of(a));
  const std::vector<std::pair<std::string, bool>> urgent{{"urgent", true}};
  EXPECT_EQ(read_one_by_one(b, 1), urgent);
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
  a.send(std::vector<Datagram>{text("lost")});
  ASSERT_TRUE(ready(a.fd(), POLLERR)) << "the refusal came back";
  EXPECT_TRUE(a.receive(true).empty());
  EXPECT_TRUE(a.receive().empty());
  pollfd p{a.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the reads absorbed it";
  UdpSocket back;
  back.set_peer(address_of(a));
  a.set_peer(address_of(back));
  drain(a);
  ASSERT_EQ(back.send(std::vector<Datagram>{text("back")}), 1u);
  const std::vector<std::pair<std::string, bool>> got{{"back", true}};
  EXPECT_EQ(read_one_by_one(a, 1), got);
}

}  // namespace
}  // namespace ttemu::wire
