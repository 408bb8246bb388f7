// One chip node driven as a chip process drives it over UDP, with a second as its peer, on a
// wire the test hands over batch by batch: when end_of_batch(now, more_may_come) keeps a
// part-filled datagram open for the next batch, and when it does not.
#include "emulator/node/chip_node.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <vector>

#include "emulator/chip/address_space.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"

namespace ttemu::node {
namespace {

using namespace std::chrono_literals;

// A chip: its node, its memory, and what its node sent (each datagram's bytes, in order).
struct Chip final : NodeObserver, wire::Transport {
  routing::ChipId id;
  uint8_t port = 0;
  std::vector<uint8_t> l1 = std::vector<uint8_t>(1 << 20);
  std::unique_ptr<chip::ChipControl> control = std::make_unique<chip::ChipControl>();
  std::unique_ptr<ChipNode> node;
  std::deque<std::vector<uint8_t>> sent;
  bool stream_finished = false;

  size_t send(uint8_t, std::span<const wire::Datagram> datagrams) override {
    for (const auto& d : datagrams) sent.push_back(d.to_bytes());
    return datagrams.size();
  }
  void stream_done(uint8_t, uint64_t, uint64_t, uint64_t, double) override { stream_finished = true; }
  const chip::PortStatus& status() const { return control->ports[port]; }
};

class TwoChips : public ::testing::Test {
 protected:
  void SetUp() override {
    const control::System sys = control::load_system(TTEMU_TOPOLOGIES "/n300.yaml");
    const control::TableSet tables = control::compute_tables(sys);
    const auto& l = sys.links.front();
    a_.id = l.a.chip, a_.port = l.a.port;
    b_.id = l.b.chip, b_.port = l.b.port;
    uint32_t nonce = 11;
    for (auto [c, peer] : {std::pair{&a_, &b_}, std::pair{&b_, &a_}}) {
      ChipNodeConfig nc;
      nc.self = c->id;
      nc.job = 1;
      nc.tables = tables.of_node(*sys.node(c->id));
      nc.ports.push_back({c->port, {1, peer->id.mesh, peer->id.device, peer->port}, nonce += 2, {}});
      c->node = std::make_unique<ChipNode>(std::move(nc), [c](uint64_t addr, size_t n) {
        return chip::locate(addr, n, c->l1, {});
      }, *c->control, *c, *c);
    }
    a_.node->start(now_);
    b_.node->start(now_);
    for (int i = 0; i < 10 && !up(); ++i) {
      deliver(a_, b_, a_.sent.size(), false);
      deliver(b_, a_, b_.sent.size(), false);
    }
    ASSERT_TRUE(up());
  }

  bool up() const {
    return a_.node->link_state(a_.port) == link::LinkState::kUp && b_.node->link_state(b_.port) == link::LinkState::kUp;
  }
  // The first n datagrams `from` sent arrive at `to` as one batch.
  void deliver(Chip& from, Chip& to, size_t n, bool more_may_come) {
    if (n == 0) return;
    for (size_t i = 0; i < n; ++i) {
      to.node->on_datagram(to.port, from.sent.front(), now_);
      from.sent.pop_front();
    }
    to.node->end_of_batch(now_, more_may_come);
  }

  link::Time now_{1s};
  Chip a_, b_;
};

// a streams to b; b's acknowledgements free a's window, and a fills it again with 4 KiB frames,
// 15 to a datagram, 64 frames in flight (four full datagrams and one of four frames).
TEST_F(TwoChips, AfterABatchOfSeveralDatagramsAPartFilledDatagramWaitsForTheNext) {
  a_.node->start_stream(a_.port, 7, 10'000, 4096, now_);
  ASSERT_EQ(a_.sent.size(), 5u) << "a window: 4 full datagrams and one part-filled";
  // b reads them in two batches and acknowledges each: two datagrams for a.
  deliver(a_, b_, 3, false);
  deliver(a_, b_, 2, false);
  ASSERT_EQ(b_.sent.size(), 2u);
  // Read by a in one batch, as a chip over UDP does (it looks for more before it sleeps): the
  // refill's last, part-filled datagram is kept open.
  deliver(b_, a_, 2, true);
  EXPECT_TRUE(a_.node->has_open());
  EXPECT_EQ(a_.sent.size(), 4u) << "the full datagrams went";
  a_.node->send_open(now_);
  EXPECT_FALSE(a_.node->has_open());
  EXPECT_EQ(a_.sent.size(), 5u) << "the open one went when the driver found nothing more";

  // A lone acknowledgement (a latency path looks like this): nothing waits.
  deliver(a_, b_, 5, false);
  ASSERT_EQ(b_.sent.size(), 1u);
  deliver(b_, a_, 1, true);
  EXPECT_FALSE(a_.node->has_open());
  EXPECT_EQ(a_.sent.size(), 5u);

  // Kept open over batches, the stream still arrives whole and in order.
  while (!a_.stream_finished && (!a_.sent.empty() || !b_.sent.empty())) {
    deliver(a_, b_, a_.sent.size(), false);
    deliver(b_, a_, b_.sent.size(), true);
    a_.node->send_open(now_);
  }
  EXPECT_TRUE(a_.stream_finished);
  EXPECT_EQ(b_.status().stream_verified.load(), 10'000u);
  EXPECT_EQ(b_.status().stream_errors.load(), 0u);
}

// On a busy chip a batch is often one datagram, but a full one: a stream's, not a latency
// path's lone packet. Its answer's part-filled datagram waits for the next batch too.
TEST_F(TwoChips, ALoneDatagramFullOfAStreamsFramesIsStreamingTooAndItsAnswerWaitsForTheNext) {
  a_.node->start_stream(a_.port, 7, 10'000, 4096, now_);
  ASSERT_EQ(a_.sent.size(), 5u);
  // b takes a's window and starts its own stream in the same turn, so that its datagrams carry
  // the acknowledgement of a's frames.
  for (; !a_.sent.empty(); a_.sent.pop_front()) b_.node->on_datagram(b_.port, a_.sent.front(), now_);
  b_.node->start_stream(b_.port, 9, 10'000, 4096, now_);
  b_.node->end_of_batch(now_, false);
  ASSERT_GE(b_.sent.size(), 2u);
  ASSERT_GT(b_.sent.front().size(), 8192u) << "b's first datagram is full of its frames";
  // a reads that one datagram alone: it frees a's window, whose refill ends part-filled.
  deliver(b_, a_, 1, true);
  EXPECT_TRUE(a_.node->has_open());
  a_.node->send_open(now_);
  EXPECT_FALSE(a_.node->has_open());

  // Both streams still arrive whole and in order.
  while ((!a_.stream_finished || !b_.stream_finished) && (!a_.sent.empty() || !b_.sent.empty())) {
    deliver(a_, b_, a_.sent.size(), true);
    b_.node->send_open(now_);
    deliver(b_, a_, b_.sent.size(), true);
    a_.node->send_open(now_);
  }
  EXPECT_TRUE(a_.stream_finished);
  EXPECT_TRUE(b_.stream_finished);
  EXPECT_EQ(b_.status().stream_verified.load(), 10'000u);
  EXPECT_EQ(a_.status().stream_verified.load(), 10'000u);
  EXPECT_EQ(a_.status().stream_errors.load() + b_.status().stream_errors.load(), 0u);
}

// Without a driver that looks again (the simulator unless SimConfig::look), nothing is kept open.
TEST_F(TwoChips, ANodeWhoseDriverDoesNotLookAgainKeepsNothingOpen) {
  a_.node->start_stream(a_.port, 8, 1'000, 4096, now_);
  deliver(a_, b_, 3, false);
  deliver(a_, b_, 2, false);
  deliver(b_, a_, 2, false);
  EXPECT_FALSE(a_.node->has_open());
  EXPECT_EQ(a_.sent.size(), 5u);
}

}  // namespace
}  // namespace ttemu::node
