// The transport seam: how the datagrams of a chip's TT-link endpoints reach the wire. A chip
// node hands its transport the datagrams one link endpoint (a port) puts on the wire; what
// arrives comes back to the node through ChipNode::on_datagram, read in place from the
// transport's own buffers. The node never learns what carries them: UDP sockets in a chip
// process (udp_socket.hpp), a simulated wire in the simulator, a direct hand-over in the hop
// benchmark; io_uring, shared-memory rings and links between hosts take the same place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "emulator/wire/datagram.hpp"

namespace ttemu::wire {

// The transports a chip process can drive its links with (emulator/process/chip_process.cpp
// builds each; `ttemu launch --transport` and the benches choose among them).
inline const std::vector<std::string> kTransports{"udp", "uring", "shm"};

class Transport {
 public:
  virtual ~Transport() = default;
  // Puts datagrams on the wire of `port` toward its peer (its own link's, and those of ports
  // whose traffic it carries on the fallback channel), in order and
  // without blocking; returns how many it took. When it takes fewer than all it must, once
  // more can go, make the node's owner call ChipNode::on_writable(port). A call with none
  // says nothing is left to send for that port.
  // A datagram's borrowed pieces are valid only during the call: a transport that keeps a
  // datagram past it (a simulated wire, an asynchronous ring) copies it (Datagram::copy_to).
  //
  // A datagram marked lazy (Datagram::lazy: a held acknowledgement) need not wake a peer that
  // sleeps: the peer finds it when it wakes for anything else, or for its own timer.
  virtual size_t send(uint8_t port, std::span<const Datagram> datagrams) = 0;
  // True when lazy datagrams reach the peer without waking it. Where they would wake it
  // anyway, a sender lets other traffic (credits) ride on them.
  virtual bool defers_lazy() const { return false; }
};

}  // namespace ttemu::wire
