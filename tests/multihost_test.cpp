// One system spread across hosts (docs/multi-host.md), for real: hosts are network, mount and
// UTS namespaces of this machine (tests/netns_hosts.hpp), each with its own address, /dev/shm
// and ttemu runtime directory; the host agents are started by Open MPI's mpirun through `ttemu mpirun`, links
// between hosts are UDP between the hosts' addresses.
#include <signal.h>

#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "emulator/process/cpu_binding.hpp"
#include "tests/eventually.hpp"
#include "tests/hosted_launch.hpp"

namespace ttemu::test {
namespace {

using nlohmann::json;

constexpr const char* kEventsDir = "events";

int alive_chips(const json& s) {
  int n = 0;
  for (const auto& c : s["chips"]) n += c["alive"].get<bool>();
  return n;
}

int ends_up(const json& s) {
  int n = 0;
  for (const auto& l : s["links"]) {
    for (const auto& e : l["ends"]) n += e["state"] == "up";
  }
  return n;
}

std::set<std::string> hosts_of_chips(const json& s) {
  std::set<std::string> out;
  for (const auto& c : s["chips"]) out.insert(c["host"].get<std::string>());
  return out;
}

// `ttemu traffic --pattern all` under mpirun, one rank per host, each driving its host's chips
// and verifying what landed in them: six reports, every byte verified (every counter right,
// every block read back), no error. `options` go to `ttemu traffic`.
void expect_all_patterns_verified_across(const NetnsHosts& hosts, const std::string& options = "") {
  std::string cmd = "mpirun";
  for (const auto& a : hosts.mpirun_args()) cmd += " " + a;
  cmd += " -np " + std::to_string(hosts.size()) + " --host " + hosts.names() + " " + TTEMU_BINARY +
         " traffic --pattern all --size 1024 --count 2 --latency-samples 8 --json " + options + " 2>&1";
  int st = -1;
  const std::string out = hosts.run_in(0, cmd, &st, 240);
  EXPECT_EQ(st, 0) << out;
  std::set<std::string> patterns;
  for (const auto& line : lines_with(out, "\"pattern\"")) {
    const json r = json::parse(line);
    patterns.insert(r["pattern"].get<std::string>());
    EXPECT_EQ(r["errors"].get<uint64_t>(), 0u) << line;
    EXPECT_GT(r["pairs"].get<uint64_t>(), 0u) << line;
    EXPECT_EQ(static_cast<double>(r["verified"].get<uint64_t>()), r["bytes"].get<double>()) << line;
    EXPECT_GT(r["mean_hops"].get<double>(), 0.0) << line;
    EXPECT_EQ(r.value("atomic_errors", 0), 0) << line;  // (--op atomic)
    if (r.contains("read_bytes")) {                        // (--op read)
      EXPECT_EQ(r["read_bytes"].get<double>(), r["bytes"].get<double>()) << line;
      EXPECT_EQ(r["read_verified"].get<double>(), r["read_bytes"].get<double>()) << line;
    }
  }
  EXPECT_EQ(patterns.size(), 6u) << out;
}

// After a failure: what the launcher and the chips saw (the whole event log, with every packet
// a router dropped and why), to tell why.
void print_what_the_system_saw(const NetnsHosts& hosts, const HostedLaunch& sys) {
  std::cerr << sys.output() << "\n" << hosts.run_in(0, std::string(TTEMU_BINARY) + " events 2>&1") << "\n";
}

// The agent process of host i.
int agent_pid(const NetnsHosts& hosts, int i) {
  for (int pid : hosts.pids(i)) {
    const std::string cmd = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmd.find("host-agent") != std::string::npos && cmd.find("mpirun") == std::string::npos) return pid;
  }
  return 0;
}

bool nothing_of_ttemu_in(const NetnsHosts& hosts, int i) {
  for (const auto& e : hosts.shm_entries(i)) {
    if (e.find("ttemu") != std::string::npos) return false;
  }
  // The runtime directory holds no control socket or description (the event log stays).
  for (const auto& e : hosts.runtime_entries(i)) {
    if (e != kEventsDir) return false;
  }
  return hosts.pids(i).empty();
}

// Stops the launch; then no host may keep a process, segment or runtime file of ttemu.
void stop_and_expect_nothing_left(const NetnsHosts& hosts, HostedLaunch& sys) {
  EXPECT_GE(sys.stop(), 0);
  for (int i = 0; i < hosts.size(); ++i) {
    EXPECT_TRUE(eventually([&] { return nothing_of_ttemu_in(hosts, i); }, std::chrono::seconds(20))) << hosts.name(i);
  }
}

// A spread of the TGG: its file, how many hosts, the chip fi_pingpong's client uses on the
// host it runs on, the host whose agent is killed and the chips that run on without it.
struct TggSpread {
  const char* file;
  int hosts;
  const char* client_chip;
  int client_host;
  int killed;
  int alive_after;
};

class MultiHost : public ::testing::TestWithParam<TggSpread> {};

TEST_P(MultiHost, TheTggIsWholeFromEveryHostCarriesTrafficAndFiPingpongAndSurvivesLosingAHost) {
  if (const std::string why = NetnsHosts::unsupported(); !why.empty()) GTEST_SKIP() << why;
  const TggSpread p = GetParam();
  NetnsHosts hosts(p.hosts);
  // The event log goes into host0's own runtime directory, where other hosts cannot read it
  // (as on real hosts): `ttemu events` elsewhere asks the control plane.
  // Bound in blocks: each host binds its own chips over its own CPUs (docs/fabric.md#cpu-binding),
  // and runs them under SCHED_BATCH (docs/fabric.md#scheduling).
  HostedLaunch sys = HostedLaunch::mpirun(hosts, topo(p.file),
                                          {"--events-dir", NetnsHosts::runtime_dir() + "/" + kEventsDir, "--cpu-bind", "blocks", "--sched", "batch"});
  ASSERT_TRUE(sys.wait_for("ready in", std::chrono::seconds(120))) << sys.output();
  {
    const json s = sys.status(0);
    std::map<std::string, std::set<std::string>> cpus_by_host;
    std::map<std::string, size_t> chips_by_host;
    for (const auto& c : s["chips"]) {
      cpus_by_host[c["host"].get<std::string>()].insert(c.value("cpus", std::string("(none)")));
      EXPECT_EQ(c.value("sched", std::string("(none)")), "batch") << c.dump();
      ++chips_by_host[c["host"].get<std::string>()];
    }
    ASSERT_EQ(cpus_by_host.size(), static_cast<size_t>(p.hosts)) << s.dump();
    for (const auto& [host, sets] : cpus_by_host) {
      EXPECT_FALSE(sets.count("(none)")) << host << ": a chip reports no CPUs";
      // As many distinct bindings as the host has CPUs for its chips (the hosts share this machine's).
      EXPECT_EQ(sets.size(), std::min(process::allowed_cpus().size(), chips_by_host[host])) << host;
    }
  }
  // Every host sees the whole system: 72 chips on all the hosts, every link end up.
  std::set<std::string> names;
  for (int i = 0; i < p.hosts; ++i) names.insert(hosts.name(i));
  for (int i = 0; i < p.hosts; ++i) {
    const json s = sys.status(i);
    EXPECT_EQ(s["chips"].size(), 72u) << hosts.name(i);
    EXPECT_EQ(alive_chips(s), 72) << hosts.name(i);
    EXPECT_EQ(hosts_of_chips(s), names) << hosts.name(i);
    EXPECT_EQ(ends_up(s), 2 * static_cast<int>(s["links"].size())) << hosts.name(i);
  }
  // A link between hosts (Galaxy 8 to Galaxy 9, on different hosts in both spreads), tested
  // from the last host: a checked stream, every payload verified at the far end, and pings.
  {
    int st = -1;
    const int last = p.hosts - 1;
    std::string out = hosts.run_in(last, std::string(TTEMU_BINARY) + " link test M8D24P8 --frames 3000 --size 4096 --json 2>&1", &st);
    ASSERT_EQ(st, 0) << out;
    const json r = json::parse(out);
    EXPECT_EQ(r["peer"].get<std::string>().rfind("M9D0P", 0), 0u) << out;
    EXPECT_EQ(r["verified"].get<uint64_t>(), 3000u) << out;
    EXPECT_EQ(r["errors"].get<uint64_t>(), 0u) << out;
    out = hosts.run_in(last, std::string(TTEMU_BINARY) + " link ping M9D0P0 --count 50 --json 2>&1", &st);
    ASSERT_EQ(st, 0) << out;
    EXPECT_EQ(json::parse(out)["count"].get<int>(), 50) << out;
  }
  // The one event log, from every host: the start, and links of chips of two hosts coming up.
  for (int i = 0; i < p.hosts; ++i) {
    int st = -1;
    const std::string out = hosts.run_in(i, std::string(TTEMU_BINARY) + " events --json 2>&1", &st);
    EXPECT_EQ(st, 0) << out;
    EXPECT_EQ(lines_with(out, "\"kind\":\"job_started\"").size(), 1u) << hosts.name(i) << ": " << out.substr(0, 2000);
    for (const std::string& chip : {std::string("M0D0P"), std::string(p.client_chip) + "P"}) {
      bool up = false;
      for (const auto& line : lines_with(out, "\"kind\":\"link_up\"")) up = up || line.find(std::string("\"port\":\"") + chip) != std::string::npos;
      EXPECT_TRUE(up) << hosts.name(i) << ": no link of " << chip << " came up in the log";
    }
  }
  // All six traffic patterns, a rank of ttemu traffic on each host driving its chips and
  // verifying what landed in them: every byte, across hosts.
  expect_all_patterns_verified_across(hosts);
  // Chips on host0 (gateway M0D0) and another host: fi_pingpong over the tt provider, its data
  // check on, the server on host0.
  const std::string run = std::string(TTEMU_BINARY) + " run --chip ";
  int server_status = -1, client_status = -1;
  std::string server_out;
  std::thread server([&] {
    server_out = hosts.run_in(0, run + "M0D0 -- fi_pingpong -p tt -e rdm -c -I 20 -S 65536 2>&1", &server_status, 90);
  });
  std::string client_out;
  // The client retries until the server listens (fi_pingpong's own out-of-band connect).
  EXPECT_TRUE(eventually([&] {
    client_out = hosts.run_in(p.client_host, run + p.client_chip + " -- fi_pingpong -p tt -e rdm -c -I 20 -S 65536 " + hosts.address(0) + " 2>&1",
                              &client_status, 90);
    return client_status == 0 || client_out.find("64k") != std::string::npos;
  }, std::chrono::seconds(60)));
  server.join();
  EXPECT_EQ(client_status, 0) << client_out;
  EXPECT_EQ(server_status, 0) << server_out;
  EXPECT_NE(client_out.find("=20"), std::string::npos) << client_out;
  EXPECT_EQ(client_out.find("Error"), std::string::npos) << client_out;

  // An MPI program over the tt provider, its ranks placed by `ttemu mpirun --rank-binding` on the
  // hosts of their chips (host0, another host, host0 again: three app contexts), every byte it
  // moves between the hosts checked.
  if (std::string(TTEMU_MPI_CHECK).empty()) {
    ADD_FAILURE() << "ttemu_mpi_fabric_check was not built (no MPI C compiler)";
  } else {
    const TempDir dir;
    write_file(dir / "ranks.yaml", std::string("rank_bindings:\n  - {rank: 0, chip: M0D0}\n  - {rank: 1, chip: ") + p.client_chip +
                                       "}\n  - {rank: 2, chip: M8D0}\n");
    std::string mpi;
    for (const auto& a : hosts.mpirun_args()) mpi += " " + a;
    mpi += " --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tt";
    int st = -1;
    const std::string out = hosts.run_in(0, std::string(TTEMU_BINARY) + " mpirun --rank-binding " + (dir / "ranks.yaml").string() +
                                                " --mpi-args '" + mpi + "' -- " + TTEMU_MPI_CHECK + " 2>&1", &st, 120);
    EXPECT_EQ(st, 0) << out;
    EXPECT_NE(out.find(std::string("--host ") + hosts.name(p.client_host) + ":1"), std::string::npos) << out;
    EXPECT_NE(out.find("mpi_fabric_check: OK"), std::string::npos) << out;
    EXPECT_NE(out.find("over 3 ranks, verified"), std::string::npos) << out;
  }
  if (HasFailure()) print_what_the_system_saw(hosts, sys);

  // A host's agent dies: its chips go with it, the control plane routes around them, the other
  // hosts' chips run on.
  const int agent = agent_pid(hosts, p.killed);
  ASSERT_GT(agent, 0);
  kill(agent, SIGKILL);
  ASSERT_TRUE(sys.wait_for("host " + hosts.name(p.killed) + " is gone", std::chrono::seconds(30))) << sys.output();
  ASSERT_TRUE(sys.wait_for("routing tables v2 loaded", std::chrono::seconds(30))) << sys.output();
  const json after = sys.status(0);
  EXPECT_EQ(alive_chips(after), p.alive_after);
  EXPECT_GE(after["tables_version"].get<int>(), 2);

  // Stopped: nothing of the job is left on any host.
  EXPECT_GE(sys.stop(), 0);
  for (int i = 0; i < p.hosts; ++i) {
    EXPECT_TRUE(eventually([&] { return nothing_of_ttemu_in(hosts, i); }, std::chrono::seconds(20)))
        << hosts.name(i) << ": " << hosts.run_in(i, "ls -A /dev/shm " + NetnsHosts::runtime_dir() + " 2>&1") << hosts.pids(i).size()
        << " process(es)";
  }
}

// The network between two hosts is cut (host1's eth0 set down) while nothing flows: the links
// between the hosts find it with their keepalives and go down, the control plane routes around
// them and every chip runs on (host1's agent still runs; TCP rides the cut out). Set up again,
// the links come back by themselves, the tables are whole again, and traffic crosses the hosts.
TEST(MultiHostPartition, ACutBetweenHostsIsALinkFailureRoutedAroundAndHealed) {
  if (const std::string why = NetnsHosts::unsupported(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts(2);
  HostedLaunch sys = HostedLaunch::mpirun(hosts, topo("tgg.yaml"), {"--events-dir", NetnsHosts::runtime_dir() + "/" + kEventsDir});
  ASSERT_TRUE(sys.wait_for("ready in", std::chrono::seconds(120))) << sys.output();
  const json before = sys.status(0);
  const ChipHosts where(before);
  int crossing = 0;
  for (const auto& l : before["links"]) crossing += where.crosses(l);
  ASSERT_GT(crossing, 0);

  int st = -1;
  EXPECT_EQ(hosts.run_in(1, "ip link set eth0 down 2>&1", &st), "");
  ASSERT_EQ(st, 0);
  ASSERT_TRUE(sys.wait_for("hosts host0 and host1 are cut apart: all " + std::to_string(crossing) + " link(s) between them are down",
                           std::chrono::seconds(60))) << sys.output();
  // host0's ends of every link to host1 are down, its links inside the host up; all 72 chips
  // still run. (host1's ends are out of reach: `ttemu status` reports what it can.)
  EXPECT_TRUE(eventually([&] {
    const json s = sys.status(0);
    for (const auto& l : s["links"]) {
      for (const auto& e : l["ends"]) {
        if (where.host_of_port(e["port"].get<std::string>()) != hosts.name(0)) continue;
        if ((e["state"] == "up") == where.crosses(l)) return false;
      }
    }
    return alive_chips(s) == 72;
  }, std::chrono::seconds(30))) << sys.status(0).dump().substr(0, 3000);

  EXPECT_EQ(hosts.run_in(1, "ip link set eth0 up 2>&1", &st), "");
  ASSERT_EQ(st, 0);
  // Healed: the hosts linked again, every link end up, the tables whole.
  ASSERT_TRUE(sys.wait_for("hosts host0 and host1 are linked again", std::chrono::seconds(60))) << sys.output();
  ASSERT_TRUE(sys.wait_for("nothing to route around", std::chrono::seconds(60))) << sys.output();
  const json healed = sys.status(0);
  EXPECT_EQ(ends_up(healed), 2 * static_cast<int>(healed["links"].size()));
  EXPECT_EQ(alive_chips(healed), 72);
  // Just after a heal the control plane may still be hearing what host1's chips reported
  // during the cut (its channel to host1 crossed the cut too), and reload around it: a write
  // NACKed then is written again once (the client library's retry mode, as a user would run
  // traffic on a system that is settling). Every byte must still land.
  expect_all_patterns_verified_across(hosts, "--retry 2");
  if (HasFailure()) print_what_the_system_saw(hosts, sys);

  stop_and_expect_nothing_left(hosts, sys);
}

// A host where io_uring is refused (host1's agent runs under a seccomp filter that refuses
// io_uring_setup, as a container's default profile does): its chips fall back to plain sockets
// by themselves and say so, host0's keep io_uring, and the links between them carry every
// pattern both ways, every byte verified (the two speak the same datagrams).
TEST(MultiHostUring, AHostThatRefusesIoUringFallsBackAloneAndItsChipsTalkToTheOthers) {
  if (const std::string why = NetnsHosts::unsupported(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts(2);
  HostedLaunch sys = HostedLaunch::agents(hosts, topo("tgg.yaml"), {{}, {TTEMU_NO_URING}});
  ASSERT_TRUE(sys.wait_for("ready in", std::chrono::seconds(120))) << sys.output();
  const json s = sys.status(0);
  const ChipHosts where(s);
  int on_uring = 0, fell_back = 0;
  for (const auto& c : s["chips"]) {
    const std::string mode = c["transport_mode"].get<std::string>();
    if (c["host"] == hosts.name(0)) {
      on_uring += mode.rfind("uring: ", 0) == 0;
      EXPECT_EQ(mode.rfind("uring: ", 0), 0u) << c["name"] << ": " << mode;
    } else {
      fell_back += mode.rfind("udp: io_uring is refused here", 0) == 0;
      EXPECT_EQ(mode.rfind("udp: io_uring is refused here", 0), 0u) << c["name"] << ": " << mode;
    }
  }
  EXPECT_GT(on_uring, 0);
  EXPECT_GT(fell_back, 0);
  int crossing = 0;
  for (const auto& l : s["links"]) crossing += where.crosses(l);
  EXPECT_GT(crossing, 0);
  EXPECT_EQ(ends_up(s), 2 * static_cast<int>(s["links"].size()));
  expect_all_patterns_verified_across(hosts);
  if (HasFailure()) print_what_the_system_saw(hosts, sys);
  stop_and_expect_nothing_left(hosts, sys);
}

// The hosts meet over IPv6 (`--network` an IPv6 subnet of the namespaces, which have IPv4
// addresses too): the chips' link sockets are bound to the hosts' IPv6 addresses, not their IPv4
// ones, every link comes up, including the two between the hosts, and every pattern lands, as
// writes, atomics and reads.
TEST(MultiHostIpv6, AnIpv6NetworkCarriesTheLinksBetweenHosts) {
  if (const std::string why = NetnsHosts::unsupported(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts(2, /*ipv6=*/true);
  HostedLaunch sys = HostedLaunch::mpirun(hosts, topo("n300_pair_2host.yaml"), {}, hosts.subnet6());
  ASSERT_TRUE(sys.wait_for("ready in", std::chrono::seconds(120))) << sys.output();
  const json s = sys.status(0);
  const ChipHosts where(s);
  int crossing = 0;
  for (const auto& l : s["links"]) crossing += where.crosses(l);
  EXPECT_EQ(crossing, 2);
  EXPECT_EQ(ends_up(s), 2 * static_cast<int>(s["links"].size()));
  for (int i = 0; i < hosts.size(); ++i) {
    // The UDP sockets of the host (its chips' links, and nothing else of ttemu's binds one).
    int st = -1;
    const std::string udp = hosts.run_in(i, "ss -Huan 2>&1", &st);
    ASSERT_EQ(st, 0) << udp;
    EXPECT_NE(udp.find("[" + hosts.address6(i) + "]:"), std::string::npos) << hosts.name(i) << ":\n" << udp;
    EXPECT_EQ(udp.find(hosts.address(i) + ":"), std::string::npos) << hosts.name(i) << ":\n" << udp;
  }
  // Writes, atomics and reads, each host's rank driving its own sources and judging what landed
  // in its own chips (ttemu traffic --op spreads its counts over the ranks).
  for (const char* op : {"write", "atomic", "read"}) {
    SCOPED_TRACE(op);
    expect_all_patterns_verified_across(hosts, std::string("--op ") + op);
  }
  if (HasFailure()) print_what_the_system_saw(hosts, sys);
  stop_and_expect_nothing_left(hosts, sys);
}

// `ttemu chip kill` and `ttemu chip restart`, from the control plane's host, of a chip of the
// other host: its agent starts it again with its memory made anew (what landed in its L1 before
// is gone) and the tables in force, its
// links come up again (one of them between the hosts), the control plane routes through it
// again, and every pattern lands across the hosts. (The restart used to be refused for a chip
// of another host.)
TEST(MultiHostRestart, AChipOfAnotherHostIsKilledAndRestartedByItsAgent) {
  if (const std::string why = NetnsHosts::unsupported(); !why.empty()) GTEST_SKIP() << why;
  NetnsHosts hosts(2);
  HostedLaunch sys = HostedLaunch::mpirun(hosts, topo("n300_pair_2host.yaml"));
  ASSERT_TRUE(sys.wait_for("ready in", std::chrono::seconds(120))) << sys.output();
  auto chip = [&](const json& status, const std::string& name) {
    for (const auto& c : status["chips"]) {
      if (c["name"] == name) return c;
    }
    return json();
  };
  const json before = chip(sys.status(0), "M0D2");
  ASSERT_EQ(before.value("host", ""), hosts.name(1)) << before.dump();
  const int old_pid = before.value("pid", 0);
  ASSERT_GT(old_pid, 0);
  // Nonzero bytes among the first 2 KiB of M0D2's L1 (where M0D0's writes land), read on host1.
  auto written = [&] {
    int status = -1;
    const std::string n = hosts.run_in(1, "od -An -tx1 -v -N 2048 /dev/shm/*M0D2.l1 | tr -d ' 0\n' | wc -c", &status);
    return status == 0 ? std::stoi(n) : -1;
  };
  expect_all_patterns_verified_across(hosts);
  ASSERT_GT(written(), 0);
  int st = -1;
  std::string out = hosts.run_in(0, std::string(TTEMU_BINARY) + " chip kill M0D2 2>&1", &st);
  ASSERT_EQ(st, 0) << out;
  ASSERT_TRUE(eventually([&] { return !chip(sys.status(0), "M0D2").value("alive", true); }, std::chrono::seconds(30)));
  ASSERT_TRUE(sys.wait_for("routing tables v2 loaded", std::chrono::seconds(60))) << sys.output();  // routed around it
  out = hosts.run_in(0, std::string(TTEMU_BINARY) + " chip restart M0D2 2>&1", &st);
  ASSERT_EQ(st, 0) << out;
  ASSERT_TRUE(eventually([&] {
    const json s = sys.status(0);
    const json c = chip(s, "M0D2");
    return c.value("alive", false) && c.value("pid", 0) != old_pid && ends_up(s) == 2 * static_cast<int>(s["links"].size());
  }, std::chrono::seconds(60))) << sys.status(0).dump().substr(0, 3000);
  EXPECT_EQ(written(), 0) << "the restarted chip's memory is new";
  ASSERT_TRUE(sys.wait_for("routing tables v3 loaded", std::chrono::seconds(60))) << sys.output();  // routed through it again
  expect_all_patterns_verified_across(hosts, "--retry 2");
  if (HasFailure()) print_what_the_system_saw(hosts, sys);
  stop_and_expect_nothing_left(hosts, sys);
}

// Two hosts as spec 7.3 has them (host1: gateways M4-M7 and Galaxy 9); four, two gateways each
// (host1: M2D0 and M3D0; the Galaxies on host0 and host2).
INSTANTIATE_TEST_SUITE_P(Tgg, MultiHost,
                         ::testing::Values(TggSpread{"tgg.yaml", 2, "M4D0", 1, 1, 36}, TggSpread{"tgg_4host.yaml", 4, "M6D0", 3, 1, 70}),
                         [](const ::testing::TestParamInfo<TggSpread>& spread) { return std::to_string(spread.param.hosts) + "Hosts"; });

}  // namespace
}  // namespace ttemu::test
