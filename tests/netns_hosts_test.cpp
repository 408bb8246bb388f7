// NetnsHosts (tests/netns_hosts.hpp): several hosts on this one machine, each its own network,
// mount and UTS namespaces, for multi-host tests under mpirun. Root only: skips otherwise.
#include "tests/netns_hosts.hpp"

#include <sys/stat.h>

#include <memory>
#include <thread>

namespace ttemu::test {
namespace {

#define SKIP_UNLESS_SUPPORTED()                                             \
  do {                                                                      \
    if (const std::string why = NetnsHosts::unsupported(); !why.empty()) { \
      GTEST_SKIP() << why;                                                  \
    }                                                                       \
  } while (false)

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The state letter and start time of a process, "" if there is no such process.
std::string process_state(int pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto end = stat.rfind(')');
  if (end == std::string::npos) return "";
  std::istringstream fields(stat.substr(end + 2));
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  return f.size() > 19 ? f[0] + " " + f[19] : "";
}

TEST(NetnsHosts, MpirunRunsOneRankPerHostEachWithItsOwnShmAndRuntimeDirectory) {
  SKIP_UNLESS_SUPPORTED();
  NetnsHosts hosts(2);
  const std::string tag = "ttemu-netns-test-" + hosts.prefix() + "-rank";
  // Each rank leaves a file named after its rank in /dev/shm and the runtime directory, and
  // says where it ran.
  const std::string rank_script = "r=$OMPI_COMM_WORLD_RANK; touch /dev/shm/" + tag + "$r " + NetnsHosts::runtime_dir() + "/" + tag +
                                  "$r && set -- $(" + NetnsHosts::program("ip") +
                                  " -4 -o addr show dev eth0) && echo \"rank $r on $(cat /proc/sys/kernel/hostname) at ${4%/*}\"";
  std::vector<std::string> mpirun = {"mpirun"};
  for (const auto& a : hosts.mpirun_args()) mpirun.push_back(a);
  for (const char* a : {"--enable-recovery", "-np", "2", "--host", "host0,host1", "/bin/sh", "-c"}) mpirun.push_back(a);
  mpirun.push_back(rank_script);

  const RunResult r = run(hosts.in_host(0, mpirun), std::chrono::seconds(60));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(lines_with(r.out, "rank 0 on "), std::vector<std::string>{"rank 0 on host0 at " + hosts.address(0)}) << r.out;
  EXPECT_EQ(lines_with(r.out, "rank 1 on "), std::vector<std::string>{"rank 1 on host1 at " + hosts.address(1)}) << r.out;
  EXPECT_EQ(lines_of(NetnsHosts::without_launch_warnings(r.out)).size(), 2u) << "mpirun said more than the ranks:\n" << r.out;

  EXPECT_EQ(hosts.shm_entries(0), std::vector<std::string>{tag + "0"});
  EXPECT_EQ(hosts.shm_entries(1), std::vector<std::string>{tag + "1"});
  for (int i = 0; i < 2; ++i) {
    const auto tmp = hosts.runtime_entries(i);
    EXPECT_NE(std::find(tmp.begin(), tmp.end(), tag + std::to_string(i)), tmp.end()) << "host" << i;
    EXPECT_EQ(std::find(tmp.begin(), tmp.end(), tag + std::to_string(1 - i)), tmp.end()) << "host" << i;
  }
  for (const std::string& root : {std::string("/dev/shm/"), NetnsHosts::runtime_dir() + "/"}) {
    EXPECT_FALSE(fs::exists(root + tag + "0"));
    EXPECT_FALSE(fs::exists(root + tag + "1"));
  }
}

TEST(NetnsHosts, NothingIsLeftAfterwards) {
  SKIP_UNLESS_SUPPORTED();
  auto hosts = std::make_unique<NetnsHosts>(2, true);
  const std::string prefix = hosts->prefix();

  // A process that would run for a long time, inside host1 (a child of ours, so that it is
  // reaped once killed).
  RunResult sleeper_run;
  const auto sleeper_argv = hosts->in_host(1, {"sleep", "1000"});
  std::thread sleeper_thread([&] { sleeper_run = run(sleeper_argv, std::chrono::seconds(100)); });
  struct Join {  // on every way out: the hosts destroyed (the sleep killed), then the thread joined
    std::unique_ptr<NetnsHosts>& hosts;
    std::thread& thread;
    ~Join() {
      hosts.reset();
      if (thread.joinable()) thread.join();
    }
  } join{hosts, sleeper_thread};
  std::vector<int> in_host1;
  for (const auto deadline = Clock::now() + std::chrono::seconds(10); in_host1.empty() && Clock::now() < deadline;) {
    in_host1 = hosts->pids(1);
    if (in_host1.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(in_host1.size(), 1u) << "not just the sleep in host1";
  EXPECT_EQ(slurp("/proc/" + std::to_string(in_host1[0]) + "/comm"), "sleep\n");
  const std::string sleeper_state = process_state(in_host1[0]);

  const auto before = NetnsHosts::leftovers(prefix);
  std::vector<std::pair<dev_t, ino_t>> namespaces;
  for (int i = 0; i < 2; ++i) {
    for (const std::string& file : {"/run/netns/" + hosts->netns(i), hosts->dir() + "/host" + std::to_string(i) + ".mnt"}) {
      struct stat st {};
      if (::stat(file.c_str(), &st) == 0) namespaces.emplace_back(st.st_dev, st.st_ino);
    }
  }
  hosts.reset();
  sleeper_thread.join();

  EXPECT_EQ(sleeper_run.status, 128 + SIGKILL) << sleeper_run.out;
  EXPECT_NE(process_state(in_host1[0]), sleeper_state) << "the sleep in host1 is still there";
  // What there was: 2 network namespaces (their files, and their files' mounts), 2 veths and the
  // bridge, the directory, its bind mount and the 4 namespace files mounted on it.
  EXPECT_EQ(before.size(), 13u) << testing::PrintToString(before);
  EXPECT_EQ(NetnsHosts::leftovers(prefix), std::vector<std::string>{});
  EXPECT_EQ(namespaces.size(), 4u);
  // No process is in any of the hosts' namespaces.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    for (const char* kind : {"net", "mnt"}) {
      struct stat st {};
      if (::stat((e.path() / "ns" / kind).c_str(), &st) != 0) continue;
      EXPECT_EQ(std::find(namespaces.begin(), namespaces.end(), std::make_pair(st.st_dev, st.st_ino)), namespaces.end())
          << e.path() << " is in a host's namespace";
    }
  }
}

TEST(NetnsHosts, Ipv6AddressesReachEachOther) {
  SKIP_UNLESS_SUPPORTED();
  const std::string python = "/usr/bin/python3";
  if (access(python.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << python;
  NetnsHosts hosts(2, true);
  ASSERT_EQ(hosts.address6(1), hosts.subnet6().substr(0, hosts.subnet6().size() - 3) + "2");

  // host1 answers one TCP connection on its IPv6 address with what it got and from where.
  const std::string server =
      "import socket\n"
      "s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)\n"
      "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind(('" + hosts.address6(1) + "', 7207))\n"
      "s.listen(1)\n"
      "s.settimeout(30)\n"
      "c, peer = s.accept()\n"
      "c.settimeout(30)\n"
      "c.sendall(b'from ' + peer[0].encode() + b': ' + c.recv(100))\n"
      "c.close()\n";
  // host0 connects (again, until host1 listens) and prints the answer.
  const std::string client =
      "import socket, time\n"
      "deadline = time.monotonic() + 20\n"
      "while True:\n"
      "    try:\n"
      "        c = socket.create_connection(('" + hosts.address6(1) + "', 7207), timeout=10)\n"
      "        break\n"
      "    except OSError:\n"
      "        if time.monotonic() > deadline: raise\n"
      "        time.sleep(0.01)\n"
      "c.sendall(b'hello over IPv6')\n"
      "print(c.recv(100).decode())\n";
  RunResult served;
  std::thread server_thread([&] { served = run(hosts.in_host(1, {python, "-c", server}), std::chrono::seconds(60)); });
  const RunResult r = run(hosts.in_host(0, {python, "-c", client}), std::chrono::seconds(60));
  server_thread.join();
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "from " + hosts.address6(0) + ": hello over IPv6\n");
  EXPECT_EQ(served.status, 0) << served.out;
}

TEST(NetnsHosts, HostsKnowTheirNamesAndResolveEachOther) {
  SKIP_UNLESS_SUPPORTED();
  NetnsHosts hosts(3);
  for (int i = 0; i < 3; ++i) {
    int status = -1;
    const std::string out = hosts.run_in(i, "cat /proc/sys/kernel/hostname; getent ahostsv4 host" + std::to_string((i + 1) % 3) + " | head -n 1", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_EQ(lines_of(out).at(0), hosts.name(i)) << out;
    EXPECT_EQ(lines_of(out).size() > 1 ? words(lines_of(out).at(1)).at(0) : "", hosts.address((i + 1) % 3)) << out;
  }
  // This machine keeps its own name.
  EXPECT_NE(slurp("/proc/sys/kernel/hostname"), "host0\n");
}

}  // namespace
}  // namespace ttemu::test
