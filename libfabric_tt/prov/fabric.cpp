// The fabric object: the ttemu system as a whole (domains are its chips).
#include "libfabric_tt/prov/objects.hpp"

namespace ttemu::fi {

namespace {

int close_fabric(fid* f) {
  delete reinterpret_cast<Fabric*>(f);
  return 0;
}

int trywait(fid_fabric*, fid**, int) { return 0; }

fi_ops g_fabric_fi_ops = fid_ops(close_fabric);

fi_ops_fabric g_fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = open_domain,
    .passive_ep = TT_NOSYS(fi_ops_fabric, passive_ep),
    .eq_open = open_eq,
    .wait_open = TT_NOSYS(fi_ops_fabric, wait_open),
    .trywait = trywait,
    .domain2 = TT_NOSYS(fi_ops_fabric, domain2),
};

}  // namespace

int open_fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context) {
  auto* f = new Fabric;
  f->name = attr && attr->name ? attr->name : "ttemu";
  f->fid.fid.fclass = FI_CLASS_FABRIC;
  f->fid.fid.context = context;
  f->fid.fid.ops = &g_fabric_fi_ops;
  f->fid.ops = &g_fabric_ops;
  *fabric = &f->fid;
  return 0;
}

}  // namespace ttemu::fi
