// Counters: completions counted per kind of operation (fi_cntr), read after progress.
#include <algorithm>
#include <chrono>

#include "libfabric_tt/prov/objects.hpp"

namespace ttemu::fi {

namespace {

Cntr* cntr_of(fid_cntr* f) { return reinterpret_cast<Cntr*>(f); }

int close_cntr(fid* f) {
  Cntr* c = reinterpret_cast<Cntr*>(f);
  {
    std::lock_guard guard(c->domain->lock);
    --c->domain->objects;
  }
  delete c;
  return 0;
}

uint64_t cntr_read(fid_cntr* f) {
  Cntr* c = cntr_of(f);
  c->domain->progress();
  std::lock_guard guard(c->domain->lock);
  return c->value;
}
uint64_t cntr_readerr(fid_cntr* f) {
  Cntr* c = cntr_of(f);
  c->domain->progress();
  std::lock_guard guard(c->domain->lock);
  return c->errors;
}
int cntr_add(fid_cntr* f, uint64_t v) {
  std::lock_guard guard(cntr_of(f)->domain->lock);
  cntr_of(f)->value += v;
  return 0;
}
int cntr_set(fid_cntr* f, uint64_t v) {
  std::lock_guard guard(cntr_of(f)->domain->lock);
  cntr_of(f)->value = v;
  return 0;
}
int cntr_adderr(fid_cntr* f, uint64_t v) {
  std::lock_guard guard(cntr_of(f)->domain->lock);
  cntr_of(f)->errors += v;
  return 0;
}
int cntr_seterr(fid_cntr* f, uint64_t v) {
  std::lock_guard guard(cntr_of(f)->domain->lock);
  cntr_of(f)->errors = v;
  return 0;
}
int cntr_wait(fid_cntr* f, uint64_t threshold, int timeout) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  const uint64_t errors = cntr_readerr(f);
  for (int spins = 0;; ++spins) {
    if (cntr_read(f) >= threshold) return 0;
    if (cntr_readerr(f) != errors) return -FI_EAVAIL;
    if (timeout >= 0 && std::chrono::steady_clock::now() >= until) return -FI_ETIMEDOUT;
    poll_pause(spins);
  }
}

fi_ops g_cntr_fi_ops = fid_ops(close_cntr);

fi_ops_cntr g_cntr_ops = {
    .size = sizeof(fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

}  // namespace

void count(Cntr* cntr, bool error) {
  if (!cntr) return;
  ++(error ? cntr->errors : cntr->value);
}

int open_cntr(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context) {
  if (attr && attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) return -FI_ENOSYS;
  auto* c = new Cntr;
  c->domain = reinterpret_cast<Domain*>(domain);
  c->fid.fid.fclass = FI_CLASS_CNTR;
  c->fid.fid.context = context;
  c->fid.fid.ops = &g_cntr_fi_ops;
  c->fid.ops = &g_cntr_ops;
  {
    std::lock_guard guard(c->domain->lock);
    ++c->domain->objects;
  }
  *cntr = &c->fid;
  return 0;
}

}  // namespace ttemu::fi
