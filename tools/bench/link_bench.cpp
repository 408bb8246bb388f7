// TT-link against raw UDP, measured in one run on this machine (the yardstick is the machine,
// not an absolute figure): throughput between two processes with 4 KiB datagrams and with the
// datagram size TT-link packs to, TT-link goodput between two chip processes (clean and at a
// frame error rate), and small-message round trips both ways. Prints raw, emulated, ratio.
//
// Each transport (--transport udp,uring,shm; all three by default) is measured against the same raw
// figures; shm also against Wormhole's line rate, and against a raw shared-memory ring between
// two processes doing TT-link's least work (raw_shm.hpp): what this machine allows today. And
// raw UDP doing TT-link's least work (raw_udp.hpp, LeastWork) against raw UDP doing nothing:
// how much of the packed yardstick any TT-link over sockets can reach here.
//
//   ttemu_bench_link [--frames N] [--payload B] [--fer P] [--repeat R] [--transport LIST]
//                    [--spin-us N] [--json]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/link/frame.hpp"
#include "emulator/wire/transport.hpp"
#include "launcher/control_requests.hpp"
#include "tools/bench/options.hpp"
#include "tools/bench/raw_shm.hpp"
#include "tools/bench/raw_udp.hpp"

namespace {

using namespace ttemu::bench;
using nlohmann::json;
json run_ttemu(const std::string& ttemu, const std::string& topology, const std::string& extra,
               const std::string& client) {
  auto docs = launch_json(ttemu, topology, extra, ttemu + " " + client);
  if (docs.empty()) throw std::runtime_error(fmt::format("no result from: ttemu launch {} {} -- ttemu {}", topology, extra, client));
  return docs.back();
}


}  // namespace

// Wormhole's ethernet line rate (100 Gb/s links, 12.5 GB/s): the yardstick of a link between two
// chips of one host, where no kernel stands between them.
constexpr double kWormholeLineRate = 12.5e9;

int main(int argc, char** argv) {
  // 500,000 frames: at FER 1e-3 a lossy run sees about 500 losses over half a second or more.
  // With 100,000 (0.15 s here) one timeout, or one scheduling hiccup, moved a pair's ratio by
  // several per cent.
  size_t frames = 500000, payload = 4096;
  double fer = 1e-3;
  bool as_json = false;
  int repeat = 3, spin_us = ttemu::bench::kLaunchChooses;
  std::vector<std::string> transports = ttemu::wire::kTransports;
  std::string ttemu = TTEMU_BINARY, topology = TTEMU_TOPOLOGIES "/n300.yaml";
  CLI::App app{"TT-link against raw UDP: throughput, goodput at a frame error rate, round trips", "ttemu_bench_link"};
  // Bounds: what `ttemu link test` accepts.
  app.add_option("--frames", frames, "Payloads per link test")
      ->check(ttemu::bench::whole_number<size_t>(1, ttemu::launcher::kMaxStreamFrames))->capture_default_str();
  app.add_option("--payload", payload, "Bytes per payload")
      ->check(ttemu::bench::whole_number<size_t>(ttemu::launcher::kMinTestPayload, ttemu::link::kMaxPayload))
      ->capture_default_str();
  // At a frame error rate of 1 nothing would ever arrive.
  app.add_option("--fer", fer, "Frame error rate of the lossy runs")->check(ttemu::bench::number_in(0, 1, true))->capture_default_str();
  ttemu::bench::add_repeat(app, repeat, "Runs per figure (the median is shown)");
  ttemu::bench::add_transports(app, transports, "Transports to measure, comma-separated");
  ttemu::bench::add_spin_us(app, spin_us, "Chips and raw processes spin this long before they sleep");
  app.add_flag("--json", as_json, "Print one JSON object");
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
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
  // Each least-work run paired with a raw one just before it, the ratio taken pair by pair.
  std::vector<double> least_rates, least_vs_raw;
  const double raw_least = med([&] {
    const double raw = raw_throughput(packed, bytes);
    least_rates.push_back(raw_throughput(packed, bytes, LeastWork{payload, packed / frame}));
    if (raw > 0) least_vs_raw.push_back(least_rates.back() / raw);
    return least_rates.back();
  });
  const double least_ratio = least_vs_raw.empty() ? 0 : median(least_vs_raw);
  // A least-work run that measured nothing had a frame whose CRC did not match.
  const bool least_failed = std::count(least_rates.begin(), least_rates.end(), 0.0) > 0;
  // Raw round trips wait as the N300's two chips do: in epoll, after the same bounded spin.
  auto raw_rtt = raw_round_trips(64, 2000, Waiting{ttemu::bench::raw_spin(spin_us, 2)});
  const double raw_p50 = median(raw_rtt);
  std::string client = fmt::format("link test M0D0P2 --frames {} --size {} --json", frames, payload);
  const ScratchFile plan(fmt::format("links:\n  - link: all\n    corrupt: {}\n", fer));
  uint64_t verified = 0, errors = least_failed ? 1 : 0;  // over every run, clean and lossy, and the raw least work
  json by_transport = json::object();
  for (const auto& t : transports) {
    const std::string opts = fmt::format("--transport {}{}", t, ttemu::bench::spin_flag(spin_us));
    json clean, lossy;
    // shm: each clean run right after a raw shm ring's, and the ratio taken pair by pair (how
    // fast the two CPUs share data changes from one second to the next here). Likewise each
    // lossy run right after a clean one: its cost is a few per cent, the drift between runs
    // more.
    std::vector<double> raw_shm_rates, vs_raw_shm, clean_rates, lossy_rates, lossy_vs_clean;
    for (int i = 0; i < repeat; ++i) {
      if (t == "shm") raw_shm_rates.push_back(raw_shm_stream(payload, packed / frame, bytes));
      clean = run_ttemu(ttemu, topology, opts, client);
      lossy = run_ttemu(ttemu, topology, opts + " --faults " + plan.path() + " --seed 1", client);
      for (const json* r : {&clean, &lossy}) {
        verified += (*r)["verified"].get<uint64_t>();
        errors += (*r)["errors"].get<uint64_t>();
      }
      clean_rates.push_back(clean["gb_per_s"].get<double>() * 1e9);
      lossy_rates.push_back(lossy["gb_per_s"].get<double>() * 1e9);
      if (clean_rates.back() > 0) lossy_vs_clean.push_back(lossy_rates.back() / clean_rates.back());
      if (t == "shm" && raw_shm_rates.back() > 0) vs_raw_shm.push_back(clean_rates.back() / raw_shm_rates.back());
    }
    const double clean_rate = median(clean_rates), lossy_rate = median(lossy_rates);
    json ping = run_ttemu(ttemu, topology, opts, "link ping M0D0P2 --count 2000 --size 64 --json");
    const double tt_p50 = ping["p50_us"].get<double>();
    by_transport[t] = {
        {"ttlink_gb_per_s", clean_rate / 1e9}, {"ttlink_vs_raw", clean_rate / raw_small},
        {"ttlink_vs_raw_packed", clean_rate / raw_packed}, {"ttlink_vs_line_rate", clean_rate / kWormholeLineRate},
        {"ttlink_vs_raw_udp_least_work", clean_rate / raw_least},
        {"raw_shm_least_work_gb_per_s", t == "shm" ? median(raw_shm_rates) / 1e9 : 0.0},
        {"ttlink_vs_raw_shm", t == "shm" ? median(vs_raw_shm) : 0.0},
        {"ttlink_lossy_gb_per_s", lossy_rate / 1e9}, {"lossy_vs_clean", median(lossy_vs_clean)},
        {"lossy_crc_errors", lossy["crc_errors"]}, {"lossy_retransmits", lossy["retransmits"]},
        {"ttlink_rtt_p50_us", tt_p50}, {"rtt_ratio", tt_p50 / raw_p50}};
  }

  json result = {
      {"payload_bytes", payload}, {"frames", frames}, {"spin_us", ttemu::bench::spin_json(spin_us)},
      {"raw_udp_gb_per_s", raw_small / 1e9}, {"raw_udp_packed_gb_per_s", raw_packed / 1e9},
      {"packed_datagram_bytes", packed}, {"fer", fer}, {"raw_rtt_p50_us", raw_p50},
      {"raw_udp_least_work_gb_per_s", raw_least / 1e9}, {"raw_udp_least_work_vs_packed", least_ratio},
      {"line_rate_gb_per_s", kWormholeLineRate / 1e9}, {"transports", by_transport},
      {"repeat", repeat}, {"verified", verified}, {"errors", errors}};
  if (as_json) {
    fmt::print("{}\n", result.dump());
  } else {
    fmt::print("TT-link vs raw UDP on this machine, {} payloads of {} B (median of {} runs, {})\n", frames, payload,
               repeat,
               spin_us == ttemu::bench::kLaunchChooses ? fmt::format("chips and raw processes spin as ttemu launch chooses: {} us with a CPU per chip, else 0",
                                                                    ttemu::launcher::kAutoSpinUs)
                                                      : fmt::format("chips spin {} us", spin_us));
    fmt::print("  {:<54} {:>10} {:>10} {:>7}\n", "", "raw", "ttemu", "ratio");
    // A rate row: what it is, the yardstick, ttemu's figure (bytes per second), their ratio.
    const auto gb_row = [](const std::string& what, double raw, double ours, double ratio) {
      fmt::print("  {:<54} {:>7.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", what, raw / 1e9, ours / 1e9, ratio);
    };
    gb_row(fmt::format("raw datagrams of {} B doing TT-link's least work**", packed), raw_packed, raw_least, least_ratio);
    for (const auto& [t, r] : by_transport.items()) {
      const double tt = r["ttlink_gb_per_s"].get<double>() * 1e9;
      fmt::print("  --transport {}\n", t);
      gb_row(fmt::format("throughput, raw datagrams of {} B", payload), raw_small, tt, tt / raw_small);
      gb_row(fmt::format("throughput, raw datagrams of {} B", packed), raw_packed, tt, tt / raw_packed);
      if (t != "shm") gb_row("  vs raw datagrams doing TT-link's least work**", raw_least, tt, tt / raw_least);
      if (t == "shm") {
        const double raw_shm = r["raw_shm_least_work_gb_per_s"].get<double>() * 1e9;
        gb_row("Wormhole line rate", kWormholeLineRate, tt, tt / kWormholeLineRate);
        gb_row("  vs a raw shm ring doing TT-link's least work*", raw_shm, tt, r["ttlink_vs_raw_shm"].get<double>());
        gb_row("  (the raw shm ring vs line rate)", kWormholeLineRate, raw_shm, raw_shm / kWormholeLineRate);
      }
      gb_row(fmt::format("goodput at frame error rate {} vs clean***", fer), tt, r["ttlink_lossy_gb_per_s"].get<double>() * 1e9,
             r["lossy_vs_clean"].get<double>());
      fmt::print("  {:<54} {:>8.1f} us {:>7.1f} us {:>7.2f}\n", "round trip, 64 B, median", raw_p50,
                 r["ttlink_rtt_p50_us"].get<double>(), r["rtt_ratio"].get<double>());
      fmt::print("  (lossy run: {} CRC errors, {} retransmissions)\n", r["lossy_crc_errors"].get<uint64_t>(),
                 r["lossy_retransmits"].get<uint64_t>());
    }
    if (by_transport.contains("shm")) {
      fmt::print("  * each clean run paired with a raw ring's just before it; the ratio is the pairs' median\n");
    }
    fmt::print("  ** a CRC per frame on each side, the payload copied out (raw_udp.hpp, LeastWork): the most a\n"
               "     TT-link over sockets can move here against the packed yardstick; runs paired, median ratio\n");
    fmt::print("  *** each lossy run paired with a clean one just before it; the ratio is the pairs' median\n");
    fmt::print("  every payload verified: {}\n", errors == 0 ? "yes" : "NO");
  }
  return errors == 0 ? 0 : 1;
}
