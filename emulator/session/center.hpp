// The center of a fabric node (spec 2.2.2.3, 2.4.1): the destination side of packet (RDMA)
// mode. It commits a packet's payload straight to the address in its header, performs reads
// and atomics, and produces the answers: write acknowledgements and NACKs on the control FVC,
// read responses on the request's FVC (answer_fvc() in packet.hpp); answers travel in answer
// lanes, so they never wait behind requests (the SUE seed's VC0/VC1). Packets addressed to
// this chip's own workers (acks, NACKs, read responses) are handed up. With memory windows
// (memory_windows.hpp) it admits a keyed request only inside the window its key names, with
// the right it needs, and in protected mode no request without a key; a refused one changes
// nothing and is NACKed with kNackPermission. A commit writes a packet's last 8 bytes last
// (commit_last_word_last), so a reader that sees them sees the packet.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "emulator/common/buffer_pool.hpp"
#include "emulator/routing/packet.hpp"
#include "emulator/session/memory_windows.hpp"

namespace ttemu::session {

using routing::ChipId;
using routing::Packet;

// Copies src to dst, its last 8 bytes after the rest with release order: a reader that sees
// them with an acquire load sees all of it and every packet committed before.
void commit_last_word_last(std::span<uint8_t> dst, std::span<const uint8_t> src);

class Center {
 public:
  // Returns the bytes at [addr, addr+size) of this chip's memory, or an empty span when the
  // range is outside L1/DRAM.
  using Memory = std::function<std::span<uint8_t>(uint64_t addr, size_t size)>;

  // Answers take their buffers from `buffers`.
  Center(ChipId self, int data_fvcs, Memory memory, BufferPool& buffers)
      : self_(self), data_fvcs_(data_fvcs), mem_(std::move(memory)), buffers_(buffers) {}

  struct Result {
    std::vector<Packet> replies;   // to inject into the router
    std::vector<Packet> for_workers; // acks, NACKs, read responses for local workers
  };
  // Handles one delivered packet, appending what it causes to `out`. A packet for a worker is
  // moved from; any other is left for the caller to reuse. Acks for the packets of one batch
  // (one `out`) from the same source core and transaction become one ack counting them.
  void on_packet(Packet& packet, Result& out);
  // The chip's Tensix cores, for multicasts with the NOC flag (spec 3.2): their dst_addr is an
  // offset written in every core's L1 (core i's L1 starts at i * l1_per_core). Unknown (0):
  // such a multicast is NACKed.
  void set_noc_grid(int cores, uint64_t l1_per_core) { cores_ = cores, core_l1_ = l1_per_core; }
  // The chip's memory-window table (none: every key is wrong) and the job's memory mode.
  void set_memory_windows(MemoryWindows* windows, MemoryMode mode) { windows_ = windows, mode_ = mode; }

 private:
  Packet reply_to(const routing::PacketHeader& h, routing::Command c, uint8_t fvc) const;
  void ack(const routing::PacketHeader& h, Result& out) const;

  ChipId self_;
  int data_fvcs_;
  Memory mem_;
  BufferPool& buffers_;
  int cores_ = 0;
  uint64_t core_l1_ = 0;
  MemoryWindows* windows_ = nullptr;
  MemoryMode mode_ = MemoryMode::kOpen;
  // The chip address a request may touch for `span` bytes needing `need`: its dst_addr when
  // it has no key (open mode), the window's address of its offset when it has one; nullopt
  // when refused (counted in the table).
  std::optional<uint64_t> admit(const routing::PacketHeader& h, uint64_t span, uint32_t need) const;
  Packet nack(const routing::PacketHeader& h, routing::NackReason why) const;
  // Commits a write's payload at `addr`; false (nothing written) when a target is outside memory.
  bool commit(const routing::PacketHeader& h, uint64_t addr, std::span<const uint8_t> payload) const;
};

}  // namespace ttemu::session
