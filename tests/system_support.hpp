// Starting real systems for tests: `ttemu launch` as a child process, its output read through
// a pipe, every wait bounded by a deadline and driven by events (pipe readable, pidfd
// readable), never by sleeps.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ttemu::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string topo(const std::string& name) { return std::string(TTEMU_TOPOLOGIES) + "/" + name; }

struct RunResult {
  int status;
  std::string out;  // stdout and stderr together
};

// Starts args[0] with stdout and stderr into a pipe; returns the pid, and the read end in fd.
inline pid_t spawn(const std::vector<std::string>& args, int& fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  fd = fds[0];
  return pid;
}

// Runs a command to completion and returns its exit status and output.
inline RunResult run(const std::vector<std::string>& args) {
  int fds[1];
  pid_t pid = spawn(args, fds[0]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

inline RunResult ttemu(std::vector<std::string> args) {
  args.insert(args.begin(), TTEMU_BINARY);
  return run(args);
}

// Waits for a process (not necessarily our child) to exit; false on timeout.
inline bool wait_gone(int pid, std::chrono::milliseconds timeout) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone
  pollfd p{fd, POLLIN, 0};
  int r = poll(&p, 1, static_cast<int>(timeout.count()));
  close(fd);
  return r == 1;
}

inline std::vector<std::string> segments_of(const std::string& job) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().find("." + job + ".") != std::string::npos) out.push_back(e.path());
  }
  return out;
}

// A launched system: started in the constructor, ready when it returns.
class System {
 public:
  explicit System(const std::vector<std::string>& launch_args, std::chrono::seconds ready_within = std::chrono::seconds(90)) {
    std::vector<std::string> args{TTEMU_BINARY, "launch"};
    args.insert(args.end(), launch_args.begin(), launch_args.end());
    pid_ = spawn(args, out_fd_);
    if (!wait_for("ready in", ready_within)) {
      throw std::runtime_error("the system did not become ready:\n" + output_);
    }
    auto at = output_.find("(job ");
    job_ = output_.substr(at + 5, output_.find(')', at) - at - 5);
  }

  ~System() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }

  // Reads output until `text` appears or the timeout passes.
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    auto end = Clock::now() + timeout;
    while (output_.find(text) == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
      char buf[4096];
      ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) return output_.find(text) != std::string::npos;
      output_.append(buf, static_cast<size_t>(n));
    }
    return true;
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
    wait_for("\x01never", std::chrono::milliseconds(0));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::string& job() const { return job_; }
  const std::string& output() const { return output_; }
  int pid() const { return pid_; }

 private:
  int pid_ = 0;
  int out_fd_ = -1;
  std::string output_, job_;
};

}  // namespace ttemu::test
