// A system spread across hosts against the same system on one host and against raw UDP between
// the same hosts, measured in one run on this machine. The hosts are network namespaces on a
// bridge (tests/netns_hosts.hpp, root only), as in the multi-host tests; this lives beside them
// because it uses their harness.
//
//   launch-to-ready   `ttemu mpirun SYSTEM` over the hosts (mpirun, its daemons, the agents'
//                     meeting, every chip of every host, every link up) against `ttemu launch
//                     SYSTEM` inside one host: the wall time until "ready", and the launcher's
//                     own figure (from its start to the last link up).
//   cross-host goodput `ttemu link test` on a link whose chips are on different hosts, against
//                     raw UDP from host0 to host1 (sendmmsg/recvmmsg, datagrams of the size
//                     TT-link packs to); and the same link with both chips on one host against
//                     raw UDP over that host's loopback.
//
//   ttemu_bench_multihost [--system FILE] [--repeat R] [--frames N] [--size B] [--json]
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/link/frame.hpp"
#include "launcher/control_requests.hpp"
#include "tests/hosted_launch.hpp"
#include "tools/bench/options.hpp"
#include "tools/bench/raw_udp.hpp"

namespace {

using nlohmann::json;
using ttemu::test::HostedLaunch;
using ttemu::test::NetnsHosts;

// A UDP socket bound to `address` (host i's, or its loopback), made inside host i's network
// namespace.
ttemu::bench::Socket socket_in(const NetnsHosts& hosts, int i, const std::string& address) {
  const int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int host = open(("/run/netns/" + hosts.netns(i)).c_str(), O_RDONLY | O_CLOEXEC);
  const bool entered = self >= 0 && host >= 0 && setns(host, CLONE_NEWNET) == 0;
  if (host >= 0) close(host);
  if (!entered) {
    if (self >= 0) close(self);
    throw std::runtime_error("cannot enter " + hosts.name(i));
  }
  std::optional<ttemu::bench::Socket> s;
  std::string why;
  try {
    s = ttemu::bench::udp_socket(address);
  } catch (const std::exception& e) {
    why = e.what();
  }
  const bool back = setns(self, CLONE_NEWNET) == 0;
  close(self);
  if (!back) throw std::runtime_error("cannot return from " + hosts.name(i));
  if (!s) throw std::runtime_error(why);
  return *s;
}

// Waits for a launch's "ready" line, or throws with its output.
void wait_ready(HostedLaunch& launch) {
  if (!launch.wait_for("ready in", std::chrono::seconds(180))) throw std::runtime_error("the system did not come up:\n" + launch.output());
}

// Raw UDP from host0 to host1 (`between`), or inside host0 over its loopback: payload bytes
// per second.
double raw_udp(const NetnsHosts& hosts, bool between, size_t datagram, size_t bytes) {
  const std::string to_address = between ? hosts.address(1) : "127.0.0.1";
  const ttemu::bench::Socket rx = socket_in(hosts, between ? 1 : 0, to_address);
  const ttemu::bench::Socket tx = socket_in(hosts, 0, between ? hosts.address(0) : "127.0.0.1");
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(rx.port);
  inet_pton(AF_INET, to_address.c_str(), &to.sin_addr);
  return ttemu::bench::raw_throughput(rx, tx, to, datagram, bytes);
}

struct Launched {
  double wall_s = 0;   // from starting the command to its "ready" line
  double ready_s = 0;  // the launcher's own "ready in X s"
  json link;           // `ttemu link test` on the measured link
};

// Starts `launch`, waits for it to be ready, measures the link, stops it.
Launched measure(HostedLaunch launch, const NetnsHosts& hosts, const std::string& port, size_t frames, size_t size) {
  const auto t0 = std::chrono::steady_clock::now();
  wait_ready(launch);
  Launched r;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::smatch m;
  const std::string& out = launch.output();
  if (std::regex_search(out, m, std::regex("ready in ([0-9.]+) s"))) r.ready_s = std::stod(m[1]);
  int st = -1;
  const std::string test = hosts.run_in(0, fmt::format("{} link test {} --frames {} --size {} --json 2>&1", TTEMU_BINARY, port, frames, size), &st, 300);
  if (st != 0) throw std::runtime_error("ttemu link test " + port + ": " + test);
  r.link = json::parse(test);
  if (r.link["verified"].get<uint64_t>() != frames || r.link["errors"].get<uint64_t>() != 0) {
    throw std::runtime_error("the stream over " + port + " did not arrive intact: " + test);
  }
  launch.stop();
  return r;
}

// The first link of the running system whose two chips are on different hosts: its sending
// end's name.
std::string crossing_port(const json& status) {
  const ttemu::test::ChipHosts where(status);
  for (const auto& l : status["links"]) {
    if (where.crosses(l)) return l["a"].get<std::string>();
  }
  throw std::runtime_error("no link of the system joins chips of two hosts");
}

}  // namespace

int main(int argc, char** argv) {
  std::string system = TTEMU_TOPOLOGIES "/tgg.yaml";
  int repeat = 3;
  size_t frames = 50000, size = 4096;
  bool as_json = false;
  CLI::App app{"A system spread across namespace hosts against one host and raw UDP", "ttemu_bench_multihost"};
  app.add_option("--system", system, "The system to launch")->check(CLI::ExistingFile)->capture_default_str();
  ttemu::bench::add_repeat(app, repeat, "Runs per figure (the median is shown)");
  // Bounds: what `ttemu link test` accepts.
  app.add_option("--frames", frames, "Payloads of the cross-host link test")
      ->check(ttemu::bench::whole_number<size_t>(1, ttemu::launcher::kMaxStreamFrames))->capture_default_str();
  app.add_option("--size", size, "Bytes per payload")
      ->check(ttemu::bench::whole_number<size_t>(ttemu::launcher::kMinTestPayload, ttemu::link::kMaxPayload))
      ->capture_default_str();
  app.add_flag("--json", as_json, "Print one JSON object");
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
  if (const std::string why = NetnsHosts::unsupported(); !why.empty()) {
    fmt::print(stderr, "ttemu_bench_multihost: cannot make hosts here: {}\n", why);
    return 1;
  }
  try {
    NetnsHosts hosts(2);
    // Which link crosses the hosts: from the system itself, spread.
    std::string port;
    {
      HostedLaunch probe = HostedLaunch::mpirun(hosts, system);
      wait_ready(probe);
      port = crossing_port(probe.status(0));
      probe.stop();
    }
    const size_t frame = size + 20;  // as ttemu_bench_link: TT-link packs frames up to ~64 KB
    const size_t packed = std::max<size_t>(frame, (65000 / frame) * frame);
    std::vector<double> one_wall, one_ready, one_gbs, multi_wall, multi_ready, multi_gbs, raw, raw_local;
    for (int r = 0; r < repeat; ++r) {
      if (!as_json) fmt::print(stderr, "run {}/{}\n", r + 1, repeat);
      const Launched one = measure(HostedLaunch::launch(hosts, system), hosts, port, frames, size);
      one_wall.push_back(one.wall_s);
      one_ready.push_back(one.ready_s);
      one_gbs.push_back(one.link["gb_per_s"].get<double>());
      const Launched multi = measure(HostedLaunch::mpirun(hosts, system), hosts, port, frames, size);
      multi_wall.push_back(multi.wall_s);
      multi_ready.push_back(multi.ready_s);
      multi_gbs.push_back(multi.link["gb_per_s"].get<double>());
      raw.push_back(raw_udp(hosts, true, packed, frames * size) / 1e9);
      raw_local.push_back(raw_udp(hosts, false, packed, frames * size) / 1e9);
    }
    using ttemu::bench::median;
    const json j = {{"system", system},
                    {"hosts", hosts.size()},
                    {"link", port},
                    {"repeat", repeat},
                    {"launch_wall_s", {{"one_host", median(one_wall)}, {"hosts", median(multi_wall)}}},
                    {"launch_ready_s", {{"one_host", median(one_ready)}, {"hosts", median(multi_ready)}}},
                    {"goodput_gb_per_s",
                     {{"raw_udp_between_hosts", median(raw)}, {"tt_link_between_hosts", median(multi_gbs)},
                      {"raw_udp_one_host", median(raw_local)}, {"tt_link_one_host", median(one_gbs)}}},
                    {"raw_datagram_bytes", packed},
                    {"ratio_tt_link_between_hosts_to_raw", median(raw) > 0 ? median(multi_gbs) / median(raw) : 0.0},
                    {"ratio_tt_link_one_host_to_raw", median(raw_local) > 0 ? median(one_gbs) / median(raw_local) : 0.0}};
    if (as_json) {
      fmt::print("{}\n", j.dump());
      return 0;
    }
    fmt::print("{} over {} namespace hosts (median of {})\n", system, hosts.size(), repeat);
    fmt::print("  launch to ready      one host {:6.2f} s wall ({:.2f} s launcher)   {} hosts {:6.2f} s wall ({:.2f} s launcher)   ratio {:.2f}\n",
               median(one_wall), median(one_ready), hosts.size(), median(multi_wall), median(multi_ready),
               median(one_wall) > 0 ? median(multi_wall) / median(one_wall) : 0.0);
    fmt::print("  goodput, {} x {} B over {}\n", frames, size, port);
    fmt::print("    raw UDP host0 -> host1 ({} B datagrams) {:8.1f} MB/s\n", packed, median(raw) * 1e3);
    fmt::print("    TT-link between hosts                {:8.1f} MB/s   ratio to raw {:.2f}\n", median(multi_gbs) * 1e3,
               j["ratio_tt_link_between_hosts_to_raw"].get<double>());
    fmt::print("    raw UDP inside host0 (loopback)       {:8.1f} MB/s\n", median(raw_local) * 1e3);
    fmt::print("    TT-link, both chips on one host      {:8.1f} MB/s   ratio to raw {:.2f}\n", median(one_gbs) * 1e3,
               j["ratio_tt_link_one_host_to_raw"].get<double>());
  } catch (const std::exception& e) {
    fmt::print(stderr, "ttemu_bench_multihost: {}\n", e.what());
    return 1;
  }
  return 0;
}
