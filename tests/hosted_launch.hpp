// A system launched inside the namespace hosts of tests/netns_hosts.hpp, for the multi-host
// tests and benchmark: `ttemu mpirun SYSTEM` (the agents on every host) or a plain
// `ttemu launch SYSTEM` inside one host, started in host0, its output read as it comes (every
// wait bounded by a deadline, driven by the pipe).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/netns_hosts.hpp"
#include "tests/system_support.hpp"

namespace ttemu::test {

// Where the chips of a running system are, from its `ttemu status --json`.
class ChipHosts {
 public:
  explicit ChipHosts(const nlohmann::json& status) {
    for (const auto& c : status["chips"]) host_of_[c["name"].get<std::string>()] = c["host"].get<std::string>();
  }
  // The host of a chip's port ("M4D0P2"), "" for none.
  std::string host_of_port(const std::string& port) const {
    const auto it = host_of_.find(port.substr(0, port.rfind('P')));
    return it == host_of_.end() ? "" : it->second;
  }
  // Whether a link of the status ({"a": port, "b": port, ...}) joins chips of two hosts.
  bool crosses(const nlohmann::json& link) const {
    return host_of_port(link["a"].get<std::string>()) != host_of_port(link["b"].get<std::string>());
  }

 private:
  std::map<std::string, std::string> host_of_;  // chip -> host
};

class HostedLaunch {
 public:
  // `ttemu mpirun SYSTEM --network SUBNET [options] -- MPIRUN-ARGS --host host0,host1,...`
  // (SUBNET: the hosts' IPv4 one, unless `network` names another, such as hosts.subnet6()).
  static HostedLaunch mpirun(const NetnsHosts& hosts, const std::string& system, const std::vector<std::string>& options = {},
                             const std::string& network = "") {
    std::vector<std::string> args{TTEMU_BINARY, "mpirun", system, "--network", network.empty() ? hosts.subnet() : network};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    for (const auto& a : hosts.mpirun_args()) args.push_back(a);
    args.push_back("--host");
    args.push_back(hosts.names());
    return HostedLaunch(hosts, args);
  }
  // The host agents started by a plain mpirun, one app context per host, so that host i's
  // agent can run under wrap[i] (a command and its arguments, before ttemu's; none: as is):
  // `mpirun --enable-recovery MPIRUN-ARGS -np 1 --host host0 [wrap0] ttemu host-agent SYSTEM
  // --network SUBNET [options] : -np 1 --host host1 [wrap1] ttemu host-agent ...`.
  static HostedLaunch agents(const NetnsHosts& hosts, const std::string& system,
                             const std::vector<std::vector<std::string>>& wrap, const std::vector<std::string>& options = {}) {
    std::vector<std::string> args{"mpirun", "--enable-recovery"};
    for (const auto& a : hosts.mpirun_args()) args.push_back(a);
    for (int i = 0; i < hosts.size(); ++i) {
      if (i > 0) args.push_back(":");
      args.insert(args.end(), {"-np", "1", "--host", hosts.name(i)});
      if (static_cast<size_t>(i) < wrap.size()) args.insert(args.end(), wrap[static_cast<size_t>(i)].begin(), wrap[static_cast<size_t>(i)].end());
      args.insert(args.end(), {TTEMU_BINARY, "host-agent", system, "--network", hosts.subnet()});
      args.insert(args.end(), options.begin(), options.end());
    }
    return HostedLaunch(hosts, args);
  }
  // `ttemu launch SYSTEM [options]` in host0 alone.
  static HostedLaunch launch(const NetnsHosts& hosts, const std::string& system, const std::vector<std::string>& options = {}) {
    std::vector<std::string> args{TTEMU_BINARY, "launch", system};
    args.insert(args.end(), options.begin(), options.end());
    return HostedLaunch(hosts, args);
  }

  HostedLaunch(HostedLaunch&& o) noexcept : hosts_(o.hosts_), pid_(std::exchange(o.pid_, 0)), fd_(std::exchange(o.fd_, -1)), out_(std::move(o.out_)) {}
  HostedLaunch& operator=(HostedLaunch&&) = delete;
  ~HostedLaunch() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  bool wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    return read_until(fd_, out_, [&] { return out_.find(text) != std::string::npos; }, timeout);
  }
  // `ttemu status --json` run on host i (its own runtime directory holds one job: its agent's,
  // or the launch's).
  nlohmann::json status(int i) const {
    int st = 0;
    const std::string out = hosts_.run_in(i, std::string(TTEMU_BINARY) + " status --json 2>&1", &st);
    if (st != 0) throw std::runtime_error("ttemu status on " + hosts_.name(i) + ": " + out);
    return nlohmann::json::parse(out);
  }
  // Stops the launch (mpirun and with it every agent) and returns its exit status; -1 on
  // timeout.
  int stop() {
    kill(pid_, SIGTERM);
    read_until(fd_, out_, [] { return false; }, std::chrono::seconds(60));  // to the end of its output
    int st = 0;
    if (waitpid(pid_, &st, 0) != pid_) return -1;
    pid_ = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  const std::string& output() const { return out_; }

 private:
  HostedLaunch(const NetnsHosts& hosts, const std::vector<std::string>& args) : hosts_(hosts) {
    pid_ = spawn(hosts.in_host(0, args), fd_);
  }

  const NetnsHosts& hosts_;
  pid_t pid_ = 0;
  int fd_ = -1;
  std::string out_;
};

}  // namespace ttemu::test
