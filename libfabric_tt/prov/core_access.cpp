#include "libfabric_tt/prov/core_access.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "libfabric_tt/tt_fabric_internal.hpp"

namespace ttemu::fi {

namespace {

std::atomic<uint32_t>* claim_word(tt_fabric* handle) {
  tt_fabric* f = client::lookup(handle);
  return f ? &f->block->commands.workers[f->core].provider_pid : nullptr;
}

bool alive(uint32_t pid) { return pid != 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace

tt_fabric* open_claimed(const Binding& b, uint16_t first, bool only_first, std::string* why) {
  const auto me = static_cast<uint32_t>(::getpid());
  for (uint32_t core = first; core < chip::kMaxWorkers; ++core) {
    char error[256] = {};
    tt_fabric* w = tt_fabric_open(nullptr, b.mesh, b.device, static_cast<uint16_t>(core), error, sizeof error);
    if (!w) {
      *why = core > first ? fmt::format("every worker core of chip {} from {} on is in use", b.chip(), first)
                          : fmt::format("chip {}: {}", b.chip(), error);
      return nullptr;
    }
    auto* word = claim_word(w);
    uint32_t owner = word->load(std::memory_order_acquire);
    // Free, or held by a process that is gone (a crashed client leaves its claim behind).
    while (owner != me && !alive(owner)) {
      if (word->compare_exchange_weak(owner, me, std::memory_order_acq_rel)) return w;
    }
    tt_fabric_close(w);
    if (only_first) {
      *why = fmt::format("core {} of chip {} is in use by process {}", core, b.chip(), owner);
      return nullptr;
    }
  }
  *why = fmt::format("every worker core of chip {} from {} on is in use", b.chip(), first);
  return nullptr;
}

void close_claimed(tt_fabric* worker) {
  if (auto* word = claim_word(worker)) {
    uint32_t me = static_cast<uint32_t>(::getpid());
    word->compare_exchange_strong(me, 0, std::memory_order_acq_rel);
  }
  tt_fabric_close(worker);
}

uint32_t txn_nacks(tt_fabric* handle, uint8_t txn) {
  tt_fabric* f = client::lookup(handle);
  return f ? f->block->commands.workers[f->core].txn_nacks[txn].load(std::memory_order_acquire) : 0;
}

}  // namespace ttemu::fi
