// The provider's libfabric objects (one file each: fabric.cpp, domain.cpp, endpoint.cpp, av.cpp,
// cq.cpp, cntr.cpp, eq.cpp, mr.cpp). Each struct starts with its libfabric fid, so the pointer
// libfabric hands back is the object. A domain is one chip of a running ttemu system; an
// endpoint is one worker (a Tensix core) of it, driving a Messenger.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include <atomic>
#include <deque>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "libfabric_tt/prov/binding.hpp"
#include "libfabric_tt/prov/messenger.hpp"

namespace ttemu::fi {

extern struct fi_provider g_provider;
inline constexpr const char* kName = "tt";
inline constexpr uint32_t kVersion = FI_VERSION(1, 0);
inline constexpr uint32_t kApi = FI_VERSION(1, 17);

// Every op libfabric may call on an object and this provider does not do: -FI_ENOSYS.
template <typename F>
struct NoSys;
template <typename R, typename... A>
struct NoSys<R (*)(A...)> {
  static R fn(A...) { return static_cast<R>(-FI_ENOSYS); }
};
#define TT_NOSYS(type, member) (&::ttemu::fi::NoSys<decltype(type::member)>::fn)

// An object's fi_ops: its close, and bind, control and ops_open where it has them.
constexpr fi_ops fid_ops(decltype(fi_ops::close) close, decltype(fi_ops::bind) bind = TT_NOSYS(fi_ops, bind),
                         decltype(fi_ops::control) control = TT_NOSYS(fi_ops, control),
                         decltype(fi_ops::ops_open) ops_open = TT_NOSYS(fi_ops, ops_open)) {
  return {.size = sizeof(fi_ops), .close = close, .bind = bind, .control = control, .ops_open = ops_open,
          .tostr = TT_NOSYS(fi_ops, tostr), .ops_set = TT_NOSYS(fi_ops, ops_set)};
}

// Logs a one-line warning through libfabric's log (FI_LOG_LEVEL=warn shows it).
void warn(const std::string& what);
// fi_strerror(prov_errno), also copied into buf (the CQ's and EQ's strerror).
const char* provider_strerror(int prov_errno, char* buf, size_t len);
// A blocking read's pause between polls: none while traffic may be flowing, then a nap that
// costs (almost) no CPU.
void poll_pause(int polls);

struct Domain;
struct Endpoint;

struct Fabric {
  fid_fabric fid{};
  std::string name;
};

struct Av {
  fid_av fid{};
  Domain* domain = nullptr;
  fi_av_type type = FI_AV_TABLE;
  std::vector<Addr> entries;  // fi_addr_t = index, for FI_AV_TABLE and FI_AV_MAP alike
  std::vector<bool> live;
  std::unordered_map<uint64_t, fi_addr_t> by_endpoint;  // (mesh, device, core, index) -> its entry
  int bound = 0;                                        // endpoints bound to it
  fi_addr_t find(const Addr& a) const;  // FI_ADDR_NOTAVAIL when not inserted
};

struct Cq;
struct Cntr;

struct Eq {
  fid_eq fid{};
  Fabric* fabric = nullptr;
  std::mutex lock;
  struct Event {
    uint32_t event;
    std::vector<uint8_t> bytes;
  };
  std::deque<Event> events;
};

struct Mr {
  fid_mr fid{};
  Domain* domain = nullptr;
  uint64_t window_key = 0;  // the chip's key for a remotely accessible window, 0 otherwise
};

struct Domain {
  fid_domain fid{};
  Fabric* fabric = nullptr;
  std::recursive_mutex lock;  // FI_THREAD_SAFE: every call of an object of this domain takes it
  Binding binding;
  tt_fabric* worker = nullptr;  // the first endpoint's worker; also registers memory
  bool worker_taken = false;
  uint64_t mr_mode = 0;
  std::vector<Endpoint*> endpoints;
  int objects = 0;  // open endpoints, AVs, CQs, counters and MRs: the domain closes after them
  std::atomic<uint32_t> idle_polls{0};
  void progress();  // every endpoint of the domain; an idle poll gives the CPU to the chips
};

struct Cq {
  fid_cq fid{};
  Domain* domain = nullptr;
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  struct Entry {
    fi_cq_tagged_entry e;
    fi_addr_t src;
  };
  std::deque<Entry> entries;
  std::deque<fi_cq_err_entry> errors;
  size_t size = 1024;
  int bound = 0;  // endpoints bound to it
};

struct Cntr {
  fid_cntr fid{};
  Domain* domain = nullptr;
  uint64_t value = 0, errors = 0;
};

struct Endpoint;
// Where an endpoint's Messenger reports (kept apart so that the endpoint starts with its fid).
class EndpointSink final : public Sink {
 public:
  explicit EndpointSink(Endpoint* ep) : ep_(ep) {}
  void transmit(const Completion& c) override;
  void receive(const Completion& c) override;

 private:
  Endpoint* ep_;
};

struct Endpoint {
  fid_ep fid{};
  Domain* domain = nullptr;
  fi_info* info = nullptr;
  Av* av = nullptr;
  Cq* tx_cq = nullptr;
  Cq* rx_cq = nullptr;
  bool tx_selective = false, rx_selective = false;
  Cntr* send_cntr = nullptr;
  Cntr* recv_cntr = nullptr;
  Cntr* write_cntr = nullptr;
  Cntr* read_cntr = nullptr;
  uint64_t tx_op_flags = 0, rx_op_flags = 0;
  tt_fabric* worker = nullptr;
  bool own_worker = false;
  std::unique_ptr<Messenger> messenger;  // from fi_endpoint on
  Addr address{};
  EndpointSink sink{this};
};

// Object constructors (one per file), as libfabric's ops tables call them.
int open_fabric(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
int open_eq(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context);
int open_domain(fid_fabric* fabric, fi_info* info, fid_domain** domain, void* context);
int open_av(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context);
int open_cq(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context);
int open_cntr(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context);
int open_endpoint(fid_domain* domain, fi_info* info, fid_ep** ep, void* context);
int register_mr(fid* fid, const void* buf, size_t len, uint64_t access, uint64_t offset, uint64_t requested_key, uint64_t flags,
                fid_mr** mr, void* context);
int register_mr_v(fid* fid, const iovec* iov, size_t count, uint64_t access, uint64_t offset, uint64_t requested_key,
                  uint64_t flags, fid_mr** mr, void* context);
int register_mr_attr(fid* fid, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr);
int query_atomic(fid_domain* domain, fi_datatype datatype, fi_op op, fi_atomic_attr* attr, uint64_t flags);
extern fi_ops_rma rma_ops;
extern fi_ops_atomic atomic_ops;
void push(Cq& cq, const Completion& c, fi_addr_t src);
void count(Cntr* cntr, bool error);

// The peer an fi_addr_t names in the endpoint's AV, or nullptr.
const Addr* lookup_peer(const Endpoint& ep, fi_addr_t addr);

}  // namespace ttemu::fi
