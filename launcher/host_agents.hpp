// The control plane's side of a multi-host launch (docs/multi-host.md): the chips of every
// host, supervised as one. Chips of the control plane's own host are LocalChips; each other
// host has an agent (`ttemu host-agent`, launcher/host_agent.hpp) that connects here over TCP
// and starts, watches and talks to its chips for the control plane, one JSON line per message
// (the protocol is in host_agents.cpp). When an agent's connection ends, its host is gone:
// every chip of it is reported dead, as one that died here would be.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/chip/status_queue.hpp"
#include "emulator/common/asio.hpp"
#include "emulator/control/system.hpp"
#include "launcher/chip_supervisor.hpp"
#include "launcher/host_channel.hpp"
#include "launcher/launch.hpp"
#include "launcher/local_chips.hpp"
#include "launcher/mpi_bootstrap.hpp"

namespace ttemu::launcher {

class HostAgents final : public ChipSupervisor {
 public:
  struct Hooks {
    // What an agent is told when it connects: {"job", "tables", "version", ...} (HostAgent).
    std::function<nlohmann::json()> setup;
    // A chip of another host pushed into its status queue; its agent drained it. `age_ns`:
    // how long before the agent sent it the entry was pushed (hosts' clocks differ).
    std::function<void(int node, const chip::StatusEntry& entry, int64_t age_ns)> status_entry;
    // A control request made on another host (`ttemu status` there), to answer as our own.
    std::function<void(const std::string& line, const std::function<void(const std::string&)>& answer)> request;
    // An agent was lost (its host died, or the network to it): said once per host.
    std::function<void(const std::string& host, const std::string& why)> host_lost;
  };

  // `multi`: where each chip runs and which host is this one; `local` supervises its chips.
  HostAgents(boost::asio::io_context& io, const control::System& sys, MultiHost multi, std::unique_ptr<LocalChips> local,
             Events events, Hooks hooks);
  ~HostAgents() override;

  // Opens the agents' TCP port on `address` (any port); returns it.
  uint16_t listen(const std::string& address);
  // Every host's entry, by rank = host index (after the MPI exchange).
  void set_hosts(std::vector<HostEntry> hosts);

  bool here(int node) const { return multi_.here(node); }
  const std::vector<int>& host_of_node() const { return multi_.host_of_node; }
  const std::string& address_of(int node) const;
  const std::string& host_name(int node) const { return sys_.hosts.at(static_cast<size_t>(host_of(node))); }
  // New routing tables for every chip of the other hosts (their agents write them into their
  // chips' L1 and tell the chips to load them).
  void reload_tables(const nlohmann::json& tables, uint32_t version);
  // The status of every chip of the other hosts (chip_report and link_end_report, by chip
  // and by port name); a host that has not answered within `wait` is left out.
  void gather_status(std::function<void(const nlohmann::json& chips, const nlohmann::json& ends)> done,
                     std::chrono::milliseconds wait);

  void start_all(const std::function<process::msg::Config(int node)>& config) override;
  void start(int node, const process::msg::Config& config) override;
  // Starts a chip of another host again (`ttemu chip restart`): its agent first renews its
  // memory as the launcher does for one of its own (ChipMemory::renew, with these tables).
  void restart(int node, const process::msg::Config& config, const nlohmann::json& tables, uint32_t version);
  void kill(int node) override;
  void send(int node, const process::msg::ToChip& m) override;
  bool alive(int node) const override;
  int pid(int node) const override;
  int running() const override;
  void kill_all() override;
  void child_exited(int pid, int status) override { local_->child_exited(pid, status); }

 private:
  struct Agent {
    std::shared_ptr<HostChannel> channel;
    bool hello = false, lost = false;
  };
  void accept();
  void on_message(const std::shared_ptr<HostChannel>& ch, const nlohmann::json& m);
  void on_closed(const std::shared_ptr<HostChannel>& ch, const std::string& why);
  Agent* agent_of(int node);
  int host_of(int node) const { return multi_.host_of_node.at(static_cast<size_t>(node)); }
  void start_remote(int host);

  boost::asio::io_context& io_;
  const control::System& sys_;
  MultiHost multi_;
  std::unique_ptr<LocalChips> local_;
  Events events_;
  Hooks hooks_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<HostEntry> hosts_;
  std::map<int, Agent> agents_;  // by host index, once it said hello
  std::vector<std::shared_ptr<HostChannel>> unnamed_;  // connected, no hello yet
  std::vector<int> remote_pid_;  // by node: a remote chip's pid, 0 when not running
  std::vector<bool> starting_;   // by node: a remote chip asked to start, not yet started
  std::function<process::msg::Config(int node)> config_;
  uint64_t next_status_ = 0;
  struct Gather;
  std::map<uint64_t, std::shared_ptr<Gather>> gathers_;
};

}  // namespace ttemu::launcher
