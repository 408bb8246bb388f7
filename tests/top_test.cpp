// `ttemu top` in a real terminal: tmux (its own server, on a socket of this test) runs it in a
// pane of known size; the test reads the screen with capture-pane and types with send-keys.
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/eventually.hpp"
#include "tests/system_support.hpp"

namespace ttemu::test {
namespace {

using nlohmann::json;

// tmux from the PATH (run() takes a path).
std::string tmux_binary() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    const std::string p = std::string(dir) + "/tmux";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

class Tmux {
 public:
  Tmux() : socket_("ttemu-top-test-" + std::to_string(::getpid())) {}
  ~Tmux() { tmux({"kill-server"}); }
  Tmux(const Tmux&) = delete;
  Tmux& operator=(const Tmux&) = delete;

  static bool available() { return !tmux_binary().empty(); }
  // A detached session of 140 x 45 running `command` under sh, which writes "exited N" into
  // the pane when the command ends (N: its exit status, 128 + the signal that ended it). The
  // shell itself ignores Ctrl-C, which is the command's to handle.
  void start(const std::string& session, const std::string& command) {
    const RunResult r = tmux({"new-session", "-d", "-s", session, "-x", "140", "-y", "45",
                              "trap '' INT; " + command + "; echo exited $?; read line"});
    ASSERT_EQ(r.status, 0) << r.out;
  }
  std::string screen(const std::string& session) { return tmux({"capture-pane", "-p", "-t", session}).out; }
  void keys(const std::string& session, const std::string& keys) { tmux({"send-keys", "-t", session, keys}); }

 private:
  RunResult tmux(std::vector<std::string> args) {
    args.insert(args.begin(), {tmux_binary(), "-L", socket_});
    return run(args, std::chrono::seconds(30));
  }
  std::string socket_;
};

// The row of link `a` on the screen, as words: link, peer, state, a>b MB/s, b>a MB/s, use, ...
std::vector<std::string> row_of(const std::string& screen, const std::string& a) {
  for (const auto& line : lines_with(screen, a)) {
    const auto w = words(line);
    if (w.size() >= 6 && w[0] == a) return w;
  }
  return {};
}

TEST(Top, ShowsALinkStreamingLiveInATerminalAndGivesTheTerminalBackOnQAndCtrlC) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  if (!Tmux::available()) GTEST_SKIP() << "tmux is not installed (tools/dev installs it)";
  System sys({topo("n300.yaml")});
  const json s = sys.status();
  std::string a, b;  // the link whose b end streams to its a end
  for (const auto& l : s["links"]) {
    if (l["b"].get<std::string>().rfind("M0D1", 0) == 0) a = l["a"], b = l["b"];
  }
  ASSERT_FALSE(a.empty()) << s.dump();
  Tmux tmux;
  tmux.start("q", std::string(TTEMU_BINARY) + " top --job " + sys.job() + " --interval 0.2");
  EXPECT_TRUE(eventually([&] { return tmux.screen("q").find("links 2/2 up") != std::string::npos; }, std::chrono::seconds(20)))
      << tmux.screen("q");
  EXPECT_EQ(row_of(tmux.screen("q"), a).at(2), "up") << tmux.screen("q");

  // A stream from b to a: its row shows b>a traffic while it runs (and a>b carries only acks).
  int out_fd = -1;
  const pid_t stream = spawn({TTEMU_BINARY, "link", "test", b, "--frames", "400000", "--job", sys.job()}, out_fd);
  bool seen = false;
  std::string screen;
  EXPECT_TRUE(eventually([&] {
    screen = tmux.screen("q");
    const auto w = row_of(screen, a);
    seen = w.size() >= 6 && std::stod(w[4]) > 1.0;
    return seen;
  }, std::chrono::seconds(30))) << screen;
  std::string stream_out;
  read_until(out_fd, stream_out, [] { return false; }, std::chrono::seconds(60));
  ::close(out_fd);
  int st = 0;
  ::waitpid(stream, &st, 0);
  EXPECT_NE(stream_out.find("errors 0"), std::string::npos) << stream_out;

  // q ends it with status 0, and the terminal is as it was: the alternate screen is gone.
  tmux.keys("q", "q");
  EXPECT_TRUE(eventually([&] { return tmux.screen("q").find("exited ") != std::string::npos; }, std::chrono::seconds(10)))
      << tmux.screen("q");
  EXPECT_NE(tmux.screen("q").find("exited 0"), std::string::npos) << tmux.screen("q");
  EXPECT_EQ(tmux.screen("q").find("ttemu top"), std::string::npos) << tmux.screen("q");

  // So does Ctrl-C.
  tmux.start("c", std::string(TTEMU_BINARY) + " top --job " + sys.job() + " --interval 0.2");
  EXPECT_TRUE(eventually([&] { return tmux.screen("c").find("links 2/2 up") != std::string::npos; }, std::chrono::seconds(20)));
  tmux.keys("c", "C-c");
  EXPECT_TRUE(eventually([&] { return tmux.screen("c").find("exited ") != std::string::npos; }, std::chrono::seconds(10)))
      << tmux.screen("c");
  EXPECT_NE(tmux.screen("c").find("exited 0"), std::string::npos) << tmux.screen("c");
  EXPECT_EQ(tmux.screen("c").find("ttemu top"), std::string::npos) << tmux.screen("c");
  EXPECT_EQ(sys.stop(), 0);
}

TEST(Top, PrintsFramesAsJsonWithoutATerminal) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  System sys({topo("n300.yaml")});
  const RunResult r = sys.ttemu({"top", "--iterations", "2", "--interval", "0.1", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto frames = lines_with(r.out, "\"link_rows\"");
  ASSERT_EQ(frames.size(), 2u) << r.out;
  const json f = json::parse(frames[1]);
  EXPECT_EQ(f["links_up"], 2);
  EXPECT_EQ(f["chips_alive"], 2);
  EXPECT_GT(f["interval_s"].get<double>(), 0.0);
  EXPECT_EQ(f["link_rows"].size(), 2u);
  EXPECT_EQ(sys.stop(), 0);
  // A system that is gone is a one-line error, not a hang.
  const RunResult gone = sys.ttemu({"top", "--iterations", "1"});
  EXPECT_NE(gone.status, 0);
}

}  // namespace
}  // namespace ttemu::test
