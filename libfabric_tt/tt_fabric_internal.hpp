// What the client library's files share (not for users: tt_fabric.h is the API): the worker
// behind a tt_fabric handle, and the lookup that turns a handle into it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/command_buffer.hpp"
#include "emulator/chip/doorbell.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/chip/socket_client.hpp"
#include "emulator/job/job.hpp"
#include "libfabric_tt/tt_fabric.h"

namespace ttemu::client {
// One call's arguments, checked by submit_checked().
struct Request {
  routing::Command command;
  uint8_t plane;
  tt_fabric_device dst;
  uint64_t src_addr = 0, dst_addr = 0, return_addr = 0;
  uint32_t size = 0, arg = 0;
  uint8_t wrap = 31;
  int fvc = -1;
  uint8_t txn = 0;
  uint16_t copies = 1;  // a multicast: the devices it writes
  uint64_t key = 0;     // the remote window's (tt_fabric_set_key): dst_addr is an offset in it
};
}  // namespace ttemu::client

struct tt_fabric {
  using Request = ttemu::client::Request;
  ttemu::job::JobId job;
  ttemu::routing::ChipId self;
  uint16_t core = 0;
  ttemu::chip::Segment ctl, l1, dram;
  ttemu::chip::ChipControl* block = nullptr;
  std::unique_ptr<ttemu::chip::DoorbellRinger> doorbell;
  std::unique_ptr<ttemu::chip::CommandBufferClient> commands;
  std::unique_ptr<ttemu::chip::SocketClient> sockets;  // over `commands` (tt_fabric_socket.cpp)
  // The default L1CB slot each socket of this worker holds (-1: none), by handle.
  std::array<int8_t, ttemu::session::kSocketEndpoints> l1cb_slot = [] {
    std::array<int8_t, ttemu::session::kSocketEndpoints> a{};
    a.fill(-1);
    return a;
  }();
  bool nonblocking = false;
  uint64_t key = 0;              // named by this worker's writes, reads and atomics (tt_fabric_set_key)
  std::vector<uint64_t> windows;  // keys this handle registered, removed by tt_fabric_close
  std::chrono::milliseconds limit{};  // of a barrier or a wait for a slot ($TTEMU_BARRIER_TIMEOUT_MS)
  int tensix_cores = 0;    // of this chip, from the published description
  uint64_t tensix_l1 = 0;
  int planes = 0, data_fvcs = 0;
  struct Target {
    uint64_t l1_bytes, dram_bytes;
    int row, col, rows, cols;
  };
  std::map<std::pair<uint16_t, uint16_t>, Target> targets;
  // Retry mode: each transaction's writes since its last barrier, the transaction's NACK count
  // and the tables version from just before the first was issued.
  struct Journal {
    std::vector<Request> writes;
    uint32_t nacks_before = 0, tables_version = 0;
  };
  // The transaction's journal starts counting from now: its NACKs so far, the tables in force.
  void begin_journal(uint8_t txn) {
    journal[txn].nacks_before = commands->nacked(txn);
    journal[txn].tables_version = block->tables_version.load(std::memory_order_acquire);
  }
  int retry_rounds = 0;
  std::chrono::milliseconds retry_wait{0};
  uint64_t retried = 0, lost = 0;
  Journal journal[ttemu::chip::kTxnIds];
};

namespace ttemu::client {
// The worker of a live handle; nullptr for a closed or made-up one.
tt_fabric* lookup(tt_fabric* handle);
bool chip_alive(const tt_fabric* f);
// This chip's memory at [addr, addr+size), empty when outside it.
std::span<uint8_t> memory(tt_fabric* f, uint64_t addr, size_t size);
}  // namespace ttemu::client

