#include "tools/traffic/sim_sockets.hpp"

#include <algorithm>
#include <chrono>
#include <random>

#include "emulator/chip/address_space.hpp"
#include "emulator/control/traffic_patterns.hpp"
#include "tools/traffic/pattern_report.hpp"

namespace ttemu::tools {

using nlohmann::json;
using routing::ChipId;

namespace {

uint16_t core(int i) { return static_cast<uint16_t>(i % chip::kMaxWorkers); }

}  // namespace

size_t socket_l1_need(const SocketRunOptions& o, int chips) {
  // Sources' blocks in the upper half, receivers' L1CBs in the lower half.
  const uint64_t block = uint64_t{o.size} * o.count;
  return static_cast<size_t>(2 * std::max<uint64_t>(block, o.l1cb) * static_cast<uint64_t>(chips));
}

size_t socket_dram_need(const SocketRunOptions& o, int chips) {
  return static_cast<size_t>(std::max<uint64_t>(1, uint64_t{o.dscb} * static_cast<uint64_t>(chips)));
}

json run_socket_pattern(sim::FabricSim& sim, const control::System& sys, const SocketRunOptions& o,
                        const std::string& pattern, int plane, const std::vector<std::pair<int, int>>& pairs, size_t l1_bytes) {
  const uint64_t block = uint64_t{o.size} * o.count;
  auto id = [&](int i) { return sys.chips[static_cast<size_t>(i)].id; };
  auto src_addr = [&](int d) { return l1_bytes / 2 + static_cast<uint64_t>(d) * block; };
  const bool ssocket = o.socket == "ssocket";
  const uint8_t handshake = o.handshake == "local" ? session::kLocalHandshake : session::kEndToEnd;
  struct Pair {
    int tx = -1, rx = -1;
    std::vector<uint8_t> got;
    int32_t open_error = 0;
    bool closed = false;  // done: both ends closed (an SSocket's reservations freed for others)
  };
  std::vector<Pair> ps(pairs.size());
  // Receivers first, then senders (either order connects; this one needs no waiting open).
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto [s, d] = pairs[i];
    chip::SocketClient::Options r;
    r.socket_id = static_cast<uint32_t>(i + 1);
    r.epoch = 1;
    r.type = ssocket ? session::kSSocket : session::kDSocket;
    r.direction = session::kSocketReceive;
    r.handshake = handshake;
    r.plane = static_cast<uint8_t>(plane);
    r.remote_mesh = id(s).mesh;
    r.remote_device = id(s).device;
    r.l1cb_addr = static_cast<uint64_t>(s) * o.l1cb;
    r.l1cb_size = o.l1cb;
    r.dscb_addr = chip::kDramBit | static_cast<uint64_t>(s) * o.dscb;
    r.dscb_size = o.dscb;
    ps[i].rx = sim.sockets(id(d), core(s)).open(r);
    auto t = r;
    t.direction = session::kSocketSend;
    t.remote_mesh = id(d).mesh;
    t.remote_device = id(d).device;
    t.fvc = ssocket ? (o.fvc < 0 ? chip::SocketClient::kAutoFvc : static_cast<uint8_t>(o.fvc)) : static_cast<uint8_t>(std::max(0, o.fvc));
    ps[i].tx = ps[i].rx >= 0 ? sim.sockets(id(s), core(d)).open(t) : -1;
    ps[i].open_error = ps[i].rx < 0 ? ps[i].rx : ps[i].tx < 0 ? ps[i].tx : 0;
    auto mem = sim.memory(id(s), src_addr(d), block);
    for (uint32_t k = 0; k < o.count; ++k) control::fill_pattern(mem.subspan(uint64_t{k} * o.size, o.size), s, d, k);
  }
  const link::Time start = sim.now();
  const link::Time limit = start + std::chrono::duration_cast<link::Time>(std::chrono::duration<double>(o.limit_s));
  // Senders send once connected; readers read (or stall, at random) until everything arrived,
  // nothing moves any more, or the limit.
  std::mt19937_64 rng(o.seed);
  std::vector<bool> sent(pairs.size(), false);
  std::vector<uint8_t> buf(64 << 10);
  uint64_t last_total = 0;
  link::Time last_progress = sim.now();
  while (sim.now() < limit) {
    uint64_t total = 0;
    bool done = true;
    for (size_t i = 0; i < pairs.size(); ++i) {
      Pair& p = ps[i];
      if (p.open_error || p.closed) continue;
      const auto [s, d] = pairs[i];
      auto& tx = sim.sockets(id(s), core(d));
      auto& rx = sim.sockets(id(d), core(s));
      const auto state = tx.endpoint(p.tx)->state.load();
      if (!sent[i] && state == session::kSocketConnected) sent[i] = tx.try_send(p.tx, src_addr(d), static_cast<uint32_t>(block));
      if (!o.reader_stalls || rng() % 3 != 0) {
        buf.resize(o.reader_stalls ? 1 + rng() % (64 << 10) : 64 << 10);
        const size_t n = rx.recv(p.rx, buf);
        p.got.insert(p.got.end(), buf.begin(), buf.begin() + static_cast<long>(n));
      }
      const bool broken = state == session::kSocketBroken || rx.endpoint(p.rx)->state.load() == session::kSocketBroken;
      if (p.got.size() == block || broken) {
        // Done: both ends close at once, so that SSockets waiting for this one's route go on.
        // (A full command buffer: tried again next round.)
        p.closed = tx.try_close(p.tx, 0) && rx.try_close(p.rx, 0);
      }
      done = done && p.closed;
    }
    for (const Pair& p : ps) total += p.got.size();
    if (done) break;
    if (total != last_total) last_total = total, last_progress = sim.now();
    if (sim.now() - last_progress >= std::chrono::seconds(5)) break;  // nothing moves: reported unverified
    sim.run(std::chrono::microseconds(o.reader_stalls ? 1 + rng() % 400 : 100));
  }
  const double seconds = std::chrono::duration<double>(sim.now() - start).count();
  uint64_t verified = 0, errors = 0, unverified = 0, spilled = 0, open_errors = 0, backed_up = 0;
  json error_writes = json::array();
  for (size_t i = 0; i < pairs.size(); ++i) {
    Pair& p = ps[i];
    const auto [s, d] = pairs[i];
    if (p.open_error) {
      ++open_errors;
      unverified += block;
      continue;
    }
    if (const auto* e = sim.sockets(id(d), core(s)).endpoint(p.rx)) {
      spilled += e->spilled.load();
      backed_up += e->backed_up.load();
    }
    for (uint32_t k = 0; k < o.count; ++k) {
      const uint64_t at = uint64_t{k} * o.size;
      if (p.got.size() < at + o.size) {
        unverified += o.size;  // never arrived (a broken or stuck stream says so; never silently)
      } else if (control::check_pattern(std::span<const uint8_t>(p.got).subspan(at, o.size), s, d, k)) {
        verified += o.size;
      } else {
        errors += o.size;
        name_error_write(error_writes, routing::to_string(id(s)), routing::to_string(id(d)), k);
      }
    }
    if (!p.closed) {  // (stuck or out of time: closed now, its reservations freed)
      sim.sockets(id(s), core(d)).try_close(p.tx, 0);
      sim.sockets(id(d), core(s)).try_close(p.rx, 0);
    }
  }
  sim.run(std::chrono::milliseconds(5));
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (ps[i].open_error) continue;
    sim.sockets(id(pairs[i].first), core(pairs[i].second)).release(ps[i].tx);
    sim.sockets(id(pairs[i].second), core(pairs[i].first)).release(ps[i].rx);
  }
  const double bytes = static_cast<double>(pairs.size()) * static_cast<double>(block);
  return {{"pattern", pattern}, {"op", "socket"}, {"socket", o.socket}, {"handshake", o.handshake}, {"plane", plane},
          {"pairs", pairs.size()}, {"bytes", bytes}, {"seconds", seconds},
          {"gb_per_s", seconds > 0 ? bytes / seconds / 1e9 : 0.0}, {"verified", verified}, {"errors", errors},
          {"unverified", unverified}, {"open_errors", open_errors}, {"spilled", spilled}, {"backed_up", backed_up},
          {"error_writes", error_writes}};
}

}  // namespace ttemu::tools
