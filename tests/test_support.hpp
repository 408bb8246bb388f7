// Helpers shared by every test binary, in one place:
// - files: shipped topologies by name, temporary directories and files, reading and writing;
// - processes: running a command (the `ttemu` binary, when the target knows it) to completion
//   with its exit status and its output, bounded by a deadline; the one-line error check;
// - the system model, for the unit tests: loading a topology, routes as text.
// Starting live systems (`ttemu launch` in the background) is tests/system_support.hpp.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "emulator/common/complete_lines.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_check.hpp"

namespace ttemu::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// --- files ------------------------------------------------------------------------------

// A shipped topology by file name ("n300.yaml").
inline std::string topo(const std::string& name) { return std::string(TTEMU_TOPOLOGIES) + "/" + name; }

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// Directories of test processes that no longer run (killed, so their destructors never ran):
// removed by the next test process that makes one. A directory's name carries its maker's pid.
inline void remove_dead_processes_dirs() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ttemu-test-", 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + 11, &end, 10);
    if (pid > 0 && *end == '-' && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
}

// A private directory for one test, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    static const bool swept = (remove_dead_processes_dirs(), true);
    (void)swept;
    std::string pattern = (fs::temp_directory_path() / ("ttemu-test-" + std::to_string(::getpid()) + "-XXXXXX")).string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// The event logs of the systems a test process launches go to a directory of its own, removed
// when it exits (ttemu launch keeps a job's log after the job ends, by design).
inline const TempDir& test_events_dir() {
  static TempDir dir;
  return dir;
}
inline const bool kTestEventsDirSet = [] {
  ::setenv("TTEMU_EVENTS_DIR", test_events_dir().path().c_str(), 1);
  return true;
}();

// The complete lines of an event log (launcher/event_log.hpp), each a JSON object (a live
// log's half-written last line is left for the next read).
inline std::vector<nlohmann::json> read_event_log(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  read_complete_lines(in, [&](const std::string& line) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  });
  return lines;
}

// A temporary file holding `text` (a fault plan, a table file), removed afterwards: a file in
// a private directory of its own.
class TempFile {
 public:
  explicit TempFile(const std::string& text) : path_((dir_ / "file").string()) { write_file(path_, text); }
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  std::string path_;
};

// --- processes --------------------------------------------------------------------------

struct RunResult {
  int status = -1;          // exit status; 128 + N if killed by signal N; -1 if it overran its limit
  std::string out;          // stdout and stderr together, in the order they came
  std::string stdout_text;  // stdout alone
  std::string stderr_text;  // stderr alone
};

// Starts args[0] (a path, no search) with stdin from /dev/null, stdout into a pipe whose read
// end goes to out_fd, and stderr into the same pipe (err_fd == nullptr) or a second one.
inline pid_t spawn(const std::vector<std::string>& args, int& out_fd, int* err_fd) {
  int out[2], err[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  if (err_fd && pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out[1], 1);
    dup2(err_fd ? err[1] : out[1], 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(out[1]);
  out_fd = out[0];
  if (err_fd) {
    ::close(err[1]);
    *err_fd = err[0];
  }
  return pid;
}

// The same, stdout and stderr into one pipe.
inline pid_t spawn(const std::vector<std::string>& args, int& fd) { return spawn(args, fd, nullptr); }

// Runs a command to completion: its exit status and its output. A command still running after
// `limit` is killed (SIGKILL) and reported with status -1 and a note in its output.
inline RunResult run(const std::vector<std::string>& args, std::chrono::seconds limit = std::chrono::seconds(200)) {
  RunResult r;
  int fds[2] = {-1, -1};
  const pid_t pid = spawn(args, fds[0], &fds[1]);
  std::string* text[2] = {&r.stdout_text, &r.stderr_text};
  const auto deadline = Clock::now() + limit;
  bool overran = false;
  while (fds[0] >= 0 || fds[1] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      overran = true;
      break;
    }
    pollfd p[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      p[n] = {fds[i], POLLIN, 0};
      which[n++] = i;
    }
    const int ready = poll(p, n, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (nfds_t k = 0; k < n && ready > 0; ++k) {
      if (!p[k].revents) continue;
      const int i = which[k];
      char buf[4096];
      const ssize_t got = ::read(fds[i], buf, sizeof buf);
      if (got > 0) {
        text[i]->append(buf, static_cast<size_t>(got));
        r.out.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (overran) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  r.status = overran ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (overran) r.out += "\n[killed by the test after " + std::to_string(limit.count()) + " s]\n";
  return r;
}

// "topo path FILE M0D0 M0D8" as arguments (split at spaces; no quoting).
inline std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A client program's run (a GoogleTest binary run inside a system) succeeded, and each test named ran and passed ("[       OK ] NAME (",
// as gtest prints it), and none failed. A filter that matched nothing exits 0 too, so the exit
// status alone proves nothing.
inline void expect_client_passed(const RunResult& r, std::initializer_list<const char*> tests) {
  EXPECT_EQ(r.status, 0) << r.out;
  for (const char* name : tests) {
    EXPECT_NE(r.out.find(std::string("[       OK ] ") + name + " ("), std::string::npos) << name << " did not pass:\n" << r.out;
  }
  EXPECT_EQ(r.out.find("[  FAILED  ]"), std::string::npos) << r.out;
}

// The lines of `out` that contain `text`.
inline std::vector<std::string> lines_with(const std::string& out, const std::string& text) {
  std::vector<std::string> found;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(text) != std::string::npos) found.push_back(line);
  }
  return found;
}

#ifdef TTEMU_BINARY
// The `ttemu` binary under test, run to completion.
inline RunResult ttemu(std::vector<std::string> args) {
  args.insert(args.begin(), TTEMU_BINARY);
  return run(args);
}
#endif

// A failed command that says why in one line on stderr, starting `prefix` ("ttemu: error: "
// for ttemu itself) and containing `fragment`, with nothing on stdout.
inline void expect_one_line_error(const RunResult& r, const std::string& fragment,
                                  const std::string& prefix = "ttemu: error: ") {
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_EQ(r.stderr_text.rfind(prefix, 0), 0u) << r.stderr_text;
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(fragment), std::string::npos) << r.stderr_text;
}

// --- the system model (unit tests) ------------------------------------------------------

inline control::System load(const std::string& name) { return control::load_system(topo(name)); }

inline int node(const control::System& sys, const std::string& name) {
  return *sys.node(*routing::parse_chip(name));
}

// "M0D0P2>M0D1P4 M0D1P2>M0D2P4 ..." for compact expectations.
inline std::string hops_text(const std::vector<control::Hop>& hops) {
  std::string out;
  for (const auto& h : hops) {
    out += (out.empty() ? "" : " ") + routing::to_string(h.from) + ">" + routing::to_string(h.to);
  }
  return out;
}

inline control::Walk route(const control::System& sys, const control::TableSet& tables,
                           const std::string& src, const std::string& dst, int plane = 0,
                           const control::Failures& failures = {}) {
  return control::walk_route(sys, tables, plane, node(sys, src), node(sys, dst), failures);
}

// Calls f(plane, src, dst, walk) for every ordered pair of chips on every plane.
template <class F>
void for_each_route(const control::System& sys, const control::TableSet& tables, F f) {
  for (int plane = 0; plane < sys.planes; ++plane) {
    for (int src = 0; src < sys.node_count(); ++src) {
      for (int dst = 0; dst < sys.node_count(); ++dst) {
        if (src != dst) f(plane, src, dst, control::walk_route(sys, tables, plane, src, dst));
      }
    }
  }
}

}  // namespace ttemu::test
