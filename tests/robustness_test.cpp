// Bad input against real systems: whatever a client sends on the control socket, the launcher
// answers (or drops that client) and keeps running; refused requests hold nothing; launch
// options, fault plans and client-library handles are checked and named when wrong.
#include <sys/socket.h>
#include <sys/un.h>

#include <gtest/gtest.h>

#include "libfabric_tt/tt_fabric.h"
#include "tests/system_support.hpp"

namespace ttemu::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// Sends `bytes` on a fresh connection to the control socket and returns the first reply line
// (with its '\n'), or what came before the launcher closed the connection ("" for nothing).
// Writing and reading interleave, so a launcher that answers before it has read everything
// (a request too long) cannot deadlock the test; every wait has a deadline.
std::string talk(const std::string& path, const std::string& bytes, std::chrono::milliseconds limit = 30s) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect to " + path);
  }
  const auto end = Clock::now() + limit;
  size_t sent = 0;
  bool writing = true;
  std::string reply;
  while (reply.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, static_cast<short>(POLLIN | (writing ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    if (p.revents & POLLIN) {
      char buf[4096];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;  // closed
      reply.append(buf, static_cast<size_t>(n));
    } else if (p.revents & POLLOUT) {
      ssize_t n = ::send(fd, bytes.data() + sent, std::min<size_t>(bytes.size() - sent, 65536), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN) writing = false;  // the launcher stopped reading: fine
      if (n > 0 && (sent += static_cast<size_t>(n)) == bytes.size()) writing = false;
    } else {
      break;  // hung up with nothing to read
    }
  }
  ::close(fd);
  return reply;
}

// A reply must be one line of JSON; returns it parsed.
json parse_reply(const std::string& reply) {
  EXPECT_FALSE(reply.empty()) << "no answer";
  EXPECT_EQ(reply.find('\n'), reply.size() - 1) << "one line: " << reply;
  auto doc = json::parse(reply, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << "not JSON: " << reply;
  return doc;
}

std::string error_of(const std::string& reply) {
  json doc = parse_reply(reply);
  if (!doc.is_object() || !doc.contains("error") || !doc["error"].is_string()) {
    ADD_FAILURE() << "not an error: " << reply;
    return "";
  }
  std::string e = doc["error"];
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
  return e;
}

// The launcher still runs and answers.
void expect_alive(System& sys) {
  ASSERT_EQ(::kill(sys.pid(), 0), 0) << "the launcher is gone:\n" << sys.output();
  json s = parse_reply(talk(sys.control_socket(), "{\"cmd\":\"status\"}\n"));
  EXPECT_EQ(s.value("job", ""), sys.job());
}

TEST(Robustness, GarbageOnTheControlSocketIsAnsweredAndTheSystemKeepsRunning) {
  System sys({topo("n300.yaml")});
  const std::string sock = sys.control_socket();
  const std::pair<std::string, std::string> cases[] = {
      {"\xff\xfe\n", "not valid JSON"},
      {"{\"cmd\": \"\xff\"}\n", "not valid JSON"},
      {"\n", "not valid JSON"},
      {"not json\n", "not valid JSON"},
      {"[1, 2]\n", "a request is a JSON object like {\"cmd\": \"status\"}, not a list"},
      {"\"status\"\n", "a request is a JSON object like {\"cmd\": \"status\"}, not \"status\""},
      {"{}\n", "cmd is missing"},
      {"{\"cmd\": 5}\n", "cmd must be a string, not 5"},
      {"{\"cmd\": \"frob\"}\n", "unknown cmd 'frob' (status, events_log, faults, stream, ping, snapshot, capture, deliveries, stall, tables, link_admin, chip, injection, stop)"},
      {"{\"cmd\": \"stall\", \"chip\": \"\\u00ff\\u0001\", \"fvc\": 0}\n", "is not a chip of"},
      {"{\"cmd\": \"status\", \"verbose\": true}\n", "unknown field 'verbose' in a status request"},
      {std::string(100000, '[') + std::string(100000, ']') + "\n", "a request is a JSON object like {\"cmd\": \"status\"}, not a list"},
  };
  for (const auto& [line, fragment] : cases) {
    SCOPED_TRACE(json(line.substr(0, 40)).dump(-1, ' ', false, json::error_handler_t::replace));
    std::string e = error_of(talk(sock, line));
    EXPECT_NE(e.find(fragment), std::string::npos) << e;
    expect_alive(sys);
  }
  // Bytes that are not UTF-8, quoted back in an error, are replaced rather than fatal.
  std::string e = error_of(talk(sock, "{\"cmd\": \"stall\", \"chip\": \"M0D0\", \"fvc\": 0, \"\xc3\x28\": 1}\n"));
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  expect_alive(sys);
  EXPECT_EQ(sys.stop(SIGTERM), 0) << sys.output();
}

TEST(Robustness, ARequestLineLongerThanOneMebibyteIsRefused) {
  System sys({topo("n300.yaml")});
  const std::string sock = sys.control_socket();
  std::string huge = "{\"cmd\": \"status\", \"pad\": \"" + std::string(2u << 20, 'x') + "\"}\n";
  std::string e = error_of(talk(sock, huge));
  EXPECT_NE(e.find("request longer than 1048576 bytes"), std::string::npos) << e;
  expect_alive(sys);
  // Just under the limit is read (and refused for its unknown field, not for its length).
  std::string big = "{\"cmd\": \"status\", \"pad\": \"" + std::string((1u << 20) - 100, 'x') + "\"}\n";
  e = error_of(talk(sock, big));
  EXPECT_NE(e.find("unknown field 'pad'"), std::string::npos) << e;
  expect_alive(sys);
  EXPECT_EQ(sys.stop(SIGTERM), 0) << sys.output();
}

TEST(Robustness, ARefusedLinkTestLeavesThePortFree) {
  System sys({topo("n300.yaml")});
  const std::string sock = sys.control_socket();
  // Each is refused; none may keep M0D0P3 reserved.
  const std::pair<std::string, std::string> refused[] = {
      {R"({"cmd": "stream", "link": "M0D0P3", "size": 9000})", "size 9000 is out of range (16-8192)"},
      {R"({"cmd": "stream", "link": "M0D0P3", "size": "big"})", "size must be a whole number 16-8192, not \"big\""},
      {R"({"cmd": "stream", "link": "M0D0P3", "frames": -1})", "frames -1 is out of range (1-100000000)"},
      {R"({"cmd": "stream", "link": "M0D0P3", "frames": "x"})", "frames must be a whole number 1-100000000, not \"x\""},
      {R"({"cmd": "stream", "link": "M0D0P3", "timeout_s": "x"})", "timeout_s must be a whole number 1-3600, not \"x\""},
      {R"({"cmd": "stream", "link": "M0D0P3", "timeout_s": 1e300})", "timeout_s must be a whole number 1-3600, not 1e+300"},
      {R"({"cmd": "ping", "link": "M0D0P3", "count": 0})", "count 0 is out of range (1-1000000)"},
      {R"({"cmd": "ping", "link": "M0D0P3", "size": 1.5})", "size must be a whole number 16-8192, not 1.5"},
      {R"({"cmd": "ping", "link": "M0D0P3", "frames": 10})", "unknown field 'frames' in a ping request"},
  };
  for (const auto& [line, fragment] : refused) {
    SCOPED_TRACE(line);
    std::string e = error_of(talk(sock, line + "\n"));
    EXPECT_NE(e.find(fragment), std::string::npos) << e;
  }
  // The port is free at once: a valid test and a valid ping run there now.
  json ok = parse_reply(talk(sock, R"({"cmd": "stream", "link": "M0D0P3", "frames": 100, "size": 64})" "\n", 60s));
  EXPECT_EQ(ok.value("verified", 0), 100) << ok;
  ok = parse_reply(talk(sock, R"({"cmd": "ping", "link": "M0D0P3", "count": 3})" "\n", 60s));
  EXPECT_EQ(ok.value("rtt_us", json::array()).size(), 3u) << ok;
  // And through the command line, as the defect was found.
  RunResult bad = sys.ttemu({"link", "test", "M0D0P3", "--size", "9000"});
  EXPECT_NE(bad.status, 0);
  RunResult good = sys.ttemu({"link", "test", "M0D0P3", "--frames", "100"});
  EXPECT_EQ(good.status, 0) << good.out;
  EXPECT_NE(good.out.find("verified 100, errors 0"), std::string::npos) << good.out;
  EXPECT_EQ(sys.stop(SIGTERM), 0) << sys.output();
}

// `ttemu mpirun --rank-binding` checks the file against the running system before mpirun
// starts anything: each mistake is one line naming the file and the rank (or the clash).
TEST(Robustness, ARankBindingThatCannotBePlacedIsRefusedBeforeMpirunStarts) {
  System sys({topo("n300.yaml")});
  const TempDir dir;
  const std::pair<std::string, std::string> refused[] = {
      {"rank_bindings:\n  - {rank: 0, chip: M0D7}\n", "rank 0: no chip M0D7 in the running system"},
      {"rank_bindings:\n  - {rank: 0, chip: chip0}\n", "rank 0: 'chip0' is not a chip"},
      {"rank_bindings:\n  - {rank: 0, chip: M0D0}\n  - {rank: 2, chip: M0D1}\n", "rank 2 in a file of 2 rank(s)"},
      {"rank_bindings:\n  - {rank: 0, chip: M0D0}\n  - {rank: 0, chip: M0D1}\n", "rank 0 is bound twice"},
      {"rank_bindings:\n  - {chip: M0D0}\n", "entry 0 needs a rank"},
      {"ranks: []\n", "no 'rank_bindings' list"},
      {"rank_bindings: []\n", "binds no rank"},
  };
  int k = 0;
  for (const auto& [text, fragment] : refused) {
    SCOPED_TRACE(text);
    const std::string file = (dir / ("b" + std::to_string(k++) + ".yaml")).string();
    write_file(file, text);
    // A --mpirun that would fail loudly if it were ever started.
    RunResult r = ttemu({"mpirun", "--job", sys.job(), "--mpirun", "/nonexistent/mpirun", "--rank-binding", file, "--", "true"});
    expect_one_line_error(r, fragment);
    EXPECT_NE(r.out.find(file), std::string::npos) << r.out;
  }
  expect_one_line_error(ttemu({"mpirun", topo("n300.yaml"), "--rank-binding", (dir / "b0.yaml").string(), "--", "true"}), "not both");
  expect_one_line_error(ttemu({"mpirun", "--job", sys.job(), "--rank-binding", (dir / "b0.yaml").string()}), "give the program to run after --");
  EXPECT_EQ(sys.stop(SIGTERM), 0) << sys.output();
}

TEST(Robustness, EveryRequestFieldIsTypeAndRangeChecked) {
  System sys({topo("n300.yaml")});  // 2 data FVCs: FVCs 0-2 with the control FVC
  const std::string sock = sys.control_socket();
  const std::pair<std::string, std::string> cases[] = {
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": 4294967296})", "fvc 4294967296 is out of range (0-2)"},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": 18446744073709551615})", "fvc 18446744073709551615 is out of range (0-2)"},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": 1e30})", "fvc must be a whole number 0-2, not 1e+30"},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": -1})", "fvc -1 is out of range (0-2)"},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": 3})", "fvc 3 is out of range (0-2)"},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": 1.0})", "fvc must be a whole number 0-2, not 1.0"},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": "0"})", "fvc must be a whole number 0-2, not \"0\""},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": [0]})", "fvc must be a whole number 0-2, not a list"},
      {R"({"cmd": "stall", "chip": "M0D0"})", "fvc is missing (a whole number 0-2)"},
      {R"({"cmd": "stall", "chip": "M0D0", "fvc": 0, "stalled": "yes"})", "stalled must be true or false, not \"yes\""},
      {R"({"cmd": "stall", "chip": 5, "fvc": 0})", "chip must be a string, not 5"},
      {R"({"cmd": "stall", "fvc": 0})", "chip is missing"},
      {R"({"cmd": "stream", "link": ["M0D0P2"]})", "link must be a string, not a list"},
      {R"({"cmd": "stream", "link": "M0D0P2", "frames": 100000001})", "frames 100000001 is out of range (1-100000000)"},
      {R"({"cmd": "stream", "link": "M0D0P2", "timeout_s": 0})", "timeout_s 0 is out of range (1-3600)"},
      {R"({"cmd": "faults"})", "plan is missing"},
      {R"({"cmd": "faults", "plan": 5})", "plan must be a string, not 5"},
      {R"({"cmd": "faults", "plan": "", "source": {}})", "source must be a string, not an object"},
  };
  for (const auto& [line, fragment] : cases) {
    SCOPED_TRACE(line);
    std::string e = error_of(talk(sock, line + "\n"));
    EXPECT_NE(e.find(fragment), std::string::npos) << e;
  }
  // The accepted form still works.
  EXPECT_TRUE(parse_reply(talk(sock, R"({"cmd": "stall", "chip": "M0D0", "fvc": 2, "stalled": false})" "\n")).value("ok", false));
  expect_alive(sys);
  EXPECT_EQ(sys.stop(SIGTERM), 0) << sys.output();
}

TEST(Robustness, LaunchOptionsAreRangeCheckedBeforeAnythingStarts) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  // Each would start a system if accepted: `-- true` makes such a run end at once.
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--seed", "-1"}, "--seed: must be a whole number 0-9000000000000000, not '-1'"},
      {{"--seed", "9000000000000001"}, "--seed: must be a whole number 0-9000000000000000, not '9000000000000001'"},
      {{"--seed", "99999999999999999999999"}, "--seed: must be a whole number 0-9000000000000000"},
      {{"--seed", "1.5"}, "--seed: must be a whole number 0-9000000000000000, not '1.5'"},
      {{"--dram-mib", "0"}, "--dram-mib: must be a whole number 1-65536, not '0'"},
      {{"--dram-mib", "-5"}, "--dram-mib: must be a whole number 1-65536, not '-5'"},
      {{"--ready-timeout", "-1"}, "--ready-timeout: must be a number 0.001-86400, not '-1'"},
      {{"--ready-timeout", "nan"}, "--ready-timeout: must be a number 0.001-86400, not 'nan'"},
      {{"--ready-timeout", "1e300"}, "--ready-timeout: must be a number 0.001-86400, not '1e300'"},
      {{"--window", "-1"}, "--window: must be a whole number 1-32768, not '-1'"},
      {{"--fvcs", "2.5"}, "--fvcs: must be a whole number 2-8, not '2.5'"},
      {{"--timeout-ms", "-1"}, "--timeout-ms: must be a whole number 1-600000, not '-1'"},
      {{"--memory", "secret"}, "--memory: secret not in {open,protected}"},
  };
  for (const auto& [opts, message] : cases) {
    std::vector<std::string> args{"launch", topo("n300.yaml")};
    args.insert(args.end(), opts.begin(), opts.end());
    args.insert(args.end(), {"--", "true"});
    SCOPED_TRACE(opts[0] + " " + opts[1]);
    RunResult r = ttemu(args);
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("ttemu: error: " + message), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("ready in"), std::string::npos) << "nothing may start: " << r.out;
  }
  // The ends of the ranges are accepted.
  for (const auto& opts : {std::vector<std::string>{"--seed", "9000000000000000"}, {"--seed", "0"}, {"--dram-mib", "1"}}) {
    std::vector<std::string> args{"launch", topo("n300.yaml")};
    args.insert(args.end(), opts.begin(), opts.end());
    args.insert(args.end(), {"--", "true"});
    RunResult r = ttemu(args);
    EXPECT_EQ(r.status, 0) << opts[0] << " " << opts[1] << ": " << r.out;
  }
}

TEST(Robustness, AFaultPlanThatIsADirectoryOrNotTextIsNamed) {
  TempDir dir;
  RunResult r = ttemu({"launch", topo("n300.yaml"), "--faults", dir.path().string(), "--", "true"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("ttemu: error: " + dir.path().string() + ": is a directory, not a file"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ready in"), std::string::npos) << r.out;

  TempFile seed("seed: -1\n");
  r = ttemu({"launch", topo("n300.yaml"), "--faults", seed.path(), "--", "true"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(seed.path() + ":1: seed -1 is out of range (0-9000000000000000)"), std::string::npos) << r.out;

  // Sent to a running system: refused with its file and line, and the system runs on.
  System sys({topo("n300.yaml")});
  TempFile binary(std::string("links:\n  - link: M0D0P2\n    drop: 0.5\n") + "\xff\xfe\x01\x02");
  RunResult a = sys.ttemu({"faults", "apply", binary.path()});
  EXPECT_EQ(a.status, 1) << a.out;
  EXPECT_NE(a.out.find("ttemu: error: " + binary.path() + ":4: not UTF-8 text (byte 0xff)"), std::string::npos) << a.out;
  EXPECT_EQ(a.out.find("json.exception"), std::string::npos) << a.out;
  std::string deep_text(5000, '[');
  TempFile deep(deep_text);
  a = sys.ttemu({"faults", "apply", deep.path()});
  EXPECT_EQ(a.status, 1) << a.out;
  EXPECT_NE(a.out.find(deep.path() + ":1: not valid YAML: nested too deep"), std::string::npos) << a.out;
  expect_alive(sys);
  EXPECT_EQ(sys.stop(SIGTERM), 0) << sys.output();
}

TEST(Robustness, AWorkerHandleUsedAfterCloseIsAnErrorNotACrash) {
  System sys({topo("n300.yaml")});
  // In a child process, so that the crash this guards against fails the test, not the run.
  pid_t pid = ::fork();
  if (pid == 0) {
    char err[256] = "";
    tt_fabric* f = tt_fabric_open(sys.job().c_str(), 0, 0, 0, err, sizeof err);
    if (!f) _exit(10);
    tt_fabric* g = tt_fabric_open(sys.job().c_str(), 0, 1, 0, err, sizeof err);
    if (!g) _exit(11);
    tt_fabric_close(f);
    tt_fabric_status st{};
    int failures = 0;
    failures += fabric_async_write(f, 0, 0, {0, 1}, 0, 64, -1, 0, &st) != TT_FABRIC_EARG;
    failures += st.status != TT_FABRIC_EARG;
    failures += fabric_async_write_barrier(f, 0) != TT_FABRIC_EARG;
    failures += fabric_async_read(f, 0, {0, 1}, 0, 0, 64, -1, 0, &st) != TT_FABRIC_EARG;
    failures += fabric_async_atomic_inc(f, 0, {0, 1}, 0, 1, 31, -1, 0, &st) != TT_FABRIC_EARG;
    failures += fabric_async_write_multicast(f, 0, {0, 0}, 1, 0, 0, 0, 0, 0, 64, -1, 0, 0, &st) != TT_FABRIC_EARG;
    failures += tt_fabric_memory(f, 0, 64) != nullptr;
    failures += tt_fabric_devices(f, nullptr, 0) != 0;
    failures += tt_fabric_data_fvcs(f) != 0;
    failures += tt_fabric_nacks(f) != 0;
    failures += tt_fabric_core_l1_size(f) != 0;
    failures += tt_fabric_device_position(f, {0, 0}, nullptr, nullptr) != TT_FABRIC_EARG;
    uint64_t key = 0;
    failures += tt_fabric_mr_register(f, 0, 64, TT_FABRIC_REMOTE_WRITE, &key) != TT_FABRIC_EARG;
    failures += key != 0;
    failures += tt_fabric_mr_deregister(f, 1) != TT_FABRIC_EARG;
    failures += tt_fabric_set_key(f, 1) != TT_FABRIC_EARG;
    failures += tt_fabric_permission_nacks(f) != 0;
    tt_fabric_close(f);  // closing twice is harmless too
    // The other handle still works.
    failures += fabric_async_write(g, 0, 0, {0, 0}, 0, 64, -1, 0, &st) != TT_FABRIC_OK;
    failures += fabric_async_write_barrier(g, 0) != TT_FABRIC_OK;
    tt_fabric_close(g);
    _exit(failures);
  }
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_gone(pid, 60s));
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << "calls on a closed handle that did not fail with EARG";
  EXPECT_EQ(sys.stop(SIGTERM), 0) << sys.output();
}

}  // namespace
}  // namespace ttemu::test
