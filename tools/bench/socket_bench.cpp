// Socket streaming against RDMA writes over the same routes, in one run (spec 2.4, 4): a 4x4
// mesh is launched per transport and this program runs inside it as a worker (--worker), on
// M0D0 toward M0D1 (1 hop) and M0D15 (6 hops). For each route it measures, after a warm-up
// round, the median of --repeat rounds of:
//   - RDMA: 64 KiB fabric_async_writes of --mib MiB, then the write barrier (the baseline);
//   - a DSocket with end-to-end handshake (default buffers: 64 KiB L1CB, 256 KiB DSCB);
//   - a DSocket with local handshake (64 KiB L1CB), sends of 1 MiB, the receiver reading in 64 KiB
//     reads in a thread of its own, timed from the first send to the last byte, every byte checked.
// It prints each goodput and the ratios (socket vs RDMA, end-to-end vs local); --json prints
// one object. Exits 1 if a byte arrived wrong or a run failed.
//
//   ttemu_bench_socket [--mib N] [--repeat R] [--transport LIST] [--json]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "libfabric_tt/tt_fabric.h"
#include "tools/bench/options.hpp"
#include "tools/bench/raw_udp.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSrc = 1 << 20;  // the sender's 1 MiB of data, in M0D0's L1
constexpr uint64_t kDst = 2 << 20;  // where RDMA writes land
constexpr uint32_t kSpan = 1 << 20;
constexpr uint32_t kChunk = 64 << 10;

struct Worker {
  tt_fabric* f = nullptr;
  Worker(tt_fabric_device d, uint16_t core) {
    char err[256] = {};
    f = tt_fabric_open(nullptr, d.mesh, d.device, core, err, sizeof err);
    if (!f) throw std::runtime_error(fmt::format("M{}D{}: {}", d.mesh, d.device, err));
  }
  ~Worker() { tt_fabric_close(f); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
};

double seconds_since(Clock::time_point t0, Clock::time_point t1) { return std::chrono::duration<double>(t1 - t0).count(); }

// Bytes per second of RDMA writes to dst; 0 if a call failed.
double rdma(Worker& tx, tt_fabric_device dst, uint64_t bytes) {
  const auto t0 = Clock::now();
  for (uint64_t off = 0; off < bytes; off += kChunk) {
    if (fabric_async_write(tx.f, 0, kSrc + off % kSpan, dst, kDst + off % kSpan, kChunk, 0, 1, nullptr) != TT_FABRIC_OK) return 0;
  }
  if (fabric_async_write_barrier(tx.f, 1) != TT_FABRIC_OK) return 0;
  return static_cast<double>(bytes) / seconds_since(t0, Clock::now());
}

// Bytes per second of one socket stream to dst, checked; 0 if anything failed or arrived wrong.
double stream(Worker& tx, Worker& rx, tt_fabric_device dst, int handshake, uint64_t bytes, uint32_t socket_id,
              uint64_t& wrong) {
  const tt_fabric_socket_options opt{handshake, 0, 0, 0, 0, {}};
  const int r = fabric_socket_open_with(rx.f, 0, 1, socket_id, TT_FABRIC_DSOCKET, TT_FABRIC_RECEIVE, {0, 0}, 0, &opt);
  const int s = fabric_socket_open_with(tx.f, 0, 1, socket_id, TT_FABRIC_DSOCKET, TT_FABRIC_SEND, dst, 0, &opt);
  if (r < 0 || s < 0 || fabric_socket_connect(tx.f, s) != TT_FABRIC_OK || fabric_socket_connect(rx.f, r) != TT_FABRIC_OK) return 0;
  const auto* src = static_cast<const uint8_t*>(tt_fabric_memory(tx.f, kSrc, kSpan));
  Clock::time_point done;
  bool ok = true;
  std::thread reader([&] {
    std::vector<uint8_t> buf(kChunk);
    for (uint64_t got = 0; got < bytes;) {
      const int64_t n = fabric_socket_recv(rx.f, r, buf.data(), buf.size());
      if (n <= 0) {
        ok = false;
        break;
      }
      // The stream is the 1 MiB at kSrc over and over: compare in at most two pieces.
      for (size_t i = 0; i < static_cast<size_t>(n);) {
        const size_t at = (got + i) % kSpan, k = std::min(static_cast<size_t>(n) - i, kSpan - at);
        wrong += std::memcmp(buf.data() + i, src + at, k) != 0 ? k : 0;
        i += k;
      }
      got += static_cast<uint64_t>(n);
    }
    done = Clock::now();
  });
  const auto t0 = Clock::now();
  // As a streaming producer would: sends as large as the API takes (1 MiB), each returning
  // once the fabric has taken its bytes.
  for (uint64_t off = 0; off < bytes && ok; off += kSpan) {
    ok = fabric_socket_send(tx.f, s, kSrc, static_cast<uint32_t>(std::min<uint64_t>(kSpan, bytes - off))) == TT_FABRIC_OK;
  }
  reader.join();
  ok = fabric_socket_close(tx.f, s, nullptr) == TT_FABRIC_OK && ok;
  ok = fabric_socket_close(rx.f, r, nullptr) == TT_FABRIC_OK && ok;
  return ok ? static_cast<double>(bytes) / seconds_since(t0, done) : 0;
}

// Inside the launched system: every figure, as one JSON line.
int worker(uint64_t bytes, int repeat) {
  Worker tx({0, 0}, 2);
  auto* src = static_cast<uint8_t*>(tt_fabric_memory(tx.f, kSrc, kSpan));
  for (uint32_t i = 0; i < kSpan; ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  json routes = json::array();
  uint64_t wrong = 0;
  bool ok = true;
  uint32_t socket_id = 1;
  for (const auto& [dst, name, hops] : {std::tuple{tt_fabric_device{0, 1}, "M0D1", 1}, std::tuple{tt_fabric_device{0, 15}, "M0D15", 6}}) {
    Worker rx(dst, 2);
    std::vector<double> w, e, l;
    for (int round = 0; round <= repeat; ++round) {  // round 0 warms up
      const double a = rdma(tx, dst, bytes);
      const double b = stream(tx, rx, dst, TT_FABRIC_END_TO_END, bytes, socket_id++, wrong);
      const double c = stream(tx, rx, dst, TT_FABRIC_LOCAL_HANDSHAKE, bytes, socket_id++, wrong);
      ok = ok && a > 0 && b > 0 && c > 0;
      if (round > 0) w.push_back(a), e.push_back(b), l.push_back(c);
    }
    const double rm = ttemu::bench::median(w), em = ttemu::bench::median(e), lm = ttemu::bench::median(l);
    routes.push_back({{"dst", name}, {"hops", hops}, {"rdma_gb_per_s", rm / 1e9}, {"end_to_end_gb_per_s", em / 1e9},
                      {"local_gb_per_s", lm / 1e9}, {"end_to_end_vs_rdma", rm > 0 ? em / rm : 0},
                      {"local_vs_rdma", rm > 0 ? lm / rm : 0}, {"end_to_end_vs_local", lm > 0 ? em / lm : 0}});
  }
  fmt::print("{}\n", json{{"routes", routes}, {"bytes_per_run", bytes}, {"wrong_bytes", wrong}, {"ok", ok}}.dump());
  return ok && wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 16;
  int repeat = 3;
  bool as_json = false, in_system = false;
  std::vector<std::string> transports{"udp"};
  CLI::App app{"Socket streaming against RDMA writes over the same routes", "ttemu_bench_socket"};
  // Up to 64 GiB a run: mib << 20 must not overflow, and nothing here needs more.
  app.add_option("--mib", mib, "MiB per run")->check(ttemu::bench::whole_number<uint64_t>(1, 65536))->capture_default_str();
  ttemu::bench::add_repeat(app, repeat, "Measured rounds (the median is shown), after a warm-up one");
  ttemu::bench::add_transports(app, transports, "Transports to measure, comma-separated");
  app.add_flag("--json", as_json, "Print one JSON object");
  app.add_flag("--worker", in_system, "Measure, inside the launched system")->group(ttemu::bench::kInternal);
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
  if (in_system) {
    try {
      return worker(mib << 20, repeat);
    } catch (const std::exception& e) {
      fmt::print(stderr, "ttemu_bench_socket: {}\n", e.what());
      return 1;
    }
  }
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  json out = json::object();
  bool ok = true;
  for (const auto& t : transports) {
    auto docs = ttemu::bench::launch_json(TTEMU_BINARY, TTEMU_TOPOLOGIES "/mesh_4x4.yaml", "--transport " + t,
                                          fmt::format("{} --worker --mib {} --repeat {}", self, mib, repeat));
    if (docs.empty() || !docs.back().value("ok", false) || docs.back().value("wrong_bytes", 1) != 0) {
      fmt::print(stderr, "ttemu_bench_socket: --transport {}: a run failed or a byte arrived wrong\n", t);
      ok = false;
      if (docs.empty()) continue;
    }
    out[t] = docs.back();
  }
  if (as_json) {
    fmt::print("{}\n", out.dump());
    return ok ? 0 : 1;
  }
  fmt::print("Socket streaming vs RDMA writes over the same route (4x4 mesh, from M0D0; {} MiB per run, median of {})\n",
             mib, repeat);
  fmt::print("  {:<10} {:<6} {:>12} {:>14} {:>12} {:>10} {:>10} {:>11}\n", "transport", "hops", "RDMA GB/s",
             "end-to-end", "local", "e2e/RDMA", "local/RDMA", "e2e/local");
  for (const auto& [t, r] : out.items()) {
    for (const auto& route : r["routes"]) {
      fmt::print("  {:<10} {:<6} {:>12.3f} {:>14.3f} {:>12.3f} {:>10.2f} {:>10.2f} {:>11.2f}\n", t,
                 route["hops"].get<int>(), route["rdma_gb_per_s"].get<double>(), route["end_to_end_gb_per_s"].get<double>(),
                 route["local_gb_per_s"].get<double>(), route["end_to_end_vs_rdma"].get<double>(),
                 route["local_vs_rdma"].get<double>(), route["end_to_end_vs_local"].get<double>());
    }
    fmt::print("  ({} bytes arrived wrong)\n", r["wrong_bytes"].get<uint64_t>());
  }
  return ok ? 0 : 1;
}
