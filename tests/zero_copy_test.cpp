// The per-hop copy budget (issue 9): a forwarded packet's payload is copied once per hop,
// when it arrives; from there its buffer moves through the routing buffer into the TT-link's
// window, and the wire gathers it from the window in place (wire::Datagram). These tests hold
// the parts of that chain that a copy could sneak back into, on the loss path too.
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

// M0D1 of the 4x4 mesh over a pool of the test's, and a 4 KiB packet from M0D0 for M0D2,
// which M0D1 forwards.
struct ForwardingChip {
  explicit ForwardingChip(BufferPool& pool)
      : sys(test::load("mesh_4x4.yaml")), planes(control::compute_tables(sys).of_node(test::node(sys, "M0D1"))),
        ports(sys.wired_ports(test::node(sys, "M0D1"))),
        node(*routing::parse_chip("M0D1"), {}, planes, ports, [](uint64_t, size_t) { return std::span<uint8_t>(); }, pool) {
    packet.header.src_mesh = 0, packet.header.src_device = 0;
    packet.header.dst_mesh = 0, packet.header.dst_device = 2;
    packet.header.size = 4096;
    packet.set_payload(std::vector<uint8_t>(4096, 0x5A));
    packet.seal();
  }

  // The buffers of the packets the router queued toward the links, after checking each.
  std::vector<const uint8_t*> forwarded() {
    session::FabricNode::Output out;
    node.poll(routing::Time{0}, out);
    std::vector<const uint8_t*> buffers;
    for (uint8_t port : ports) {
      const auto& backlog = node.backlog(port);
      for (size_t i = 0; i < backlog.size(); ++i) {
        const auto& entry = backlog[i];
        if (entry.dest_addr != transport::kLinkPacketAddr) continue;  // credits
        buffers.push_back(entry.bytes.data());
        EXPECT_EQ(entry.bytes.size(), packet.bytes.size());
        EXPECT_EQ(std::memcmp(entry.bytes.data() + routing::Packet::kPayloadAt, packet.payload().data(), 4096), 0);
        routing::PacketHeader h;
        EXPECT_TRUE(routing::Packet::peek(std::span(entry.bytes).subspan(routing::Packet::kLinkRoom), h));
        EXPECT_EQ(h.ttl, packet.header.ttl - 1) << "the header is rewritten in its room";
      }
    }
    return buffers;
  }

  control::System sys;
  std::vector<routing::RouterTable> planes;
  std::vector<uint8_t> ports;
  session::FabricNode node;
  routing::Packet packet;
};

// A packet that arrives for another chip leaves toward it in the very buffer it was decoded
// into: the router and the link backlog move it, nobody copies it.
TEST(FabricNode, AForwardedPacketLeavesInTheBufferItArrivedIn) {
  BufferPool pool;
  std::vector<uint8_t> seeded;
  seeded.reserve(8192);
  const uint8_t* where = seeded.data();
  pool.give(std::move(seeded));
  ForwardingChip chip(pool);
  chip.node.on_link_payload(chip.ports.front(), transport::kLinkPacketAddr, chip.packet.on_link(), routing::Time{0});
  EXPECT_EQ(chip.forwarded(), std::vector<const uint8_t*>{where}) << "forwarded in the buffer it was decoded into";
}

// A packet that a TT-link held behind a gap comes in the buffer the link held it in (room for
// the frame header, then the packet): the router keeps that buffer and forwards it, so a
// frame that waited for a resend is copied once on its hop, as one that came in order is. A
// buffer that holds no packet it can forward goes back to the pool.
TEST(FabricNode, APacketHeldBehindAGapIsForwardedInTheBufferTheLinkHeldItIn) {
  BufferPool pool;
  ForwardingChip chip(pool);
  std::vector<uint8_t> held = chip.packet.bytes;  // as TtLink holds it: kLinkRoom of room, then the packet
  const uint8_t* where = held.data();
  chip.node.on_link_buffer(chip.ports.front(), transport::kLinkPacketAddr, std::move(held), routing::Time{0});
  EXPECT_EQ(chip.forwarded(), std::vector<const uint8_t*>{where}) << "forwarded in the buffer the link held it in";

  // A size that disagrees with its header: not a packet; its buffer goes back to the pool.
  std::vector<uint8_t> bad = chip.packet.bytes;
  bad.resize(bad.size() - 1);
  const uint8_t* bad_at = bad.data();
  const size_t spare = pool.spare();
  chip.node.on_link_buffer(chip.ports.front(), transport::kLinkPacketAddr, std::move(bad), routing::Time{0});
  EXPECT_EQ(chip.forwarded().size(), 1u) << "the one packet forwarded before, nothing new";
  ASSERT_GT(pool.spare(), spare);
  EXPECT_EQ(pool.take().data(), bad_at) << "the refused buffer is the pool's again";
}

TEST(Packet, AdoptChecksAsDecodeDoesAndTakesTheBufferOnlyWhenItHoldsAPacket) {
  routing::Packet p;
  p.header.size = 100;
  p.set_payload(std::vector<uint8_t>(100, 3));
  p.seal();
  routing::Packet decoded, adopted;
  ASSERT_TRUE(routing::Packet::decode(p.on_link(), decoded));
  std::vector<uint8_t> framed = p.bytes;
  const uint8_t* where = framed.data();
  ASSERT_TRUE(routing::Packet::adopt(std::move(framed), adopted));
  EXPECT_EQ(adopted.bytes.data(), where);
  EXPECT_EQ(adopted.bytes, decoded.bytes);
  std::vector<uint8_t> short_one = p.bytes;
  short_one.pop_back();
  routing::Packet refused;
  EXPECT_FALSE(routing::Packet::adopt(std::move(short_one), refused));
  EXPECT_EQ(short_one.size(), p.bytes.size() - 1) << "left as it was";
  std::vector<uint8_t> no_room(routing::Packet::kLinkRoom - 1, 0);
  EXPECT_FALSE(routing::Packet::adopt(std::move(no_room), refused));
}

}  // namespace
}  // namespace ttemu
