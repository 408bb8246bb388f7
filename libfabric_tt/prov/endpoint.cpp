// The endpoint (FI_EP_RDM and FI_EP_DGRAM): one worker core of the domain's chip, its region
// registered under a key, and the Messenger that moves its messages. Messages and tagged
// messages are here; RMA and atomics are in rma.cpp.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "libfabric_tt/prov/core_access.hpp"
#include "libfabric_tt/prov/objects.hpp"
#include "libfabric_tt/prov/region.hpp"

namespace ttemu::fi {

namespace {

constexpr size_t kQueueLimit = 1024;  // tx_attr->size: past it, FI_EAGAIN

Endpoint* ep_of(fid_ep* f) { return reinterpret_cast<Endpoint*>(f); }
Endpoint* ep_of(fid* f) { return reinterpret_cast<Endpoint*>(f); }

int ep_close(fid* f) {
  Endpoint* ep = ep_of(f);
  Domain* d = ep->domain;
  // What is queued still goes: the peer may be waiting for it (fi_pingpong's "fin"). The lock
  // is not held while waiting, and the CPU is given to the chips doing the work.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    {
      std::lock_guard guard(d->lock);
      if (!ep->messenger->busy()) break;
      ep->messenger->progress(ep->sink);
    }
    if (std::chrono::steady_clock::now() >= until) {
      warn(fmt::format("fi_close: endpoint {} closed with operations the fabric had not finished", to_string(ep->address)));
      break;
    }
    sched_yield();
  }
  std::lock_guard guard(d->lock);
  ep->messenger.reset();
  if (ep->address.key) tt_fabric_mr_deregister(ep->worker, ep->address.key);
  if (ep->own_worker) close_claimed(ep->worker);
  else d->worker_taken = false;
  if (ep->av) --ep->av->bound;
  if (ep->tx_cq) --ep->tx_cq->bound;
  if (ep->rx_cq) --ep->rx_cq->bound;
  --d->objects;
  d->endpoints.erase(std::remove(d->endpoints.begin(), d->endpoints.end(), ep), d->endpoints.end());
  fi_freeinfo(ep->info);
  delete ep;
  return 0;
}

int ep_bind(fid* f, fid* bfid, uint64_t flags) {
  Endpoint* ep = ep_of(f);
  std::lock_guard guard(ep->domain->lock);
  switch (bfid->fclass) {
    case FI_CLASS_AV:
      if (ep->av) --ep->av->bound;
      ep->av = reinterpret_cast<Av*>(bfid);
      ++ep->av->bound;
      return 0;
    case FI_CLASS_CQ: {
      auto* cq = reinterpret_cast<Cq*>(bfid);
      if (flags & FI_TRANSMIT) {
        if (ep->tx_cq) --ep->tx_cq->bound;
        ep->tx_cq = cq, ++cq->bound, ep->tx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
      }
      if (flags & FI_RECV) {
        if (ep->rx_cq) --ep->rx_cq->bound;
        ep->rx_cq = cq, ++cq->bound, ep->rx_selective = (flags & FI_SELECTIVE_COMPLETION) != 0;
      }
      return 0;
    }
    case FI_CLASS_CNTR: {
      auto* c = reinterpret_cast<Cntr*>(bfid);
      if (flags & (FI_REMOTE_READ | FI_REMOTE_WRITE)) return -FI_ENOSYS;  // the fabric does not tell the target
      if (flags & FI_SEND) ep->send_cntr = c;
      if (flags & FI_RECV) ep->recv_cntr = c;
      if (flags & FI_WRITE) ep->write_cntr = c;
      if (flags & FI_READ) ep->read_cntr = c;
      return 0;
    }
    case FI_CLASS_EQ:
      return 0;  // no connections, so no events
    default:
      return -FI_EINVAL;
  }
}

int ep_control(fid* f, int command, void* arg) {
  Endpoint* ep = ep_of(f);
  std::lock_guard guard(ep->domain->lock);
  switch (command) {
    case FI_ENABLE:
      if (!ep->av) return -FI_ENOAV;
      if (!ep->tx_cq && !ep->send_cntr && !ep->rx_cq && !ep->recv_cntr) return -FI_ENOCQ;
      return 0;
    case FI_GETOPSFLAG: {
      auto* flags = static_cast<uint64_t*>(arg);
      *flags = (*flags & FI_TRANSMIT) ? ep->tx_op_flags : ep->rx_op_flags;
      return 0;
    }
    case FI_SETOPSFLAG: {
      const uint64_t flags = *static_cast<uint64_t*>(arg);
      if (flags & FI_TRANSMIT) ep->tx_op_flags = flags & ~uint64_t{FI_TRANSMIT};
      else ep->rx_op_flags = flags & ~uint64_t{FI_RECV};
      return 0;
    }
    default:
      return -FI_ENOSYS;
  }
}

ssize_t ep_cancel(fid* f, void* context) {
  Endpoint* ep = ep_of(f);
  std::lock_guard guard(ep->domain->lock);
  return ep->messenger->cancel(context, ep->sink) ? 0 : -FI_ENOENT;
}

int ep_getopt(fid*, int, int, void*, size_t*) { return -FI_ENOPROTOOPT; }
int ep_setopt(fid*, int, int, const void*, size_t) { return -FI_ENOPROTOOPT; }
ssize_t ep_rx_size_left(fid_ep*) { return static_cast<ssize_t>(kQueueLimit); }
ssize_t ep_tx_size_left(fid_ep* f) {
  Endpoint* ep = ep_of(f);
  std::lock_guard guard(ep->domain->lock);
  return static_cast<ssize_t>(kQueueLimit - std::min(kQueueLimit, ep->messenger->queued_sends()));
}

int ep_getname(fid* f, void* addr, size_t* addrlen) {
  Endpoint* ep = ep_of(f);
  const size_t given = *addrlen;
  *addrlen = sizeof(Addr);
  if (given < sizeof(Addr)) return -FI_ETOOSMALL;
  std::memcpy(addr, &ep->address, sizeof(Addr));
  return 0;
}

std::vector<iovec> iovs(const iovec* iov, size_t count) { return {iov, iov + count}; }
std::vector<iovec> one(const void* buf, size_t len) { return {iovec{const_cast<void*>(buf), len}}; }

// `inject_call`: fi_inject and its kin, which never complete; FI_INJECT on fi_sendmsg only
// means the buffer is free at once.
ssize_t do_send(Endpoint* ep, std::vector<iovec> iov, fi_addr_t dest, uint64_t tag, uint64_t data, bool tagged, uint64_t flags,
                void* context, bool inject_call = false) {
  std::lock_guard guard(ep->domain->lock);
  const Addr* peer = lookup_peer(*ep, dest);
  if (!peer) return -FI_EINVAL;
  const size_t len = iov_bytes(iov);
  if (len > ep->info->ep_attr->max_msg_size) return -FI_EMSGSIZE;
  const bool inject = (flags & FI_INJECT) != 0;
  if (inject && len > ep->info->tx_attr->inject_size) return -FI_EMSGSIZE;
  if (ep->messenger->queued_sends() >= kQueueLimit) {
    ep->messenger->progress(ep->sink);
    return -FI_EAGAIN;
  }
  SendArgs a;
  a.to = *peer;
  a.iov = std::move(iov);
  a.tag = tag, a.data = data;
  a.tagged = tagged;
  a.has_data = (flags & FI_REMOTE_CQ_DATA) != 0;
  a.inject = inject;
  a.transmit_complete = (flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE)) != 0;
  a.report = !inject_call && (!ep->tx_selective || (flags & FI_COMPLETION));
  a.context = context;
  const int rc = ep->messenger->send(std::move(a));
  ep->messenger->progress(ep->sink);
  return rc;
}

ssize_t do_recv(Endpoint* ep, std::vector<iovec> iov, fi_addr_t src, uint64_t tag, uint64_t ignore, bool tagged, uint64_t flags,
                void* context) {
  std::lock_guard guard(ep->domain->lock);
  if (flags & (FI_CLAIM | FI_DISCARD)) return -FI_ENOSYS;
  RecvArgs r;
  r.iov = std::move(iov);
  if ((ep->info->caps & FI_DIRECTED_RECV) && src != FI_ADDR_UNSPEC) {
    const Addr* from = lookup_peer(*ep, src);
    if (!from) return -FI_EINVAL;
    r.from = *from;
  }
  r.tag = tag, r.ignore = ignore;
  r.tagged = tagged;
  r.peek = (flags & FI_PEEK) != 0;
  r.report = !ep->rx_selective || (flags & FI_COMPLETION);
  r.context = context;
  const int rc = ep->messenger->post_recv(std::move(r), ep->sink);
  ep->messenger->progress(ep->sink);
  return rc;
}

// fi_ops_msg
ssize_t msg_recv(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, void* ctx) {
  return do_recv(ep_of(e), one(buf, len), src, 0, 0, false, ep_of(e)->rx_op_flags, ctx);
}
ssize_t msg_recvv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src, void* ctx) {
  return do_recv(ep_of(e), iovs(iov, count), src, 0, 0, false, ep_of(e)->rx_op_flags, ctx);
}
ssize_t msg_recvmsg(fid_ep* e, const fi_msg* m, uint64_t flags) {
  return do_recv(ep_of(e), iovs(m->msg_iov, m->iov_count), m->addr, 0, 0, false, flags, m->context);
}
ssize_t msg_send(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest, void* ctx) {
  return do_send(ep_of(e), one(buf, len), dest, 0, 0, false, ep_of(e)->tx_op_flags, ctx);
}
ssize_t msg_sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest, void* ctx) {
  return do_send(ep_of(e), iovs(iov, count), dest, 0, 0, false, ep_of(e)->tx_op_flags, ctx);
}
ssize_t msg_sendmsg(fid_ep* e, const fi_msg* m, uint64_t flags) {
  return do_send(ep_of(e), iovs(m->msg_iov, m->iov_count), m->addr, 0, m->data, false, flags, m->context);
}
ssize_t msg_inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest) {
  return do_send(ep_of(e), one(buf, len), dest, 0, 0, false, FI_INJECT, nullptr, true);
}
ssize_t msg_senddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest, void* ctx) {
  return do_send(ep_of(e), one(buf, len), dest, 0, data, false, ep_of(e)->tx_op_flags | FI_REMOTE_CQ_DATA, ctx);
}
ssize_t msg_injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data, fi_addr_t dest) {
  return do_send(ep_of(e), one(buf, len), dest, 0, data, false, FI_INJECT | FI_REMOTE_CQ_DATA, nullptr, true);
}

// fi_ops_tagged
ssize_t tag_recv(fid_ep* e, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag, uint64_t ignore, void* ctx) {
  return do_recv(ep_of(e), one(buf, len), src, tag, ignore, true, ep_of(e)->rx_op_flags, ctx);
}
ssize_t tag_recvv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag, uint64_t ignore, void* ctx) {
  return do_recv(ep_of(e), iovs(iov, count), src, tag, ignore, true, ep_of(e)->rx_op_flags, ctx);
}
ssize_t tag_recvmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) {
  return do_recv(ep_of(e), iovs(m->msg_iov, m->iov_count), m->addr, m->tag, m->ignore, true, flags, m->context);
}
ssize_t tag_send(fid_ep* e, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag, void* ctx) {
  return do_send(ep_of(e), one(buf, len), dest, tag, 0, true, ep_of(e)->tx_op_flags, ctx);
}
ssize_t tag_sendv(fid_ep* e, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t tag, void* ctx) {
  return do_send(ep_of(e), iovs(iov, count), dest, tag, 0, true, ep_of(e)->tx_op_flags, ctx);
}
ssize_t tag_sendmsg(fid_ep* e, const fi_msg_tagged* m, uint64_t flags) {
  return do_send(ep_of(e), iovs(m->msg_iov, m->iov_count), m->addr, m->tag, m->data, true, flags, m->context);
}
ssize_t tag_inject(fid_ep* e, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) {
  return do_send(ep_of(e), one(buf, len), dest, tag, 0, true, FI_INJECT, nullptr, true);
}
ssize_t tag_senddata(fid_ep* e, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest, uint64_t tag, void* ctx) {
  return do_send(ep_of(e), one(buf, len), dest, tag, data, true, ep_of(e)->tx_op_flags | FI_REMOTE_CQ_DATA, ctx);
}
ssize_t tag_injectdata(fid_ep* e, const void* buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t tag) {
  return do_send(ep_of(e), one(buf, len), dest, tag, data, true, FI_INJECT | FI_REMOTE_CQ_DATA, nullptr, true);
}

fi_ops g_ep_fi_ops = fid_ops(ep_close, ep_bind, ep_control);

fi_ops_ep g_ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = ep_cancel,
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = TT_NOSYS(fi_ops_ep, tx_ctx),
    .rx_ctx = TT_NOSYS(fi_ops_ep, rx_ctx),
    .rx_size_left = ep_rx_size_left,
    .tx_size_left = ep_tx_size_left,
};

fi_ops_cm g_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = TT_NOSYS(fi_ops_cm, setname),
    .getname = ep_getname,
    .getpeer = TT_NOSYS(fi_ops_cm, getpeer),
    .connect = TT_NOSYS(fi_ops_cm, connect),
    .listen = TT_NOSYS(fi_ops_cm, listen),
    .accept = TT_NOSYS(fi_ops_cm, accept),
    .reject = TT_NOSYS(fi_ops_cm, reject),
    .shutdown = TT_NOSYS(fi_ops_cm, shutdown),
    .join = TT_NOSYS(fi_ops_cm, join),
};

fi_ops_msg g_msg_ops = {
    .size = sizeof(fi_ops_msg),
    .recv = msg_recv,
    .recvv = msg_recvv,
    .recvmsg = msg_recvmsg,
    .send = msg_send,
    .sendv = msg_sendv,
    .sendmsg = msg_sendmsg,
    .inject = msg_inject,
    .senddata = msg_senddata,
    .injectdata = msg_injectdata,
};

fi_ops_tagged g_tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv = tag_recv,
    .recvv = tag_recvv,
    .recvmsg = tag_recvmsg,
    .send = tag_send,
    .sendv = tag_sendv,
    .sendmsg = tag_sendmsg,
    .inject = tag_inject,
    .senddata = tag_senddata,
    .injectdata = tag_injectdata,
};

fi_ops_collective g_collective_ops = {
    .size = sizeof(fi_ops_collective),
    .barrier = TT_NOSYS(fi_ops_collective, barrier),
    .broadcast = TT_NOSYS(fi_ops_collective, broadcast),
    .alltoall = TT_NOSYS(fi_ops_collective, alltoall),
    .allreduce = TT_NOSYS(fi_ops_collective, allreduce),
    .allgather = TT_NOSYS(fi_ops_collective, allgather),
    .reduce_scatter = TT_NOSYS(fi_ops_collective, reduce_scatter),
    .reduce = TT_NOSYS(fi_ops_collective, reduce),
    .scatter = TT_NOSYS(fi_ops_collective, scatter),
    .gather = TT_NOSYS(fi_ops_collective, gather),
    .msg = TT_NOSYS(fi_ops_collective, msg),
    .barrier2 = TT_NOSYS(fi_ops_collective, barrier2),
};

}  // namespace

// Counters count every operation; a CQ gets the ones that asked for a completion, and errors.
void EndpointSink::transmit(const Completion& c) {
  Endpoint* ep = ep_;
  Cntr* cn = (c.flags & (FI_RMA | FI_ATOMIC)) ? ((c.flags & FI_READ) ? ep->read_cntr : ep->write_cntr) : ep->send_cntr;
  count(cn, c.err != 0);
  if (ep->tx_cq && (c.report || c.err)) push(*ep->tx_cq, c, FI_ADDR_NOTAVAIL);
}

void EndpointSink::receive(const Completion& c) {
  Endpoint* ep = ep_;
  if (c.counted) count(ep->recv_cntr, c.err != 0);
  if (ep->rx_cq && (c.report || c.err)) push(*ep->rx_cq, c, c.source && ep->av ? ep->av->find(*c.source) : FI_ADDR_NOTAVAIL);
}

int open_endpoint(fid_domain* domain, fi_info* info, fid_ep** out, void* context) {
  auto* d = reinterpret_cast<Domain*>(domain);
  if (!info || !info->ep_attr || (info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_DGRAM)) return -FI_EINVAL;
  std::lock_guard guard(d->lock);
  auto ep = std::make_unique<Endpoint>();
  ep->domain = d;
  if (!d->worker_taken) {
    ep->worker = d->worker;
    d->worker_taken = true;
  } else {
    // A further endpoint is a further worker: the next core after the domain's that no
    // provider holds.
    std::string why;
    ep->worker = open_claimed(d->binding, static_cast<uint16_t>(d->binding.core + 1), false, &why);
    if (!ep->worker) {
      warn("fi_endpoint: " + why);
      return -FI_EBUSY;
    }
    ep->own_worker = true;
  }
  auto fail = [&](const std::string& why) {
    warn(fmt::format("fi_endpoint on {}: {}", d->binding.chip(), why));
    if (ep->own_worker) close_claimed(ep->worker);
    else d->worker_taken = false;
    return -FI_ENOMEM;
  };
  const auto region = region_of(ep->worker);
  if (!region) return fail("the chip's DRAM has no room for this core's region");
  auto* memory = static_cast<uint8_t*>(tt_fabric_memory(ep->worker, *region, kRegion));
  if (!memory) return fail("the region is outside the chip's memory");
  uint64_t key = 0;
  if (const int rc = tt_fabric_mr_register(ep->worker, *region, kRegion, TT_FABRIC_REMOTE_READ | TT_FABRIC_REMOTE_WRITE, &key);
      rc != TT_FABRIC_OK) {
    return fail(fmt::format("registering its region: {}", tt_fabric_strerror(rc)));
  }
  const uint16_t core = static_cast<uint16_t>(tt_fabric_core_l1(ep->worker) / std::max<uint64_t>(1, tt_fabric_core_l1_size(ep->worker)));
  ep->address = Addr{kAddrMagic, d->binding.mesh, d->binding.device, core, 0, 0, *region, key};
  ep->messenger = std::make_unique<Messenger>(ep->worker, ep->address, *region, memory);
  ep->info = fi_dupinfo(info);
  ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
  ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
  ep->fid.fid.fclass = FI_CLASS_EP;
  ep->fid.fid.context = context;
  ep->fid.fid.ops = &g_ep_fi_ops;
  ep->fid.ops = &g_ep_ops;
  ep->fid.cm = &g_cm_ops;
  ep->fid.msg = &g_msg_ops;
  ep->fid.tagged = &g_tagged_ops;
  ep->fid.rma = &rma_ops;
  ep->fid.atomic = &atomic_ops;
  ep->fid.collective = &g_collective_ops;
  d->endpoints.push_back(ep.get());
  ++d->objects;
  *out = &ep.release()->fid;
  return 0;
}

}  // namespace ttemu::fi
