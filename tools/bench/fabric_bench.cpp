// Fabric routers against raw UDP, in one run on this machine: small-write round trips (write
// and its acknowledgement) from M0D0 of a 4x4 mesh to devices 1 to 6 hops away give the
// per-hop latency (the slope, halved: the write and the ack each cross every hop), next to
// the raw UDP one-way latency (half a ping-pong between two processes) and a raw UDP relay
// through a chain of one process per hop (the same shape); and goodput of large writes over
// the longest route (median of 3) next to raw UDP throughput. Raw processes wait as the chips
// do: in epoll, after the same bounded spin (--spin-us, passed to the chips too).
//
//   ttemu_bench_fabric [--samples N] [--spin-us N] [--json]
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/bench/raw_udp.hpp"

namespace {

using nlohmann::json;

// Least-squares slope of ys over x = 1, 2, ... (microseconds per hop of a round trip).
double slope(const std::vector<double>& ys) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < ys.size(); ++i) {
    const double x = static_cast<double>(i + 1);
    sx += x, sy += ys[i], sxx += x * x, sxy += x * ys[i];
  }
  const double k = static_cast<double>(ys.size());
  return (k * sxy - sx * sy) / (k * sxx - sx * sx);
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 300, spin_us = 0;
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--samples" && i + 1 < argc) samples = std::stoi(argv[++i]);
    else if (a == "--spin-us" && i + 1 < argc) spin_us = std::stoi(argv[++i]);
    else if (a == "--json") as_json = true;
    else {
      fmt::print(stderr, "usage: ttemu_bench_fabric [--samples N] [--spin-us N] [--json]\n");
      return 2;
    }
  }
  const ttemu::bench::Waiting waiting{std::chrono::microseconds(spin_us)};
  const std::string ttemu = TTEMU_BINARY;
  const std::string topo = TTEMU_TOPOLOGIES "/mesh_4x4.yaml";
  // Destinations 1..6 hops from M0D0 (X first: along row 0, then down column 3).
  const std::vector<std::string> dsts = {"M0D1", "M0D2", "M0D3", "M0D7", "M0D11", "M0D15"};
  std::string script;
  for (const auto& d : dsts) {
    script += fmt::format("{} traffic --pattern unicast --src M0D0 --dst {} --count 1 --size 64 "
                          "--latency-samples {} --json; ", ttemu, d, samples);
  }
  constexpr size_t kBulkRuns = 3;
  for (size_t i = 0; i < kBulkRuns; ++i) {
    script += fmt::format("{} traffic --pattern unicast --src M0D0 --dst M0D15 --count 48 --size 65536 "
                          "--latency-samples 1 --json; ", ttemu);
  }
  auto docs = ttemu::bench::capture_json_lines(fmt::format("{} launch {} --spin-us {} -- sh -c '{}' 2>/dev/null", ttemu, topo, spin_us, script));
  if (docs.size() != dsts.size() + kBulkRuns) {
    fmt::print(stderr, "ttemu_bench_fabric: expected {} results, got {}\n", dsts.size() + kBulkRuns, docs.size());
    return 1;
  }
  // Median round trips by hops; half their slope is one hop one way.
  std::vector<double> p50;
  for (size_t i = 0; i < dsts.size(); ++i) p50.push_back(docs[i]["latency_us"]["p50"].get<double>());
  const double per_hop = slope(p50) / 2;
  const double raw_one_way = ttemu::bench::median(ttemu::bench::raw_round_trips(64, 2000, waiting)) / 2;
  // The same chain shape in raw UDP: one process per hop, 1 to 6 hops.
  std::vector<double> chain;
  for (int h = 1; h <= 6; ++h) chain.push_back(ttemu::bench::median(ttemu::bench::raw_chain_round_trips(h, 64, samples, waiting)));
  const double raw_chain_hop = slope(chain) / 2;
  const double raw_tput = ttemu::bench::raw_throughput(4096, 200000ull * 4096);
  std::vector<double> bulk_rates;
  double bulk_verified = 0, bulk_errors = 0;
  for (size_t i = dsts.size(); i < docs.size(); ++i) {
    bulk_rates.push_back(docs[i]["gb_per_s"].get<double>() * 1e9);
    bulk_verified += docs[i]["verified"].get<double>();
    bulk_errors += docs[i]["errors"].get<double>();
  }
  const double goodput = ttemu::bench::median(bulk_rates);
  json result = {{"per_hop_us", per_hop}, {"raw_udp_one_way_us", raw_one_way}, {"per_hop_vs_raw", per_hop / raw_one_way},
                 {"raw_chain_per_hop_us", raw_chain_hop}, {"per_hop_vs_raw_chain", per_hop / raw_chain_hop},
                 {"raw_chain_round_trip_p50_us_by_hops", chain},
                 {"round_trip_p50_us_by_hops", p50}, {"six_hop_goodput_gb_per_s", goodput / 1e9},
                 {"raw_udp_gb_per_s", raw_tput / 1e9}, {"goodput_vs_raw", goodput / raw_tput},
                 {"spin_us", spin_us}, {"verified", bulk_verified}, {"errors", bulk_errors}};
  if (as_json) {
    fmt::print("{}\n", result.dump());
  } else {
    fmt::print("Fabric routers vs raw UDP on this machine (4x4 mesh, one process per chip; all wait in\n"
               "epoll{})\n", spin_us ? fmt::format(" after a {} us spin", spin_us) : std::string());
    fmt::print("  write + ack round trip, median, by hops:");
    for (size_t i = 0; i < p50.size(); ++i) fmt::print(" {}:{:.0f}us", i + 1, p50[i]);
    fmt::print("\n  {:<40} {:>10} {:>10} {:>7}\n", "", "raw", "ttemu", "ratio");
    fmt::print("  {:<40} {:>7.1f} us {:>7.1f} us {:>7.2f}\n", "per-hop one-way latency (64 B)", raw_one_way, per_hop, per_hop / raw_one_way);
    fmt::print("  {:<40} {:>7.1f} us {:>7.1f} us {:>7.2f}\n", "  vs raw UDP relayed by a process per hop", raw_chain_hop, per_hop, per_hop / raw_chain_hop);
    fmt::print("  {:<40} {:>5.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", "goodput, 64 KiB writes over 6 hops", raw_tput / 1e9, goodput / 1e9, goodput / raw_tput);
    fmt::print("  (bulk runs verified {} bytes, errors {})\n", bulk_verified, bulk_errors);
  }
  return bulk_errors == 0 ? 0 : 1;
}
