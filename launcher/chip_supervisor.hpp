// Starting, watching and talking to a job's chip processes: the part of `ttemu launch` that
// multi-host launch replaces (chips started by mpirun or Slurm on other hosts). The launcher
// speaks to chips only through this, by node, in typed messages (process/chip_messages.hpp).
#pragma once

#include <functional>
#include <string>

#include "emulator/process/chip_messages.hpp"

namespace ttemu::launcher {

class ChipSupervisor {
 public:
  struct Events {
    std::function<void(int node, const process::msg::FromChip& m)> message;
    // A chip process ended (how: "exited with status 1", "was killed by signal 9 (Killed)").
    std::function<void(int node, int pid, const std::string& how)> died;
  };
  virtual ~ChipSupervisor() = default;

  // Starts every chip; each gets `config(node)` as its first message.
  virtual void start_all(const std::function<process::msg::Config(int node)>& config) = 0;
  // Starts one chip that is not running (a restart), with `config` as its first message.
  virtual void start(int node, const process::msg::Config& config) = 0;
  // Kills one chip (SIGKILL); `died` tells when it is gone.
  virtual void kill(int node) = 0;
  // Sends a message to a chip that is alive (to a dead one: nothing).
  virtual void send(int node, const process::msg::ToChip& m) = 0;
  virtual bool alive(int node) const = 0;
  virtual int pid(int node) const = 0;
  virtual int running() const = 0;
  // Ends what is still running at once (SIGKILL) and waits for it.
  virtual void kill_all() = 0;
  // A child process of the launcher ended (it reaps them all, SIGCHLD); if it was one of these
  // chips, `died` is told.
  virtual void child_exited(int pid, int status) = 0;
};

}  // namespace ttemu::launcher
