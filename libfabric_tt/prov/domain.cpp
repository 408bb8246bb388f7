// The domain: one chip of a running ttemu system, and the worker that registers its memory.
#include <sched.h>

#include <cstring>

#include "libfabric_tt/prov/fi_tt.h"
#include "libfabric_tt/prov/core_access.hpp"
#include "libfabric_tt/prov/objects.hpp"
#include "libfabric_tt/prov/region.hpp"

namespace ttemu::fi {

namespace {

Domain* domain_of(fid* f) { return reinterpret_cast<Domain*>(f); }

int close_domain(fid* f) {
  Domain* d = domain_of(f);
  {
    std::lock_guard guard(d->lock);
    if (d->objects > 0) return -FI_EBUSY;  // its endpoints, AVs, CQs, counters and MRs first
  }
  close_claimed(d->worker);
  delete d;
  return 0;
}

void* chip_memory(fid_domain* fd, uint64_t addr, size_t len) {
  Domain* d = domain_of(&fd->fid);
  return d->worker ? tt_fabric_memory(d->worker, addr, len) : nullptr;
}

uint64_t free_dram(fid_domain* fd) {
  Domain* d = domain_of(&fd->fid);
  return d->worker ? lowest_region(d->worker) : 0;
}

fi_tt_memory_ops g_memory_ops = {sizeof(fi_tt_memory_ops), chip_memory, free_dram};

int domain_ops_open(fid*, const char* name, uint64_t, void** ops, void*) {
  if (!name || std::strcmp(name, FI_TT_MEMORY_OPS) != 0) return -FI_ENOSYS;
  *ops = &g_memory_ops;
  return 0;
}

fi_ops g_domain_fi_ops = fid_ops(close_domain, TT_NOSYS(fi_ops, bind), TT_NOSYS(fi_ops, control), domain_ops_open);

fi_ops_domain g_domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = open_av,
    .cq_open = open_cq,
    .endpoint = open_endpoint,
    .scalable_ep = TT_NOSYS(fi_ops_domain, scalable_ep),
    .cntr_open = open_cntr,
    .poll_open = TT_NOSYS(fi_ops_domain, poll_open),
    .stx_ctx = TT_NOSYS(fi_ops_domain, stx_ctx),
    .srx_ctx = TT_NOSYS(fi_ops_domain, srx_ctx),
    .query_atomic = query_atomic,
    .query_collective = TT_NOSYS(fi_ops_domain, query_collective),
    .endpoint2 = TT_NOSYS(fi_ops_domain, endpoint2),
};

fi_ops_mr g_mr_ops = {
    .size = sizeof(fi_ops_mr),
    .reg = register_mr,
    .regv = register_mr_v,
    .regattr = register_mr_attr,
};

}  // namespace

void Domain::progress() {
  bool moved = false;
  {
    std::lock_guard guard(lock);
    for (Endpoint* ep : endpoints) moved = (ep->messenger && ep->messenger->progress(ep->sink)) || moved;
  }
  // The chips' processes do the fabric's work on the same CPUs as a client that polls its CQ in
  // a loop: after a few idle polls, let them run.
  const uint32_t idle = moved ? 0 : idle_polls.load(std::memory_order_relaxed) + 1;
  idle_polls.store(idle, std::memory_order_relaxed);
  if (idle > 8) sched_yield();
}

int open_domain(fid_fabric* fabric, fi_info* info, fid_domain** domain, void* context) {
  std::string why;
  const char* chip = info && info->domain_attr && info->domain_attr->name && parse_chip(info->domain_attr->name)
                         ? info->domain_attr->name
                         : nullptr;
  auto b = resolve_binding(chip, &why);
  if (!b) {
    warn(why);
    return -FI_ENODEV;
  }
  if (info && info->src_addr && info->src_addrlen == sizeof(Addr)) {
    const auto* a = static_cast<const Addr*>(info->src_addr);
    if (a->magic == kAddrMagic && a->mesh == b->mesh && a->device == b->device) b->core = a->core;
  }
  tt_fabric* worker = open_claimed(*b, b->core, b->core_given, &why);
  if (!worker) {
    warn("fi_domain: " + why);
    return b->core_given ? -FI_EBUSY : -FI_ENODEV;
  }
  b->core = static_cast<uint16_t>(tt_fabric_core_l1(worker) / tt_fabric_core_l1_size(worker));
  auto* d = new Domain;
  d->fabric = reinterpret_cast<Fabric*>(fabric);
  d->binding = *b;
  d->worker = worker;
  d->mr_mode = info && info->domain_attr ? static_cast<uint64_t>(static_cast<unsigned>(info->domain_attr->mr_mode)) : 0;
  d->fid.fid.fclass = FI_CLASS_DOMAIN;
  d->fid.fid.context = context;
  d->fid.fid.ops = &g_domain_fi_ops;
  d->fid.ops = &g_domain_ops;
  d->fid.mr = &g_mr_ops;
  *domain = &d->fid;
  return 0;
}

}  // namespace ttemu::fi
