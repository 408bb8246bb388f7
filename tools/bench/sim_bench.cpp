// The simulator's speed (issue 12: campaigns of many faulty runs must finish in minutes): packet-
// hops per second of CPU, where a packet-hop is one fabric packet delivered across one TT-link
// (acks and NACKs are packets too). `ttemu sim --json` counts them from the links' counters and
// times its own thread's CPU while the writes go; this runs it on the Galaxy's all_to_all for
// each payload size, clean and with one frame in a thousand corrupted, and takes the median of
// --repeat runs. ttemu sim runs on one thread, so per CPU second is per core.
//
// The raw baseline, measured in the same run: the least a simulated hop must do with a packet's
// bytes, in a tight loop with nothing else: write a 16-byte frame header and copy the payload
// into a pooled buffer, CRC it (ISA-L, as TT-link does), queue it on a "wire", take it off and
// check the CRC. The ratio says what share of a hop's cost is the bytes' own work; the rest is
// the fabric's logic (routing, buffers, credits, go-back-N, acks, the event queue).
//
//   ttemu_bench_sim [--sizes 64,4096] [--count N] [--repeat R] [--json]
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/bench/options.hpp"
#include "tools/bench/raw_udp.hpp"

namespace {

using nlohmann::json;

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Packet-hops per CPU second of the bytes' own work (see the header), over `hops` hops per packet.
double raw_hops_per_s(size_t size, uint64_t packets, int hops) {
  constexpr size_t kHeader = 16, kCrc = 4;
  std::vector<uint8_t> payload(size);
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<std::vector<uint8_t>> pool(8, std::vector<uint8_t>(kHeader + size + kCrc));
  std::deque<std::vector<uint8_t>> wire;
  uint64_t bad = 0;
  const double t0 = cpu_s();
  for (uint64_t p = 0; p < packets; ++p) {
    const uint8_t* in = payload.data();
    for (int h = 0; h < hops; ++h) {
      std::vector<uint8_t> frame = std::move(pool.back());
      pool.pop_back();
      std::memset(frame.data(), static_cast<int>(h), kHeader);
      std::memcpy(frame.data() + kHeader, in, size);
      const uint32_t crc = ttemu::link::crc32({frame.data(), kHeader + size});
      std::memcpy(frame.data() + kHeader + size, &crc, kCrc);
      wire.push_back(std::move(frame));
      std::vector<uint8_t> got = std::move(wire.front());
      wire.pop_front();
      uint32_t sent = 0;
      std::memcpy(&sent, got.data() + kHeader + size, kCrc);
      if (ttemu::link::crc32({got.data(), kHeader + size}) != sent) ++bad;
      pool.push_back(std::move(got));
      in = pool.back().data() + kHeader;  // the next hop sends what this one received
    }
  }
  const double spent = cpu_s() - t0;
  if (bad != 0) std::fprintf(stderr, "ttemu_bench_sim: raw baseline saw %llu CRC mismatches\n", static_cast<unsigned long long>(bad));
  return static_cast<double>(packets) * hops / spent;
}

struct SimFigure {
  double hops_per_cpu_s = 0;
  uint64_t packet_hops = 0;
  double cpu_s = 0;
  bool ok = false;
};

// One `ttemu sim` run of the Galaxy's all_to_all; ok when every byte verified.
SimFigure sim_run(const std::string& ttemu, size_t size, int count, const std::string& plan) {
  const std::string cmd = fmt::format("'{}' sim '{}' --pattern all_to_all --size {} --count {} --latency-samples 1 --json{}",
                                      ttemu, TTEMU_TOPOLOGIES "/galaxy.yaml", size, count,
                                      plan.empty() ? "" : fmt::format(" --faults '{}'", plan));
  SimFigure f;
  for (const auto& r : ttemu::bench::capture_json_lines(cmd)) {
    if (!r.contains("packet_hops")) continue;
    f.packet_hops = r["packet_hops"].get<uint64_t>();
    f.cpu_s = r["cpu_s"].get<double>();
    f.hops_per_cpu_s = r["packet_hops_per_cpu_s"].get<double>();
    f.ok = r["errors"].get<uint64_t>() == 0 && r["unanswered"].get<uint64_t>() == 0 && f.packet_hops > 0;
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes{64, 4096};
  int count = 16, repeat = 3;
  bool as_json = false;
  CLI::App app{"The simulator's speed: packet-hops per CPU second against the least a hop must do", "ttemu_bench_sim"};
  app.add_option("--sizes", sizes, "Payload sizes, comma-separated")
      ->delimiter(',')->check(ttemu::bench::whole_number<size_t>(1, 65536))->capture_default_str();
  app.add_option("--count", count, "Writes per pair")->check(ttemu::bench::whole_number(1, 10000))->capture_default_str();
  app.add_option("--repeat", repeat, "Runs per figure (the median is shown)")->check(ttemu::bench::whole_number(1, 100))->capture_default_str();
  app.add_flag("--json", as_json, "Print one JSON object");
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
  // A fault plan: one frame in a thousand corrupted on every direction of every link.
  char plan[] = "/tmp/ttemu-bench-sim-XXXXXX.yaml";
  const int fd = mkstemps(plan, 5);
  if (fd < 0 || write(fd, "defaults: {corrupt: 0.001}\n", 27) != 27) {
    std::fprintf(stderr, "ttemu_bench_sim: cannot write a fault plan in /tmp\n");
    return 1;
  }
  close(fd);

  json rows = json::array();
  bool ok = true;
  if (!as_json) {
    fmt::print("ttemu sim on the Galaxy, all_to_all, {} writes per pair; median of {} run(s); packet-hops per CPU second (one core)\n",
               count, repeat);
    fmt::print("{:>7} {:>12} {:>16} {:>16} {:>8}\n", "size", "faults", "ttemu sim", "raw baseline", "ratio");
  }
  for (size_t size : sizes) {
    // Enough packets for a stable figure, whatever the size: about 256 MiB through the loop.
    const uint64_t raw_packets = std::max<uint64_t>(20000, (uint64_t{256} << 20) / (size * 6));
    for (const std::string& faults : {std::string(), std::string(plan)}) {
      std::vector<double> fig, raw;
      uint64_t hops = 0;
      for (int r = 0; r < repeat; ++r) {
        const SimFigure f = sim_run(TTEMU_BINARY, size, count, faults);
        ok = ok && f.ok;
        fig.push_back(f.hops_per_cpu_s);
        hops = f.packet_hops;
        raw.push_back(raw_hops_per_s(size, raw_packets, 6));
      }
      const double sim = ttemu::bench::median(fig), base = ttemu::bench::median(raw);
      const std::string label = faults.empty() ? "none" : "corrupt 1e-3";
      rows.push_back({{"size", size}, {"faults", label}, {"packet_hops", hops}, {"sim_hops_per_cpu_s", sim},
                      {"sim_runs", fig}, {"raw_hops_per_cpu_s", base}, {"ratio", base > 0 ? sim / base : 0.0}});
      if (!as_json) {
        fmt::print("{:>7} {:>12} {:>14.2f} M {:>14.2f} M {:>8.3f}\n", size, label, sim / 1e6, base / 1e6, base > 0 ? sim / base : 0.0);
        std::fflush(stdout);
      }
    }
  }
  unlink(plan);
  if (as_json) fmt::print("{}\n", json{{"galaxy_all_to_all", rows}, {"writes_per_pair", count}, {"repeat", repeat}, {"ok", ok}}.dump());
  if (!ok) std::fprintf(stderr, "ttemu_bench_sim: a ttemu sim run failed, or did not verify every byte\n");
  return ok ? 0 : 1;
}
