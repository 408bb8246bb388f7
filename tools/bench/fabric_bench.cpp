// Fabric routers against raw UDP, in one run on this machine: small-write round trips (write
// and its acknowledgement) from M0D0 of a 4x4 mesh to devices 1 to 6 hops away give the
// per-hop latency (the slope, halved: the write and the ack each cross every hop), next to
// the raw UDP one-way latency (half a ping-pong between two processes) and a raw UDP relay
// with a process per chip that the write and its acknowledgement cross, in the order the
// routing tables send them (route_shapes: from 4 hops on, the acknowledgement comes back over
// other chips than the write); measured in turn with the routes, kLatencyPairs pairs in each
// launch, and compared pair by pair; and goodput of large writes over
// the longest route (median of 3, after a warm-up run) next to raw UDP throughput. Raw processes wait as the chips
// do: in epoll, after the same bounded spin (--spin-us, passed to the chips too).
//
// Each transport (--transport udp,uring,shm; all three by default) gets the same rows, and two more: the
// 6-hop goodput and the Galaxy's all_to_all goodput times its mean route length, each against
// one TT-link's goodput with that transport (each a median of 3 runs after a warm-up run: link
// tests, all_to_all runs). The Galaxy row also stands beside the same all_to_all relayed raw by
// a process per chip (raw_mesh.hpp) over the same kind of wire (UDP for udp and uring, shared-
// memory rings for shm), at two levels of work: checking CRCs only, and the least work the
// issue's cost model grants TT-link (a CRC on each side of a crossing, one copy per hop); and
// each relay beside one link: what an emulator with a process per chip could move here. The
// Galaxy runs three times: as launched by default, with its chips bound in blocks (--cpu-bind
// blocks), and under SCHED_BATCH (--sched batch); which goes first turns with the round.
//
// Warm-up: the first run on a fresh system pays for first touches that hardware never pays
// (the kernel allocating the chips' L1 pages as writes land, buffer pools filling): measured
// here, the first Galaxy all_to_all moved half (shm) to four fifths (udp) of the later runs.
//
// The machine is noisy (raw UDP's own figures swing by a factor of 1.5 between runs), so
// --repeat R measures everything R times, baselines included, and adds each ratio's median
// and range over the rounds.
//
//   ttemu_bench_fabric [--samples N] [--spin-us N] [--repeat R] [--transport LIST] [--json]
//   ttemu_bench_fabric --raw-chain SAMPLES SPIN_US   (the raw half of a latency pair, run by
//                                                     a launched system's client; one JSON line)
//   ttemu_bench_fabric --route-shapes                 (what the raw relay follows; one JSON line)
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_check.hpp"
#include "emulator/wire/transport.hpp"
#include "tools/bench/options.hpp"
#include "tools/bench/raw_mesh.hpp"
#include "tools/bench/raw_udp.hpp"

namespace {

using nlohmann::json;

// Measured runs of each goodput row, after a warm-up run.
constexpr size_t kBulkRuns = 3;
// Latency pairs per transport: the raw chain, then the fabric's routes, in turn, in one launch.
constexpr size_t kLatencyPairs = 3;
constexpr size_t kHops = 6;
// The latency routes: from M0D0 of the 4x4 mesh to devices 1..6 hops away (X first: along row
// 0, then down column 3).
constexpr const char* kMesh = TTEMU_TOPOLOGIES "/mesh_4x4.yaml";
constexpr size_t kMeshChips = 16, kGalaxyChips = 32;  // (for how their raw stand-ins wait)
constexpr std::array<const char*, kHops> kDestinations = {"M0D1", "M0D2", "M0D3", "M0D7", "M0D11", "M0D15"};

// Each latency route's shape for the raw relay: the chips that a write from M0D0 crosses to
// its destination, then those its acknowledgement crosses back, as the mesh's routing tables
// (plane 0) send them, numbered in order of first visit with M0D0 as node 0. Up to 3 hops the
// acknowledgement retraces the write; from 4 on it comes back over other chips (M0D15 answers
// through M0D14, M0D13, M0D12, M0D8 and M0D4), and the relay then has as many processes.
std::vector<std::vector<int>> route_shapes() {
  namespace control = ttemu::control;
  const control::System sys = control::load_system(kMesh);
  const control::TableSet tables = control::compute_tables(sys);
  auto node = [&](const std::string& name) { return *sys.node(*ttemu::routing::parse_chip(name)); };
  const int src = node("M0D0");
  std::vector<std::vector<int>> shapes;
  for (const char* dst : kDestinations) {
    std::map<int, int> id{{src, 0}};
    std::vector<int> shape{0};
    for (const auto& [from, to] : {std::pair{src, node(dst)}, std::pair{node(dst), src}}) {
      const control::Walk w = control::walk_route(sys, tables, 0, from, to);
      if (!w.arrived()) throw std::runtime_error(fmt::format("no route on {} to {}: {}", kMesh, dst, w.reason(sys)));
      for (const auto& hop : w.hops) {
        const int chip = *sys.node(hop.to.chip);
        shape.push_back(id.emplace(chip, static_cast<int>(id.size())).first->second);
      }
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

// A shell script running `one` (a command ending in "; ") as a warm-up, then kBulkRuns times.
std::string warm_up_and_measure(const std::string& one) {
  std::string all;
  for (size_t i = 0; i <= kBulkRuns; ++i) all += one;
  return all;
}

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

// One transport: latencies by hops and 6-hop goodput on the 4x4 mesh, all_to_all on the Galaxy.
struct FabricRun {
  std::vector<double> p50, raw_chain_p50;  // write + ack round trip by hops (median over the pairs); the raw chain's
  double per_hop_us = 0, raw_chain_hop_us = 0, per_hop_vs_raw_chain = 0;  // medians over the pairs
  double goodput = 0, galaxy_goodput = 0, galaxy_mean_hops = 0;
  double galaxy_bound_goodput = 0;  // the same all_to_all with --cpu-bind blocks
  double galaxy_batch_goodput = 0;  // and with --sched batch
  double verified = 0, errors = 0;
  bool ok = false;
};

FabricRun run_transport(const std::string& ttemu, const std::string& transport, int samples, int spin_us, int round) {
  FabricRun r;
  const std::string topo = kMesh;
  // Pairs, in turn: the raw relay (this program, run by the launched system's client while the
  // chips idle), then the same routes through the chips. How fast this machine wakes a process
  // on the other CPU drifts within seconds (the chain's hop read 17 to 31 us across one run's
  // rounds, a few seconds apart), so each pair's ratio is taken, and the median of the pairs.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string script;
  for (size_t k = 0; k < kLatencyPairs; ++k) {
    script += fmt::format("{} --raw-chain {} {}; ", self, samples, ttemu::bench::raw_spin(spin_us, kMeshChips).count());
    for (const auto& d : kDestinations) {
      script += fmt::format("{} traffic --pattern unicast --src M0D0 --dst {} --count 1 --size 64 "
                            "--latency-samples {} --json; ", ttemu, d, samples);
    }
  }
  auto runs = [&](const std::string& traffic_args) {
    return warm_up_and_measure(fmt::format("{} traffic {} --latency-samples 1 --json; ", ttemu, traffic_args));
  };
  script += runs("--pattern unicast --src M0D0 --dst M0D15 --count 48 --size 65536");
  const std::string opts = fmt::format("--transport {}{}", transport, ttemu::bench::spin_flag(spin_us));
  auto docs = ttemu::bench::launch_json(ttemu, topo, opts, fmt::format("sh -c '{}'", script));
  // The Galaxy as launched by default, bound (--cpu-bind blocks) and under SCHED_BATCH (--sched
  // batch), in turn; which goes first turns with the round, since a later launch of a series read
  // a few per cent faster here (docs/fabric.md#cpu-binding).
  auto galaxy_run = [&](const std::string& extra) {
    return ttemu::bench::launch_json(ttemu, TTEMU_TOPOLOGIES "/galaxy.yaml", opts + extra,
                                     fmt::format("sh -c '{}'", runs("--pattern all_to_all --count 4 --size 16384")));
  };
  const std::array<std::string, 3> variants{"", " --cpu-bind blocks", " --sched batch"};
  std::array<std::vector<json>, 3> galaxies;
  for (size_t k = 0; k < variants.size(); ++k) {
    const size_t v = (k + static_cast<size_t>(round)) % variants.size();
    galaxies[v] = galaxy_run(variants[v]);
  }
  const auto& [galaxy, bound, batch] = galaxies;
  const size_t latency_lines = kLatencyPairs * (1 + kHops);
  const bool galaxies_whole = std::all_of(galaxies.begin(), galaxies.end(), [](const auto& g) { return g.size() == 1 + kBulkRuns; });
  if (docs.size() != latency_lines + 1 + kBulkRuns || !galaxies_whole) {
    fmt::print(stderr, "ttemu_bench_fabric: --transport {}: expected {} + 3 x {} results, got {} + {} + {} + {}\n", transport,
               latency_lines + 1 + kBulkRuns, 1 + kBulkRuns, docs.size(), galaxy.size(), bound.size(), batch.size());
    return r;
  }
  // Half a slope is one hop one way (the write and its ack each cross every hop).
  std::vector<double> hops, raw_hops, ratios;
  std::vector<std::vector<double>> by_hops(kHops), raw_by_hops(kHops);
  for (size_t k = 0; k < kLatencyPairs; ++k) {
    const json& raw = docs[k * (1 + kHops)]["raw_chain_p50_us_by_hops"];
    std::vector<double> ours;
    for (size_t h = 0; h < kHops; ++h) {
      ours.push_back(docs[k * (1 + kHops) + 1 + h]["latency_us"]["p50"].get<double>());
      by_hops[h].push_back(ours.back());
      raw_by_hops[h].push_back(raw.at(h).get<double>());
    }
    hops.push_back(slope(ours) / 2);
    raw_hops.push_back(slope(raw.get<std::vector<double>>()) / 2);
    ratios.push_back(hops.back() / raw_hops.back());
  }
  for (size_t h = 0; h < kHops; ++h) {
    r.p50.push_back(ttemu::bench::median(by_hops[h]));
    r.raw_chain_p50.push_back(ttemu::bench::median(raw_by_hops[h]));
  }
  r.per_hop_us = ttemu::bench::median(hops);
  r.raw_chain_hop_us = ttemu::bench::median(raw_hops);
  r.per_hop_vs_raw_chain = ttemu::bench::median(ratios);
  // The goodputs of the measured runs; every run's bytes count as verified, the warm-up's too.
  auto measured = [&](const std::vector<json>& results, size_t warm_up_at) {
    std::vector<double> rates;
    for (size_t i = warm_up_at; i < results.size(); ++i) {
      if (i > warm_up_at) rates.push_back(results[i]["gb_per_s"].get<double>() * 1e9);
      r.verified += results[i]["verified"].get<double>();
      r.errors += results[i]["errors"].get<double>();
    }
    return rates;
  };
  const std::vector<double> bulk_rates = measured(docs, latency_lines), galaxy_rates = measured(galaxy, 0);
  r.goodput = ttemu::bench::median(bulk_rates);
  r.galaxy_goodput = ttemu::bench::median(galaxy_rates);
  r.galaxy_bound_goodput = ttemu::bench::median(measured(bound, 0));
  r.galaxy_batch_goodput = ttemu::bench::median(measured(batch, 0));
  r.galaxy_mean_hops = galaxy[0]["mean_hops"].get<double>();
  r.ok = true;
  return r;
}

// One TT-link's goodput with this transport (the yardstick of the multi-hop figures): the
// median of kBulkRuns link tests after a warm-up one, as the multi-hop rows are measured (a
// first test on a fresh system pays for first touches, and a single one swings by a factor of
// two here); every test's payloads count as verified.
double link_goodput(const std::string& ttemu, const std::string& transport, int spin_us, FabricRun& r) {
  const std::string script = warm_up_and_measure(ttemu + " link test M0D0P2 --frames 100000 --size 4096 --json; ");
  auto docs = ttemu::bench::launch_json(ttemu, TTEMU_TOPOLOGIES "/n300.yaml",
                                        fmt::format("--transport {}{}", transport, ttemu::bench::spin_flag(spin_us)),
                                        fmt::format("sh -c '{}'", script));
  if (docs.size() != 1 + kBulkRuns) return 0;
  std::vector<double> rates;
  for (size_t i = 0; i < docs.size(); ++i) {
    r.verified += docs[i]["verified"].get<double>() * 4096;
    r.errors += docs[i]["errors"].get<double>() * 4096;
    if (i > 0) rates.push_back(docs[i]["gb_per_s"].get<double>() * 1e9);
  }
  return ttemu::bench::median(rates);
}

// One round: the raw baselines, then every transport; false if some run failed or lost bytes.
bool measure_round(const std::vector<std::string>& transports, int samples, int spin_us, int round, json& result) {
  // The raw processes wait as the chips they stand for: the 4x4 mesh's for the latencies, the
  // Galaxy's for its relays.
  const ttemu::bench::Waiting as_mesh{ttemu::bench::raw_spin(spin_us, kMeshChips)};
  const ttemu::bench::Waiting as_galaxy{ttemu::bench::raw_spin(spin_us, kGalaxyChips)};
  const std::string ttemu = TTEMU_BINARY;
  const double raw_one_way = ttemu::bench::median(ttemu::bench::raw_round_trips(64, 2000, as_mesh)) / 2;
  const double raw_tput = ttemu::bench::raw_throughput(4096, 200000ull * 4096);
  // The Galaxy's all_to_all (4x8, 64 KiB per pair in 4 KiB chunks) relayed raw by a process per
  // chip, over UDP and over shared-memory rings, doing TT-link's work in part (raw_mesh.hpp).
  json meshes = json::object();
  bool meshes_ok = true;
  for (const char* wire : {"udp", "shm"}) {
    for (const auto& [name, work] : {std::pair{"crc_check", ttemu::bench::RelayWork::kCheckCrc},
                                     std::pair{"tt_link_least", ttemu::bench::RelayWork::kTtLinkLeast}}) {
      std::vector<double> runs;
      for (size_t i = 0; i < kBulkRuns; ++i) {
        const auto m = std::string(wire) == "udp" ? ttemu::bench::raw_mesh_all_to_all(4, 8, 65536, 4096, work, as_galaxy)
                                                  : ttemu::bench::raw_shm_mesh_all_to_all(4, 8, 65536, 4096, work);
        if (m.complete) runs.push_back(m.crossings_per_s);
      }
      meshes[wire][name] = ttemu::bench::median(runs) / 1e9;
      meshes_ok = meshes_ok && !runs.empty();
    }
  }

  json by_transport = json::object();
  double errors = 0;
  bool ok = true;
  for (const auto& t : transports) {
    FabricRun r = run_transport(ttemu, t, samples, spin_us, round);
    const double link = link_goodput(ttemu, t, spin_us, r);
    ok = ok && r.ok && link > 0;
    errors += r.errors;
    const std::string wire = t == "shm" ? "shm" : "udp";  // the relay over the same kind of wire
    const double galaxy = r.galaxy_goodput * r.galaxy_mean_hops;
    const double raw_mesh = meshes[wire]["crc_check"].get<double>() * 1e9;
    const double least = meshes[wire]["tt_link_least"].get<double>() * 1e9;
    by_transport[t] = {
        {"round_trip_p50_us_by_hops", r.p50}, {"per_hop_us", r.per_hop_us},
        {"per_hop_vs_raw", r.per_hop_us / raw_one_way}, {"raw_chain_per_hop_us", r.raw_chain_hop_us},
        {"raw_chain_round_trip_p50_us_by_hops", r.raw_chain_p50}, {"per_hop_vs_raw_chain", r.per_hop_vs_raw_chain},
        {"six_hop_goodput_gb_per_s", r.goodput / 1e9}, {"goodput_vs_raw", r.goodput / raw_tput},
        {"link_goodput_gb_per_s", link / 1e9}, {"six_hop_vs_link", link > 0 ? r.goodput / link : 0.0},
        {"galaxy_all_to_all_gb_per_s", r.galaxy_goodput / 1e9}, {"galaxy_mean_hops", r.galaxy_mean_hops},
        {"galaxy_x_hops_vs_link", link > 0 ? galaxy / link : 0.0}, {"raw_mesh_wire", wire},
        {"galaxy_bound_all_to_all_gb_per_s", r.galaxy_bound_goodput / 1e9},
        {"galaxy_bound_x_hops_vs_link", link > 0 ? r.galaxy_bound_goodput * r.galaxy_mean_hops / link : 0.0},
        {"galaxy_bound_vs_unbound", r.galaxy_goodput > 0 ? r.galaxy_bound_goodput / r.galaxy_goodput : 0.0},
        {"galaxy_batch_all_to_all_gb_per_s", r.galaxy_batch_goodput / 1e9},
        {"galaxy_batch_x_hops_vs_link", link > 0 ? r.galaxy_batch_goodput * r.galaxy_mean_hops / link : 0.0},
        {"galaxy_batch_vs_normal", r.galaxy_goodput > 0 ? r.galaxy_batch_goodput / r.galaxy_goodput : 0.0},
        {"galaxy_x_hops_vs_raw_mesh", raw_mesh > 0 ? galaxy / raw_mesh : 0.0},
        {"raw_mesh_vs_link", link > 0 ? raw_mesh / link : 0.0},
        {"galaxy_x_hops_vs_least_work_mesh", least > 0 ? galaxy / least : 0.0},
        {"least_work_mesh_vs_link", link > 0 ? least / link : 0.0},
        {"verified", r.verified}, {"errors", r.errors}};
  }
  result = {{"raw_udp_one_way_us", raw_one_way}, {"raw_udp_gb_per_s", raw_tput / 1e9},
            {"raw_mesh_all_to_all_x_hops_gb_per_s", meshes},
            {"spin_us", ttemu::bench::spin_json(spin_us)}, {"transports", by_transport}, {"errors", errors}};
  return ok && errors == 0 && meshes_ok;
}

void print_round(const json& result, int spin_us, int round, int repeat) {
  const double raw_one_way = result["raw_udp_one_way_us"].get<double>();
  const double raw_tput = result["raw_udp_gb_per_s"].get<double>() * 1e9;
  const json& meshes = result["raw_mesh_all_to_all_x_hops_gb_per_s"];
  const json& by_transport = result["transports"];
  if (repeat > 1) fmt::print("Round {} of {}\n", round + 1, repeat);
  fmt::print("Fabric routers vs raw UDP on this machine (4x4 mesh and Galaxy, one process per chip; all wait\n"
             "in the kernel when idle{})\n", spin_us > 0 ? fmt::format(", after a {} us spin", spin_us)
                                             : spin_us < 0 ? std::string(", after the spin the launch chooses for each system") : std::string());
  fmt::print("  {:<48} {:>10} {:>10} {:>7}\n", "", "raw", "ttemu", "ratio");
  for (const auto& [t, r] : by_transport.items()) {
    const double hop = r["per_hop_us"].get<double>(), six = r["six_hop_goodput_gb_per_s"].get<double>();
    const double link = r["link_goodput_gb_per_s"].get<double>();
    const double raw_chain_hop = r["raw_chain_per_hop_us"].get<double>();
    fmt::print("  --transport {}: write + ack round trip, median, by hops:", t);
    const auto& p50 = r["round_trip_p50_us_by_hops"];
    for (size_t i = 0; i < p50.size(); ++i) fmt::print(" {}:{:.0f}us", i + 1, p50[i].get<double>());
    fmt::print("\n");
    fmt::print("  {:<48} {:>7.1f} us {:>7.1f} us {:>7.2f}\n", "per-hop one-way latency (64 B)", raw_one_way, hop, hop / raw_one_way);
    fmt::print("  {:<48} {:>7.1f} us {:>7.1f} us {:>7.2f}\n", "  vs raw UDP relayed by a process per hop*", raw_chain_hop, hop,
               r["per_hop_vs_raw_chain"].get<double>());
    // A goodput row: what it is, the yardstick, ttemu's figure (GB/s), their ratio.
    const auto gb_row = [](const std::string& what, double raw, double ours, double ratio) {
      fmt::print("  {:<48} {:>5.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", what, raw, ours, ratio);
    };
    gb_row("goodput, 64 KiB writes over 6 hops", raw_tput / 1e9, six, six * 1e9 / raw_tput);
    gb_row("  vs one TT-link (link test)", link, six, r["six_hop_vs_link"].get<double>());
    const double galaxy = r["galaxy_all_to_all_gb_per_s"].get<double>() * r["galaxy_mean_hops"].get<double>();
    gb_row(fmt::format("Galaxy all_to_all x {:.2f} mean hops vs one link", r["galaxy_mean_hops"].get<double>()), link, galaxy,
           r["galaxy_x_hops_vs_link"].get<double>());
    gb_row("  the same, --cpu-bind blocks", link,
           r["galaxy_bound_all_to_all_gb_per_s"].get<double>() * r["galaxy_mean_hops"].get<double>(),
           r["galaxy_bound_x_hops_vs_link"].get<double>());
    fmt::print("  {:<48} {:>10} {:>10} {:>7.2f}\n", "  (bound vs unbound)", "", "", r["galaxy_bound_vs_unbound"].get<double>());
    gb_row("  the same, --sched batch", link,
           r["galaxy_batch_all_to_all_gb_per_s"].get<double>() * r["galaxy_mean_hops"].get<double>(),
           r["galaxy_batch_x_hops_vs_link"].get<double>());
    fmt::print("  {:<48} {:>10} {:>10} {:>7.2f}\n", "  (batch vs normal)", "", "", r["galaxy_batch_vs_normal"].get<double>());
    const std::string wire = r["raw_mesh_wire"].get<std::string>();
    const std::string relayed = wire == "shm" ? "over shm rings" : "in raw UDP";
    const double raw_mesh = meshes[wire]["crc_check"].get<double>(), least = meshes[wire]["tt_link_least"].get<double>();
    gb_row("  vs relayed " + relayed + ", CRCs checked", raw_mesh, galaxy, r["galaxy_x_hops_vs_raw_mesh"].get<double>());
    gb_row("  vs relayed doing TT-link's least work", least, galaxy, r["galaxy_x_hops_vs_least_work_mesh"].get<double>());
    gb_row("  (the CRC-checking relay vs one link)", link, raw_mesh, r["raw_mesh_vs_link"].get<double>());
    gb_row("  (the least-work relay vs one link)", link, least, r["least_work_mesh_vs_link"].get<double>());
    fmt::print("  (verified {} bytes, errors {})\n", r["verified"].get<double>(), r["errors"].get<double>());
  }
  fmt::print("  * the raw chain and the routes measured in turn, {} pairs in each launch; medians, and the pairs' median ratio\n",
             kLatencyPairs);
}

// Per transport, the ratios of the table over all rounds: median, min and max.
json summarise(const json& rounds) {
  json out = json::object();
  for (const auto& [t, first] : rounds[0]["transports"].items()) {
    for (const char* row : {"per_hop_vs_raw_chain", "six_hop_vs_link", "galaxy_x_hops_vs_link", "galaxy_bound_x_hops_vs_link",
                            "galaxy_bound_vs_unbound", "galaxy_batch_x_hops_vs_link", "galaxy_batch_vs_normal", "galaxy_x_hops_vs_raw_mesh",
                            "raw_mesh_vs_link", "galaxy_x_hops_vs_least_work_mesh", "least_work_mesh_vs_link"}) {
      std::vector<double> v;
      for (const auto& r : rounds) v.push_back(r["transports"][t][row].get<double>());
      out[t][row] = {{"median", ttemu::bench::median(v)},
                     {"min", *std::min_element(v.begin(), v.end())},
                     {"max", *std::max_element(v.begin(), v.end())}};
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int samples = 300, spin_us = ttemu::bench::kLaunchChooses, repeat = 1;
  bool as_json = false;
  std::vector<std::string> transports = ttemu::wire::kTransports;
  std::vector<int> raw_chain;  // SAMPLES SPIN_US
  CLI::App app{"Fabric routers against raw UDP: per-hop latency and goodput, per transport", "ttemu_bench_fabric"};
  // Up to what ttemu traffic --latency-samples accepts.
  auto* samples_opt = app.add_option("--samples", samples, "Latency samples per route")
                          ->check(ttemu::bench::whole_number(1, 100000))->capture_default_str();
  auto* spin_opt = ttemu::bench::add_spin_us(app, spin_us, "Chips and raw processes spin this long before they sleep");
  auto* repeat_opt = ttemu::bench::add_repeat(app, repeat, "Measure everything this many times; add each ratio's median and range");
  auto* transport_opt = ttemu::bench::add_transports(app, transports, "Transports to measure, comma-separated");
  auto* json_opt = app.add_flag("--json", as_json, "Print one JSON object");
  // The raw half of a latency pair, run by a launched system's client (run_transport). Not
  // hidden: CLI11 leaves a hidden option's name out of its errors.
  app.add_option("--raw-chain", raw_chain, "SAMPLES SPIN_US: the raw UDP relay along the routes alone, one JSON line")
      ->expected(2)
      ->check(ttemu::bench::whole_number(1, 100000).application_index(0))
      ->check(ttemu::bench::whole_number(0, ttemu::bench::kMaxSpinUs).application_index(1))
      ->excludes(samples_opt)->excludes(spin_opt)->excludes(repeat_opt)->excludes(transport_opt)->excludes(json_opt)
      ->group(ttemu::bench::kInternal);
  bool shapes = false;
  app.add_flag("--route-shapes", shapes, "Print the latency routes' shapes that the raw relay follows, one JSON line")
      ->excludes(samples_opt)->excludes(spin_opt)->excludes(repeat_opt)->excludes(transport_opt)->excludes(json_opt)
      ->group(ttemu::bench::kInternal);
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
  if (shapes) {
    json out = json::object();
    const auto all = route_shapes();
    for (size_t i = 0; i < kHops; ++i) out[kDestinations[i]] = all[i];
    fmt::print("{}\n", out.dump());
    return 0;
  }
  if (!raw_chain.empty()) {
    const ttemu::bench::Waiting waiting{std::chrono::microseconds(raw_chain[1])};
    std::vector<double> chain;
    for (const auto& shape : route_shapes()) {
      chain.push_back(ttemu::bench::median(ttemu::bench::raw_route_round_trips(shape, 64, raw_chain[0], waiting)));
    }
    fmt::print("{}\n", json{{"raw_chain_p50_us_by_hops", chain}}.dump());
    return 0;
  }
  json rounds = json::array();
  bool ok = true;
  for (int round = 0; round < repeat; ++round) {
    json result;
    ok = measure_round(transports, samples, spin_us, round, result) && ok;
    if (!as_json) print_round(result, spin_us, round, repeat);
    rounds.push_back(std::move(result));
  }
  const json summary = summarise(rounds);
  if (as_json) {
    fmt::print("{}\n", (repeat == 1 ? rounds[0] : json{{"rounds", rounds}, {"summary", summary}}).dump());
  } else if (repeat > 1) {
    fmt::print("Over {} rounds, ratios as median [min-max]:\n", repeat);
    for (const auto& [t, rows] : summary.items()) {
      fmt::print("  --transport {}:", t);
      for (const auto& [row, v] : rows.items()) {
        fmt::print(" {} {:.2f} [{:.2f}-{:.2f}];", row, v["median"].get<double>(), v["min"].get<double>(), v["max"].get<double>());
      }
      fmt::print("\n");
    }
  }
  return ok ? 0 : 1;
}
