// TT-link against raw UDP, measured in one run on this machine (the yardstick is the machine,
// not an absolute figure): throughput between two processes with 4 KiB datagrams and with the
// datagram size TT-link packs to, TT-link goodput between two chip processes (clean and at a
// frame error rate), and small-message round trips both ways. Prints raw, emulated, ratio.
//
//   ttemu_bench_link [--frames N] [--payload B] [--fer P] [--repeat R] [--json]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/bench/raw_udp.hpp"

namespace {

using namespace ttemu::bench;
using nlohmann::json;
json run_ttemu(const std::string& ttemu, const std::string& topology, const std::string& extra,
               const std::string& client) {
  std::string cmd = fmt::format("{} launch {} {} -- {} {} 2>/dev/null", ttemu, topology, extra, ttemu, client);
  auto docs = capture_json_lines(cmd);
  if (docs.empty()) throw std::runtime_error("no result from: " + cmd);
  return docs.back();
}


}  // namespace

int main(int argc, char** argv) {
  size_t frames = 100000, payload = 4096;
  double fer = 1e-3;
  bool as_json = false;
  int repeat = 3;
  std::string ttemu = TTEMU_BINARY, topology = TTEMU_TOPOLOGIES "/n300.yaml";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--frames" && i + 1 < argc) frames = std::stoul(argv[++i]);
    else if (a == "--payload" && i + 1 < argc) payload = std::stoul(argv[++i]);
    else if (a == "--fer" && i + 1 < argc) fer = std::stod(argv[++i]);
    else if (a == "--json") as_json = true;
    else if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::stoi(argv[++i]));
    else {
      fmt::print(stderr, "usage: ttemu_bench_link [--frames N] [--payload B] [--fer P] [--repeat R] [--json]\n");
      return 2;
    }
  }
  const size_t bytes = frames * payload;
  const size_t frame = payload + 20;
  const size_t packed = std::max<size_t>(frame, (65000 / frame) * frame);

  // Each figure is the median of `repeat` runs: this machine is shared and noisy.
  auto med = [&](auto f) {
    std::vector<double> v;
    for (int i = 0; i < repeat; ++i) v.push_back(f());
    return median(v);
  };
  double raw_small = med([&] { return raw_throughput(payload, bytes); });
  double raw_packed = med([&] { return raw_throughput(packed, bytes); });
  std::string client = fmt::format("link test M0D0P2 --frames {} --size {} --json", frames, payload);
  json clean, lossy;
  uint64_t verified = 0, errors = 0;  // over every run, clean and lossy
  double clean_rate = med([&] {
    clean = run_ttemu(ttemu, topology, "", client);
    verified += clean["verified"].get<uint64_t>();
    errors += clean["errors"].get<uint64_t>();
    return clean["gb_per_s"].get<double>();
  });
  std::string plan_path = fmt::format("/tmp/ttemu-bench-plan-{}.yaml", getpid());
  std::ofstream(plan_path) << fmt::format("links:\n  - link: all\n    corrupt: {}\n", fer);
  double lossy_rate = med([&] {
    lossy = run_ttemu(ttemu, topology, "--faults " + plan_path + " --seed 1", client);
    verified += lossy["verified"].get<uint64_t>();
    errors += lossy["errors"].get<uint64_t>();
    return lossy["gb_per_s"].get<double>();
  });
  std::filesystem::remove(plan_path);
  auto raw_rtt = raw_round_trips(64, 2000);
  json ping = run_ttemu(ttemu, topology, "", "link ping M0D0P2 --count 2000 --size 64 --json");

  const double tt_clean = clean_rate * 1e9;
  const double tt_lossy = lossy_rate * 1e9;
  const double raw_p50 = median(raw_rtt), tt_p50 = ping["p50_us"].get<double>();
  json result = {
      {"payload_bytes", payload}, {"frames", frames},
      {"raw_udp_gb_per_s", raw_small / 1e9}, {"raw_udp_packed_gb_per_s", raw_packed / 1e9},
      {"packed_datagram_bytes", packed},
      {"ttlink_gb_per_s", tt_clean / 1e9}, {"ttlink_vs_raw", tt_clean / raw_small},
      {"ttlink_vs_raw_packed", tt_clean / raw_packed},
      {"fer", fer}, {"ttlink_lossy_gb_per_s", tt_lossy / 1e9}, {"lossy_vs_clean", tt_lossy / tt_clean},
      {"lossy_crc_errors", lossy["crc_errors"]}, {"lossy_retransmits", lossy["retransmits"]},
      {"raw_rtt_p50_us", raw_p50}, {"ttlink_rtt_p50_us", tt_p50}, {"rtt_ratio", tt_p50 / raw_p50},
      {"repeat", repeat},
      {"verified", verified}, {"errors", errors}};
  if (as_json) {
    fmt::print("{}\n", result.dump());
  } else {
    fmt::print("TT-link vs raw UDP on this machine, {} payloads of {} B (median of {} runs)\n", frames, payload, repeat);
    fmt::print("  {:<44} {:>10} {:>10} {:>7}\n", "", "raw", "ttemu", "ratio");
    fmt::print("  {:<44} {:>7.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", fmt::format("throughput, raw datagrams of {} B", payload),
               raw_small / 1e9, tt_clean / 1e9, tt_clean / raw_small);
    fmt::print("  {:<44} {:>7.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", fmt::format("throughput, raw datagrams of {} B", packed),
               raw_packed / 1e9, tt_clean / 1e9, tt_clean / raw_packed);
    fmt::print("  {:<44} {:>7.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", fmt::format("goodput at frame error rate {} vs clean", fer),
               tt_clean / 1e9, tt_lossy / 1e9, tt_lossy / tt_clean);
    fmt::print("  {:<44} {:>8.1f} us {:>7.1f} us {:>7.2f}\n", "round trip, 64 B, median", raw_p50, tt_p50, tt_p50 / raw_p50);
    fmt::print("  (lossy run: {} CRC errors, {} retransmissions; every payload verified: {})\n",
               lossy["crc_errors"].get<uint64_t>(), lossy["retransmits"].get<uint64_t>(),
               result["errors"] == 0 ? "yes" : "NO");
  }
  return result["errors"] == 0 ? 0 : 1;
}
