#include "launcher/top_command.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <fstream>

#include <fmt/format.h>

#include "emulator/common/complete_lines.hpp"
#include "emulator/common/error.hpp"
#include "launcher/control_client.hpp"
#include "launcher/event_log.hpp"
#include "launcher/events_command.hpp"
#include "tools/viz/top_view.hpp"

namespace ttemu::launcher {

using nlohmann::json;
using viz::render;
using viz::top_frame;
using viz::TopFrame;

namespace {

struct TopOptions {
  std::string job;
  double interval_s = 1.0;
  int iterations = 0;  // 0: until q (interactive), else this many frames
  bool json = false;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// The terminal while top owns it: the alternate screen, no cursor, keys read one at a time
// without echo. Given back as it was on every way out (the destructor).
class Screen {
 public:
  Screen() {
    if (::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C is SIGINT
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      restore_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    write("\x1b[?1049h\x1b[?25l");
  }
  ~Screen() {
    write("\x1b[?25h\x1b[?1049l");
    if (restore_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  static std::pair<int, int> size() {
    winsize w{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0) return {w.ws_col, w.ws_row};
    return {100, 40};
  }
  void draw(const std::vector<std::string>& lines) {
    std::string out = "\x1b[H";
    for (const auto& l : lines) out += l + "\x1b[K\r\n";
    out += "\x1b[J";
    write(out);
  }
  // Waits up to `timeout` for a key; true when it asks to quit.
  static bool quit_key(std::chrono::milliseconds timeout) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char c[16];
    const ssize_t n = ::read(STDIN_FILENO, c, sizeof c);
    for (ssize_t i = 0; i < n; ++i) {
      if (c[i] == 'q' || c[i] == 'Q') return true;
    }
    return false;
  }

 private:
  static void write(const std::string& s) {
    for (size_t done = 0; done < s.size();) {
      const ssize_t n = ::write(STDOUT_FILENO, s.data() + done, s.size() - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }
  termios saved_{};
  bool restore_ = false;
};

// The newest event lines in words (not the rate lines), read on from where the last call
// stopped.
class EventTail {
 public:
  explicit EventTail(const std::string& path) : in_(path) {}
  std::vector<std::string> lines() {
    if (in_) {
      read_complete_lines(in_, [&](const std::string& line) {
        const json e = json::parse(line, nullptr, false);
        if (e.is_discarded() || !e.is_object() || is_rates(e)) return;
        kept_.push_back(event_text(e));
        if (kept_.size() > kKept) kept_.pop_front();
      });
    }
    return {kept_.begin(), kept_.end()};
  }

 private:
  static constexpr size_t kKept = 200;
  std::ifstream in_;
  std::deque<std::string> kept_;
};

void run_top(const TopOptions& o) {
  const std::string socket = control_socket(o.job);
  auto status = [&] { return request(socket, {{"cmd", "status"}}); };
  auto snapshot = [&] {
    try {
      return request(socket, {{"cmd", "snapshot"}});
    } catch (const Error&) {
      return json();  // a chip that does not answer in time leaves occupancy out, not the view
    }
  };
  json before = status();
  EventTail events(before.value("event_log", ""));
  const auto interval = std::chrono::milliseconds(static_cast<long>(o.interval_s * 1000));
  const bool interactive = o.iterations == 0 && ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  if (!interactive) {
    const int frames = o.iterations > 0 ? o.iterations : 1;
    for (int i = 0; i < frames; ++i) {
      ::poll(nullptr, 0, static_cast<int>(interval.count()));  // rates over one interval
      json now = status();
      const TopFrame f = top_frame(before, now, snapshot(), events.lines());
      if (o.json) {
        fmt::print("{}\n", to_json(f).dump());
      } else {
        for (const auto& l : render(f, 120, 60)) fmt::print("{}\n", l);
        if (i + 1 < frames) fmt::print("\n");
      }
      std::fflush(stdout);
      before = std::move(now);
    }
    return;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: poll() returns at once
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  Screen screen;
  json now = before;
  while (!g_stop) {
    const auto [cols, rows] = Screen::size();
    screen.draw(render(top_frame(before, now, snapshot(), events.lines()), cols, rows));
    if (Screen::quit_key(interval)) break;
    before = std::move(now);
    now = status();  // the system stopped: Error, after the screen is given back
  }
}

}  // namespace

void add_top_command(CLI::App& app) {
  auto o = std::make_shared<TopOptions>();
  auto* top = app.add_subcommand("top", "A live view of a running system: link use and errors, routing buffers, events (q quits)");
  top->add_option("--job", o->job, kJobHelp);
  top->add_option("--interval", o->interval_s, "Seconds between refreshes")->check(CLI::Range(0.1, 3600.0));
  top->add_option("--iterations", o->iterations, "Print this many frames one after another, then exit (no terminal needed)")
      ->check(CLI::Range(1, 1000000));
  top->add_flag("--json", o->json, "With --iterations (or without a terminal): one JSON object per frame");
  top->callback([o] { run_top(*o); });
}

}  // namespace ttemu::launcher
