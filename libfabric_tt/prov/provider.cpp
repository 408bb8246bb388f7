// The provider's entry point (fi_prov_ini, found by libfabric in $FI_PROVIDER_PATH) and
// fi_getinfo: what the provider offers, matched against the caller's hints.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <rdma/providers/fi_log.h>

#include "libfabric_tt/prov/objects.hpp"

namespace ttemu::fi {

namespace {

constexpr uint64_t kRdmCaps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ | FI_WRITE |
                              FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM |
                              FI_REMOTE_COMM;
constexpr uint64_t kDgramCaps = FI_MSG | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr size_t kRdmMaxMsg = size_t{1} << 30;
constexpr size_t kDgramMaxMsg = 64 << 10;
// Messages go in order after messages to the same peer, and RMA after RMA (one queue each, one
// route); a message and an RMA operation may pass each other.
constexpr uint64_t kOrder = FI_ORDER_SAS | FI_ORDER_WAW | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR;
constexpr uint64_t kRemoteCaps = FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

char* dup(const std::string& s) { return strdup(s.c_str()); }

// One offer for an endpoint type, or nullptr when the hints rule it out.
fi_info* offer(fi_ep_type type, const fi_info* hints, const Binding* b, uint32_t version) {
  uint64_t caps = type == FI_EP_RDM ? kRdmCaps : kDgramCaps;
  // Remote memory needs the chips' keys: a caller that does not take FI_MR_PROV_KEY gets no RMA.
  const int accepted = hints && hints->domain_attr ? hints->domain_attr->mr_mode : 0;
  const bool prov_key = FI_VERSION_GE(version, FI_VERSION(1, 5)) && (accepted & FI_MR_PROV_KEY);
  if (!prov_key) caps &= ~kRemoteCaps;
  const size_t max_msg = type == FI_EP_RDM ? kRdmMaxMsg : kDgramMaxMsg;
  if (hints) {
    if (hints->caps & ~caps) return nullptr;
    if (hints->addr_format != FI_FORMAT_UNSPEC) return nullptr;
    if (hints->ep_attr && hints->ep_attr->max_msg_size > max_msg) return nullptr;
    if (hints->domain_attr) {
      const auto* d = hints->domain_attr;
      if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO) return nullptr;
      if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_TABLE && d->av_type != FI_AV_MAP) return nullptr;
    }
  }
  fi_info* i = fi_allocinfo();
  if (!i) return nullptr;
  // What was asked for (a capability that changes behaviour, like FI_DIRECTED_RECV, only then),
  // with the send and receive directions its primary capabilities imply.
  if (hints && hints->caps) {
    caps = hints->caps;
    if (!(caps & (FI_SEND | FI_RECV))) caps |= FI_SEND | FI_RECV;
    if ((caps & (FI_RMA | FI_ATOMIC)) && !(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE))) {
      caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    }
    caps |= FI_LOCAL_COMM | FI_REMOTE_COMM;
  }
  i->caps = caps;
  i->mode = 0;
  i->addr_format = FI_FORMAT_UNSPEC;
  if (b) {
    auto* a = static_cast<Addr*>(calloc(1, sizeof(Addr)));
    *a = Addr{kAddrMagic, b->mesh, b->device, b->core, 0, 0, 0, 0};
    i->src_addr = a;
    i->src_addrlen = sizeof(Addr);
  }
  if (hints && hints->dest_addr && hints->dest_addrlen == sizeof(Addr)) {
    i->dest_addr = malloc(sizeof(Addr));
    std::memcpy(i->dest_addr, hints->dest_addr, sizeof(Addr));
    i->dest_addrlen = sizeof(Addr);
  }
  *i->tx_attr = fi_tx_attr{};
  i->tx_attr->caps = caps;
  i->tx_attr->msg_order = kOrder;
  i->tx_attr->comp_order = FI_ORDER_NONE;
  // The caller's default flags (e.g. FI_COMPLETION with FI_SELECTIVE_COMPLETION) are the endpoint's.
  if (hints && hints->tx_attr) i->tx_attr->op_flags = hints->tx_attr->op_flags;
  i->tx_attr->inject_size = 4096;
  i->tx_attr->size = 1024;
  i->tx_attr->iov_limit = 4;
  i->tx_attr->rma_iov_limit = 1;
  *i->rx_attr = fi_rx_attr{};
  i->rx_attr->caps = caps;
  i->rx_attr->msg_order = kOrder;
  i->rx_attr->comp_order = FI_ORDER_NONE;
  if (hints && hints->rx_attr) i->rx_attr->op_flags = hints->rx_attr->op_flags;
  i->rx_attr->size = 1024;
  i->rx_attr->iov_limit = 4;
  *i->ep_attr = fi_ep_attr{};
  i->ep_attr->type = type;
  i->ep_attr->protocol = FI_PROTO_UNSPEC;
  i->ep_attr->max_msg_size = max_msg;
  i->ep_attr->mem_tag_format = type == FI_EP_RDM ? ~uint64_t{0} : 0;  // all 64 bits are the tag's
  i->ep_attr->tx_ctx_cnt = 1;
  i->ep_attr->rx_ctx_cnt = 1;
  auto* d = i->domain_attr;
  *d = fi_domain_attr{};
  d->name = dup(b ? b->chip() : std::string(kName));
  d->threading = FI_THREAD_SAFE;
  d->control_progress = FI_PROGRESS_MANUAL;
  d->data_progress = FI_PROGRESS_MANUAL;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = hints && hints->domain_attr && hints->domain_attr->av_type != FI_AV_UNSPEC ? hints->domain_attr->av_type : FI_AV_TABLE;
  // Keys are the chip's (FI_MR_PROV_KEY) where the caller accepts that; remote addresses are
  // offsets into the registered window (no FI_MR_VIRT_ADDR).
  d->mr_mode = prov_key ? FI_MR_PROV_KEY : 0;
  d->mr_key_size = 8;
  d->cq_data_size = type == FI_EP_RDM ? 8 : 0;
  d->cq_cnt = 64;
  d->ep_cnt = 64;
  d->tx_ctx_cnt = 64;
  d->rx_ctx_cnt = 64;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->mr_cnt = 256;
  d->mr_iov_limit = 1;
  d->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
  i->fabric_attr->name = dup("ttemu");
  i->fabric_attr->prov_version = kVersion;
  i->fabric_attr->api_version = kApi;
  return i;
}

// libfabric's utility providers (ofi_rxd, ofi_rxm) ask core providers with this flag set when
// they look for one to layer over.
constexpr uint64_t kCoreProviderOnly = 1ULL << 59;

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints, fi_info** info) {
  (void)service;
  *info = nullptr;
  // Reliability is the fabric's (TT-link go-back-N, NACKs): no ofi_rxd over these endpoints.
  if (flags & kCoreProviderOnly) return -FI_ENODATA;
  const char* chip = node;
  if ((!chip || !*chip) && hints && hints->domain_attr && hints->domain_attr->name && parse_chip(hints->domain_attr->name)) {
    chip = hints->domain_attr->name;  // a domain named after a chip binds to it
  }
  if (node && *node && !parse_chip(node)) return -FI_ENODATA;  // an address of another provider
  std::string why;
  const auto binding = resolve_binding(chip, &why);
  const fi_ep_type wanted = hints && hints->ep_attr ? hints->ep_attr->type : FI_EP_UNSPEC;
  fi_info* tail = nullptr;
  for (fi_ep_type type : {FI_EP_RDM, FI_EP_DGRAM}) {
    if (wanted != FI_EP_UNSPEC && wanted != type) continue;
    fi_info* i = offer(type, hints, binding ? &*binding : nullptr, version);
    if (!i) continue;
    (tail ? tail->next : *info) = i;
    tail = i;
  }
  if (!*info) return -FI_ENODATA;
  if (!binding) warn(why + " (fi_domain will fail)");
  return 0;
}

void cleanup() {}

}  // namespace

struct fi_provider g_provider = {
    .version = kVersion,
    .fi_version = kApi,
    .context = {},
    .name = kName,
    .getinfo = getinfo,
    .fabric = open_fabric,
    .cleanup = cleanup,
};

void warn(const std::string& what) { FI_WARN(&g_provider, FI_LOG_CORE, "%s\n", what.c_str()); }

const char* provider_strerror(int prov_errno, char* buf, size_t len) {
  const char* s = fi_strerror(prov_errno);
  if (buf && len) {
    std::strncpy(buf, s, len - 1);
    buf[len - 1] = 0;
  }
  return s;
}

void poll_pause(int polls) {
  if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace ttemu::fi

extern "C" __attribute__((visibility("default"))) struct fi_provider* fi_prov_ini(void) { return &ttemu::fi::g_provider; }
