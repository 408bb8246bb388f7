// fi_pingpong over the tt provider against libfabric's own providers, in one run: one-way
// latency of 64-byte messages and pingpong bandwidth of 1 MiB messages (fi_pingpong's own
// "usec/xfer" and "MB/sec"), RDM endpoints everywhere:
//   - tt, server on M0D0 of a 4x4 mesh and client on M0D1 (1 hop) and on M0D15 (6 hops), both
//     bound with `ttemu run` inside one `ttemu launch` of the mesh (--transport chooses how
//     its links move datagrams), once with chips that sleep when idle (the default) and once
//     with chips that poll for --spin-us after traffic, as the clients themselves poll;
//   - udp (through libfabric's ofi_rxd, which gives it RDM), tcp and shm, on loopback.
// Prints each figure with the ratios to udp (the issue's yardstick: bandwidth at 1 MiB >= udp's,
// one-hop latency <= 2x udp's); --json prints one object. The median of --repeat runs.
//
//   ttemu_bench_libfabric [--repeat R] [--iterations N] [--transport T] [--spin-us N] [--json]
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/free_port.hpp"
#include "tools/bench/options.hpp"

namespace {

using nlohmann::json;

std::string shell(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(command.c_str(), "r"), pclose);
  if (!p) throw std::runtime_error("popen failed: " + command);
  std::string out;
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p.get())) > 0;) out.append(buf.data(), n);
  return out;
}


// The script that runs one fi_pingpong pair: $1 provider, $2 size, $3 iterations, $4 a free
// port, and for tt the chips ($5 server, $6 client); prints the client's result row prefixed
// with "ROW".
const char* kPair = R"SH(
pair() {
  local prov=$1 size=$2 iters=$3 port=$4 server=${5:-} client=${6:-}
  local run_s="" run_c=""
  if [ "$prov" = tt ]; then run_s="$TTEMU run --chip $server --"; run_c="$TTEMU run --chip $client --"; fi
  $run_s fi_pingpong -p $prov -e rdm -B $port -S $size -I $iters > /dev/null 2>&1 &
  local srv=$!
  for i in $(seq 1 400); do ss -Hltn "sport = :$port" | grep -q . && break; read -t 0.05 < /dev/zero 2>/dev/null || true; done
  $run_c fi_pingpong -p $prov -e rdm -P $port -S $size -I $iters 127.0.0.1 2>&1 | awk -v p="$prov$server$client" '/^[0-9]/ {print "ROW", p, $0}'
  wait $srv
}
)SH";

struct Figure {
  std::vector<double> latency_us, mb_per_s;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3, iterations = 1000;
  std::string transport = "udp";
  int spin_us = 100;
  bool as_json = false;
  CLI::App app{"fi_pingpong over the tt provider against libfabric's udp, tcp and shm providers", "ttemu_bench_libfabric"};
  ttemu::bench::add_repeat(app, repeat, "Runs per figure (the median is shown)");
  // At least 10, as the 1 MiB runs take a tenth of them.
  app.add_option("--iterations", iterations, "fi_pingpong iterations at 64 B")
      ->check(ttemu::bench::whole_number(10, 100000000))->capture_default_str();
  ttemu::bench::add_transport(app, transport, "How the tt chips' links move datagrams");
  ttemu::bench::add_spin_us(app, spin_us, "The polling chips' spin after traffic", 1);
  app.add_flag("--json", as_json, "Print one JSON object");
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
  const int big_iters = std::max(10, iterations / 10);
  // The runs: name, provider, server chip, client chip, chips' spin (tt only).
  const std::string spun = fmt::format(", spin {}", spin_us);
  const std::vector<std::array<std::string, 5>> runs = {
      {"tt, 1 hop", "tt", "M0D0", "M0D1", "0"},         {"tt, 6 hops", "tt", "M0D0", "M0D15", "0"},
      {"tt, 1 hop" + spun, "tt", "M0D0", "M0D1", std::to_string(spin_us)},
      {"tt, 6 hops" + spun, "tt", "M0D0", "M0D15", std::to_string(spin_us)},
      {"udp (ofi_rxd)", "udp", "", "", ""},           {"tcp", "tcp", "", "", ""},
      {"shm", "shm", "", "", ""}};
  std::map<std::string, Figure> figures;
  for (int r = 0; r < repeat; ++r) {
    std::map<std::string, std::string> scripts;  // by the chips' spin ("" for the other providers)
    for (const auto& [name, prov, s, c, spin] : runs) {
      std::string& script = scripts[spin];
      if (script.empty()) script = kPair;
      script += fmt::format("pair {0} 64 {2} {5} {3} {4}\npair {0} 1048576 {1} {6} {3} {4}\n", prov, big_iters, iterations, s, c,
                            ttemu::free_tcp_port(), ttemu::free_tcp_port());
    }
    for (const auto& [spin, script] : scripts) {
      std::string quoted;
      for (char ch : script) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      const std::string out =
          spin.empty() ? shell("/bin/bash -c '" + quoted + "' 2>/dev/null")
                       : shell(fmt::format("{0} launch {1}/mesh_4x4.yaml --transport {2} --spin-us {3} -- /bin/bash -c 'TTEMU={0}; {4}' "
                                           "2>/dev/null",
                                           TTEMU_BINARY, TTEMU_TOPOLOGIES, transport, spin, quoted));
      // ROW <prov><server><client> bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
      std::istringstream lines(out);
      for (std::string line; std::getline(lines, line);) {
        std::istringstream w(line);
        std::string tag, who, bytes, sent, ack, total, time;
        double mb = 0, us = 0;
        if (!(w >> tag >> who >> bytes >> sent >> ack >> total >> time >> mb >> us) || tag != "ROW") continue;
        for (const auto& [name, prov, s, c, sp] : runs) {
          if (who != prov + s + c || sp != spin) continue;
          if (bytes == "64") figures[name].latency_us.push_back(us);
          if (bytes == "1m") figures[name].mb_per_s.push_back(mb);
        }
      }
    }
  }
  json out = json::object();
  const double udp_lat = median(figures["udp (ofi_rxd)"].latency_us), udp_bw = median(figures["udp (ofi_rxd)"].mb_per_s);
  bool complete = true;
  for (const auto& [name, prov, s, c, spin] : runs) {
    const Figure& f = figures[name];
    complete = complete && !f.latency_us.empty() && !f.mb_per_s.empty();
    const double lat = median(f.latency_us), bw = median(f.mb_per_s);
    out[name] = {{"latency_64B_us", lat},
                 {"bandwidth_1MiB_MB_per_s", bw},
                 {"latency_vs_udp", udp_lat > 0 ? lat / udp_lat : 0},
                 {"bandwidth_vs_udp", udp_bw > 0 ? bw / udp_bw : 0}};
  }
  if (as_json) {
    fmt::print("{}\n", json{{"transport", transport}, {"repeat", repeat}, {"iterations", iterations}, {"providers", out}}.dump());
  } else {
    fmt::print("fi_pingpong, RDM endpoints, median of {} runs ({} iterations at 64 B, {} at 1 MiB); tt links over {}\n", repeat,
               iterations, big_iters, transport);
    fmt::print("  {:<22} {:>16} {:>18} {:>14} {:>16}\n", "provider", "64 B latency us", "1 MiB MB/s (pp)", "latency/udp",
               "bandwidth/udp");
    for (const auto& [name, prov, s, c, spin] : runs) {
      const auto& o = out[name];
      fmt::print("  {:<22} {:>16.1f} {:>18.1f} {:>14.2f} {:>16.2f}\n", name, o["latency_64B_us"].get<double>(),
                 o["bandwidth_1MiB_MB_per_s"].get<double>(), o["latency_vs_udp"].get<double>(), o["bandwidth_vs_udp"].get<double>());
    }
  }
  if (!complete) fmt::print(stderr, "ttemu_bench_libfabric: some runs printed no result (is libfabric-bin installed?)\n");
  return complete ? 0 : 1;
}
