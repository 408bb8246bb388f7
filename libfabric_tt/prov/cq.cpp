// The completion queue, in the formats fabtests and Open MPI ask for (context, msg, data,
// tagged). Reading it is what drives progress (FI_PROGRESS_MANUAL): every read first lets the
// domain's endpoints move data.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "libfabric_tt/prov/objects.hpp"

namespace ttemu::fi {

namespace {

Cq* cq_of(fid_cq* f) { return reinterpret_cast<Cq*>(f); }

int close_cq(fid* f) {
  Cq* cq = reinterpret_cast<Cq*>(f);
  {
    std::lock_guard guard(cq->domain->lock);
    if (cq->bound > 0) return -FI_EBUSY;  // its endpoints first
    --cq->domain->objects;
  }
  delete cq;
  return 0;
}

size_t entry_size(fi_cq_format f) {
  switch (f) {
    case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
    case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
    default: return sizeof(fi_cq_tagged_entry);
  }
}

ssize_t cq_readfrom(fid_cq* fc, void* buf, size_t count, fi_addr_t* src) {
  Cq* cq = cq_of(fc);
  cq->domain->progress();
  std::lock_guard guard(cq->domain->lock);
  if (!cq->errors.empty()) return -FI_EAVAIL;  // an error is read before anything after it
  if (cq->entries.empty()) return -FI_EAGAIN;
  const size_t size = entry_size(cq->format);
  size_t n = 0;
  for (; n < count && !cq->entries.empty(); ++n) {
    // The tagged entry's fields start with every smaller format's, in the same order.
    std::memcpy(static_cast<uint8_t*>(buf) + n * size, &cq->entries.front().e, size);
    if (src) src[n] = cq->entries.front().src;
    cq->entries.pop_front();
  }
  return static_cast<ssize_t>(n);
}

ssize_t cq_read(fid_cq* fc, void* buf, size_t count) { return cq_readfrom(fc, buf, count, nullptr); }

ssize_t cq_readerr(fid_cq* fc, fi_cq_err_entry* buf, uint64_t) {
  Cq* cq = cq_of(fc);
  std::lock_guard guard(cq->domain->lock);
  if (cq->errors.empty()) return -FI_EAGAIN;
  const fi_cq_err_entry e = cq->errors.front();
  cq->errors.pop_front();
  // (An application may pass err_data of its own; this provider has none to put there.)
  void* user_err_data = buf->err_data;
  *buf = e;
  buf->err_data = user_err_data;
  buf->err_data_size = 0;
  return 1;
}

ssize_t cq_sreadfrom(fid_cq* fc, void* buf, size_t count, fi_addr_t* src, const void*, int timeout) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  for (int spins = 0;; ++spins) {
    const ssize_t n = cq_readfrom(fc, buf, count, src);
    if (n != -FI_EAGAIN) return n;
    if (timeout >= 0 && std::chrono::steady_clock::now() >= until) return -FI_EAGAIN;
    poll_pause(spins);
  }
}

ssize_t cq_sread(fid_cq* fc, void* buf, size_t count, const void* cond, int timeout) {
  return cq_sreadfrom(fc, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq*) { return 0; }

const char* cq_strerror(fid_cq*, int prov_errno, const void*, char* buf, size_t len) { return provider_strerror(prov_errno, buf, len); }

fi_ops g_cq_fi_ops = fid_ops(close_cq);

fi_ops_cq g_cq_ops = {
    .size = sizeof(fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

}  // namespace

void push(Cq& cq, const Completion& c, fi_addr_t src) {
  if (c.err) {
    fi_cq_err_entry e{};
    e.op_context = c.context;
    e.flags = c.flags;
    e.len = c.len;
    e.buf = c.buf;
    e.data = c.data;
    e.tag = c.tag;
    e.olen = c.olen;
    e.err = c.err;
    e.prov_errno = c.err;
    cq.errors.push_back(e);
    return;
  }
  cq.entries.push_back({fi_cq_tagged_entry{c.context, c.flags, c.len, c.buf, c.data, c.tag}, src});
}

int open_cq(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context) {
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
  if (attr && attr->format != FI_CQ_FORMAT_UNSPEC && attr->format != FI_CQ_FORMAT_CONTEXT && attr->format != FI_CQ_FORMAT_MSG &&
      attr->format != FI_CQ_FORMAT_DATA && attr->format != FI_CQ_FORMAT_TAGGED) {
    return -FI_ENOSYS;
  }
  auto* q = new Cq;
  q->domain = reinterpret_cast<Domain*>(domain);
  q->format = attr && attr->format != FI_CQ_FORMAT_UNSPEC ? attr->format : FI_CQ_FORMAT_CONTEXT;
  if (attr && attr->size) q->size = attr->size;
  q->fid.fid.fclass = FI_CLASS_CQ;
  q->fid.fid.context = context;
  q->fid.fid.ops = &g_cq_fi_ops;
  q->fid.ops = &g_cq_ops;
  {
    std::lock_guard guard(q->domain->lock);
    ++q->domain->objects;
  }
  *cq = &q->fid;
  return 0;
}

}  // namespace ttemu::fi
