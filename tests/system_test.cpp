// Real systems: chip processes, shared memory, UDP links, the launcher, the CLI.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <cstring>
#include <fstream>
#include <iterator>
#include <gtest/gtest.h>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/ranges.h>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/job/job.hpp"
#include "emulator/link/frame.hpp"
#include "emulator/node/snapshot.hpp"
#include "emulator/process/cpu_binding.hpp"
#include "tests/eventually.hpp"
#include "tests/system_support.hpp"
#include "tools/campaign/leftovers.hpp"

namespace ttemu::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::vector<int> chip_pids(const json& status) {
  std::vector<int> pids;
  for (const auto& c : status["chips"]) pids.push_back(c["pid"]);
  return pids;
}

void expect_all_links_up(const json& status, size_t chips, size_t links) {
  ASSERT_EQ(status["chips"].size(), chips);
  for (const auto& c : status["chips"]) EXPECT_TRUE(c["alive"].get<bool>()) << c;
  ASSERT_EQ(status["links"].size(), links);
  for (const auto& l : status["links"]) {
    for (const auto& end : l["ends"]) {
      EXPECT_EQ(end["state"], "up") << end["port"];
      if (status["transport"] == "udp") {
        EXPECT_GT(end["udp"].get<int>(), 0);
      }
    }
  }
}

// What a running system holds, noted while it runs: its chip processes, its segments, and its
// control socket at the path the launcher itself named. Each must be there (an empty listing
// would make the check afterwards pass for nothing).
struct Held {
  std::string job, socket;
  std::vector<int> pids;
};

Held held_by(const System& sys, const json& status) {
  Held h{sys.job(), sys.control_socket(), chip_pids(status)};
  EXPECT_FALSE(h.job.empty()) << sys.output();
  EXPECT_FALSE(h.pids.empty()) << "no chip in the status: " << status;
  EXPECT_FALSE(segments_of(h.job).empty()) << "no segment of job " << h.job << " in /dev/shm";
  EXPECT_TRUE(fs::is_socket(h.socket)) << "no control socket at '" << h.socket << "', where the launcher said:\n"
                                       << sys.output();
  return h;
}

// Nothing left once it has stopped: no chip process, no segment, no control socket, and
// nothing else of the job in the socket's directory.
void expect_nothing_left(const Held& h) {
  for (int pid : h.pids) EXPECT_TRUE(wait_gone(pid, 20s)) << "chip pid " << pid << " still running";
  const auto segments = segments_of(h.job);
  EXPECT_TRUE(segments.empty()) << segments.size() << " segment(s) left, the first " << (segments.empty() ? "" : segments[0]);
  std::error_code ec;
  EXPECT_FALSE(fs::exists(fs::symlink_status(h.socket, ec))) << h.socket << " is still there";
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(fs::path(h.socket).parent_path(), ec)) {
    if (e.path().filename().string().find(h.job) != std::string::npos) left.push_back(e.path());
  }
  EXPECT_TRUE(left.empty()) << "left in " << fs::path(h.socket).parent_path() << ": " << (left.empty() ? "" : left[0]);
}

// Every chip of the status `s` comes to sleep in system call `idle_call` within 10 s.
void expect_chips_idle_in(const json& s, long idle_call, const std::string& idle_name) {
  for (int pid : chip_pids(s)) {
    std::string call;
    EXPECT_TRUE(eventually(
        [&] {
          std::ifstream f("/proc/" + std::to_string(pid) + "/syscall");
          f >> call;
          return call == std::to_string(idle_call);
        },
        10s))
        << "chip " << pid << " idles in system call '" << call << "', not " << idle_name << " (" << idle_call << ")";
  }
}

// A running N300's chips all say `mode` (`ttemu status`, text and JSON), idle in system call
// `idle_call`, and their link carries a link test.
void expect_transport_mode(System& sys, const std::string& mode, long idle_call, const std::string& idle_name) {
  const json s = sys.status();
  ASSERT_EQ(s["chips"].size(), 2u);
  for (const auto& c : s["chips"]) EXPECT_EQ(c["transport_mode"].get<std::string>().rfind(mode, 0), 0u) << c;
  expect_chips_idle_in(s, idle_call, idle_name);
  RunResult text = sys.ttemu({"status"});
  EXPECT_NE(text.out.find("transport: " + mode), std::string::npos) << text.out;
  RunResult t = sys.ttemu({"link", "test", "M0D0P2", "--frames", "20000", "--json"});
  ASSERT_EQ(t.status, 0) << t.out;
  const json r = json::parse(t.stdout_text);
  EXPECT_EQ(r["verified"], 20000);
  EXPECT_EQ(r["errors"], 0);
}

// The default transport is uring: multishot receives into a provided buffer ring where the
// kernel has them, single-shot receives where it does not (forced here), and it says which.
// The chip's loop sleeps in its ring (io_uring_enter), not in epoll.
void expect_uring_mode(bool single_shot, const std::string& mode) {
  if (single_shot) setenv("TTEMU_URING_SINGLE_SHOT", "1", 1);
  System sys({topo("n300.yaml")});
  unsetenv("TTEMU_URING_SINGLE_SHOT");
  expect_transport_mode(sys, "uring: " + mode, SYS_io_uring_enter, "io_uring_enter");
}

// Whether the event log holds a line `which` accepts.
bool logged(const std::string& log, const std::function<bool(const json&)>& which) {
  const auto lines = read_event_log(log);
  return std::any_of(lines.begin(), lines.end(), which);
}

TEST(System, UringReceivesAreMultishotWhereTheKernelHasThem) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  expect_uring_mode(false, "multishot");
}
TEST(System, UringFallsBackToSingleShotReceivesAndSaysSo) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  expect_uring_mode(true, "single-shot");
}

// Where io_uring is refused (a container's seccomp profile does it; here ttemu_no_uring), the
// default transport falls back to udp: the launcher says so in one line, every chip says so in
// `ttemu status` and sleeps in epoll, and the link carries traffic.
TEST(System, WhereIoUringIsRefusedTheDefaultFallsBackToUdpAndSaysSo) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  System sys({topo("n300.yaml")}, 90s, {TTEMU_NO_URING});
  EXPECT_NE(sys.output().find("ttemu: io_uring is refused here (io_uring_setup: Operation not permitted): the chips' links use udp\n"),
            std::string::npos)
      << sys.output();
  expect_transport_mode(sys, "udp: io_uring is refused here", SYS_epoll_pwait2, "epoll_pwait2");
}

// Chosen, not defaulted, a refused io_uring is an error that names it, and nothing starts.
TEST(System, UringChosenWhereIoUringIsRefusedIsAnError) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  const RunResult r = run({TTEMU_NO_URING, TTEMU_BINARY, "launch", "--transport", "uring", topo("n300.yaml")}, 60s);
  expect_one_line_error(r, "--transport uring: io_uring is refused here (io_uring_setup: Operation not permitted)");
}

// With a CPU for each chip, chips poll for 1 ms after traffic before they sleep, over every
// transport (a sleeping peer's wake-up is what held a shm link to a third of its speed); when
// asked, they sleep at once. `ttemu status` says which, and a spinning chip still sleeps once
// traffic stops: idle is free. (With more chips than CPUs: tests/spin_choice_test.cpp.)
TEST(System, WithACpuPerChipChipsSpinAfterTrafficThenSleep) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  const bool cpu_per_chip = process::allowed_cpus().size() >= 2;  // an n300 has two chips
  struct Case {
    std::vector<std::string> args;
    int spin;
    long idle_call = SYS_epoll_pwait2;
    const char* idle_name = "epoll_pwait2";
  };
  const std::vector<Case> cases{Case{{"--transport", "shm"}, cpu_per_chip ? 1000 : 0},
                                Case{{"--transport", "uring"}, cpu_per_chip ? 1000 : 0, SYS_io_uring_enter, "io_uring_enter"},
                                Case{{"--transport", "udp"}, cpu_per_chip ? 1000 : 0}, Case{{"--transport", "shm", "--spin-us", "0"}, 0},
                                Case{{"--transport", "udp", "--spin-us", "40"}, 40}};
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(c.args, " ")));
    std::vector<std::string> args{topo("n300.yaml")};
    args.insert(args.end(), c.args.begin(), c.args.end());
    System sys(args);
    EXPECT_EQ(sys.status()["spin_us"], c.spin);
    const RunResult text = sys.ttemu({"status"});
    EXPECT_NE(text.out.find(c.spin > 0 ? fmt::format("waiting: a chip polls for {} us after traffic, then sleeps", c.spin)
                                       : std::string("waiting: a chip sleeps as soon as it is idle")),
              std::string::npos)
        << text.out;
    RunResult t = sys.ttemu({"link", "test", "M0D0P2", "--frames", "20000", "--json"});
    ASSERT_EQ(t.status, 0) << t.out;
    EXPECT_EQ(json::parse(t.stdout_text)["verified"], 20000);
    expect_chips_idle_in(sys.status(), c.idle_call, c.idle_name);  // after the spin, asleep
  }
}

TEST(System, TwoChipsComeUpAndShutDownLeavingNothing) {
  System sys({topo("n300.yaml")});
  json s = sys.status();
  expect_all_links_up(s, 2, 2);
  const Held held = held_by(sys, s);
  const size_t link_segments = transport_under_test() == "shm" ? 2 : 0;  // one per link (both rings), two links
  EXPECT_EQ(segments_of(sys.job()).size(), 6u + link_segments) << "control, L1 and DRAM per chip, and the links'";
  EXPECT_EQ(sys.stop(SIGTERM), 0);
  expect_nothing_left(held);
}

TEST(System, GalaxyComesUpWithEveryLinkUpAndShutsDownLeavingNothing) {
  System sys({topo("galaxy.yaml")});
  json s = sys.status();
  expect_all_links_up(s, 32, 208);
  const Held held = held_by(sys, s);
  std::set<int> unique(held.pids.begin(), held.pids.end());
  EXPECT_EQ(unique.size(), 32u) << "one process per chip";
  EXPECT_EQ(sys.stop(SIGINT), 0);
  expect_nothing_left(held);
}

// What a process has cost so far: its wake-ups (voluntary context switches) and its CPU
// time in clock ticks (user and system).
struct Cost {
  long wakeups = 0, ticks = 0;
};

Cost cost_of(int pid) {
  Cost c;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) c.wakeups = std::stol(line.substr(24));
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream rest(all.substr(all.rfind(')') + 2));  // after the command's name
  std::vector<std::string> f((std::istream_iterator<std::string>(rest)), std::istream_iterator<std::string>());
  EXPECT_GE(f.size(), 13u) << "cannot read /proc/" << pid << "/stat";
  if (f.size() >= 13) c.ticks = std::stol(f[11]) + std::stol(f[12]);  // utime, stime
  return c;
}

// Idle is free: once up, a system with no traffic neither wakes nor runs, whatever its
// transport (the io_uring transport sleeps in its ring, shm chips in the kernel). Settling
// (the last acks, the status query) may take a moment, so the test waits, with a bound, for
// a whole second in which the launcher and every chip stayed asleep.
TEST(System, AnIdleSystemNeitherWakesNorRuns) {
  System sys({topo("galaxy.yaml")});
  json s = sys.status();
  expect_all_links_up(s, 32, 208);
  std::vector<int> pids = chip_pids(s);
  pids.push_back(sys.pid());
  auto total = [&] {
    Cost sum;
    for (int pid : pids) {
      const Cost c = cost_of(pid);
      sum.wakeups += c.wakeups, sum.ticks += c.ticks;
    }
    return sum;
  };
  Cost last = total(), worst{};
  bool quiet = false;
  for (int second = 0; second < 30 && !quiet; ++second) {
    std::this_thread::sleep_for(1s);  // a measuring window, not a wait for an event
    const Cost now = total();
    const Cost spent{now.wakeups - last.wakeups, now.ticks - last.ticks};
    quiet = spent.wakeups == 0 && spent.ticks == 0;
    if (second == 0 || spent.wakeups < worst.wakeups) worst = spent;
    last = now;
  }
  EXPECT_TRUE(quiet) << "no quiet second in 30: at best " << worst.wakeups << " wake-ups and " << worst.ticks
                     << " ticks in a second, over " << pids.size() << " processes";
  EXPECT_EQ(sys.stop(SIGTERM), 0);
}

TEST(System, KillingTheLauncherTakesEveryChipWithIt) {
  System sys({topo("galaxy.yaml")});
  const Held held = held_by(sys, sys.status());
  EXPECT_EQ(sys.stop(SIGKILL), 128 + SIGKILL);
  expect_nothing_left(held);
}

TEST(System, AChipThatDiesIsReportedAndTheRestKeepRunning) {
  System sys({topo("t3k.yaml")});
  json s = sys.status();
  const Held held = held_by(sys, s);
  int victim = s["chips"][3]["pid"];
  kill(victim, SIGKILL);
  ASSERT_TRUE(sys.wait_for("chip M0D3 (pid " + std::to_string(victim) + ") was killed by signal 9", 20s))
      << sys.output();
  // Its neighbours' links go down at once, idle or not: the launcher tells them.
  std::vector<std::string> neighbours;
  for (const auto& l : s["links"]) {
    const std::string a = l["a"], b = l["b"];
    if (a.rfind("M0D3P", 0) == 0) neighbours.push_back(b);
    if (b.rfind("M0D3P", 0) == 0) neighbours.push_back(a);
  }
  ASSERT_FALSE(neighbours.empty());
  for (const auto& n : neighbours) EXPECT_TRUE(sys.wait_for("ttemu: link " + n + " is down", 20s)) << n << "\n" << sys.output();
  s = sys.status();
  // The event log (spec 1.1.2.1) has the death and each neighbour's link going down, as the
  // neighbours' status queues reported it.
  const std::string log = s["event_log"];
  auto line = [](const std::string& kind, const std::string& field, const std::string& value) {
    return [=](const json& e) { return e["kind"] == kind && e.value(field, "") == value; };
  };
  EXPECT_TRUE(logged(log, line("chip_died", "chip", "M0D3"))) << log;
  for (const auto& n : neighbours) EXPECT_TRUE(logged(log, line("link_down", "port", n))) << n;
  EXPECT_FALSE(s["chips"][3]["alive"].get<bool>());
  EXPECT_TRUE(s["chips"][0]["alive"].get<bool>());
  for (const auto& l : s["links"]) {
    for (const auto& end : l["ends"]) {
      const std::string port = end["port"];
      if (std::find(neighbours.begin(), neighbours.end(), port) != neighbours.end()) {
        EXPECT_EQ(end["state"], "down") << port;
      }
    }
  }
  RunResult r = sys.ttemu({"link", "test", "M0D0P2", "--frames", "2000", "--size", "512", "--json"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(sys.stop(), 0);
  // The launcher stops the 7 chips that live, not the dead one too.
  EXPECT_TRUE(sys.wait_for("received, stopping 7 chip(s)", 5s)) << sys.output();
  expect_nothing_left(held);
}

// The JSON objects a command printed, one per line.
std::vector<json> json_lines(const std::string& out) {
  std::vector<json> docs;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '{') docs.push_back(json::parse(line));
  }
  return docs;
}

json stream(System& sys, const std::string& port, int frames, int size) {
  RunResult r = sys.ttemu({"link", "test", port, "--frames", std::to_string(frames), "--size",
                     std::to_string(size), "--json"});
  EXPECT_EQ(r.status, 0) << r.out;
  return json::parse(r.out.substr(r.out.find('{')));
}

// The window's bound in bytes closes it before its frames run out (16 frames of 8 KiB in
// 128 KiB, of a 256-frame window): the stream waits for room, and loses nothing.
TEST(System, AStreamThatFillsTheWindowsByteBoundArrivesExact) {
  System sys({topo("n300.yaml"), "--window-kib", "128"});
  json r = stream(sys, "M0D0P2", 5000, 8192);
  EXPECT_EQ(r["verified"], 5000);
  EXPECT_EQ(r["errors"], 0);
}

TEST(System, StreamsArriveExactAtTenPercentFrameErrors) {
  TempFile plan("links:\n  - link: all\n    corrupt: 0.10\n");
  System sys({topo("n300.yaml"), "--faults", plan.path(), "--seed", "7"});
  json r = stream(sys, "M0D0P2", 20000, 1024);
  EXPECT_EQ(r["verified"], 20000);
  EXPECT_EQ(r["errors"], 0);
  EXPECT_GT(r["crc_errors"].get<int>(), 500) << "about 10% of 20000 frames";
  EXPECT_GT(r["retransmits"].get<int>(), 0);
  json s = sys.status();
  const auto& rx = s["links"][0]["ends"][1]["counters"];
  EXPECT_EQ(rx["stream_errors"], 0);
  EXPECT_GT(s["links"][0]["ends"][0]["counters"]["injected_corrupt"].get<int>(), 0);
}

TEST(System, StreamsArriveExactThroughBurstErrorsAndDrops) {
  TempFile plan(
      "links:\n  - link: M0D0P2\n    direction: both\n"
      "    burst: {enter_bad: 0.02, leave_bad: 0.2, corrupt_in_bad: 0.8}\n    drop: 0.01\n");
  System sys({topo("n300.yaml"), "--faults", plan.path()});
  json r = stream(sys, "M0D0P2", 20000, 2048);
  EXPECT_EQ(r["verified"], 20000);
  EXPECT_EQ(r["errors"], 0);
  EXPECT_GT(r["crc_errors"].get<int>(), 0);
  // The other plane's link had no faults.
  json clean = stream(sys, "M0D0P3", 2000, 2048);
  EXPECT_EQ(clean["crc_errors"], 0);
}

TEST(System, FaultsChangeAtRunTime) {
  System sys({topo("n300.yaml")});
  EXPECT_EQ(stream(sys, "M0D0P2", 3000, 1024)["crc_errors"], 0);
  TempFile plan("links:\n  - link: M0D1P6\n    direction: in\n    corrupt: 0.05\n");
  RunResult r = sys.ttemu({"faults", "apply", plan.path()});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("1 link direction(s) with faults"), std::string::npos) << r.out;
  json faulty = stream(sys, "M0D0P2", 3000, 1024);
  EXPECT_EQ(faulty["verified"], 3000);
  EXPECT_GT(faulty["crc_errors"].get<int>(), 0);
  TempFile none("");
  ASSERT_EQ(sys.ttemu({"faults", "apply", none.path()}).status, 0);
  EXPECT_EQ(stream(sys, "M0D0P2", 3000, 1024)["crc_errors"], 0);
}

// A plan's down intervals count from when the links started; with --from-now, from when the
// plan arrives: the same plan, applied both ways to a system up for longer than the interval,
// cuts the wire only the second way (and the stream still arrives whole, after it).
TEST(System, AFaultPlanAppliedFromNowCutsTheWireFromNow) {
  System sys({topo("n300.yaml")});
  TempFile plan("links:\n  - link: M0D0P2\n    down: [{at: 0, for: 0.3}]\n");
  auto drops = [&] { return sys.status()["links"][0]["ends"][0]["counters"]["injected_drop"].get<uint64_t>(); };
  for (auto end = Clock::now() + 60s; sys.status()["uptime_s"].get<double>() < 0.5;) {
    ASSERT_LT(Clock::now(), end) << "the system's uptime does not grow";
  }
  ASSERT_EQ(sys.ttemu({"faults", "apply", plan.path()}).status, 0);
  EXPECT_EQ(stream(sys, "M0D0P2", 1000, 1024)["verified"], 1000);
  EXPECT_EQ(drops(), 0u) << "the interval ended long ago";
  const RunResult r = sys.ttemu({"faults", "apply", "--from-now", plan.path()});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(stream(sys, "M0D0P2", 1000, 1024)["verified"], 1000);
  EXPECT_GT(drops(), 0u) << "the wire was cut from the moment the plan arrived";
}

TEST(System, StrayDatagramsAreDroppedAndCounted) {
  if (transport_under_test() == "shm") GTEST_SKIP() << "sends to the chips' UDP sockets";
  System sys({topo("n300.yaml")});
  json s = sys.status();
  int udp = s["links"][0]["ends"][1]["udp"];  // M0D1P6
  int sock = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(udp));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  std::mt19937 rng(1);
  int sent = 0;
  for (int i = 0; i < 50; ++i, ++sent) {  // garbage
    std::vector<uint8_t> junk(1 + rng() % 500);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    sendto(sock, junk.data(), junk.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
  // A well-formed hello from another job, and a data frame with a valid CRC.
  link::HelloBody hello;
  hello.job = 12345;
  hello.nonce = 99;
  std::vector<uint8_t> d;
  link::FrameHeader h;
  h.type = link::FrameType::kHello;
  link::append_frame(d, h, {reinterpret_cast<uint8_t*>(&hello), sizeof hello});
  h.type = link::FrameType::kData;
  h.session = 42;
  std::vector<uint8_t> payload(64, 0x5a);
  link::append_frame(d, h, payload);
  sendto(sock, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  ++sent;
  close(sock);
  // Traffic on the same socket afterwards: once it has arrived, the strays were handled.
  json r = stream(sys, "M0D0P2", 2000, 256);
  EXPECT_EQ(r["verified"], 2000);
  EXPECT_EQ(r["errors"], 0);
  s = sys.status();
  const auto& rx = s["links"][0]["ends"][1];
  EXPECT_EQ(rx["counters"]["foreign"].get<int>(), sent);
  EXPECT_EQ(rx["state"], "up");
}

// A chip's lazy inbox, where its peers send the acknowledgements that need not wake it, takes
// datagrams from those peers only: anyone else's are dropped and counted (`ttemu status`), and
// the chip's links go on. The chip reads its inbox while it is awake, so traffic brings the
// count up to date.
TEST(System, StrayDatagramsToALazyInboxAreDroppedAndCounted) {
  if (transport_under_test() == "shm") GTEST_SKIP() << "shm chips have no lazy inbox";
  System sys({topo("n300.yaml")});
  auto inbox_of = [](const json& status, const std::string& chip) {
    for (const auto& c : status["chips"]) {
      if (c["name"] == chip) return c.value("lazy_inbox", json::object());
    }
    return json::object();
  };
  const json inbox = inbox_of(sys.status(), "M0D1");
  ASSERT_TRUE(inbox.contains("udp")) << inbox;
  EXPECT_EQ(inbox["foreign"], 0);
  int sock = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(inbox["udp"].get<uint16_t>());
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  std::mt19937 rng(7);
  const int sent = 30;
  for (int i = 0; i < sent; ++i) {
    std::vector<uint8_t> junk(1 + rng() % 500);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    ASSERT_GT(sendto(sock, junk.data(), junk.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  }
  close(sock);
  uint64_t foreign = 0;
  EXPECT_TRUE(test::eventually(
      [&] {
        json r = stream(sys, "M0D1P6", 500, 256);  // M0D1 sends: its peer's acknowledgements come lazily
        EXPECT_EQ(r["verified"], 500);
        EXPECT_EQ(r["errors"], 0);
        foreign = inbox_of(sys.status(), "M0D1").value("foreign", uint64_t{0});
        return foreign >= sent;
      },
      std::chrono::seconds(60)));
  EXPECT_EQ(foreign, static_cast<uint64_t>(sent));  // each stray once
  RunResult text = sys.ttemu({"status"});
  EXPECT_NE(text.out.find("lazy inboxes: 30 stray datagram(s) dropped"), std::string::npos) << text.out;
  const json s = sys.status();
  for (const auto& l : s["links"]) {
    EXPECT_EQ(l["ends"][0]["state"], "up");
    EXPECT_EQ(l["ends"][0]["counters"]["foreign"], 0);  // the strays were the inbox's, not a link's
    EXPECT_EQ(l["ends"][1]["counters"]["foreign"], 0);
  }
}

// A worker process killed in the middle of a submission, after it took a ticket and before
// its command was ready, held that slot, and with it every slot behind it: once other workers
// had gone round the buffer the chip took no command again. Here one worker takes a ticket
// and dies before it claims the slot, and another claims its slot and dies once it has
// counted its command's packets; the chip voids both slots, takes the count back, says so,
// and a traffic run of three laps of the buffer goes through. (The seeded simulator test FabricSim.AWorkerThatDies... replays both.)
TEST(System, AWorkerKilledWhileSubmittingDoesNotHoldTheCommandBuffer) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  System sys({topo("n300.yaml")});
  const auto job = job::JobId::parse(sys.job());
  ASSERT_TRUE(job);
  chip::Segment block = chip::Segment::open(chip::segment_name(*job, {0, 0}, chip::SegmentKind::kControl));
  auto& cb = block.as<chip::ChipControl>()->commands;
  auto take_ticket = [&cb] {
    uint32_t t = cb.next_ticket.load();
    while (!cb.next_ticket.compare_exchange_weak(t, t + 1)) {
    }
    return t;
  };
  take_ticket();  // a worker that dies between its ticket and its claim
  const pid_t child = fork();
  if (child == 0) {  // a worker (core 5) that dies once it has counted its command's 7 packets
    const uint32_t t = take_ticket();
    chip::FabricCommand& slot = cb.slots[t % chip::kCommandSlots];
    slot.state.store(chip::slot_state(t, chip::kSlotFilling, static_cast<uint32_t>(getpid())));
    slot.core = 5;
    slot.txn_id = 3;
    slot.counted = 7;
    slot.counted_ticket = t;
    cb.workers[5].txn[3].fetch_add(7);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  int exited = 0;
  ASSERT_EQ(waitpid(child, &exited, 0), child);

  const auto laps = std::to_string(3 * chip::kCommandSlots);
  RunResult r = sys.ttemu({"traffic", "--pattern", "unicast", "--src", "M0D0", "--dst", "M0D1", "--count", laps,
                           "--size", "64", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  const json t = json_lines(r.stdout_text).at(0);
  EXPECT_EQ(t["errors"], 0) << r.out;
  EXPECT_EQ(t["verified"], 3 * chip::kCommandSlots * 64) << r.out;
  uint64_t voided = 0;
  const json status = sys.status();  // kept: a loop over a temporary's member would dangle
  for (const auto& c : status["chips"]) {
    if (c["name"] == "M0D0") voided = c["command_slots_voided"].get<uint64_t>();
  }
  EXPECT_EQ(voided, 2u);
  EXPECT_EQ(cb.workers[5].txn[3].load(), 0u) << "the dead worker's count was taken back";
  RunResult text = sys.ttemu({"status"});
  EXPECT_NE(text.out.find("command slots voided (a worker died while writing a command): 2 on M0D0"), std::string::npos)
      << text.out;
}

// The stale-packet problem across processes: datagrams captured at the start of a link test
// are sent again to the receiving port (spoofed as coming from the sending port) once the
// 16-bit sequence numbers have wrapped. They must be refused as stale, never delivered.
// Needs root for the packet capture and the raw socket; only loopback is touched.
TEST(System, DatagramsReplayedAfterASequenceWrapAreRefusedAsStale) {
  if (transport_under_test() == "shm") GTEST_SKIP() << "sends to the chips' UDP sockets";
  if (geteuid() != 0) GTEST_SKIP() << "needs root: packet capture and a raw socket on loopback";
  System sys({topo("n300.yaml")});
  json s = sys.status();
  int tx_udp = 0, rx_udp = 0;
  std::string rx_port;
  for (const auto& l : s["links"]) {
    if (l["ends"][0]["port"] == "M0D0P2") {
      tx_udp = l["ends"][0]["udp"];
      rx_udp = l["ends"][1]["udp"];
      rx_port = l["ends"][1]["port"];
    }
  }
  ASSERT_GT(rx_udp, 0);

  int cap = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP));
  ASSERT_GE(cap, 0) << std::strerror(errno);
  int rcvbuf = 16 << 20;
  setsockopt(cap, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_IP);
  ll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
  ASSERT_EQ(bind(cap, reinterpret_cast<sockaddr*>(&ll), sizeof ll), 0) << std::strerror(errno);
  int raw = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_UDP);
  ASSERT_GE(raw, 0) << std::strerror(errno);

  int out_fd = -1;
  pid_t test = spawn({TTEMU_BINARY, "link", "test", "M0D0P2", "--frames", "300000", "--size", "256",
                      "--json", "--job", sys.job()}, out_fd);
  std::vector<std::vector<uint8_t>> recorded;
  bool seen_high = false, wrapped = false;
  size_t replayed = 0;
  std::string out;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  std::vector<uint8_t> pkt(70000), udp(70000);
  const auto deadline = Clock::now() + 200s;
  for (bool done = false; !done && Clock::now() < deadline;) {
    pollfd p[2] = {{out_fd, POLLIN, 0}, {cap, POLLIN, 0}};
    if (poll(p, 2, 1000) < 0) break;
    if (p[0].revents) {
      char buf[4096];
      ssize_t n = read(out_fd, buf, sizeof buf);
      if (n <= 0) done = true;
      else out.append(buf, static_cast<size_t>(n));
    }
    for (int k = 0; k < 256 && (p[1].revents & POLLIN); ++k) {
      sockaddr_ll from{};
      socklen_t fl = sizeof from;
      ssize_t n = recvfrom(cap, pkt.data(), pkt.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
      if (n <= 0) break;
      if (from.sll_pkttype == PACKET_OUTGOING || n < 28) continue;
      const auto* ip = reinterpret_cast<const iphdr*>(pkt.data());
      const size_t ihl = ip->ihl * 4u;
      if (ip->protocol != IPPROTO_UDP || static_cast<size_t>(n) < ihl + 8 + link::kHeaderBytes) continue;
      const auto* uh = reinterpret_cast<const udphdr*>(pkt.data() + ihl);
      if (ntohs(uh->dest) != rx_udp || ntohs(uh->source) != tx_udp) continue;
      const uint8_t* body = pkt.data() + ihl + 8;
      const size_t len = static_cast<size_t>(n) - ihl - 8;
      link::FrameHeader h;
      std::memcpy(&h, body, sizeof h);
      if (recorded.size() < 400 && !wrapped) recorded.emplace_back(body, body + len);
      if (h.type == link::FrameType::kData) {
        seen_high = seen_high || h.tx_seq >= 60000;
        wrapped = wrapped || (seen_high && h.tx_seq < 5000);
      }
    }
    // After the wrap, three rounds of replays, each datagram spoofed from the sending port.
    for (int k = 0; wrapped && k < 32 && replayed < 3 * recorded.size(); ++k, ++replayed) {
      const auto& d = recorded[replayed % recorded.size()];
      udphdr uh{};
      uh.source = htons(static_cast<uint16_t>(tx_udp));
      uh.dest = htons(static_cast<uint16_t>(rx_udp));
      uh.len = htons(static_cast<uint16_t>(8 + d.size()));
      std::memcpy(udp.data(), &uh, 8);
      std::memcpy(udp.data() + 8, d.data(), d.size());
      sendto(raw, udp.data(), 8 + d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    }
  }
  close(cap);
  close(raw);
  close(out_fd);
  int status = 0;
  if (waitpid(test, &status, WNOHANG) == 0) kill(test, SIGKILL);
  waitpid(test, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  ASSERT_TRUE(wrapped) << "the capture saw the sequence numbers wrap";
  EXPECT_GT(replayed, 0u);
  json r = json::parse(out.substr(out.find('{')));
  EXPECT_EQ(r["verified"], 300000);
  EXPECT_EQ(r["errors"], 0) << "no replayed payload was taken for a current one";
  s = sys.status();
  for (const auto& l : s["links"]) {
    for (const auto& end : l["ends"]) {
      if (end["port"] != rx_port) continue;
      EXPECT_GT(end["counters"]["stale"].get<int>(), 0) << end;
      EXPECT_EQ(end["counters"]["down_transitions"].get<int>(), 0) << end;
      EXPECT_EQ(end["state"], "up");
    }
  }
}

TEST(System, AClientCommandRunsAgainstTheLiveSystemAndGivesItsStatus) {
  RunResult ok = ttemu({"launch", topo("n300.yaml"), "--", TTEMU_BINARY, "link", "test", "M0D1P6", "--frames", "500"});
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("verified 500, errors 0"), std::string::npos) << ok.out;
  RunResult fail = ttemu({"launch", topo("n300.yaml"), "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(fail.status, 3) << fail.out;
}

TEST(System, ALinkCommandOnAnUnwiredPortNamesTheChipsWiredPorts) {
  RunResult r = ttemu({"launch", topo("n300.yaml"), "--", TTEMU_BINARY, "link", "ping", "M0D0P8"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("'M0D0P8' is not a wired port of " + topo("n300.yaml") + " (M0D0 has P2, P3)"), std::string::npos) << r.out;
}

TEST(System, BadLaunchInputFailsWithOneLineAndLeavesNothing) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  TempFile plan("links:\n  - link: M0D0P9\n    corrupt: 0.1\n");
  RunResult r = ttemu({"launch", topo("n300.yaml"), "--faults", plan.path()});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find(plan.path() + ":2: port M0D0P9 has no link"), std::string::npos) << r.out;
  RunResult s = ttemu({"status", "--job", "1-00000001"});
  EXPECT_EQ(s.status, 1);
  EXPECT_NE(s.out.find("no running job 1-00000001"), std::string::npos) << s.out;
}

TEST(System, CleanRemovesWhatDeadJobsLeft) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  // A segment named for a job whose launcher (pid 1's child that never was) is gone.
  int dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  std::string name = "/dev/shm/ttemu." + std::to_string(getuid()) + "." + std::to_string(dead) +
                     "-0000abcd.M0D0.ctl";
  std::ofstream(name) << "stale";
  ASSERT_TRUE(fs::exists(name));
  RunResult r = ttemu({"clean"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(fs::exists(name));
  EXPECT_NE(r.out.find("removed " + name), std::string::npos) << r.out;
}

TEST(System, CleanSparesALiveJobWhoseLauncherRunsUnderAnotherName) {
  // A launcher started through a link named otherwise (as under valgrind or a renamed copy)
  // is still recognised as alive: its control socket answers.
  const fs::path link = fs::temp_directory_path() / ("emu-renamed-" + std::to_string(getpid()));
  fs::remove(link);
  fs::create_symlink(TTEMU_BINARY, link);
  const std::string real = TTEMU_BINARY;
  RunResult r = run({link.string(), "launch", topo("n300.yaml"), "--", "sh", "-c", real + " clean && " + real + " status"});
  fs::remove(link);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("0 leftover(s) removed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("links 2/2 up"), std::string::npos) << r.out;
}

TEST(System, CleanSeesThroughAReusedPidAndSparesALiveJob) {
  // A dead job whose pid now names another program (this test): its leftovers go.
  std::string reused = "/dev/shm/ttemu." + std::to_string(getuid()) + "." + std::to_string(getpid()) +
                       "-0000abce.M0D0.ctl";
  std::ofstream(reused) << "stale";
  System sys({topo("n300.yaml")});
  RunResult r = ttemu({"clean"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(fs::exists(reused)) << r.out;
  // The live job keeps everything: its status still answers, and a link still carries data.
  EXPECT_EQ(r.out.find(sys.job()), std::string::npos) << r.out;
  RunResult t = sys.ttemu({"link", "test", "M0D0P2", "--frames", "200", "--json"});
  EXPECT_EQ(t.status, 0) << t.out;
  const Held held = held_by(sys, sys.status());
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

}  // namespace
}  // namespace ttemu::test

namespace ttemu::test {
namespace {

// --- fabric routers and the read/write API across processes -------------------------------

RunResult client_on(const std::vector<std::string>& launch_args, const std::string& filter) {
  std::vector<std::string> args{"launch"};
  args.insert(args.end(), launch_args.begin(), launch_args.end());
  args.insert(args.end(), {"--", TTEMU_FABRIC_CLIENT, "--gtest_filter=" + filter});
  return ttemu(args);
}


const std::set<std::string> kAllPatterns = {"unicast", "all_to_all", "one_to_all", "all_to_one", "neighbor_exchange",
                                            "random_pairing"};

// What a user of `ttemu traffic --json` relies on: one line for each pattern asked for, none
// missing, none twice; every byte written (pairs x size x count, more than none) verified at its
// destination, none wrong, and no write NACKed.
void expect_every_byte_verified(const std::vector<json>& runs, const std::set<std::string>& patterns, double size, double count) {
  std::multiset<std::string> seen;
  for (const auto& p : runs) {
    SCOPED_TRACE(p.dump());
    seen.insert(p.value("pattern", "?"));
    const double pairs = p.value("pairs", 0.0), bytes = p.value("bytes", 0.0);
    EXPECT_GT(pairs, 0);
    EXPECT_EQ(bytes, pairs * size * count);
    EXPECT_EQ(p.value("verified", -1.0), bytes);
    EXPECT_EQ(p.value("errors", -1), 0);
    EXPECT_EQ(p.value("nacks", -1), 0);
  }
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), patterns);
  EXPECT_EQ(seen.size(), patterns.size()) << "each pattern once";
}

// The client's Fabric.* tests, each of which must have passed.
void expect_fabric_suite_passed(const RunResult& r) {
  expect_client_passed(r, {"Fabric.AllToAllWritesThenReadsBackBitExact", "Fabric.AtomicsCountEveryIncrementOnce",
                           "Fabric.MulticastReachesExactlyTheDevicesInRange", "Fabric.InvalidArgumentsAreRefusedAndWriteNothing",
                           "Fabric.AutomaticFvcIsReportedInTheStatus"});
}

// --cpu-bind blocks (docs/fabric.md#cpu-binding): each chip runs on its block's CPU, and a
// restarted chip on the same one; unbound chips run wherever the launcher may.
// The chip called `name` in a status report (null if there is none).
json chip_named(const json& status, const std::string& name) {
  for (const auto& c : status["chips"]) {
    if (c["name"] == name) return c;
  }
  return json();
}

TEST(System, ChipsBoundInBlocksRunOnTheirBlocksCpuAndKeepItWhenRestarted) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  const std::vector<int> mine = process::allowed_cpus();
  if (mine.size() < 2) GTEST_SKIP() << "needs two CPUs";
  const std::string first = std::to_string(mine[0]), second = std::to_string(mine[1]);
  const std::vector<std::string> two_cpus{"/usr/bin/taskset", "-c", first + "," + second};
  {
    System unbound({topo("n300.yaml")}, 90s, two_cpus);
    const json s = unbound.status();
    ASSERT_EQ(s["chips"].size(), 2u);
    for (const auto& c : s["chips"]) EXPECT_EQ(c["cpus"], process::cpu_list_text({mine[0], mine[1]})) << c.dump();
  }
  System sys({topo("mesh_4x4.yaml"), "--cpu-bind", "blocks"}, 90s, two_cpus);
  // Two CPUs for a 4x4 mesh: columns 0-1 on the first, 2-3 on the second (device ids are row-major).
  auto expected = [&](const std::string& chip) { return std::stoi(chip.substr(3)) % 4 < 2 ? first : second; };
  const json s = sys.status();
  ASSERT_EQ(s["chips"].size(), 16u);
  for (const auto& c : s["chips"]) EXPECT_EQ(c["cpus"], expected(c["name"])) << c.dump();
  RunResult traffic = sys.ttemu({"traffic", "--pattern", "all_to_all", "--count", "2", "--size", "4096", "--json"});
  ASSERT_EQ(traffic.status, 0) << traffic.out;
  expect_every_byte_verified(json_lines(traffic.stdout_text), {"all_to_all"}, 4096, 2);
  auto m0d5 = [&] { return chip_named(sys.status(), "M0D5"); };
  RunResult kill = sys.ttemu({"chip", "kill", "M0D5"});
  ASSERT_EQ(kill.status, 0) << kill.out;
  ASSERT_TRUE(eventually([&] { return m0d5().value("alive", true) == false; }, 30s)) << m0d5().dump();
  RunResult restart = sys.ttemu({"chip", "restart", "M0D5"});
  ASSERT_EQ(restart.status, 0) << restart.out;
  ASSERT_TRUE(eventually([&] { return m0d5().value("cpus", "") == first; }, 30s)) << m0d5().dump();
}

// --sched batch: every chip runs under SCHED_BATCH (as the kernel reports it), says so in
// `ttemu status`, moves traffic, and keeps it when restarted; without it, chips are normal.
TEST(System, ChipsAskedToRunAsBatchDoAndKeepItWhenRestarted) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  {
    System normal({topo("n300.yaml")});
    const json s = normal.status();
    ASSERT_EQ(s["chips"].size(), 2u);
    for (const auto& c : s["chips"]) EXPECT_EQ(c["sched"], "normal") << c.dump();
  }
  System sys({topo("n300.yaml"), "--sched", "batch"});
  const json s = sys.status();
  EXPECT_EQ(s["sched"], "batch");
  ASSERT_EQ(s["chips"].size(), 2u);
  for (const auto& c : s["chips"]) {
    EXPECT_EQ(c["sched"], "batch") << c.dump();
    EXPECT_EQ(process::scheduling_of(c["pid"].get<int>()), "batch") << c.dump();
  }
  RunResult text = sys.ttemu({"status"});
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.stdout_text.find("scheduling (--sched batch): 2 chip(s) batch"), std::string::npos) << text.stdout_text;
  RunResult traffic = sys.ttemu({"traffic", "--pattern", "all_to_all", "--count", "2", "--size", "4096", "--json"});
  ASSERT_EQ(traffic.status, 0) << traffic.out;
  expect_every_byte_verified(json_lines(traffic.stdout_text), {"all_to_all"}, 4096, 2);
  auto m0d1 = [&] { return chip_named(sys.status(), "M0D1"); };
  const int before = m0d1().value("pid", 0);
  RunResult kill = sys.ttemu({"chip", "kill", "M0D1"});
  ASSERT_EQ(kill.status, 0) << kill.out;
  ASSERT_TRUE(eventually([&] { return m0d1().value("alive", true) == false; }, 30s)) << m0d1().dump();
  RunResult restart = sys.ttemu({"chip", "restart", "M0D1"});
  ASSERT_EQ(restart.status, 0) << restart.out;
  ASSERT_TRUE(eventually([&] { return m0d1().value("sched", "") == "batch" && m0d1().value("pid", 0) != before; }, 30s))
      << m0d1().dump();
}

TEST(Fabric, GalaxyWritesReadsAtomicsMulticastAndBadArguments) {
  expect_fabric_suite_passed(client_on({topo("galaxy.yaml")}, "Fabric.*"));
}

TEST(Fabric, FourMeshClusterWritesReadsAndAtomicsAcrossMeshes) {
  expect_fabric_suite_passed(client_on({topo("spec_4mesh_3x3.yaml")}, "Fabric.*"));
}

// Sockets between chip processes (spec 2.4.2-2.4.4, 4): DSocket streams across meshes with
// either handshake, epochs that keep two senders apart, a stalled consumer that blocks the
// shared FVC with local handshake and nothing with end-to-end, an SSocket's reservation seen
// in `ttemu status` and freed on close, and freed when its worker or its receiver's chip dies,
// named errors (tests/socket_client.cpp). The router timeout is long: the stalls must not time out.
TEST(Sockets, SocketsBetweenChipProcessesAcrossMeshes) {
  RunResult r = ttemu({"launch", topo("spec_4mesh_3x3.yaml"), "--timeout-ms", "60000", "--", TTEMU_SOCKET_CLIENT});
  expect_client_passed(r, {"Socket.AnEndToEndStreamCrossesMeshesByteForByte", "Socket.ALocalHandshakeStreamCrossesMeshesByteForByte",
                           "Socket.EpochsKeepTwoSendersApart", "Socket.AStalledConsumerBlocksTheSharedFvcWithLocalHandshake",
                           "Socket.AStalledConsumerBlocksNothingWithEndToEndHandshake", "Socket.AnSSocketReservesItsFvcVisiblyAndFreesItOnClose",
                           "Socket.AMulticastSSocketReachesEveryReceiver", "Socket.AWorkerThatDiesWithoutClosingLeavesNoReservationBehind",
                           "Socket.BadArgumentsAreNamedAndDoNothing", "Socket.AnSSocketWhoseReceivingChipDiesLeavesNoReservation"});
}

// Memory protection between chip processes (tests/memory_keys_client.cpp): a worker on M0D1
// registers windows, a worker on M0D0 writes and reads them by key; a wrong key, a range
// outside the window, a read-only window written and a write without a key are each NACKed
// for permission with M0D1's bytes unchanged; ttemu status says the memory is protected.
TEST(Fabric, ProtectedMemoryAdmitsOnlyWhatAWindowAllows) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();  // the check is the center's, whatever carries the packets
  RunResult r = ttemu({"launch", topo("n300.yaml"), "--memory", "protected", "--", TTEMU_MEMORY_KEYS_CLIENT});
  expect_client_passed(r, {"MemoryKeys.AKeyedWriteLandsByteForByteAndReadsBack", "MemoryKeys.AWrongKeyIsNackedForPermissionAndChangesNothing",
                           "MemoryKeys.AWriteOutsideTheWindowIsNackedForPermissionAndChangesNothing",
                           "MemoryKeys.AWriteToAReadOnlyWindowIsNackedForPermissionAndChangesNothing",
                           "MemoryKeys.AnUnkeyedWriteOrReadIsRefusedInProtectedMemory", "MemoryKeys.ADeregisteredOrClosedWindowIsRefused",
                           "MemoryKeys.StatusSaysTheMemoryIsProtectedAndCountsRefusals"});
}

// From 4 hops on the mesh's routes, the chips on the way forward see traffic one way only: the
// acknowledgements they owe go back alone, held, and reach the chip upstream without waking it
// (over shm in its ring, over sockets in its lazy inbox). It must still read them: a chip that
// never read its inbox would resend once per timeout on every one-way link (2,446 times in
// this run, tried), where a machine's hiccups cause a few at most.
TEST(Fabric, HeldAcknowledgementsOnOneWayLinksCauseNoRetransmissions) {
  System sys({topo("mesh_4x4.yaml")});
  const Held held = held_by(sys, sys.status());
  RunResult r = sys.ttemu({"traffic", "--pattern", "unicast", "--src", "M0D0", "--dst", "M0D15", "--count", "1",
                           "--size", "64", "--latency-samples", "2000", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  const json t = json_lines(r.stdout_text).at(0);
  EXPECT_EQ(t["errors"], 0) << t;
  EXPECT_GT(t["verified"].get<uint64_t>(), 0u) << t;
  const json s = sys.status();
  uint64_t timeouts = 0, frames = 0;
  for (const auto& l : s["links"]) {
    for (const auto& end : l["ends"]) {
      timeouts += end["counters"]["timeouts"].get<uint64_t>();
      frames += end["counters"]["frames_tx"].get<uint64_t>();
    }
  }
  EXPECT_GE(frames, 2 * 2000u * 6) << "every write and its answer crossed six links";
  EXPECT_LT(timeouts, 50u) << "held acknowledgements were read before the timeouts fired";
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

TEST(Fabric, TrafficVerifiesEveryPatternWithCrcErrorsOnEveryLink) {
  TempFile plan("links:\n  - link: all\n    corrupt: 0.02\n");
  System sys({topo("galaxy.yaml"), "--faults", plan.path()});
  const Held held = held_by(sys, sys.status());
  RunResult r = sys.ttemu({"traffic", "--pattern", "all", "--count", "2", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  expect_every_byte_verified(json_lines(r.stdout_text), kAllPatterns, 4096, 2);
  // The faults were real: frames failed their CRC and were sent again; every link stayed up.
  json s = sys.status();
  uint64_t crc_errors = 0, retransmits = 0;
  for (const auto& l : s["links"]) {
    for (const auto& end : l["ends"]) {
      crc_errors += end["counters"]["crc_errors"].get<uint64_t>();
      retransmits += end["counters"]["retransmits"].get<uint64_t>();
      EXPECT_EQ(end["state"], "up") << end["port"];
    }
  }
  EXPECT_GT(crc_errors, 0u);
  EXPECT_GT(retransmits, 0u);
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

// `ttemu traffic --op atomic` and `--op read` through the chip processes, with one frame in
// fifty failing its CRC on every link, so that go-back-N sends frames again: every increment
// counts exactly once (a frame taken twice would count twice), each run's counters from zero,
// and every block read back is what was written.
TEST(Fabric, TrafficCountsEveryIncrementOnceAndReadsBackWhatItWroteThroughCrcErrors) {
  TempFile plan("links:\n  - link: all\n    corrupt: 0.02\n");
  System sys({topo("mesh_4x4.yaml"), "--faults", plan.path()});
  const Held held = held_by(sys, sys.status());
  for (const char* count : {"20", "7"}) {
    RunResult r = sys.ttemu({"traffic", "--pattern", "all_to_all", "--op", "atomic", "--count", count, "--json"});
    ASSERT_EQ(r.status, 0) << r.out;
    const std::vector<json> runs = json_lines(r.stdout_text);
    ASSERT_EQ(runs.size(), 1u) << r.out;
    const json& a = runs[0];
    SCOPED_TRACE(a.dump());
    EXPECT_EQ(a.value("op", ""), "atomic");
    EXPECT_EQ(a.value("pairs", 0), 16 * 15);
    EXPECT_EQ(a.value("bytes", 0.0), 16 * 15 * std::stod(count) * 4);
    EXPECT_EQ(a.value("verified", -1.0), a.value("bytes", 0.0)) << "every counter holds its pair's increments, once each";
    EXPECT_EQ(a.value("atomic_errors", -1), 0);
    EXPECT_EQ(a.value("nacks", -1), 0);
    EXPECT_EQ(a.value("unanswered", -1), 0);
  }
  RunResult r = sys.ttemu({"traffic", "--pattern", "all_to_all,random_pairing", "--op", "read", "--size", "8192", "--count", "2", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<json> reads = json_lines(r.stdout_text);
  expect_every_byte_verified(reads, {"all_to_all", "random_pairing"}, 8192, 2);
  for (const auto& p : reads) {
    SCOPED_TRACE(p.dump());
    EXPECT_EQ(p.value("read_bytes", 0.0), p.value("bytes", -1.0)) << "every pair reads its block back";
    EXPECT_EQ(p.value("read_verified", -1.0), p.value("read_bytes", 0.0));
    EXPECT_EQ(p.value("read_errors", -1), 0);
    EXPECT_EQ(p.value("reads_nacked", -1), 0);
  }
  json s = sys.status();
  uint64_t retransmits = 0;
  for (const auto& l : s["links"]) {
    for (const auto& end : l["ends"]) retransmits += end["counters"]["retransmits"].get<uint64_t>();
  }
  EXPECT_GT(retransmits, 0u) << "the faults were real";
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

// The Ethernet Fallback Channel between chip processes (spec 2.2.5). Of the four links
// between M0D0 and M0D1, plane 0's is cut for two seconds (both directions) and plane 1's
// corrupts one frame in five, while all_to_all runs on both planes again and again. Every
// byte must arrive and no write be NACKed; the event log must show plane 0's link moving onto
// the fallback channel and back, and plane 1's moving for its error rate; `ttemu diagnose`
// must name both links, the unreliable one first; its receivers must raise a CRC alarm.
TEST(Fabric, TrafficRunsThroughACutAndAnUnreliableLinkOnTheFallbackChannel) {
  TempFile plan(
      "links:\n"
      "  - link: M0D0P4\n    direction: both\n    down: [{at: 1.0, for: 2.0}]\n"
      "  - link: M0D0P5\n    direction: both\n    corrupt: 0.2\n");
  // Status intervals of 100 ms: the interval that holds the unreliable link's errors, before it
  // leaves its wire, is mostly those errors.
  System sys({topo("galaxy.yaml"), "--faults", plan.path(), "--status-interval-ms", "100"});
  const Held held = held_by(sys, sys.status());
  const std::string log = sys.status()["event_log"];
  auto has = [&](const char* kind, const std::string& port, const char* reason) {
    return logged(log, [&](const json& e) {
      return e["kind"] == kind && e.value("port", "") == port && (!reason || e.value("reason", "") == reason);
    });
  };
  // The receivers of the unreliable link raise a CRC alarm in their status queues.
  auto crc_alarm = [&] {
    return logged(log, [&](const json& e) {
      return e["kind"] == "error_rate" && (e["port"] == "M0D0P5" || e["port"] == "M0D1P13") && e["rate"] == "crc_errors" &&
             e["above"] == true;
    });
  };
  auto done = [&] {
    return (has("returned", "M0D0P4", nullptr) || has("returned", "M0D1P12", nullptr)) &&
           (has("fallback", "M0D0P5", "error_rate") || has("fallback", "M0D1P13", "error_rate")) && crc_alarm();
  };
  int runs = 0;
  for (auto end = Clock::now() + std::chrono::seconds(90); Clock::now() < end && !(runs >= 2 && done());) {
    for (const char* plane : {"1", "0"}) {
      RunResult r = sys.ttemu({"traffic", "--pattern", "all_to_all", "--count", "4", "--size", "16384", "--plane", plane, "--json"});
      ASSERT_EQ(r.status, 0) << r.out;
      expect_every_byte_verified(json_lines(r.stdout_text), {"all_to_all"}, 16384, 4);
      ++runs;
    }
  }
  ASSERT_TRUE(done()) << "after " << runs << " runs the log shows no reroute and return: " << slurp(log);
  EXPECT_TRUE(has("fallback", "M0D0P4", nullptr) || has("fallback", "M0D1P12", "timeouts"));
  for (const auto& e : read_event_log(log)) EXPECT_NE(e["kind"], "dropped") << e.dump();
  RunResult d = ttemu({"diagnose", log, "--json"});
  ASSERT_EQ(d.status, 0) << d.out;
  const json diag = json::parse(d.stdout_text);
  ASSERT_GE(diag["links"].size(), 2u) << diag.dump();
  EXPECT_EQ(diag["links"][0]["ends"], json({"M0D0P5", "M0D1P13"})) << diag.dump();
  // The cut link is named too; on a loaded machine another link may have timed out onto its
  // fallback channel as well, and rank level with it.
  const auto& links = diag["links"];
  EXPECT_NE(std::find_if(links.begin() + 1, links.end(), [](const json& l) { return l["ends"] == json({"M0D0P4", "M0D1P12"}); }),
            links.end()) << diag.dump();
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

// Waits (up to a minute) until workers have injected packets into the system: traffic has
// begun. It reads the chips' control blocks, starting no process: the traffic keeps the CPUs.
bool traffic_begun(System& sys) {
  const auto job = job::JobId::parse(sys.job());
  std::vector<chip::Segment> blocks;
  const json status = sys.status();  // kept: a loop over a temporary's member would dangle
  for (const auto& c : status["chips"]) {
    blocks.push_back(chip::Segment::open(chip::segment_name(*job, *routing::parse_chip(c["name"].get<std::string>()), chip::SegmentKind::kControl)));
  }
  auto injected = [&] {
    uint64_t n = 0;
    for (const auto& b : blocks) n += b.as<chip::ChipControl>()->packets_injected.load();
    return n;
  };
  const uint64_t before = injected();
  for (auto end = Clock::now() + std::chrono::seconds(60); Clock::now() < end;) {
    if (injected() > before) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a poll of shared memory, bounded above
  }
  return false;
}

// The Galaxy with all_to_all running in the background, with the client library's retry mode
// (a few seconds): start() returns once it injects; finish() joins it and returns its report.
struct GalaxyUnderTraffic {
  System sys{{topo("galaxy.yaml")}};
  Held held = held_by(sys, sys.status());
  std::string log = sys.status()["event_log"];
  RunResult traffic;
  std::jthread run;

  bool start() {
    run = std::jthread([this] {
      traffic = sys.ttemu({"traffic", "--pattern", "all_to_all", "--count", "48", "--size", "16384", "--retry", "3", "--json"});
    });
    if (traffic_begun(sys)) return true;
    run.join();
    return false;
  }
  RunResult finish() {
    run.join();
    return traffic;
  }
};

// The live control plane (spec 1.1.2). All four links between M0D0 and M0D1 are taken out of
// service while all_to_all runs with the client library's retry mode: the EFC has no parallel
// link left, so the control plane loads tables that go around the pair; writes NACKed meanwhile
// are written again over the new routes, and every byte arrives. One link back in service
// brings the pair back into the tables.
TEST(Fabric, AllFourLinksOfAPairCutMidTrafficReloadTheTablesAndRetriedWritesLand) {
  GalaxyUnderTraffic g;
  ASSERT_TRUE(g.start()) << g.traffic.out;
  auto& sys = g.sys;
  const std::string& log = g.log;
  for (const char* port : {"M0D0P4", "M0D0P5", "M0D0P6", "M0D0P7"}) {
    RunResult r = sys.ttemu({"links", "down", port});
    EXPECT_EQ(r.status, 0) << r.out;
  }
  const RunResult traffic = g.finish();
  ASSERT_EQ(traffic.status, 0) << traffic.out;
  const json p = json::parse(traffic.stdout_text);
  EXPECT_EQ(p["verified"], p["bytes"]) << p.dump();
  EXPECT_EQ(p["errors"], 0);
  EXPECT_TRUE(p["dead_chips"].empty());
  auto reload = [&](const std::function<bool(const json&)>& which) {
    return eventually([&] { return logged(log, [&](const json& e) { return e["kind"] == "tables_reloaded" && which(e); }); },
                      std::chrono::seconds(30));
  };
  EXPECT_TRUE(reload([](const json& e) { return e["failed"] == "M0D0-M0D1 (4 links)" && e["unreachable_pairs"] == 0; }))
      << slurp(log);
  RunResult up = sys.ttemu({"links", "up", "M0D0P4"});
  EXPECT_EQ(up.status, 0) << up.out;
  EXPECT_TRUE(reload([](const json& e) { return e["failed_links"].empty() && e["failed_chips"].empty(); })) << slurp(log);
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(g.held);
}

// A chip killed while all_to_all runs: the pairs among the other chips all verify, writes to
// the dead chip come back NACKed (within milliseconds: the neighbours' links go down at once
// and the routers NACK what would cross them, then the tables leave no route to it), and the
// chip restarts with its links handshaking anew, after which the whole Galaxy verifies again.
TEST(Fabric, AChipKilledMidTrafficLeavesTheRestVerifiedAndComesBackWhenRestarted) {
  GalaxyUnderTraffic g;
  ASSERT_TRUE(g.start()) << g.traffic.out;
  auto& sys = g.sys;
  const std::string& log = g.log;
  RunResult kill = sys.ttemu({"chip", "kill", "M0D5"});
  EXPECT_EQ(kill.status, 0) << kill.out;
  const RunResult traffic = g.finish();
  ASSERT_EQ(traffic.status, 0) << traffic.out;
  json p = json::parse(traffic.stdout_text);
  EXPECT_EQ(p["dead_chips"], json({"M0D5"})) << p.dump();
  const double live_pairs = p["pairs"].get<double>() - p["pairs_to_dead"].get<double>() - p["pairs_from_dead"].get<double>();
  EXPECT_EQ(p["verified"].get<double>(), live_pairs * 16384 * 48) << p.dump();
  EXPECT_EQ(p["errors"], 0);
  EXPECT_EQ(p["pairs_to_dead"], 31);
  // A write to the dead chip now: NACKed at once (no retry), well within the bound of 0.5 s.
  RunResult to_dead = sys.ttemu({"traffic", "--pattern", "unicast", "--src", "M0D0", "--dst", "M0D5", "--count", "1", "--json"});
  ASSERT_EQ(to_dead.status, 0) << to_dead.out;
  p = json::parse(to_dead.stdout_text);
  EXPECT_GE(p["nacks"].get<int>(), 1) << p.dump();
  EXPECT_LT(p["seconds"].get<double>(), 0.5) << "the write and its NACK";
  EXPECT_TRUE(logged(log, [](const json& e) { return e["kind"] == "chip_died" && e["chip"] == "M0D5"; }));
  RunResult restart = sys.ttemu({"chip", "restart", "M0D5"});
  if (transport_under_test() == "shm") {
    EXPECT_NE(restart.status, 0);
    EXPECT_NE(restart.out.find("cannot restart over --transport shm"), std::string::npos) << restart.out;
  } else {
    ASSERT_EQ(restart.status, 0) << restart.out;
    auto all_up = [&] {
      const json s = sys.status();
      for (const auto& l : s["links"]) {
        if (l["ends"][0]["state"] != "up" || l["ends"][1]["state"] != "up") return false;
      }
      return true;
    };
    ASSERT_TRUE(eventually(all_up, std::chrono::seconds(30))) << sys.status().dump();
    // The tables include it again (the last reload routes around nothing).
    ASSERT_TRUE(eventually([&] {
      json last;
      for (const auto& e : read_event_log(log)) {
        if (e["kind"] == "tables_reloaded") last = e;
      }
      return !last.is_null() && last["failed_links"].empty() && last["failed_chips"].empty();
    }, std::chrono::seconds(30))) << slurp(log);
    RunResult again = sys.ttemu({"traffic", "--pattern", "all_to_all", "--count", "2", "--size", "4096", "--json"});
    ASSERT_EQ(again.status, 0) << again.out;
    expect_every_byte_verified(json_lines(again.stdout_text), {"all_to_all"}, 4096, 2);
    EXPECT_TRUE(logged(log, [](const json& e) { return e["kind"] == "peer_restarted"; }))
        << "its neighbours took its new link sessions";
  }
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(g.held);
}

TEST(Fabric, ARoutingLoopIsDroppedWhereTtlRunsOutAndTheSenderIsTold) {
  RunResult t = ttemu({"topo", "tables", topo("mesh_4x4.yaml"), "--json"});
  ASSERT_EQ(t.status, 0);
  json doc = json::parse(t.stdout_text);
  // Spec 5.4's loop toward D16 (M0D15): D1 -> D5 -> D6 -> D7 -> D11 -> D10 -> D9 -> D5 ...
  const std::pair<int, int> loop[] = {{0, 2}, {4, 1}, {5, 1}, {6, 2}, {10, 3}, {9, 3}, {8, 0}};
  for (auto [device, port] : loop) doc["routers"][static_cast<size_t>(device)]["l0"][15] = port;
  TempFile tables(doc.dump());
  RunResult r = client_on({topo("mesh_4x4.yaml"), "--tables", tables.path()}, "Loop.*");
  expect_client_passed(r, {"Loop.AWriteIntoARoutingLoopIsNackedNotLanded"});
  // TTL 64 from M0D0: one hop to the loop, then around it; it runs out at M0D10 (the spec's D11).
  EXPECT_NE(r.out.find("ttl_expired at M0D10: write packet 1 from M0D0 to M0D15 on FVC 0 (ttl 0)"), std::string::npos) << r.out;
  // The drop travelled through M0D10's status queue into the job's event log, which outlives
  // the job, and `ttemu events` shows it.
  const std::string marker = "ttemu: event log ";
  const size_t at = r.out.find(marker);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string path = r.out.substr(at + marker.size(), r.out.find('\n', at) - at - marker.size());
  const auto log = read_event_log(path);
  const auto drop = std::find_if(log.begin(), log.end(), [](const json& e) { return e["kind"] == "dropped"; });
  ASSERT_NE(drop, log.end()) << path;
  EXPECT_EQ((*drop)["reason"], "ttl_expired");
  EXPECT_EQ((*drop)["chip"], "M0D10");
  EXPECT_EQ((*drop)["src"], "M0D0");
  EXPECT_EQ((*drop)["dst"], "M0D15");
  EXPECT_EQ((*drop)["command"], "write");
  RunResult shown = ttemu({"events", path});
  EXPECT_EQ(shown.status, 0) << shown.out;
  EXPECT_NE(shown.stdout_text.find("write packet 1 from M0D0 to M0D15 dropped: ttl_expired"), std::string::npos)
      << shown.out;
  RunResult as_json = ttemu({"events", "--json", "--rates", path});
  EXPECT_EQ(as_json.stdout_text, slurp(path)) << "--json --rates prints the log's lines as they are";
  RunResult missing = ttemu({"events", "no-such-job"});
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.out.find("'no-such-job' is neither an event log file nor a job"), std::string::npos) << missing.out;
}

// A lost wake-up must fail the test, not merely delay a command. So nothing but the doorbell
// may wake M0D0's router for the client's isolated commands: the chips run without delayed
// acknowledgements and credit returns (each would wake a chip a millisecond after traffic, and
// it would find the command anyway), and the client issues those commands one at a time, some
// once both chips are asleep with nothing in flight, and waits on futex words with no periodic
// re-poll (fabric_client.cpp). The library's own waits (TTEMU_BARRIER_TIMEOUT_MS) are a backstop.
TEST(Fabric, WorkersWakeASleepingRouterWithoutLosingACommand) {
  ::setenv("TTEMU_BARRIER_TIMEOUT_MS", "2000", 1);
  RunResult r = client_on({topo("n300.yaml"), "--ack-delay-us", "0", "--credit-delay-us", "0"}, "Doorbell.*");
  ::unsetenv("TTEMU_BARRIER_TIMEOUT_MS");
  expect_client_passed(r, {"Doorbell.EveryCommandIsTakenWhetherTheRouterSleepsOrNot"});
}

// A dead chip's neighbours drop what they would send it at once, with a reason, and NACK the
// senders: no write waits for a timeout (the router timeout here is a minute, the client's
// barrier limit ten seconds); once the control plane has routed around it, writes past it land.
TEST(Fabric, WritesToADeadChipAreNackedAtOnceAndWritesPastItGoAround) {
  System sys({topo("mesh_4x4.yaml"), "--timeout-ms", "60000"});
  json s = sys.status();
  const Held held = held_by(sys, s);
  const int victim = s["chips"][5]["pid"];
  ASSERT_EQ(s["chips"][5]["name"], "M0D5");
  kill(victim, SIGKILL);
  ASSERT_TRUE(sys.wait_for("ttemu: link M0D4P1 is down", 20s)) << sys.output();
  // The control plane routes around the dead chip 25 ms after its death; the writes go after
  // that, so that which tables they meet does not depend on how fast the client starts.
  ASSERT_TRUE(sys.wait_for("routing tables v2 loaded (the fabric): around chip M0D5", 20s)) << sys.output();
  ::setenv("TTEMU_JOB", sys.job().c_str(), 1);
  ::setenv("TTEMU_BARRIER_TIMEOUT_MS", "10000", 1);
  RunResult r = run({TTEMU_FABRIC_CLIENT, "--gtest_filter=DeadChip.*"});
  ::unsetenv("TTEMU_BARRIER_TIMEOUT_MS");
  ::unsetenv("TTEMU_JOB");
  expect_client_passed(r, {"DeadChip.WritesToADeadChipAreNackedAtOnceAndWritesPastItGoAround",
                           "DeadChip.InRetryModeAWriteNackedBeforeItsCallReturnsIsStillReported"});
  EXPECT_TRUE(sys.wait_for("no_route at M0D4: write packet", 10s)) << sys.output();
  EXPECT_EQ(sys.output().find("timeout at"), std::string::npos) << sys.output();
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

// An n300 whose two links are out of service: the tables loaded after it (v2) leave M0D1 with
// no route from M0D0.
void cut_the_n300_in_two(System& sys) {
  for (const char* port : {"M0D0P2", "M0D0P3"}) {
    RunResult down = sys.ttemu({"links", "down", port});
    ASSERT_EQ(down.status, 0) << down.out;
  }
  ASSERT_TRUE(sys.wait_for("routing tables v2 loaded", 30s)) << sys.output();
}

// The client library's retry mode over three reloads (Retry.* in the fabric client): the first
// leaves M0D1 with no route, the second (the operator's) still none, the third, after a link
// came back, routes again; the write goes again after each and lands.
TEST(Fabric, RetriedWritesWaitInEachRoundForTablesThatRouteThem) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  System sys({topo("n300.yaml")});
  const Held held = held_by(sys, sys.status());
  ASSERT_NO_FATAL_FAILURE(cut_the_n300_in_two(sys));
  ::setenv("TTEMU_JOB", sys.job().c_str(), 1);
  auto client = std::async(std::launch::async, [] { return run({TTEMU_FABRIC_CLIENT, "--gtest_filter=Retry.*"}); });
  auto nacked = [&](size_t n) {
    return sys.wait_until([&] { return lines_with(sys.output(), "at M0D0: write packet").size() >= n; }, 30s);
  };
  EXPECT_TRUE(nacked(1)) << sys.output();
  RunResult reload = sys.ttemu({"tables", "reload"});
  EXPECT_EQ(reload.status, 0) << reload.out;
  EXPECT_TRUE(nacked(2)) << sys.output();
  RunResult up = sys.ttemu({"links", "up", "M0D0P2"});
  EXPECT_EQ(up.status, 0) << up.out;
  const RunResult r = client.get();
  ::unsetenv("TTEMU_JOB");
  expect_client_passed(r, {"Retry.ALaterRoundWaitsForTheTablesThatRouteAgain"});
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

// ttemu traffic's latency probes over a pair with no route: the first probe is NACKed (and
// written again once, by the short retry mode of the probes), and the pair is not probed again
// (each probe used to be written again and wait for tables that would not come: a second or
// more per sample).
TEST(Fabric, ALatencyProbeInVainCostsItsSampleAndItsPairIsNotProbedAgain) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  System sys({topo("n300.yaml")});
  ASSERT_NO_FATAL_FAILURE(cut_the_n300_in_two(sys));
  RunResult r = sys.ttemu({"traffic", "--pattern", "unicast", "--src", "M0D0", "--dst", "M0D1", "--count", "1",
                           "--size", "64", "--retry", "1", "--latency-samples", "10", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  const json p = json_lines(r.stdout_text).at(0);
  EXPECT_EQ(p["unverified"], 64) << p.dump();
  EXPECT_EQ(p["errors"], 0) << p.dump();
  EXPECT_EQ(p["nacks"], 4) << "the write and one probe, each written again once: " << p.dump();
  EXPECT_EQ(p["latency_us"]["p50"], 0) << p.dump();
  EXPECT_EQ(sys.stop(), 0);
}

// A probe that no answer will ever come for (its destination stopped while the probes run, so
// that its links go down and the tables leave it no route) is taken as lost, and ttemu traffic
// ends with the samples it has; it once waited for the answer until the barrier timed out.
TEST(Fabric, ALatencyProbeThatIsNeverAnsweredIsTakenAsLost) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  System sys({topo("n300.yaml")});
  const json s = sys.status();
  const int m0d1 = s["chips"][1]["pid"];
  ASSERT_EQ(s["chips"][1]["name"], "M0D1");
  const auto job = job::JobId::parse(sys.job());
  ASSERT_TRUE(job);
  chip::Segment block = chip::Segment::open(chip::segment_name(*job, {0, 1}, chip::SegmentKind::kControl));
  const auto& delivered = block.as<chip::ChipControl>()->packets_delivered;
  ::setenv("TTEMU_BARRIER_TIMEOUT_MS", "30000", 1);
  auto traffic = std::async(std::launch::async, [&] {
    return sys.ttemu({"traffic", "--pattern", "unicast", "--src", "M0D0", "--dst", "M0D1", "--count", "1", "--size",
                      "64", "--latency-samples", "100000", "--json"});
  });
  const bool probing = eventually([&] { return delivered.load() > 500; }, 30s);  // the probes land
  kill(m0d1, SIGSTOP);
  const RunResult r = traffic.get();
  kill(m0d1, SIGCONT);
  ::unsetenv("TTEMU_BARRIER_TIMEOUT_MS");
  ASSERT_TRUE(probing);
  ASSERT_EQ(r.status, 0) << r.out;
  const json p = json_lines(r.stdout_text).at(0);
  EXPECT_EQ(p["verified"], 64) << p.dump();
  EXPECT_GT(p["latency_us"]["p50"].get<double>(), 0) << p.dump();
  EXPECT_EQ(sys.stop(), 0);
}

// The operator's word on a link outlives the chips at its ends. Put back in service while its
// far end is dead, a link comes up when that chip restarts; taken out of service while its far
// end is dead, it stays out after the restart, at both ends. Both commands used to be refused
// ("the far end M0D1 is not running"), and a cut ending during a kill left the near end out of
// service for good.
TEST(Fabric, TheOperatorsLinkStateHoldsForAChipThatRestarts) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();  // (the default transport restarts chips; shm cannot)
  System sys({topo("n300.yaml")});
  const Held held = held_by(sys, sys.status());
  auto ends_of = [&](const std::string& port) {
    const json s = sys.status();
    for (const auto& l : s["links"]) {
      if (l["a"] == port || l["b"] == port) return l["ends"];
    }
    return json();
  };
  auto both = [&](const std::string& port, const std::function<bool(const json&)>& is) {
    const json ends = ends_of(port);
    return ends.size() == 2 && is(ends[0]) && is(ends[1]);
  };
  // Up on its own wire, in service (an end out of service is down, or its session rides the
  // parallel link's wire: the EFC).
  auto up = [](const json& end) {
    return end["state"] == "up" && !end.contains("fallback") && !end.contains("out_of_service");
  };
  RunResult r = sys.ttemu({"links", "down", "M0D0P2"});
  ASSERT_EQ(r.status, 0) << r.out;
  r = sys.ttemu({"chip", "kill", "M0D1"});
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_TRUE(eventually([&] { return both("M0D0P3", [](const json& e) { return e["state"] != "up"; }); }, 30s))
      << ends_of("M0D0P3").dump();
  r = sys.ttemu({"links", "up", "M0D0P2"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("M0D1P6: when its chip restarts"), std::string::npos) << r.out;
  r = sys.ttemu({"links", "down", "M0D0P3", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(json::parse(r.stdout_text)["at_restart"], json({"M0D1P7"})) << r.out;
  r = sys.ttemu({"chip", "restart", "M0D1"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(eventually([&] { return both("M0D0P2", up); }, 30s)) << ends_of("M0D0P2").dump();
  EXPECT_TRUE(both("M0D0P3", [&](const json& e) { return !up(e) && e["out_of_service"] == true; }))
      << ends_of("M0D0P3").dump();
  r = sys.ttemu({"links", "up", "M0D0P3"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("when its chip restarts"), std::string::npos) << r.out;
  EXPECT_TRUE(eventually([&] { return both("M0D0P3", up); }, 30s)) << ends_of("M0D0P3").dump();
  EXPECT_EQ(sys.stop(), 0);
  expect_nothing_left(held);
}

// Also the non-blocking client: a full command buffer says try again, completions are polled.
TEST(Fabric, AFullFvcAtTheSourceDoesNotHoldBackAnotherFvcsInjections) {
  ::setenv("TTEMU_BARRIER_TIMEOUT_MS", "10000", 1);
  RunResult r = ttemu({"launch", topo("n300.yaml"), "--timeout-ms", "60000", "--", "sh", "-c",
                       std::string(TTEMU_BINARY) + " fabric stall M0D1 --fvc 0 && " + TTEMU_FABRIC_CLIENT +
                           " --gtest_filter=Independence.*:NonBlocking.*"});
  ::unsetenv("TTEMU_BARRIER_TIMEOUT_MS");
  expect_client_passed(r, {"Independence.AFullFvcAtTheSourceDoesNotHoldBackAnother",
                           "NonBlocking.AFullCommandBufferSaysTryAgainAndSendsNothing",
                           "NonBlocking.CompletionsArePolledWithTheirTransactionAndKind"});
  EXPECT_EQ(r.out.find("timeout at"), std::string::npos) << r.out;
}

// M0D3's center stops consuming FVC 0; the client checks that its four writes there are NACKed
// (and land nowhere) while FVC 1 flows. The launcher reports the drops: how many timeout lines,
// and at which router, depends on timing, so not their number but that there is at least one,
// and that every one is a write of the stalled traffic, from M0D0 to M0D3.
TEST(Fabric, AStalledConsumerTimesOutNacksTheSenderAndOtherFvcsFlow) {
  RunResult r = ttemu({"launch", topo("mesh_4x4.yaml"), "--timeout-ms", "200", "--", "sh", "-c",
                       std::string(TTEMU_BINARY) + " fabric stall M0D3 --fvc 0 && " + TTEMU_FABRIC_CLIENT +
                           " --gtest_filter=Stall.*"});
  expect_client_passed(r, {"Stall.AStalledFvcTimesOutWhileAnotherFlows"});
  const auto timeouts = lines_with(r.out, "ttemu: timeout at ");
  EXPECT_FALSE(timeouts.empty()) << "no timeout reported:\n" << r.out;
  for (const auto& line : timeouts) {
    EXPECT_NE(line.find(": write packet "), std::string::npos) << line;
    EXPECT_NE(line.find(" from M0D0 to M0D3 "), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace ttemu::test

namespace ttemu::test {
namespace {

TEST(Fabric, TrafficStartsASystemItselfWhenNoneRuns) {
  RunResult r = ttemu({"traffic", "--system", topo("t3k.yaml"), "--pattern", "unicast,one_to_all", "--count", "3", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("8 chip(s), 20 link(s) up"), std::string::npos) << r.out;
  expect_every_byte_verified(json_lines(r.stdout_text), {"unicast", "one_to_all"}, 4096, 3);
  // The system it started for the run is gone with it.
  const Held held{job_in(r.out), control_socket_in(r.out), {}};
  ASSERT_FALSE(held.job.empty()) << r.out;
  ASSERT_FALSE(held.socket.empty()) << r.out;
  expect_nothing_left(held);
}

// ttemu snapshot: a stalled FVC is shown on its chip; an idle chip with every credit is not.
TEST(System, SnapshotShowsWhatEachChipHolds) {
  System sys({topo("n300.yaml")});
  ASSERT_EQ(sys.ttemu({"fabric", "stall", "M0D1", "--fvc", "1"}).status, 0);
  const RunResult text = sys.ttemu({"snapshot"});
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.stdout_text.find("M0D1\n  stalled FVCs: [1]"), std::string::npos) << text.out;
  EXPECT_NE(text.stdout_text.find("1 chip(s) hold nothing and have every credit"), std::string::npos) << text.out;
  const RunResult j = sys.ttemu({"snapshot", "--json"});
  ASSERT_EQ(j.status, 0) << j.out;
  const json s = json::parse(j.stdout_text);
  ASSERT_EQ(s["chips"].size(), 2u) << s.dump();
  EXPECT_EQ(s["chips"][0]["chip"], "M0D0");
  EXPECT_EQ(s["chips"][1]["stalled_fvcs"], json({1}));
  for (const auto& p : s["chips"][0]["ports"]) {
    EXPECT_EQ(p["state"], "up") << p;
    EXPECT_TRUE(p["starved_lanes"].empty()) << p;
  }
  // The processes' snapshot is the simulator's format, and survives it field by field.
  const node::SystemSnapshot typed = node::read_system_snapshot(s);
  EXPECT_EQ(typed.chips[1].stalled_fvcs, std::vector<int>{1});
  EXPECT_EQ(json(typed), s);
}

// ttemu topo draw --live: the running system drawn from its status and snapshot. M0D1 stalls
// FVC 0 and M0D0 writes to it: M0D1's buffers fill, and the picture fills M0D1 and not M0D0;
// every link is up, with its rates in its tooltip.
TEST(System, TopoDrawLiveDrawsTheRunningSystemsState) {
  System sys({topo("n300.yaml"), "--timeout-ms", "60000"});
  ASSERT_EQ(sys.ttemu({"fabric", "stall", "M0D1", "--fvc", "0"}).status, 0);
  auto writes = std::async(std::launch::async, [&] {
    return sys.ttemu({"traffic", "--pattern", "unicast", "--src", "M0D0", "--dst", "M0D1", "--fvc", "0", "--count", "20"});
  });
  ASSERT_TRUE(eventually([&] {
    const json s = json::parse(sys.ttemu({"snapshot", "--json"}).stdout_text);
    return !s["chips"][1]["buffers"].empty();
  }, std::chrono::seconds(30))) << "the writes wait at M0D1";
  TempDir dir;
  const std::string svg = (dir / "live.svg").string();
  const RunResult r = sys.ttemu({"topo", "draw", "--live", "--interval", "0.2", "-o", svg});
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string picture = slurp(svg);
  EXPECT_NE(picture.find("live at "), std::string::npos);
  EXPECT_NE(picture.find("M0D0P2 - M0D1P6: up;"), std::string::npos) << picture;
  EXPECT_NE(picture.find("fill=\"#ffffff\" stroke=\"#4a5a6a\" stroke-width=\"1\"><title>M0D0, host host0: 0 packet(s) buffered"),
            std::string::npos) << "M0D0 holds nothing: " << picture;
  EXPECT_NE(picture.find("<title>M0D1, host host0: "), std::string::npos) << picture;
  EXPECT_EQ(picture.find("<title>M0D1, host host0: 0 packet(s)"), std::string::npos) << "M0D1 holds the writes: " << picture;
  EXPECT_EQ(picture.find("fill=\"#ffffff\" stroke=\"#4a5a6a\" stroke-width=\"1\"><title>M0D1"), std::string::npos)
      << "and is filled: " << picture;
  expect_one_line_error(sys.ttemu({"topo", "draw", "--live", "--path", "M0D0", "M0D1", "-o", svg}), "--live draws the system as it is");
  expect_one_line_error(sys.ttemu({"topo", "draw", "--live", topo("t3k.yaml"), "-o", svg}), "give the file it was launched with");
  ASSERT_EQ(sys.ttemu({"fabric", "resume", "M0D1", "--fvc", "0"}).status, 0);
  const RunResult landed = writes.get();
  EXPECT_EQ(landed.status, 0) << "the writes land once M0D1 resumes: " << landed.out;
}

// With two systems running and none named, traffic must not guess, nor start a third.
TEST(Fabric, TrafficRefusesToGuessBetweenTwoRunningSystems) {
  System first({topo("n150.yaml")});
  System second({topo("n150.yaml")});
  RunResult r = ttemu({"traffic", "--pattern", "unicast", "--count", "1"});
  expect_one_line_error(r, "2 systems are running; name one with --job");
  EXPECT_EQ(r.stderr_text.find("ready in"), std::string::npos) << "no third system was started";
  EXPECT_EQ(job::live_jobs().size(), 2u);
}

// The campaign's processes engine: a small matrix of real systems (faults, a chip killed and
// restarted, a consumer stalled past the routers' timeout), writes and atomics, each judged by
// the invariants, including that nothing of its job outlived it.
TEST(Fabric, TheProcessesCampaignPasses) {
  TempDir dir;
  const RunResult r = test::ttemu({"campaign", std::string(TTEMU_TOPOLOGIES) + "/../tools/campaigns/processes.yaml", "--engine",
                                   "processes", "--out", dir.path().string()});
  ASSERT_EQ(r.status, 0) << r.out;
  std::set<std::string> scenarios, ops;
  size_t runs = 0;
  for (const auto& run : read_event_log((dir / "runs.jsonl").string())) {
    ++runs;
    ASSERT_FALSE(run.contains("skipped")) << run.dump();
    EXPECT_TRUE(run["pass"].get<bool>()) << run.dump();
    EXPECT_EQ(run["engine"], "processes");
    EXPECT_NE(run["sim"].get<std::string>().find("ttemu launch "), std::string::npos) << "its reproduction is a launch";
    scenarios.insert(run["scenario"].get<std::string>());
    ops.insert(run["op"].get<std::string>());
  }
  EXPECT_EQ(runs, 32u) << "(writes, atomics) x (2 topologies x 3 scenarios x 2 seeds, and the kill and the stall on the T3K x 2 seeds each)";
  EXPECT_EQ(scenarios.size(), 5u);
  EXPECT_EQ(ops, (std::set<std::string>{"write", "atomic"}));
}

// A processes run past its bound (a consumer stalled for ten minutes, the bound 8 s) fails as
// a hang and keeps what the routers held then (ttemu snapshot) and the system's status.
TEST(Fabric, AHungRunKeepsItsRoutersState) {
  TempDir dir;
  write_file(dir / "c.yaml",
             "name: hung\ntopologies: [t3k]\nseeds: [1]\nlimit_s: 8\nworkloads: [{pattern: all_to_all, count: 2, fvc: 0}]\n"
             "scenarios:\n  - {name: stalled_forever, stall: ['M0D3:0@0-600000']}\n");
  const RunResult r = test::ttemu({"campaign", (dir / "c.yaml").string(), "--engine", "processes", "--out", (dir / "out").string()});
  EXPECT_EQ(r.status, 1) << r.out;
  ASSERT_NE(r.stdout_text.find("FAIL run 0 (t3k x all_to_all x stalled_forever x seed 1): bounded:"), std::string::npos) << r.out;
  const fs::path run = dir / "out" / "runs" / "0";
  const json state = json::parse(slurp(run / "state.json"));
  ASSERT_EQ(state["chips"].size(), 8u) << state.dump();
  for (const auto& c : state["chips"]) {
    EXPECT_EQ(c["stalled_fvcs"], c["chip"] == "M0D3" ? json({0}) : json::array()) << c.dump();
    EXPECT_FALSE(c["ports"].empty()) << c.dump();
  }
  EXPECT_EQ(json::parse(slurp(run / "status.json"))["links"].size(), 20u);
}

// What the processes engine's last invariant looks for is there while a job runs, and gone
// once it stopped: the check can fail.
TEST(System, TheCampaignsLeakCheckSeesWhatALiveJobHolds) {
  System sys({topo("n300.yaml")});
  const std::vector<std::string> held = tools::leftovers(sys.job());
  auto has = [&](const std::string& fragment) {
    return std::count_if(held.begin(), held.end(), [&](const std::string& h) { return h.find(fragment) != std::string::npos; });
  };
  EXPECT_EQ(has("launcher "), 1) << testing::PrintToString(held);
  EXPECT_EQ(has("chip run"), 2) << "both chip processes: " << testing::PrintToString(held);
  EXPECT_GE(has("/dev/shm/"), 6) << "control, L1 and DRAM of each chip: " << testing::PrintToString(held);
  EXPECT_EQ(has(job::control_socket_path(*job::JobId::parse(sys.job()))), 3) << "the socket, and the chips naming it: " << testing::PrintToString(held);
  EXPECT_EQ(sys.stop(SIGTERM), 0);
  EXPECT_EQ(tools::leftovers(sys.job()), std::vector<std::string>{});
}

}  // namespace
}  // namespace ttemu::test
