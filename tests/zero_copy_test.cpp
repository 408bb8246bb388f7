// The per-hop copy budget (issue 9): a forwarded packet's payload is copied once per hop,
// when it arrives; from there its buffer moves through the routing buffer into the TT-link's
// window, and the wire gathers it from the window in place (wire::Datagram). These tests hold
// the parts of that chain that a copy could sneak back into.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "emulator/common/buffer_pool.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/session/fabric_node.hpp"
#include "emulator/wire/datagram.hpp"
#include "tests/test_support.hpp"

namespace ttemu {
namespace {

bool refers_to(const wire::Datagram& d, const uint8_t* where) {
  bool found = false;
  d.for_each_piece([&](std::span<const uint8_t> s) { found = found || s.data() == where; });
  return found;
}

const std::vector<uint8_t> kOneTwo{1, 2}, kThree{3}, kFour{4};

TEST(Datagram, OwnedBytesMergeAndBorrowedBytesAreReferredTo) {
  std::vector<uint8_t> payload(100, 7);
  wire::Datagram d;
  d.append_copy(kOneTwo);
  d.append_copy(kThree);
  d.append_borrowed(payload);
  d.append_copy(kFour);
  EXPECT_EQ(d.pieces(), 3u) << "header bytes merge; the payload is one piece of its own";
  EXPECT_EQ(d.size(), 104u);
  EXPECT_TRUE(refers_to(d, payload.data()));
  std::vector<uint8_t> want(104, 7);  // 1 2 3, the payload, 4
  want[0] = 1, want[1] = 2, want[2] = 3, want[103] = 4;
  EXPECT_EQ(d.to_bytes(), want);
}

TEST(Datagram, RewindTakesBackWhatWasAppendedAndOwnCutsTheBorrowedBytesLoose) {
  std::vector<uint8_t> payload(100, 7);
  wire::Datagram d;
  d.append_copy(kOneTwo);
  const auto mark = d.mark();
  d.append_copy(kThree);
  d.append_borrowed(payload);
  d.rewind(mark);
  EXPECT_EQ(d.to_bytes(), kOneTwo);
  d.append_borrowed(payload);
  d.own();
  EXPECT_FALSE(refers_to(d, payload.data()));
  std::fill(payload.begin(), payload.end(), 0);  // the window reuses its buffer
  EXPECT_EQ(d.to_bytes()[2], 7) << "an owned datagram keeps its bytes";
}

// A packet that arrives for another chip leaves toward it in the very buffer it was decoded
// into: the router and the link backlog move it, nobody copies it.
TEST(FabricNode, AForwardedPacketLeavesInTheBufferItArrivedIn) {
  const auto sys = test::load("mesh_4x4.yaml");
  const auto tables = control::compute_tables(sys);
  const int v = test::node(sys, "M0D1");
  const std::vector<uint8_t> ports = sys.wired_ports(v);
  const std::vector<routing::RouterTable> planes = tables.of_node(v);
  BufferPool pool;
  std::vector<uint8_t> seeded;
  seeded.reserve(8192);
  const uint8_t* where = seeded.data();
  pool.give(std::move(seeded));
  session::FabricNode node(*routing::parse_chip("M0D1"), {}, planes, ports,
                           [](uint64_t, size_t) { return std::span<uint8_t>(); }, pool);

  routing::Packet p;
  p.header.src_mesh = 0, p.header.src_device = 0;
  p.header.dst_mesh = 0, p.header.dst_device = 2;
  p.header.size = 4096;
  p.set_payload(std::vector<uint8_t>(4096, 0x5A));
  p.seal();
  node.on_link_payload(ports.front(), transport::kLinkPacketAddr, p.on_link(), routing::Time{0});
  session::FabricNode::Output out;
  node.poll(routing::Time{0}, out);

  int forwarded = 0;
  for (uint8_t port : ports) {
    const auto& backlog = node.backlog(port);
    for (size_t i = 0; i < backlog.size(); ++i) {
      const auto& entry = backlog[i];
      if (entry.dest_addr != transport::kLinkPacketAddr) continue;  // credits
      ++forwarded;
      EXPECT_EQ(entry.bytes.data(), where) << "forwarded in the buffer it was decoded into";
      ASSERT_EQ(entry.bytes.size(), p.bytes.size());
      EXPECT_EQ(std::memcmp(entry.bytes.data() + routing::Packet::kPayloadAt, p.payload().data(), 4096), 0);
      routing::PacketHeader h;
      ASSERT_TRUE(routing::Packet::peek(std::span(entry.bytes).subspan(routing::Packet::kLinkRoom), h));
      EXPECT_EQ(h.ttl, p.header.ttl - 1) << "the header is rewritten in its room";
    }
  }
  EXPECT_EQ(forwarded, 1);
}

}  // namespace
}  // namespace ttemu
