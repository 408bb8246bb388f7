// The worker's side of sockets (spec 4): claim an endpoint in the chip's socket table, fill it
// in and ask the chip's session layer to open it; queue sends through the command buffer (the
// router pulls the bytes from the worker's memory, as for writes); read arrivals straight out
// of the L1CB ring and tell the chip when room was made. The client library (a worker process)
// and the simulator's workers both use it, so simulated sockets run the very protocol real ones
// do. It never blocks: callers wait (on the endpoint's futex words, or a simulated clock).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/command_buffer.hpp"
#include "emulator/session/socket_endpoint.hpp"

namespace ttemu::chip {

class SocketClient {
 public:
  // Bytes of this chip's memory at [addr, addr+size), empty when out of range.
  using Memory = std::function<std::span<uint8_t>(uint64_t addr, size_t size)>;
  // `owner`: who the endpoints it opens belong to, for their chip to close and free them once
  // that owner is gone without closing (ChipNode::owner_gone): a worker process's pid, a
  // simulated worker's number; 0 for none.
  SocketClient(ChipControl& control, CommandBufferClient& commands, uint16_t core, Memory memory, uint32_t owner = 0)
      : ctl_(control), commands_(commands), core_(core), mem_(std::move(memory)), owner_(owner) {}

  struct Options {
    uint32_t socket_id = 0, epoch = 0;
    uint8_t type = session::kDSocket;
    uint8_t direction = session::kSocketSend;
    uint8_t handshake = session::kEndToEnd;
    uint8_t fvc = 0, plane = 0;  // SSocket senders: kAutoFvc picks a reservable FVC
    uint16_t remote_mesh = 0, remote_device = 0;  // receiver: session::kAnyDevice for any sender
    // A multicast sender: the devices of remote_mesh it sends to (each opens a receiving
    // socket); 0: unicast to remote_device.
    uint16_t group_size = 0;
    uint16_t group[session::kMaxGroup] = {};
    // Receive side: L1CB (at least one packet, kMaxPacketPayload) and DSCB (0: none).
    uint64_t l1cb_addr = 0, dscb_addr = 0;
    uint32_t l1cb_size = 0, dscb_size = 0;
    // A default DSCB per endpoint instead (dscb_size 0, dscb_each > 0): endpoint e's is the
    // dscb_each bytes below dscb_top - e x dscb_each in DRAM (dscb_top: the DRAM's size).
    uint64_t dscb_top = 0;
    uint32_t dscb_each = 0;
  };
  static constexpr uint8_t kAutoFvc = 0xFF;
  // Claims a free endpoint and asks the chip to open it: the endpoint (0..kSocketEndpoints-1),
  // or a negative status: kSocketOpenError when every endpoint is taken or, for an SSocket,
  // every reservable FVC (1 .. data FVCs - 1) already carries one of this chip's SSockets (the
  // open error of spec 2.4.2), kStatusBadSize / kStatusBadAddress for buffers that cannot
  // serve, kSocketNoCredits (try again) when the command buffer is full.
  int open(const Options& o);
  session::SocketEndpoint* endpoint(int ep) const;  // nullptr unless this core owns it

  // Queues `size` bytes at src_addr (this chip's memory) for the socket; false when the
  // command buffer has no free slot (try again). The bytes must stay until sent() covers them.
  bool try_send(int ep, uint64_t src_addr, uint32_t size);
  // Bytes the router has put into packets, and bytes queued so far.
  uint64_t sent(int ep) const;
  uint64_t queued(int ep) const;
  // Bytes waiting in L1CB for the owner.
  uint64_t readable(int ep) const;
  // Moves up to out.size() bytes out of L1CB; returns how many. When the chip waits for room
  // (its DSCB holds data, packets wait in the fabric, credits follow reads), tells it.
  size_t recv(int ep, std::span<uint8_t> out);
  // Asks the chip to close (a sender's close goes behind its data); false when the command
  // buffer is full. The chip fills the FabricStatus at status_addr (0: none) and the endpoint
  // becomes kSocketClosed; release() then frees it.
  bool try_close(int ep, uint64_t status_addr);
  void release(int ep);

 private:
  ChipControl& ctl_;
  CommandBufferClient& commands_;
  uint16_t core_;
  Memory mem_;
  uint32_t owner_;
  // The FVC an SSocket sender opened as endpoint `self` gets, or -1 when none is free.
  int streaming_fvc(const Options& o, int self) const;
};

}  // namespace ttemu::chip
