// The fabric's own work per hop, without sockets, processes or wake-ups: two ChipNodes (the
// very node a chip process runs: router, center, TT-links) joined by a wire that hands each
// datagram over at once, in one process. A small write goes from M0D0 to M0D1 and its
// acknowledgement comes back, through exactly the per-packet code of a chip process (routing,
// credits, packet buffers, TT-link framing and CRC, commit), minus the command buffer and
// the system calls. Half a round trip is one hop's work; a chip process adds a wake-up, a
// receive and a send to it (ttemu_bench_fabric measures those).
//
//   ttemu_bench_hop [--rounds N] [--size B] [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/chip/address_space.hpp"
#include "emulator/node/chip_node.hpp"
#include "tools/bench/options.hpp"

namespace {

using namespace ttemu;
using Clock = std::chrono::steady_clock;

link::Time now() { return std::chrono::duration_cast<link::Time>(Clock::now().time_since_epoch()); }

// A chip: its node and its memory. Its transport hands each datagram to the peer's node at
// once, gathered into one buffer as the kernel copies it into a socket's; the peer handles
// the batch when it takes its turn (cross). Without faults no gap is ever seen, so a receive never answers
// inside the sender's call.
struct Chip final : node::NodeObserver, wire::Transport {
  routing::ChipId id;
  uint8_t port = 0;
  std::vector<uint8_t> l1 = std::vector<uint8_t>(1 << 20);
  std::unique_ptr<chip::ChipControl> control = std::make_unique<chip::ChipControl>();
  std::unique_ptr<node::ChipNode> node;
  Chip* peer = nullptr;
  link::Time now{};
  bool sent = false;  // datagrams went to the peer since its last turn
  std::vector<uint8_t> wire;
  size_t answers = 0;

  size_t send(uint8_t, std::span<const wire::Datagram> datagrams) override {
    for (const auto& d : datagrams) {
      d.copy_to(wire);  // the wire's copy, as the kernel's from a socket's buffer
      peer->node->on_datagram(peer->port, wire, now);
    }
    sent = sent || !datagrams.empty();
    return datagrams.size();
  }
  void answer(const routing::Packet&) override { ++answers; }
};

// `to` handles what `from` sent it, as one batch of a wake-up.
void cross(Chip& from, Chip& to, link::Time t) {
  if (!from.sent) return;
  from.sent = false;
  from.now = to.now = t;
  to.node->end_of_batch(t);
}

}  // namespace

int main(int argc, char** argv) {
  long rounds = 200000;
  uint32_t size = 64;
  bool as_json = false;
  CLI::App app{"The fabric's own work per hop, in one process: small writes and their acknowledgements", "ttemu_bench_hop"};
  app.add_option("--rounds", rounds, "Write and acknowledgement round trips")
      ->check(bench::whole_number(1L, 1000000000L))->capture_default_str();
  // One packet per write: the bench hands the node whole packets, as a link would.
  app.add_option("--size", size, "Bytes per write")->check(bench::whole_number(1u, routing::kMaxPacketPayload))->capture_default_str();
  app.add_flag("--json", as_json, "Print one JSON object");
  if (const auto status = bench::parse_command_line(app, argc, argv)) return *status;
  const control::System sys = control::load_system(TTEMU_TOPOLOGIES "/n300.yaml");
  const control::TableSet tables = control::compute_tables(sys);
  const auto& l = sys.links.front();  // plane 0 between the two chips
  Chip a, b;
  a.id = l.a.chip, a.port = l.a.port;
  b.id = l.b.chip, b.port = l.b.port;
  a.peer = &b, b.peer = &a;
  uint32_t nonce = 11;
  for (auto [c, peer] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    const int v = *sys.node(c->id);
    node::ChipNodeConfig nc;
    nc.self = c->id;
    nc.job = 1;
    nc.link.ack_delay = std::chrono::milliseconds(1);  // as chips run by default
    nc.link.peer_ack_delay = std::chrono::milliseconds(2);  // (the far end's delay and timer slack)
    nc.router.credit_delay = std::chrono::milliseconds(10);  // as chips run by default
    nc.tables = tables.of_node(v);
    // Only the link under test is wired.
    nc.ports.push_back({c->port, {1, peer->id.mesh, peer->id.device, peer->port}, nonce += 2, {}});
    c->node = std::make_unique<node::ChipNode>(std::move(nc), [c](uint64_t addr, size_t n) {
      return chip::locate(addr, n, c->l1, {});
    }, *c->control, *c, *c);
  }
  a.node->start(now());
  b.node->start(now());
  for (int i = 0; i < 10 && !(a.node->link_state(a.port) == link::LinkState::kUp && b.node->link_state(b.port) == link::LinkState::kUp); ++i) {
    cross(a, b, now());
    cross(b, a, now());
  }
  if (a.node->link_state(a.port) != link::LinkState::kUp) {
    fmt::print(stderr, "ttemu_bench_hop: the link did not come up\n");
    return 1;
  }
  routing::Packet p;
  p.header.src_mesh = a.id.mesh, p.header.src_device = a.id.device;
  p.header.dst_mesh = b.id.mesh, p.header.dst_device = b.id.device;
  p.header.command = routing::Command::kWrite;
  p.header.size = size;
  p.header.dst_addr = 4096;
  const std::vector<uint8_t> payload(size, 0x5A);
  const auto start = Clock::now();
  for (long r = 0; r < rounds; ++r) {
    const size_t before = a.answers;
    p.header.packet_id = static_cast<uint64_t>(r);
    p.set_payload(payload);
    const link::Time t = now();  // one clock read per wake-up, as in a chip
    a.now = b.now = t;
    a.node->inject(p, t);
    a.node->pump(t);
    for (int i = 0; i < 8 && a.answers == before; ++i) {
      cross(a, b, t);  // the write crosses; B commits
      cross(b, a, t);  // the acknowledgement crosses back
    }
    if (a.answers == before) {
      fmt::print(stderr, "ttemu_bench_hop: round {} got no acknowledgement\n", r);
      return 1;
    }
    if ((r & 255) == 0) {  // let the delayed acks and credits go, as timers would
      for (Chip* c : {&a, &b}) c->node->on_timer(t + std::chrono::seconds(1));
      cross(a, b, t), cross(b, a, t);
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(rounds);
  const bool intact = std::equal(payload.begin(), payload.end(), b.l1.begin() + 4096);
  if (as_json) {
    fmt::print("{}\n", nlohmann::json{{"size", size}, {"rounds", rounds}, {"round_trip_ns", ns},
                                      {"per_hop_ns", ns / 2}, {"intact", intact}}.dump());
  } else {
    fmt::print("The fabric's own work, in one process with warm caches ({} B writes, {} round trips)\n", size, rounds);
    fmt::print("  write + acknowledgement: {:.0f} ns; per hop: {:.0f} ns\n", ns, ns / 2);
  }
  return intact ? 0 : 1;
}
