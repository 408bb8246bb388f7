// Memory regions. A local buffer needs no registration here (no FI_MR_LOCAL): its descriptor
// is only a handle. A buffer for remote access must lie in the bound chip's memory (fi_tt.h):
// it becomes a window of the chip's memory-window table, under a key the chip makes
// (FI_MR_PROV_KEY), and the chip's center checks every RDMA packet against it.
#include <fmt/format.h>

#include "libfabric_tt/prov/objects.hpp"
#include "libfabric_tt/prov/region.hpp"

namespace ttemu::fi {

namespace {

int close_mr(fid* f) {
  Mr* mr = reinterpret_cast<Mr*>(f);
  {
    std::lock_guard guard(mr->domain->lock);
    if (mr->window_key) tt_fabric_mr_deregister(mr->domain->worker, mr->window_key);
    --mr->domain->objects;
  }
  delete mr;
  return 0;
}

int bind_mr(fid*, fid*, uint64_t) { return 0; }

fi_ops g_mr_fi_ops = fid_ops(close_mr, bind_mr);

}  // namespace

int register_mr(fid* fid, const void* buf, size_t len, uint64_t access, uint64_t offset, uint64_t requested_key, uint64_t flags,
                fid_mr** out, void* context) {
  (void)offset;
  (void)requested_key;
  (void)flags;
  auto* d = reinterpret_cast<Domain*>(fid);
  std::lock_guard guard(d->lock);
  uint64_t key = 0;
  if (access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) {
    const auto addr = chip_address(d->worker, buf, len);
    if (!addr || len == 0) {
      warn(fmt::format("fi_mr_reg: a buffer for remote access must lie in chip {}'s memory (fi_tt.h, FI_TT_MEMORY_OPS)",
                       d->binding.chip()));
      return -FI_EINVAL;
    }
    const uint32_t rights = ((access & FI_REMOTE_READ) ? TT_FABRIC_REMOTE_READ : 0u) |
                            ((access & FI_REMOTE_WRITE) ? TT_FABRIC_REMOTE_WRITE : 0u);
    const int rc = tt_fabric_mr_register(d->worker, *addr, len, rights, &key);
    if (rc != TT_FABRIC_OK) {
      warn(fmt::format("fi_mr_reg: {}", tt_fabric_strerror(rc)));
      return rc == TT_FABRIC_ENOWINDOW ? -FI_ENOSPC : -FI_EINVAL;
    }
  }
  auto* mr = new Mr;
  mr->domain = d;
  mr->window_key = key;
  mr->fid.fid.fclass = FI_CLASS_MR;
  mr->fid.fid.context = context;
  mr->fid.fid.ops = &g_mr_fi_ops;
  mr->fid.mem_desc = mr;
  mr->fid.key = key;
  ++d->objects;
  *out = &mr->fid;
  return 0;
}

int register_mr_v(fid* fid, const iovec* iov, size_t count, uint64_t access, uint64_t offset, uint64_t requested_key,
                  uint64_t flags, fid_mr** mr, void* context) {
  if (count != 1) return -FI_EINVAL;  // mr_iov_limit is 1
  return register_mr(fid, iov[0].iov_base, iov[0].iov_len, access, offset, requested_key, flags, mr, context);
}

int register_mr_attr(fid* fid, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr) {
  if (!attr || attr->iov_count != 1) return -FI_EINVAL;
  if (attr->iface != FI_HMEM_SYSTEM) return -FI_ENOSYS;
  return register_mr(fid, attr->mr_iov[0].iov_base, attr->mr_iov[0].iov_len, attr->access, attr->offset, attr->requested_key,
                     flags, mr, attr->context);
}

}  // namespace ttemu::fi
