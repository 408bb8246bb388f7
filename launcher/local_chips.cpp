#include "launcher/local_chips.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::launcher {

namespace asio = boost::asio;
namespace msg = process::msg;

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the ttemu binary (/proc/self/exe)");
  return p.string();
}

namespace {

// "exited with status N", "was killed by signal N (name)".
std::string describe_exit(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

}  // namespace

LocalChips::LocalChips(asio::io_context& io, const control::System& sys, const job::JobId& job,
                       std::string control_socket, Events events)
    : io_(io), sys_(sys), job_(job), control_socket_(std::move(control_socket)), events_(std::move(events)) {
  chips_.resize(sys.chips.size());
  for (size_t v = 0; v < chips_.size(); ++v) chips_[v].node = static_cast<int>(v);
}

LocalChips::~LocalChips() { kill_all(); }

void LocalChips::start_all(const std::function<msg::Config(int node)>& config) {
  for (auto& c : chips_) start(c.node, config(c.node));
}

void LocalChips::start(int node, const msg::Config& config) {
  Proc& c = chips_.at(static_cast<size_t>(node));
  if (c.alive) throw Error(fmt::format("chip {} is running", routing::to_string(sys_.chips[static_cast<size_t>(node)].id)));
  const std::string exe = self_exe();
  const pid_t self = getpid();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw Error("socketpair failed");
  const std::string name = routing::to_string(sys_.chips[static_cast<size_t>(c.node)].id);
  const std::string job = job_.text();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("fork failed");
  }
  if (pid == 0) {
    // The chip dies with its launcher, whatever kills the launcher.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != self) _exit(1);
    ::dup2(fds[1], 3);
    ::close_range(4, ~0u, 0);
    signal(SIGINT, SIG_IGN);  // Ctrl-C goes to the launcher, which stops the chips
    execl(exe.c_str(), "ttemu", "chip", "run", "--job", job.c_str(), "--chip", name.c_str(), "--control-fd", "3",
          "--control-socket", control_socket_.c_str(), nullptr);
    _exit(127);
  }
  ::close(fds[1]);
  c.pid = pid;
  c.alive = true;
  node_of_pid_[pid] = c.node;
  if (c.control) c.control->socket.close();  // a restart: a read pending on the old one ends
  c.control = std::make_shared<Proc::Channel>(io_);
  c.control->socket.assign(asio::local::stream_protocol(), fds[0]);
  send(c.node, config);
  read(c);
}

void LocalChips::kill(int node) {
  const Proc& c = chips_.at(static_cast<size_t>(node));
  if (c.alive && c.pid > 0) ::kill(c.pid, SIGKILL);
}

// Blocking: control messages are rare and short, and the chip always reads.
void LocalChips::send(int node, const msg::ToChip& m) {
  Proc& c = chips_.at(static_cast<size_t>(node));
  if (!c.alive) return;
  const std::string line = msg::encode(m);
  boost::system::error_code ec;
  asio::write(c.control->socket, asio::buffer(line), ec);
}

void LocalChips::read(Proc& c) {
  auto ch = c.control;
  asio::async_read_until(ch->socket, ch->in, '\n', [this, &c, ch](auto ec, size_t n) {
    if (ec || ch != c.control) return;  // the chip is gone (SIGCHLD tells how), or restarted
    std::string line(asio::buffers_begin(ch->in.data()), asio::buffers_begin(ch->in.data()) + static_cast<long>(n));
    ch->in.consume(n);
    try {
      events_.message(c.node, msg::decode_from_chip(line));
    } catch (const Error& e) {
      events_.message(c.node, msg::ChipError{fmt::format("unreadable control message: {}", e.what())});
    }
    read(c);
  });
}

int LocalChips::running() const {
  int n = 0;
  for (const auto& c : chips_) n += c.alive;
  return n;
}

void LocalChips::child_exited(int pid, int status) {
  auto it = node_of_pid_.find(pid);
  if (it == node_of_pid_.end()) return;
  Proc& c = chips_[static_cast<size_t>(it->second)];
  node_of_pid_.erase(it);
  c.alive = false;
  events_.died(c.node, pid, describe_exit(status));
}

void LocalChips::kill_all() {
  for (auto& c : chips_) {
    if (c.alive && c.pid > 0) ::kill(c.pid, SIGKILL);
  }
  for (auto& c : chips_) {
    if (c.pid > 0 && node_of_pid_.count(c.pid)) ::waitpid(c.pid, nullptr, 0);
    c.alive = false;
  }
  node_of_pid_.clear();
}

}  // namespace ttemu::launcher
