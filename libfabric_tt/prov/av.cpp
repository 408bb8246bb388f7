// The address vector: provider addresses (mailbox.hpp's Addr) by fi_addr_t, which is the index
// of the entry for FI_AV_TABLE and FI_AV_MAP alike.
#include <cstring>

#include <fmt/format.h>

#include "libfabric_tt/prov/objects.hpp"

namespace ttemu::fi {

namespace {
uint64_t endpoint_key(const Addr& a) {
  return uint64_t{a.mesh} << 48 | uint64_t{a.device} << 32 | uint64_t{a.core} << 16 | a.index;
}
}  // namespace

fi_addr_t Av::find(const Addr& a) const {
  const auto it = by_endpoint.find(endpoint_key(a));
  return it == by_endpoint.end() ? FI_ADDR_NOTAVAIL : it->second;
}

namespace {

Av* av_of(fid_av* f) { return reinterpret_cast<Av*>(f); }

int close_av(fid* f) {
  Av* av = reinterpret_cast<Av*>(f);
  {
    std::lock_guard guard(av->domain->lock);
    if (av->bound > 0) return -FI_EBUSY;  // its endpoints first
    --av->domain->objects;
  }
  delete av;
  return 0;
}

int av_insert(fid_av* fa, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t, void*) {
  Av* av = av_of(fa);
  std::lock_guard guard(av->domain->lock);
  int done = 0;
  for (size_t i = 0; i < count; ++i) {
    Addr a;
    std::memcpy(&a, static_cast<const uint8_t*>(addr) + i * sizeof(Addr), sizeof a);
    if (a.magic != kAddrMagic) {
      warn(fmt::format("fi_av_insert: entry {} is not a tt provider address", i));
      if (fi_addr) fi_addr[i] = FI_ADDR_NOTAVAIL;
      continue;
    }
    av->entries.push_back(a);
    av->live.push_back(true);
    av->by_endpoint.emplace(endpoint_key(a), av->entries.size() - 1);  // (the first entry of an endpoint names it)
    if (fi_addr) fi_addr[i] = av->entries.size() - 1;
    ++done;
  }
  return done;
}

int av_remove(fid_av* fa, fi_addr_t* fi_addr, size_t count, uint64_t) {
  Av* av = av_of(fa);
  std::lock_guard guard(av->domain->lock);
  for (size_t i = 0; i < count; ++i) {
    if (fi_addr[i] >= av->entries.size()) return -FI_EINVAL;
    av->live[fi_addr[i]] = false;
    const auto it = av->by_endpoint.find(endpoint_key(av->entries[fi_addr[i]]));
    if (it != av->by_endpoint.end() && it->second == fi_addr[i]) av->by_endpoint.erase(it);
  }
  return 0;
}

int av_lookup(fid_av* fa, fi_addr_t fi_addr, void* addr, size_t* addrlen) {
  Av* av = av_of(fa);
  std::lock_guard guard(av->domain->lock);
  if (fi_addr >= av->entries.size() || !av->live[fi_addr]) return -FI_EINVAL;
  std::memcpy(addr, &av->entries[fi_addr], std::min(*addrlen, sizeof(Addr)));
  *addrlen = sizeof(Addr);
  return 0;
}

const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) {
  Addr a;
  std::memcpy(&a, addr, sizeof a);
  const std::string s = a.magic == kAddrMagic ? "tt://" + to_string(a) : std::string("tt://(not a tt address)");
  if (buf && *len) {
    std::strncpy(buf, s.c_str(), *len - 1);
    buf[*len - 1] = 0;
  }
  *len = s.size() + 1;
  return buf;
}

fi_ops g_av_fi_ops = fid_ops(close_av);

fi_ops_av g_av_ops = {
    .size = sizeof(fi_ops_av),
    .insert = av_insert,
    .insertsvc = TT_NOSYS(fi_ops_av, insertsvc),
    .insertsym = TT_NOSYS(fi_ops_av, insertsym),
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
    .av_set = TT_NOSYS(fi_ops_av, av_set),
};

}  // namespace

int open_av(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context) {
  if (attr && attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE && attr->type != FI_AV_MAP) return -FI_EINVAL;
  if (attr && (attr->flags & FI_EVENT)) return -FI_ENOSYS;  // no asynchronous inserts
  auto* a = new Av;
  a->domain = reinterpret_cast<Domain*>(domain);
  a->type = attr && attr->type != FI_AV_UNSPEC ? attr->type : FI_AV_TABLE;
  a->fid.fid.fclass = FI_CLASS_AV;
  a->fid.fid.context = context;
  a->fid.fid.ops = &g_av_fi_ops;
  a->fid.ops = &g_av_ops;
  {
    std::lock_guard guard(a->domain->lock);
    ++a->domain->objects;
  }
  *av = &a->fid;
  return 0;
}

const Addr* lookup_peer(const Endpoint& ep, fi_addr_t addr) {
  if (!ep.av || addr >= ep.av->entries.size() || !ep.av->live[addr]) return nullptr;
  return &ep.av->entries[addr];
}

}  // namespace ttemu::fi
