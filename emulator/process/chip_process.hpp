// The life of one chip process: it maps its shared-memory segments, takes its configuration
// from the launcher over a private control socket (JSON lines), builds its transport (a UDP
// socket per wired ethernet port, the same sockets driven through an io_uring, or shared-memory
// rings), builds its ChipNode (emulator/node/chip_node.hpp) over it, and drives it from its
// event loop until told to stop or orphaned. Idle, it sleeps in the kernel: no deadline is
// set unless a link has frames in flight, is coming up or probing, a packet waits in a routing
// buffer, or credits or acknowledgements are due.
//
// Its control messages, both ways, are the types of chip_messages.hpp.
#pragma once

#include <string>

#include "emulator/chip/segments.hpp"
#include "emulator/routing/address.hpp"

namespace ttemu::process {

struct ChipOptions {
  job::JobId job;
  routing::ChipId chip;
  int control_fd = -1;
  std::string control_socket;  // the launcher's socket, removed if the launcher is gone
};

// Returns the process exit status.
int run_chip(const ChipOptions& options);

}  // namespace ttemu::process
