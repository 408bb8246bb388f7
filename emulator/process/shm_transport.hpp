// The shared-memory transport (--transport shm): the links of chips on one host as datagram
// rings in shared memory, without sockets or system calls on the data path. Each link has one
// segment (chip::link_segment_name) holding two wire::ShmRing, one per direction: the link's
// lower end writes ring 0, the other end ring 1. The TT-link on top is unchanged: the same
// frames, CRCs, go-back-N and fault injection.
//
// Wake-ups: a chip that has said it sleeps (ChipControl::commands.router_asleep, the flag its
// workers read before ringing) is rung on its doorbell by a neighbour that has just put a
// datagram in its ring; a busy chip is never rung. The chip's event loop looks at its rings
// on every turn and once more after saying it sleeps, as it does for its command buffer.
//
// A full ring drops the datagram (counted as wire_drops on the port), as a socket's full
// receive buffer would; the TT-link retransmits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/doorbell.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/wire/shm_ring.hpp"
#include "emulator/wire/transport.hpp"

namespace ttemu::process {

// The capacity of each direction's ring for a TT-link window of `window` frames: room for the
// window twice over (a go-back-N round resent while the first is still unread) and its acks,
// rounded up to a power of two; at least 1 MiB.
size_t shm_ring_capacity(uint16_t window);
// Bytes of one link's segment, and its layout (the launcher creates it before the chips start;
// the chips read the capacity from it).
size_t shm_link_bytes(size_t ring_capacity);
void create_shm_link(void* memory, size_t ring_capacity);

class ShmTransport final : public wire::Transport {
 public:
  ShmTransport(const chip::JobId& job, routing::ChipId self, chip::ChipControl& control);
  ~ShmTransport() override;

  // Maps the segment of the link from `port` to `peer` (created by the launcher).
  void add(uint8_t port, routing::PortId peer);
  // Reaches each peer's control block and doorbell; every chip of the job must be up.
  void connect();
  // A lazy datagram goes into the ring without ringing a sleeping peer's doorbell.
  size_t send(uint8_t port, std::span<const wire::Datagram> datagrams) override;
  bool defers_lazy() const override { return true; }
  // A datagram waits in some ring.
  bool has_incoming() const;
  // Hands up to `batch` datagrams per port to deliver(port, bytes), read in place; returns
  // how many in all.
  size_t receive(const std::function<void(uint8_t, std::span<const uint8_t>)>& deliver, size_t batch = 64);
  // Removes the links' segments (a chip whose launcher is gone leaves nothing behind).
  void unlink_segments();

 private:
  struct Link;
  chip::JobId job_;
  routing::ChipId self_;
  chip::ChipControl& ctl_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<Link*> by_port_;
};

}  // namespace ttemu::process
