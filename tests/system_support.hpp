// Starting real systems for tests: `ttemu launch` as a child process, its output read through
// a pipe, every wait bounded by a deadline and driven by events (pipe readable, pidfd
// readable), never by sleeps. Running commands to completion, temporary files and the other
// plain helpers are in tests/test_support.hpp.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_support.hpp"

namespace ttemu::test {

// Waits for a process (not necessarily our child) to exit; false on timeout.
inline bool wait_gone(int pid, std::chrono::milliseconds timeout) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone
  pollfd p{fd, POLLIN, 0};
  int r = poll(&p, 1, static_cast<int>(timeout.count()));
  close(fd);
  return r == 1;
}

// Appends what `fd` gives to `output` until done() holds (true) or the timeout passes or the
// output ends (whether done() holds then).
inline bool read_until(int fd, std::string& output, const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (!done()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return done();
    output.append(buf, static_cast<size_t>(n));
  }
  return true;
}

// The shared-memory segments in /dev/shm whose names carry the job id.
inline std::vector<std::string> segments_of(const std::string& job) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().find("." + job + ".") != std::string::npos) out.push_back(e.path());
  }
  return out;
}

// What the launcher said at start about itself: its job id from "ready in ... (job J)", and
// its control socket from "control socket PATH; ..."; empty where the output has no such line.
inline std::string job_in(const std::string& output) {
  const auto at = output.find("(job ");
  if (at == std::string::npos) return "";
  const auto end = output.find(')', at);
  return end == std::string::npos ? "" : output.substr(at + 5, end - at - 5);
}

inline std::string control_socket_in(const std::string& output) {
  const auto at = output.find("control socket ");
  if (at == std::string::npos) return "";
  const auto end = output.find(';', at);
  return end == std::string::npos ? "" : output.substr(at + 15, end - at - 15);
}

// The transport the systems of this run use: $TTEMU_TRANSPORT, as the launcher reads it, else
// the default, uring (CTest runs the system tests once per transport; this machine has
// io_uring).
inline bool default_transport_run() {
  const char* t = std::getenv("TTEMU_TRANSPORT");
  return !(t && *t);
}
inline std::string transport_under_test() { return default_transport_run() ? "uring" : std::getenv("TTEMU_TRANSPORT"); }

// For a test that does not depend on the transport, or names its own: it runs once, in the
// default run, and CTest's per-transport runs skip it.
#define TTEMU_ONCE_FOR_ALL_TRANSPORTS()            \
  if (!::ttemu::test::default_transport_run())     \
  GTEST_SKIP() << "does not depend on the transport: runs once, in the default (uring) run"

// A launched system: started in the constructor, ready (every link up, the control socket
// named) when it returns.
class System {
 public:
  // `wrapper` runs the launcher (tests/no_uring.cpp, say): its command and arguments come first.
  explicit System(const std::vector<std::string>& launch_args, std::chrono::seconds ready_within = std::chrono::seconds(90),
                  const std::vector<std::string>& wrapper = {}) {
    std::vector<std::string> args = wrapper;
    args.insert(args.end(), {TTEMU_BINARY, "launch"});
    args.insert(args.end(), launch_args.begin(), launch_args.end());
    pid_ = spawn(args, out_fd_);
    if (!wait_for("ready in", ready_within)) {
      throw std::runtime_error("the system did not become ready:\n" + output_);
    }
    // The socket's line follows the ready line.
    if (!wait_until([this] { return !control_socket_in(output_).empty(); }, std::chrono::seconds(10))) {
      throw std::runtime_error("the launcher did not name its control socket:\n" + output_);
    }
    job_ = job_in(output_);
    control_socket_ = control_socket_in(output_);
  }

  ~System() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }

  System(const System&) = delete;
  System& operator=(const System&) = delete;

  // Reads output until `text` appears or the timeout passes.
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    return wait_until([&] { return output_.find(text) != std::string::npos; }, timeout);
  }

  // Reads output until done() holds or the timeout passes (or the output ends).
  bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
    return read_until(out_fd_, output_, done, timeout);
  }

  RunResult ttemu(std::vector<std::string> args) {
    args.push_back("--job");
    args.push_back(job_);
    return test::ttemu(args);
  }

  nlohmann::json status() {
    RunResult r = ttemu({"status", "--json"});
    if (r.status != 0) throw std::runtime_error("status failed: " + r.out);
    return nlohmann::json::parse(r.out);
  }

  // Stops with a signal and returns the launcher's exit status (-1 on timeout).
  int stop(int sig = SIGTERM, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    kill(pid_, sig);
    if (!wait_gone(pid_, timeout)) return -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::string& job() const { return job_; }
  // The control socket as the launcher named it.
  const std::string& control_socket() const { return control_socket_; }
  const std::string& output() const { return output_; }
  int pid() const { return pid_; }

 private:
  int pid_ = 0;
  int out_fd_ = -1;
  std::string output_, job_, control_socket_;
};

}  // namespace ttemu::test
