// What a fabric node does with the payloads waiting for a link (its backlog) when the link
// goes down: requests go back to their senders as NACKs, answers stay for the link's session.
#include <gtest/gtest.h>

#include <vector>

#include "emulator/common/buffer_pool.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/session/fabric_node.hpp"
#include "tests/test_support.hpp"

namespace ttemu {
namespace {

using routing::Command;

// The commands of the packets waiting in `port`'s backlog (credit payloads aside).
std::vector<Command> waiting(session::FabricNode& node, uint8_t port) {
  std::vector<Command> out;
  const auto& q = node.backlog(port);
  for (size_t i = 0; i < q.size(); ++i) {
    routing::PacketHeader h;
    const uint32_t lane = q[i].dest_addr - transport::kLinkPacketAddr;  // (packets travel at their lane's address)
    if (q[i].dest_addr < transport::kLinkPacketAddr || lane >= static_cast<uint32_t>(node.router().lanes())) continue;
    if (routing::Packet::peek(std::span(q[i].bytes).subspan(routing::Packet::kLinkRoom), h)) out.push_back(h.command);
  }
  return out;
}

// M0D1 of an N300, with a write from M0D0 to answer.
struct AnsweringNode {
  control::System sys = test::load("n300.yaml");
  control::TableSet tables = control::compute_tables(sys);
  int v = test::node(sys, "M0D1");
  std::vector<uint8_t> ports = sys.wired_ports(v);
  std::vector<uint8_t> memory = std::vector<uint8_t>(1 << 16);
  BufferPool pool;
  session::FabricNode node{*routing::parse_chip("M0D1"), {}, tables.of_node(v), ports,
                           [this](uint64_t addr, size_t size) {
                             return addr + size <= memory.size() ? std::span<uint8_t>(memory).subspan(addr, size) : std::span<uint8_t>();
                           },
                           pool};
  session::FabricNode::Output out;

  // The write arrives on each port in turn, so that an ack waits whichever port the table
  // sends M0D0's answers by.
  void write_arrives(routing::Time now) {
    routing::Packet p;
    p.header.src_mesh = 0, p.header.src_device = 0;
    p.header.dst_mesh = 0, p.header.dst_device = 1;
    p.header.command = Command::kWrite;
    p.header.dst_addr = 64;
    p.header.size = 64;
    p.set_payload(std::vector<uint8_t>(64, 0x5A));
    p.seal();
    for (uint8_t port : ports) node.on_link_payload(port, transport::kLinkPacketAddr, p.on_link(), now);
  }
  void poll(routing::Time now) {
    for (int i = 0; i < 4; ++i) node.poll(now, out);
  }
  // The port M0D0's answers leave by.
  uint8_t back() const {
    const auto& t = tables.at(0, v);
    return *t.l0(0);
  }
};

// The ack waits in the port's backlog when the link goes down. It must wait for the link's
// session, not be dropped, since an answer's loss can be told to nobody (found by the processes
// engine's thorough campaign: `ttemu links down` on the far end, the writer's barrier timed out).
TEST(FabricNode, AnAckWaitingForALinkThatGoesDownWaitsForItsSession) {
  AnsweringNode n;
  n.write_arrives(routing::Time{0});
  n.poll(routing::Time{0});
  ASSERT_EQ(n.memory[64], 0x5A) << "the write landed";
  const uint8_t back = n.back();
  const size_t acks = waiting(n.node, back).size();
  ASSERT_GT(acks, 0u) << "an answer waits for the link back to M0D0";
  for (Command c : waiting(n.node, back)) EXPECT_EQ(c, Command::kWriteAck);
  n.out.clear();
  ASSERT_TRUE(n.node.set_link_down(back, true));
  n.poll(routing::Time{1});
  EXPECT_EQ(waiting(n.node, back).size(), acks) << "the acks still wait for the link";
  EXPECT_TRUE(n.out.events.empty()) << "nothing was dropped";
  ASSERT_TRUE(n.node.set_link_down(back, false));
  EXPECT_EQ(waiting(n.node, back).size(), acks) << "and go when it is back";
}

// The same ack made while the link is already down waits in the router, for
// answer_down_wait: it goes if the link comes back meanwhile, else it is dropped and reported.
TEST(FabricNode, AnAckWhoseLinkIsDownWaitsALittleForIt) {
  using std::chrono::milliseconds;
  const routing::Duration wait = routing::RouterConfig{}.answer_down_wait;
  for (const bool comes_back : {true, false}) {
    AnsweringNode n;
    const uint8_t back = n.back();
    ASSERT_TRUE(n.node.set_link_down(back, true));
    n.write_arrives(routing::Time{0});
    n.poll(routing::Time{0});
    ASSERT_EQ(n.memory[64], 0x5A) << "the write landed";
    EXPECT_TRUE(waiting(n.node, back).empty()) << "the ack waits in the router";
    EXPECT_TRUE(n.out.events.empty()) << "not dropped at once";
    EXPECT_LE(*n.node.router().next_deadline(), routing::Time{0} + wait) << "the router wakes when the wait is over";
    if (comes_back) {
      n.poll(wait / 2);
      ASSERT_TRUE(n.node.set_link_down(back, false));
      n.poll(wait / 2);
      EXPECT_FALSE(waiting(n.node, back).empty()) << "the ack left once the link was back";
      EXPECT_TRUE(n.out.events.empty());
    } else {
      n.poll(wait + milliseconds(1));
      EXPECT_TRUE(waiting(n.node, back).empty());
      ASSERT_FALSE(n.out.events.empty()) << "dropped after the wait, and reported";
      EXPECT_EQ(n.out.events[0].kind, routing::RouterEvent::kLinkDown);
      EXPECT_EQ(n.out.events[0].packet.command, Command::kWriteAck);
    }
  }
}

}  // namespace
}  // namespace ttemu
