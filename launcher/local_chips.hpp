// Chip processes on this host: each a child of the launcher (fork, exec of `ttemu chip`), with
// a socketpair as its control channel, dying with the launcher (PR_SET_PDEATHSIG).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "emulator/common/asio.hpp"
#include "emulator/control/system.hpp"
#include "emulator/job/job.hpp"
#include "launcher/chip_supervisor.hpp"

namespace ttemu::launcher {

class LocalChips final : public ChipSupervisor {
 public:
  // control_socket: the job's socket, which an orphaned chip removes.
  LocalChips(boost::asio::io_context& io, const control::System& sys, const job::JobId& job,
             std::string control_socket, Events events);
  ~LocalChips() override;

  void start_all(const std::function<process::msg::Config(int node)>& config) override;
  void start(int node, const process::msg::Config& config) override;
  void kill(int node) override;
  void send(int node, const process::msg::ToChip& m) override;
  bool alive(int node) const override { return chips_.at(static_cast<size_t>(node)).alive; }
  int pid(int node) const override { return chips_.at(static_cast<size_t>(node)).pid; }
  int running() const override;
  void kill_all() override;
  void child_exited(int pid, int status) override;

 private:
  struct Proc {
    int node = 0;
    int pid = 0;
    bool alive = false;
    // The control channel. Reads in progress hold it too: a restart's new channel replaces it
    // while a read of the old one may still be pending.
    struct Channel {
      explicit Channel(boost::asio::io_context& io) : socket(io) {}
      boost::asio::local::stream_protocol::socket socket;
      boost::asio::streambuf in;
    };
    std::shared_ptr<Channel> control;
  };
  void read(Proc& c);

  boost::asio::io_context& io_;
  const control::System& sys_;
  job::JobId job_;
  std::string control_socket_;
  Events events_;
  std::vector<Proc> chips_;
  std::map<int, int> node_of_pid_;
};

}  // namespace ttemu::launcher
