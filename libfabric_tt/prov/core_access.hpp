// What the provider needs of its worker beyond tt_fabric.h: a claim on the worker's core (one
// provider endpoint per core, across processes: two would share one region and one set of
// transaction counters), and the core's NACK count per transaction id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "libfabric_tt/prov/binding.hpp"
#include "libfabric_tt/tt_fabric.h"

namespace ttemu::fi {

// A worker on the first core from `first` on that no live process's provider holds, claimed
// for this process; only `first` when the binding named its core. nullptr and a one-line
// reason in *why when there is none.
tt_fabric* open_claimed(const Binding& b, uint16_t first, bool only_first, std::string* why);
// Gives the worker's core back and closes the worker.
void close_claimed(tt_fabric* worker);
// Packets of transaction `txn` the fabric NACKed since the worker's chip started (counts up).
uint32_t txn_nacks(tt_fabric* worker, uint8_t txn);

}  // namespace ttemu::fi
