// TEMPORARY: the memory-key calls of tt_fabric.h, declared weak until they land there.
#pragma once
#include <cstdint>
#include "libfabric_tt/tt_fabric.h"
extern "C" {
int tt_fabric_mr_register(tt_fabric* f, uint64_t addr, uint64_t size, uint32_t access, uint64_t* key) __attribute__((weak));
int tt_fabric_mr_deregister(tt_fabric* f, uint64_t key) __attribute__((weak));
int tt_fabric_set_key(tt_fabric* f, uint64_t key) __attribute__((weak));
}
namespace ttemu::fi {
inline constexpr uint32_t kRemoteRead = 1, kRemoteWrite = 2;
inline constexpr int kENoWindow = -19;
inline int mr_register(tt_fabric* f, uint64_t addr, uint64_t size, uint32_t access, uint64_t* key) {
  if (!tt_fabric_mr_register) return *key = 0, 0;
  return tt_fabric_mr_register(f, addr, size, access, key);
}
inline int mr_deregister(tt_fabric* f, uint64_t key) { return tt_fabric_mr_deregister ? tt_fabric_mr_deregister(f, key) : 0; }
inline int set_key(tt_fabric* f, uint64_t key) { return tt_fabric_set_key ? tt_fabric_set_key(f, key) : 0; }
}  // namespace ttemu::fi
