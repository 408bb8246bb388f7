/* The tt provider's extension for applications (the way libfabric's providers offer theirs,
 * e.g. fi_ext_psm2.h): fi_open_ops(&domain->fid, FI_TT_MEMORY_OPS, 0, &ops, NULL) gives
 * access to the bound chip's memory, which is where a buffer for remote access (fi_mr_reg
 * with FI_REMOTE_READ or FI_REMOTE_WRITE) must lie: the fabric reads and writes chip memory. */
#ifndef FI_TT_H
#define FI_TT_H

#include <rdma/fabric.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_TT_MEMORY_OPS "tt_memory"
#define FI_TT_DRAM (1ull << 63) /* a chip address in DRAM: FI_TT_DRAM | offset; L1 otherwise */

struct fi_tt_memory_ops {
  size_t size; /* sizeof(struct fi_tt_memory_ops) */
  /* The chip's memory at chip address addr (L1 offset or FI_TT_DRAM | offset), NULL when
   * [addr, addr+len) is outside it. */
  void* (*chip_memory)(struct fid_domain* domain, uint64_t addr, size_t len);
  /* Bytes of DRAM below the provider's own endpoint regions: free for the application. */
  uint64_t (*free_dram)(struct fid_domain* domain);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_TT_H */
