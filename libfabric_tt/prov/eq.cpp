// The event queue: an RDM or DGRAM endpoint has no connections, so nothing posts here but
// fi_eq_write; it exists because clients (fi_pingpong) open one.
#include <chrono>
#include <cstring>
#include <thread>

#include "libfabric_tt/prov/objects.hpp"

namespace ttemu::fi {

namespace {

Eq* eq_of(fid_eq* e) { return reinterpret_cast<Eq*>(e); }

int close_eq(fid* f) {
  delete reinterpret_cast<Eq*>(f);
  return 0;
}

ssize_t eq_read(fid_eq* fe, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  Eq* eq = eq_of(fe);
  std::lock_guard lock(eq->lock);
  if (eq->events.empty()) return -FI_EAGAIN;
  auto& e = eq->events.front();
  if (len < e.bytes.size()) return -FI_ETOOSMALL;
  if (event) *event = e.event;
  std::memcpy(buf, e.bytes.data(), e.bytes.size());
  const auto n = static_cast<ssize_t>(e.bytes.size());
  if (!(flags & FI_PEEK)) eq->events.pop_front();
  return n;
}

ssize_t eq_readerr(fid_eq*, fi_eq_err_entry*, uint64_t) { return -FI_EAGAIN; }

ssize_t eq_write(fid_eq* fe, uint32_t event, const void* buf, size_t len, uint64_t) {
  Eq* eq = eq_of(fe);
  std::lock_guard lock(eq->lock);
  const auto* b = static_cast<const uint8_t*>(buf);
  eq->events.push_back({event, std::vector<uint8_t>(b, b + len)});
  return static_cast<ssize_t>(len);
}

ssize_t eq_sread(fid_eq* fe, uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  for (;;) {
    const ssize_t n = eq_read(fe, event, buf, len, flags);
    if (n != -FI_EAGAIN) return n;
    if (timeout >= 0 && std::chrono::steady_clock::now() >= until) return -FI_EAGAIN;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // nothing but fi_eq_write wakes an EQ here
  }
}

const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) { return provider_strerror(prov_errno, buf, len); }

fi_ops g_eq_fi_ops = fid_ops(close_eq);

fi_ops_eq g_eq_ops = {
    .size = sizeof(fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

}  // namespace

int open_eq(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context) {
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
  auto* e = new Eq;
  e->fabric = reinterpret_cast<Fabric*>(fabric);
  e->fid.fid.fclass = FI_CLASS_EQ;
  e->fid.fid.context = context;
  e->fid.fid.ops = &g_eq_fi_ops;
  e->fid.ops = &g_eq_ops;
  *eq = &e->fid;
  return 0;
}

}  // namespace ttemu::fi
