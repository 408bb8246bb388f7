// Where each worker core's provider region lies in its chip's DRAM (mailbox.hpp): core c's at
// DRAM top - the sockets' DSCBs - (c + 1) regions. Below every Tensix core's region, DRAM is
// the application's (fi_tt.h's free_dram).
#pragma once

#include <cstdint>
#include <optional>

#include "libfabric_tt/tt_fabric.h"

namespace ttemu::fi {

// The chip address (TT_FABRIC_DRAM | offset) of the worker's core's region; nullopt when the
// chip's DRAM is too small for it.
std::optional<uint64_t> region_of(tt_fabric* worker);
// DRAM bytes below the regions of all Tensix cores (0 if they do not all fit).
uint64_t lowest_region(tt_fabric* worker);

}  // namespace ttemu::fi

namespace ttemu::fi {
// The chip address of [p, p+len) when it lies in the worker's chip memory.
std::optional<uint64_t> chip_address(tt_fabric* worker, const void* p, size_t len);
}  // namespace ttemu::fi
