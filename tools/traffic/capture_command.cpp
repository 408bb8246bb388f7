#include "tools/traffic/capture_command.hpp"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <queue>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/error.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/job/description.hpp"
#include "emulator/wire/capture_stream.hpp"
#include "emulator/wire/pcapng.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/control_client.hpp"
#include "tools/traffic/sim_capture.hpp"

extern char** environ;

namespace ttemu::tools {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct CaptureOptions {
  std::string output;
  std::vector<std::string> links;
  double duration = 0;  // 0: until the command ends, or Ctrl-C
  std::string job;
  bool json = false;
};

// Records in time order, as far as the chips' clocks allow: the chips' streams interleave as the
// scheduler ran them, so a record waits until it is kHold older than the newest one seen.
class Reorder {
 public:
  explicit Reorder(wire::PcapngWriter& out) : out_(out) {}
  void add(size_t interface, uint64_t ns, std::span<const uint8_t> bytes) {
    newest_ = std::max(newest_, ns);
    held_.push({ns, seq_++, interface, std::vector<uint8_t>(bytes.begin(), bytes.end())});
    while (!held_.empty() && held_.top().ns + kHold < newest_) emit();
  }
  void flush() {
    while (!held_.empty()) emit();
    out_.flush();
  }

 private:
  static constexpr uint64_t kHold = 200'000'000;  // ns
  struct Held {
    uint64_t ns, seq;
    size_t interface;
    std::vector<uint8_t> bytes;
    bool operator>(const Held& o) const { return ns != o.ns ? ns > o.ns : seq > o.seq; }
  };
  void emit() {
    const Held& h = held_.top();
    out_.write(h.interface, std::chrono::nanoseconds(h.ns), h.bytes);
    held_.pop();
  }
  wire::PcapngWriter& out_;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held_;
  uint64_t newest_ = 0, seq_ = 0;
};

// The command run during the capture, with the system's job named in its environment.
pid_t spawn(const std::vector<std::string>& argv, const std::string& job) {
  ::setenv("TTEMU_JOB", job.c_str(), 1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw Error(fmt::format("cannot run '{}': {}", argv[0], std::strerror(rc)));
  return pid;
}

int run_capture(const CaptureOptions& o, const std::vector<std::string>& command) {
  // Ctrl-C and SIGTERM end the capture (and reach the command, in the terminal's group). Taken
  // as events from the start: one that comes while the capture starts must not kill this
  // process with its file unfinished.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const int signal_fd = ::signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
  const job::JobId running = job::find_job(o.job.empty() ? std::nullopt : std::optional<std::string>(o.job));
  const job::SystemDescription desc = job::read_description(running);
  const std::string socket = launcher::control_socket(running.text());
  const control::System sys = control::load_system(desc.system_path);
  const CaptureLayout layout = capture_layout(sys, o.links, "--link");
  std::optional<wire::PcapngWriter> writer;
  try {
    writer.emplace(o.output, layout.interfaces);
  } catch (const std::runtime_error& e) {
    throw Error(fmt::format("-o: {}", e.what()));
  }
  wire::CaptureSink sink;
  json links = json::array();
  for (const auto& l : o.links) links.push_back(l);
  try {
    launcher::request(socket, {{"cmd", "capture"}, {"sink", sink.name()}, {"links", links}});
  } catch (const Error&) {  // refused: the file this command made goes, nothing half-written is left
    writer.reset();
    std::error_code ec;
    std::filesystem::remove(o.output, ec);
    throw;
  }

  fmt::print(stderr, "ttemu capture: recording {} link end(s) of job {} to {} ({})\n", layout.interfaces.size(), running.text(),
             o.output, !command.empty() ? "until the command ends" : o.duration > 0 ? fmt::format("for {} s", o.duration) : "Ctrl-C stops");
  std::fflush(stderr);
  pid_t child = command.empty() ? 0 : spawn(command, running.text());

  Reorder order(*writer);
  uint64_t received = 0, bytes = 0, unknown = 0;
  auto take = [&] {
    return sink.receive([&](const wire::CaptureRecord& r, std::span<const uint8_t> datagram) {
      const auto it = layout.interface_of.find({{r.mesh, r.device}, r.port});
      if (it == layout.interface_of.end()) {
        ++unknown;
        return;
      }
      order.add(it->second, r.ns, datagram);
      ++received;
      bytes += datagram.size();
    });
  };
  auto drain = [&] {
    while (take() > 0) {
    }
  };
  const auto start = Clock::now();
  const bool progress = ::isatty(STDERR_FILENO) && !o.json;
  auto shown = start;
  int child_status = 0;
  std::string ended_by = o.duration > 0 ? "duration" : "command";
  for (bool done = false; !done;) {
    const auto now = Clock::now();
    int wait_ms = 1000;
    if (o.duration > 0) {
      const double left = o.duration - std::chrono::duration<double>(now - start).count();
      if (left <= 0) break;
      wait_ms = std::min(wait_ms, static_cast<int>(left * 1000) + 1);
    }
    pollfd fds[2] = {{sink.fd(), POLLIN, 0}, {signal_fd, POLLIN, 0}};
    ::poll(fds, 2, wait_ms);
    drain();
    signalfd_siginfo si;
    while (::read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      if (si.ssi_signo != SIGCHLD) done = true, ended_by = "signal";
    }
    if (child > 0 && ::waitpid(child, &child_status, WNOHANG) == child) {
      child = 0;
      done = done || o.duration <= 0;
    }
    if (progress && Clock::now() - shown > std::chrono::seconds(1)) {
      shown = Clock::now();
      fmt::print(stderr, "\rttemu capture: {} datagrams, {:.1f} MB", received, static_cast<double>(bytes) / 1e6);
    }
  }
  if (progress) fmt::print(stderr, "\n");
  json stopped;
  try {
    // Chips still send records while the stop reaches them (credits and acknowledgements that
    // trail the traffic): they are taken meanwhile, or a chip blocked on a full sink could
    // not answer the stop until its send gave up, and would drop them.
    auto reply = std::async(std::launch::async, [&] {
      return launcher::request(socket, {{"cmd", "capture"}, {"sink", sink.name()}, {"stop", true}});
    });
    while (reply.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      pollfd fd{sink.fd(), POLLIN, 0};
      ::poll(&fd, 1, 5);
      drain();
    }
    stopped = reply.get();
  } catch (const Error& e) {
    // The system went away (or stopped the capture): what came is kept.
    drain();
    order.flush();
    fmt::print(stderr, "ttemu capture: the capture did not end cleanly ({}); {} datagrams written to {}\n", e.what(),
               received, o.output);
    return 1;
  }
  // Every record a chip sent before it answered is queued here already.
  drain();
  order.flush();
  if (child > 0) {  // ended by Ctrl-C or --duration: the command is waited for, not left behind
    ::kill(child, SIGTERM);
    ::waitpid(child, &child_status, 0);
  }
  ::close(signal_fd);
  const uint64_t dropped = stopped.at("dropped").get<uint64_t>();
  const json report = {{"file", o.output},          {"interfaces", layout.interfaces.size()},
                       {"datagrams", received},     {"bytes", bytes},
                       {"dropped", dropped},        {"recorded_by_chips", stopped.at("recorded")},
                       {"silent", stopped.at("silent")}, {"sink_lost", stopped.at("sink_lost")},
                       {"stray", sink.stray() + unknown}, {"seconds", std::chrono::duration<double>(Clock::now() - start).count()},
                       {"ended_by", ended_by}};
  if (o.json) {
    fmt::print("{}\n", report.dump());
  } else {
    fmt::print(stderr, "ttemu capture: {} datagrams ({:.1f} MB) of {} link ends written to {}{}\n", received,
               static_cast<double>(bytes) / 1e6, layout.interfaces.size(), o.output,
               dropped ? fmt::format("; {} dropped by chips (the capture did not keep up)", dropped) : "");
  }
  int status = dropped > 0 || !stopped.at("silent").empty() ? 1 : 0;
  if (!command.empty() && status == 0) {
    status = WIFEXITED(child_status) ? WEXITSTATUS(child_status) : 128 + WTERMSIG(child_status);
  }
  return status;
}

}  // namespace

void add_capture_command(CLI::App& app, const std::vector<std::string>& client, int& exit_status) {
  auto o = std::make_shared<CaptureOptions>();
  CLI::App* c = app.add_subcommand("capture", "Record the TT-link datagrams of a running system's links as pcapng");
  c->add_option("-o,--output", o->output, "The pcapng file to write")->required();
  c->add_option("--link", o->links, "A port whose link to capture, both directions (repeatable; default: every link)");
  c->add_option("--duration", o->duration, "Seconds to capture (default: until COMMAND ends, or Ctrl-C)")
      ->check(launcher::number_in(0.001, 86400));
  c->add_option("--job", o->job, launcher::kJobHelp);
  c->add_flag("--json", o->json, "The summary as one JSON object");
  c->footer("Capture while a command runs: ttemu capture -o FILE.pcapng -- ttemu traffic --pattern all_to_all\n"
            "Open it with: wireshark -X lua_script:tools/wireshark/ttlink.lua FILE.pcapng (docs/capture.md)");
  c->callback([o, &client, &exit_status] { exit_status = run_capture(*o, client); });
}

}  // namespace ttemu::tools
