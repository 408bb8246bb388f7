// How big a system this machine launches, and how fast (issue 16's scale targets), against the
// raw cost of starting as many processes of the same binary, measured in the same run:
//
//   ready      `ttemu launch SYSTEM`: the launcher's own figure (from its start to every link
//              up) and the wall time until its ready line
//   raw        fork+exec of N `ttemu --version` processes, all at once, until the last exits:
//              what N chip processes cost before they do anything
//   status     wall time of `ttemu status --json` on the running system
//   idle CPU   CPU time of the launcher and every chip process over --idle seconds with no
//              traffic, as a share of one core
//   traffic    (--traffic PATTERN) `ttemu traffic --pattern PATTERN --count 1`: verified bytes
//   stop       SIGTERM to the launcher until it has exited, and what is left of the job after:
//              processes, shared-memory segments, its control socket
//
//   ttemu_bench_launch [--systems tgg,galaxy,16x16,32x32] [--idle S] [--traffic PATTERN] [--json]
//
// A system is a file in topologies/ (its name without .yaml), a path to a specification
// (ending .yaml), or RxC for a mesh of Wormhole chips with one link between neighbours
// (written to a scratch file).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "emulator/control/traffic_patterns.hpp"
#include "tools/bench/options.hpp"
#include "tools/bench/raw_udp.hpp"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

pid_t spawn(const std::vector<std::string>& args, int* out_fd) {
  int p[2] = {-1, -1};
  if (out_fd && pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(out_fd ? p[1] : null, 1);
    dup2(null, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (out_fd) {
    ::close(p[1]);
    *out_fd = p[0];
  }
  return pid;
}

// N processes of the binary started at once, until the last has exited: seconds.
double raw_start(const std::string& ttemu, int n) {
  const auto t0 = Clock::now();
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) pids.push_back(spawn({ttemu, "--version"}, nullptr));
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  return seconds_since(t0);
}

// CPU seconds (user + system) a process has used, from /proc/PID/stat; its parent's pid.
struct ProcCpu {
  double cpu = 0;
  int ppid = 0;
};
std::optional<ProcCpu> proc_cpu(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> f;
  std::string field;
  for (size_t i = close + 2; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ') {
      f.push_back(field);
      field.clear();
    } else {
      field += text[i];
    }
  }
  if (f.size() < 13) return std::nullopt;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ProcCpu{(std::stod(f[11]) + std::stod(f[12])) / tick, std::stoi(f[1])};
}

// The launcher and its children (the chip processes): their pids.
std::vector<int> family(int launcher) {
  std::vector<int> out{launcher};
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(name);
    if (const auto c = proc_cpu(pid); c && c->ppid == launcher) out.push_back(pid);
  }
  return out;
}

double cpu_of(const std::vector<int>& pids) {
  double sum = 0;
  for (int p : pids) sum += proc_cpu(p).value_or(ProcCpu{}).cpu;
  return sum;
}

// Reads the launcher's output until a line matches, or the deadline.
std::optional<std::smatch> read_until(int fd, std::string& out, const std::regex& re, Clock::time_point deadline) {
  std::smatch m;
  while (!std::regex_search(out, m, re)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return std::nullopt;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    out.append(buf, static_cast<size_t>(n));
  }
  return m;
}

// What is left of a job: chip processes (children of the gone launcher are reparented, so by
// their command line), segments, the control socket.
json leftovers(const std::string& job, const std::string& socket) {
  int procs = 0, segments = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    procs += cmd.find(job) != std::string::npos;
  }
  for (const auto& e : fs::directory_iterator("/dev/shm")) segments += e.path().filename().string().find(job) != std::string::npos;
  return {{"processes", procs}, {"segments", segments}, {"socket", fs::exists(socket)}};
}

std::string mesh_yaml(int rows, int cols) {
  return fmt::format(
      "ChipSpec:\n  Wormhole:\n    arch: wormhole_b0\n    ethernet_ports: {{N: 1, E: 1, S: 1, W: 1}}\n"
      "Board:\n  Grid:\n    submodule: Wormhole\n    topology: {}x{}\nHost: [host0]\n"
      "Mesh:\n  0:\n    submodule: Grid\n    topology: 1x1\n    host_mapping: [[host0]]\n",
      rows, cols);
}

// A system's specification file, unless it is an RxC mesh: a path ending .yaml, or a name in topologies/.
std::string system_file(const std::string& system) {
  return system.ends_with(".yaml") ? system : fmt::format("{}/{}.yaml", TTEMU_TOPOLOGIES, system);
}

// An RxC mesh of 1 to 999 chips a side (as std::stoi reads them), or nothing.
std::optional<std::pair<int, int>> mesh_dims(const std::string& system) {
  std::smatch dims;
  if (!std::regex_match(system, dims, std::regex(R"(([1-9]\d{0,2})x([1-9]\d{0,2}))"))) return std::nullopt;
  return std::pair{std::stoi(dims[1]), std::stoi(dims[2])};
}

// --systems: each an RxC mesh or an existing file, so that a typo fails here rather than as a
// launch that never comes up.
std::string check_system(const std::string& system) {
  if (mesh_dims(system)) return {};
  if (fs::is_regular_file(system_file(system))) return {};
  return fmt::format("'{}' is neither an RxC mesh nor a system file ({} not found)", system, system_file(system));
}

struct Options {
  std::vector<std::string> systems{"tgg", "galaxy", "16x16", "32x32"};
  double idle_s = 2;
  std::vector<std::string> traffic;  // --traffic's patterns
  bool json = false;
};

json measure(const std::string& ttemu, const std::string& system, const Options& o) {
  std::optional<ttemu::bench::ScratchFile> scratch;
  std::string file = system_file(system);
  if (const auto dims = mesh_dims(system)) {
    scratch.emplace(mesh_yaml(dims->first, dims->second));
    file = scratch->path();
  }
  json r = {{"system", system.ends_with(".yaml") ? fs::path(system).stem().string() : system}};
  int fd = -1;
  const auto t0 = Clock::now();
  const pid_t launcher = spawn({ttemu, "launch", file, "--ready-timeout", "300"}, &fd);
  std::string out;
  const auto ready = read_until(fd, out, std::regex(R"((\d+) chip\(s\), (\d+) link\(s\) up, ready in ([0-9.]+) s \(job ([^)]+)\))"),
                                Clock::now() + std::chrono::seconds(330));
  if (!ready) {
    kill(launcher, SIGTERM);
    waitpid(launcher, nullptr, 0);
    ::close(fd);
    r["error"] = "did not come up: " + out.substr(0, 400);
    return r;
  }
  r["wall_ready_s"] = seconds_since(t0);
  r["chips"] = std::stoi((*ready)[1]);
  r["links"] = std::stoi((*ready)[2]);
  r["ready_s"] = std::stod((*ready)[3]);
  const std::string job = (*ready)[4];
  const auto sock = read_until(fd, out, std::regex(R"(control socket (\S+);)"), Clock::now() + std::chrono::seconds(10));
  const std::string socket = sock ? std::string((*sock)[1]) : "";

  auto t = Clock::now();
  const std::string status = ttemu::bench::capture(fmt::format("{} status --json --job {} 2>&1", ttemu, job));
  r["status_s"] = seconds_since(t);
  const json s = json::parse(status, nullptr, false);
  r["status_ok"] = !s.is_discarded() && s.value("chips", json::array()).size() == r["chips"].get<size_t>();

  const std::vector<int> pids = family(launcher);
  r["processes"] = pids.size();
  const double cpu0 = cpu_of(pids);
  t = Clock::now();
  ::poll(nullptr, 0, static_cast<int>(o.idle_s * 1000));  // the system does nothing meanwhile
  r["idle_cpu_percent"] = 100 * (cpu_of(pids) - cpu0) / seconds_since(t);

  if (!o.traffic.empty()) {
    t = Clock::now();
    const auto docs = ttemu::bench::capture_json_lines(
        fmt::format("{} traffic --job {} --pattern {} --count 1 --json 2>/dev/null", ttemu, job, fmt::join(o.traffic, ",")));
    r["traffic_s"] = seconds_since(t);
    double verified = 0, errors = 0;
    for (const auto& d : docs) {
      verified += d.value("verified", 0.0);
      errors += d.value("errors", 0.0);
    }
    r["traffic"] = {{"pattern", fmt::format("{}", fmt::join(o.traffic, ","))}, {"verified", verified}, {"errors", errors}, {"ok", !docs.empty() && errors == 0 && verified > 0}};
  }

  t = Clock::now();
  kill(launcher, SIGTERM);
  int st = 0;
  waitpid(launcher, &st, 0);
  r["stop_s"] = seconds_since(t);
  r["exit"] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  ::close(fd);
  r["left"] = leftovers(job, socket);
  r["raw_start_s"] = raw_start(ttemu, r["chips"].get<int>());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"How big a system this machine launches, and how fast, against raw process starts", "ttemu_bench_launch"};
  app.add_option("--systems", o.systems, "Systems to launch, comma-separated: topology names, .yaml paths or RxC meshes")
      ->delimiter(',')->check(CLI::Validator([](std::string& s) { return check_system(s); }, "RxC|NAME|FILE.yaml"))
      ->capture_default_str();
  // Up to a day: the idle wait is a poll() timeout in milliseconds, an int.
  app.add_option("--idle", o.idle_s, "Seconds of no traffic over which the idle CPU is measured")
      ->check(ttemu::bench::number_in(0, 86400))->capture_default_str();
  // Checked as ttemu traffic checks it: it is passed on to a shell, and a typo would otherwise
  // surface only after every system had been launched.
  app.add_option("--traffic", o.traffic, "Also run ttemu traffic --pattern PATTERN --count 1 on each system")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            try {
              ttemu::control::expand_patterns({name});
            } catch (const std::exception& e) {
              return e.what();
            }
            return {};
          },
          "PATTERN"));
  app.add_flag("--json", o.json, "Print one JSON array");
  if (const auto status = ttemu::bench::parse_command_line(app, argc, argv)) return *status;
  const std::string ttemu = TTEMU_BINARY;
  json all = json::array();
  if (!o.json) {
    fmt::print("{:<10} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>9} {:>8} {:>7}  {}\n", "system", "chips", "links", "ready s", "raw s",
               "ready/raw", "status", "idle CPU", "stop s", "left", "traffic");
  }
  bool ok = true;
  for (const auto& system : o.systems) {
    const json r = measure(ttemu, system, o);
    all.push_back(r);
    if (r.contains("error")) {
      ok = false;
      if (!o.json) fmt::print("{:<10} {}\n", r["system"].get<std::string>(), r["error"].get<std::string>());
      continue;
    }
    const json& left = r["left"];
    const bool clean = left["processes"] == 0 && left["segments"] == 0 && !left["socket"].get<bool>();
    ok = ok && clean && r["status_ok"].get<bool>() && (!r.contains("traffic") || r["traffic"]["ok"].get<bool>());
    if (!o.json) {
      fmt::print("{:<10} {:>6} {:>6} {:>9.2f} {:>9.2f} {:>9.1f} {:>6.2f}s {:>8.1f}% {:>8.2f} {:>7}  {}\n", r["system"].get<std::string>(), r["chips"].get<int>(),
                 r["links"].get<int>(), r["ready_s"].get<double>(), r["raw_start_s"].get<double>(),
                 r["ready_s"].get<double>() / r["raw_start_s"].get<double>(), r["status_s"].get<double>(),
                 r["idle_cpu_percent"].get<double>(), r["stop_s"].get<double>(), clean ? "nothing" : left.dump(),
                 r.contains("traffic") ? fmt::format("{} {:.0f} B verified, {:.0f} errors in {:.1f} s", r["traffic"]["pattern"].get<std::string>(),
                                                     r["traffic"]["verified"].get<double>(), r["traffic"]["errors"].get<double>(),
                                                     r["traffic_s"].get<double>())
                                       : "");
      std::fflush(stdout);
    }
  }
  if (o.json) fmt::print("{}\n", all.dump());
  return ok ? 0 : 1;
}
