// RMA and atomics on the fabric's own RDMA: fi_write / fi_read are the fabric's writes and
// reads into a peer's registered window (remote address = offset in it, key = its key), and
// the atomics that map: FI_SUM on FI_UINT32 (the fabric's atomic increment) and its fetching
// form (read-increment), FI_ATOMIC_READ as a fetching add of 0.
#include <cstring>
#include <memory>

#include "libfabric_tt/prov/objects.hpp"

namespace ttemu::fi {

namespace {

Endpoint* ep_of(fid_ep* f) { return reinterpret_cast<Endpoint*>(f); }

// `inject_call`: fi_inject_write and fi_inject_atomic, which never complete; FI_INJECT on a
// *msg call only means the buffer is free at once.
ssize_t issue(Endpoint* ep, RmaArgs a, fi_addr_t peer, uint64_t flags, bool inject_call = false) {
  std::lock_guard guard(ep->domain->lock);
  const Addr* p = lookup_peer(*ep, peer);
  if (!p) return -FI_EINVAL;
  // Remote memory is reached only through a window's key (chip keys are never 0).
  if (a.key == 0) return -FI_EINVAL;
  a.peer = *p;
  a.report = !inject_call && (!ep->tx_selective || (flags & FI_COMPLETION));
  a.inject = (flags & FI_INJECT) != 0;
  const int rc = ep->messenger->rma(std::move(a));
  ep->messenger->progress(ep->sink);
  return rc;
}

RmaArgs args(RmaArgs::Op op, std::vector<iovec> iov, uint64_t addr, uint64_t key, void* ctx) {
  RmaArgs a;
  a.op = op;
  a.iov = std::move(iov);
  a.remote_addr = addr;
  a.key = key;
  a.context = ctx;
  return a;
}

ssize_t rma_read(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr, uint64_t key, void* ctx) {
  return issue(ep_of(e), args(RmaArgs::kRead, {iovec{buf, len}}, addr, key, ctx), src, ep_of(e)->tx_op_flags);
}
ssize_t rma_readv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t addr, uint64_t key, void* ctx) {
  return issue(ep_of(e), args(RmaArgs::kRead, {iov, iov + count}, addr, key, ctx), src, ep_of(e)->tx_op_flags);
}
ssize_t rma_readmsg(fid_ep* e, const fi_msg_rma* m, uint64_t flags) {
  if (m->rma_iov_count != 1) return -FI_EINVAL;
  return issue(ep_of(e), args(RmaArgs::kRead, {m->msg_iov, m->msg_iov + m->iov_count}, m->rma_iov[0].addr, m->rma_iov[0].key, m->context),
               m->addr, flags);
}
ssize_t rma_write(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dst, uint64_t addr, uint64_t key, void* ctx) {
  return issue(ep_of(e), args(RmaArgs::kWrite, {iovec{const_cast<void*>(buf), len}}, addr, key, ctx), dst, ep_of(e)->tx_op_flags);
}
ssize_t rma_writev(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dst, uint64_t addr, uint64_t key, void* ctx) {
  return issue(ep_of(e), args(RmaArgs::kWrite, {iov, iov + count}, addr, key, ctx), dst, ep_of(e)->tx_op_flags);
}
ssize_t rma_writemsg(fid_ep* e, const fi_msg_rma* m, uint64_t flags) {
  if (m->rma_iov_count != 1) return -FI_EINVAL;
  if (flags & FI_REMOTE_CQ_DATA) return -FI_ENOSYS;
  return issue(ep_of(e), args(RmaArgs::kWrite, {m->msg_iov, m->msg_iov + m->iov_count}, m->rma_iov[0].addr, m->rma_iov[0].key, m->context),
               m->addr, flags);
}
ssize_t rma_inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dst, uint64_t addr, uint64_t key) {
  return issue(ep_of(e), args(RmaArgs::kWrite, {iovec{const_cast<void*>(buf), len}}, addr, key, nullptr), dst, FI_INJECT, true);
}

bool mapped(fi_datatype type, fi_op op, bool fetch) {
  return type == FI_UINT32 && (op == FI_SUM || (fetch && op == FI_ATOMIC_READ));
}

ssize_t atomic_write(fid_ep* e, const void* buf, size_t count, void*, fi_addr_t dst, uint64_t addr, uint64_t key, fi_datatype type,
                     fi_op op, void* ctx) {
  if (!mapped(type, op, false) || count != 1) return -FI_EOPNOTSUPP;
  RmaArgs a = args(RmaArgs::kAtomicAdd, {}, addr, key, ctx);
  std::memcpy(&a.operand, buf, 4);
  return issue(ep_of(e), std::move(a), dst, ep_of(e)->tx_op_flags);
}
ssize_t atomic_writemsg(fid_ep* e, const fi_msg_atomic* m, uint64_t flags) {
  if (m->iov_count != 1 || m->rma_iov_count != 1) return -FI_EINVAL;
  if (!mapped(m->datatype, m->op, false) || m->msg_iov[0].count != 1) return -FI_EOPNOTSUPP;
  RmaArgs a = args(RmaArgs::kAtomicAdd, {}, m->rma_iov[0].addr, m->rma_iov[0].key, m->context);
  std::memcpy(&a.operand, m->msg_iov[0].addr, 4);
  return issue(ep_of(e), std::move(a), m->addr, flags);
}
ssize_t atomic_inject(fid_ep* e, const void* buf, size_t count, fi_addr_t dst, uint64_t addr, uint64_t key, fi_datatype type, fi_op op) {
  if (!mapped(type, op, false) || count != 1) return -FI_EOPNOTSUPP;
  RmaArgs a = args(RmaArgs::kAtomicAdd, {}, addr, key, nullptr);
  std::memcpy(&a.operand, buf, 4);
  return issue(ep_of(e), std::move(a), dst, FI_INJECT, true);
}
ssize_t atomic_readwrite(fid_ep* e, const void* buf, size_t count, void*, void* result, void*, fi_addr_t dst, uint64_t addr,
                         uint64_t key, fi_datatype type, fi_op op, void* ctx) {
  if (!mapped(type, op, true) || count != 1) return -FI_EOPNOTSUPP;
  RmaArgs a = args(RmaArgs::kFetchAdd, {}, addr, key, ctx);
  if (op == FI_SUM) std::memcpy(&a.operand, buf, 4);
  a.result = result;
  return issue(ep_of(e), std::move(a), dst, ep_of(e)->tx_op_flags);
}
int atomic_writevalid(fid_ep*, fi_datatype type, fi_op op, size_t* count) {
  if (!mapped(type, op, false)) return -FI_EOPNOTSUPP;
  if (count) *count = 1;
  return 0;
}
int atomic_readwritevalid(fid_ep*, fi_datatype type, fi_op op, size_t* count) {
  if (!mapped(type, op, true)) return -FI_EOPNOTSUPP;
  if (count) *count = 1;
  return 0;
}
int atomic_compwritevalid(fid_ep*, fi_datatype, fi_op, size_t*) { return -FI_EOPNOTSUPP; }

}  // namespace

fi_ops_rma rma_ops = {
    .size = sizeof(fi_ops_rma),
    .read = rma_read,
    .readv = rma_readv,
    .readmsg = rma_readmsg,
    .write = rma_write,
    .writev = rma_writev,
    .writemsg = rma_writemsg,
    .inject = rma_inject,
    .writedata = TT_NOSYS(fi_ops_rma, writedata),
    .injectdata = TT_NOSYS(fi_ops_rma, injectdata),
};

fi_ops_atomic atomic_ops = {
    .size = sizeof(fi_ops_atomic),
    .write = atomic_write,
    .writev = TT_NOSYS(fi_ops_atomic, writev),
    .writemsg = atomic_writemsg,
    .inject = atomic_inject,
    .readwrite = atomic_readwrite,
    .readwritev = TT_NOSYS(fi_ops_atomic, readwritev),
    .readwritemsg = TT_NOSYS(fi_ops_atomic, readwritemsg),
    .compwrite = TT_NOSYS(fi_ops_atomic, compwrite),
    .compwritev = TT_NOSYS(fi_ops_atomic, compwritev),
    .compwritemsg = TT_NOSYS(fi_ops_atomic, compwritemsg),
    .writevalid = atomic_writevalid,
    .readwritevalid = atomic_readwritevalid,
    .compwritevalid = atomic_compwritevalid,
};

int query_atomic(fid_domain*, fi_datatype type, fi_op op, fi_atomic_attr* attr, uint64_t flags) {
  if (flags & FI_COMPARE_ATOMIC) return -FI_EOPNOTSUPP;
  if (!mapped(type, op, (flags & FI_FETCH_ATOMIC) != 0)) return -FI_EOPNOTSUPP;
  if (attr) attr->size = 4, attr->count = 1;
  return 0;
}

}  // namespace ttemu::fi
