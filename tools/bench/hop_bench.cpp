// The fabric's own work per hop, without sockets, processes or wake-ups: two FabricNodes (router
// and center) joined by a pair of TtLinks in one process. A small write goes from M0D0 to M0D1
// and its acknowledgement comes back, passing through exactly the code a chip process runs for
// a packet (routing, credits, packet encoding, TT-link framing and CRC, commit), minus the
// system calls. Half a round trip is one hop's work; a chip process adds a wake-up, a receive
// and a send to it (ttemu_bench_fabric measures those).
//
//   ttemu_bench_hop [--rounds N] [--size B] [--json]
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/link/link_counters.hpp"
#include "emulator/link/tt_link.hpp"
#include "emulator/session/fabric_node.hpp"

namespace {

using namespace ttemu;
using Clock = std::chrono::steady_clock;

link::Time now() { return std::chrono::duration_cast<link::Time>(Clock::now().time_since_epoch()); }

struct Chip {
  routing::ChipId id;
  uint8_t port = 0;
  std::vector<uint8_t> l1 = std::vector<uint8_t>(1 << 20);
  std::unique_ptr<session::FabricNode> node;
  link::LinkCounters counters{};
  std::unique_ptr<link::TtLink> link;
  std::vector<std::vector<uint8_t>> datagrams;
  session::FabricNode::Output out;
  size_t answers = 0;
};

// One chip's turn, as on a wake-up: move its fabric, hand its link payloads to the link, and
// put what the link transmits on the wire to the peer.
void turn(Chip& c, Chip& peer, link::Time t) {
  c.out.clear();
  c.node->poll(t, c.out);
  c.answers += c.out.for_workers.size();
  c.node->pass_backlog(c.port, [&](uint32_t addr, std::span<const uint8_t> bytes) {
    return c.link->send_room() > 0 && c.link->send(addr, bytes);
  });
  c.link->poll_transmit(t, c.datagrams);
  for (const auto& d : c.datagrams) peer.link->on_datagram(d, t);
  c.link->recycle(c.datagrams);
}

}  // namespace

int main(int argc, char** argv) {
  long rounds = 200000;
  uint32_t size = 64;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::stol(argv[++i]);
    else if (a == "--size" && i + 1 < argc) size = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (a == "--json") as_json = true;
    else {
      fmt::print(stderr, "usage: ttemu_bench_hop [--rounds N] [--size B] [--json]\n");
      return 2;
    }
  }
  const control::System sys = control::load_system(TTEMU_TOPOLOGIES "/n300.yaml");
  const control::TableSet tables = control::compute_tables(sys);
  const auto& l = sys.links.front();  // plane 0 between the two chips
  Chip a, b;
  a.id = l.a.chip, a.port = l.a.port;
  b.id = l.b.chip, b.port = l.b.port;
  routing::RouterConfig rc;
  link::LinkConfig lc;
  lc.ack_delay = std::chrono::milliseconds(1);  // as chips run by default
  rc.credit_delay = std::chrono::milliseconds(1);
  for (Chip* c : {&a, &b}) {
    const int v = *sys.node(c->id);
    std::vector<routing::RouterTable> planes;
    for (int p = 0; p < tables.planes(); ++p) planes.push_back(tables.at(p, v));
    std::vector<uint8_t> ports;
    for (int port = 0; port < routing::kMaxPorts; ++port) {
      if (sys.link_at(v, static_cast<uint8_t>(port)) >= 0) ports.push_back(static_cast<uint8_t>(port));
    }
    c->node = std::make_unique<session::FabricNode>(c->id, rc, std::move(planes), ports, [c](uint64_t addr, size_t n) {
      return addr + n <= c->l1.size() ? std::span<uint8_t>(c->l1.data() + addr, n) : std::span<uint8_t>();
    });
  }
  a.link = std::make_unique<link::TtLink>(lc, link::LinkIdentity{1, a.id.mesh, a.id.device, a.port},
                                          link::LinkIdentity{1, b.id.mesh, b.id.device, b.port}, 11, a.counters);
  b.link = std::make_unique<link::TtLink>(lc, link::LinkIdentity{1, b.id.mesh, b.id.device, b.port},
                                          link::LinkIdentity{1, a.id.mesh, a.id.device, a.port}, 13, b.counters);
  for (Chip* c : {&a, &b}) {
    c->link->set_delivery([c](uint32_t dest, std::span<const uint8_t> payload) {
      c->node->on_link_payload(c->port, dest, payload, now());
    });
    c->link->start(now());
  }
  for (int i = 0; i < 10 && !(a.link->state() == link::LinkState::kUp && b.link->state() == link::LinkState::kUp); ++i) {
    turn(a, b, now());
    turn(b, a, now());
  }
  if (a.link->state() != link::LinkState::kUp) {
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
    p.payload = payload;
    const link::Time t = now();  // one clock read per wake-up, as in a chip
    a.node->inject(p, t);
    for (int i = 0; i < 8 && a.answers == before; ++i) {
      turn(a, b, t);  // the write crosses
      turn(b, a, t);  // B commits; the acknowledgement crosses back
    }
    if (a.answers == before) {
      fmt::print(stderr, "ttemu_bench_hop: round {} got no acknowledgement\n", r);
      return 1;
    }
    if ((r & 255) == 0) {  // let the delayed acks and credits go, as timers would
      for (Chip* c : {&a, &b}) c->link->on_timer(t + std::chrono::seconds(1));
      turn(a, b, t), turn(b, a, t);
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
