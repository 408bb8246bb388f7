#include "tools/campaign/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

extern char** environ;

namespace ttemu::tools {

namespace {
constexpr int kGraceMs = 5000;
}  // namespace

ChildResult run_child(const std::string& program, const std::vector<std::string>& args, const std::string& stdout_path,
                      const std::string& stderr_path, double limit_s, const std::function<void()>& at_bound) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, program.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw Error(fmt::format("cannot start {}: {}", program, std::strerror(rc)));
  ChildResult r;
  // Waits on the child's pidfd with the bound as the timeout: no polling loop.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int left_ms = static_cast<int>(limit_s * 1000);
    while (true) {
      const int n = ::poll(&p, 1, left_ms);
      if (n > 0) break;
      if (n < 0 && errno == EINTR) continue;
      r.timed_out = true;
      if (at_bound) at_bound();
      // A term first, so that a launcher stops its chips and removes what it made; a kill if
      // it does not go within kGrace.
      ::kill(pid, SIGTERM);
      if (::poll(&p, 1, kGraceMs) <= 0) ::kill(pid, SIGKILL);
      break;
    }
    ::close(pidfd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./,:=@+%") == std::string::npos;
  if (plain) return w;
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + '\'';
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + shell_word(w);
  return out;
}

}  // namespace ttemu::tools
