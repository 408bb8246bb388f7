// The worker's side of a chip's memory-window table (session/memory_windows.hpp): register a
// window of the chip's memory, and deregister it. The client library (a worker process over
// shared memory) and the simulator both use it, so simulated workers publish windows under
// the very protocol the center reads.
#pragma once

#include <cstdint>

#include "emulator/chip/chip_control.hpp"

namespace ttemu::chip {

struct WindowRegistration {
  int32_t status = kStatusOk;  // kStatusOk, kStatusBadArgument, kStatusBadSize, kStatusBadAddress, kStatusNoWindow
  uint64_t key = 0;            // never 0 once registered
};

// Registers [addr, addr + size) of a chip with l1_bytes of L1 and dram_bytes of DRAM for
// `core`, with `access` (session::WindowAccess bits). `random` makes the key's upper bits
// (the caller's source: the OS in processes, the seed in the simulator).
WindowRegistration register_window(ChipControl& control, uint16_t core, uint64_t addr, uint64_t size, uint32_t access,
                                   uint64_t l1_bytes, uint64_t dram_bytes, uint64_t random);
// Makes the window under `key` invisible, then frees its entry: kStatusOk, or
// kStatusBadArgument when `core` owns no window under that key.
int32_t deregister_window(ChipControl& control, uint16_t core, uint64_t key);

}  // namespace ttemu::chip
