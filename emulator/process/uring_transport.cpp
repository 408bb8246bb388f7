#include "emulator/process/uring_transport.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::process {

namespace {

constexpr unsigned kQueueDepth = 512;
constexpr unsigned kBufCount = 64;  // provided receive buffers (a power of two)
constexpr size_t kBufSize = 65536 + 256;  // a datagram, the recvmsg header and the source address
constexpr uint16_t kGroup = 1;
constexpr size_t kSendBatch = 64;
// Small datagrams (a latency-bound write, acknowledgements, credits) are copied into these
// slots and go out with the chip's next call into the ring, which is usually its wait (a lone
// one goes at once: goes_alone()). A large one would cost more to copy than the call.
constexpr size_t kDeferMax = 2048;
constexpr size_t kStageSlots = 64;

enum Kind : uint64_t { kRecv = 1, kSend = 2, kWritable = 3, kEpoll = 4, kDeferredSend = 5, kTimer = 6, kTimerRemove = 7 };

uint64_t tag(Kind k, uint8_t port, uint32_t index = 0) { return (uint64_t{k} << 56) | (uint64_t{port} << 32) | index; }
Kind kind_of(uint64_t t) { return static_cast<Kind>(t >> 56); }
uint8_t port_of(uint64_t t) { return static_cast<uint8_t>(t >> 32); }
uint32_t index_of(uint64_t t) { return static_cast<uint32_t>(t); }

}  // namespace

struct UringTransport::Socket {
  uint8_t port = 0;
  bool multishot = false;  // its receive is a multishot one (else single-shot, re-armed each time)
  std::unique_ptr<wire::UdpSocket> sock;
  bool write_waiting = false;
  msghdr layout{};  // the layout of what a multishot receive writes into a provided buffer
  // Single-shot receives: one in flight, into this buffer.
  msghdr msg{};
  iovec iov{};
  wire::Address from;
  std::unique_ptr<uint8_t[]> buf;
};

UringTransport::UringTransport(bool allow_multishot) : by_port_(256, nullptr) {
  // DEFER_TASKRUN: completions are posted when the chip enters the kernel to wait or look, so
  // a busy chip is not interrupted by each arriving datagram (perf showed a fifth of a
  // receiving chip's time in such interrupts). Before 6.1, COOP_TASKRUN does that for a
  // running chip; before 5.19, neither.
  int e = io_uring_queue_init(kQueueDepth, &ring_, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
  if (e == -EINVAL) e = io_uring_queue_init(kQueueDepth, &ring_, IORING_SETUP_COOP_TASKRUN);
  if (e == -EINVAL) e = io_uring_queue_init(kQueueDepth, &ring_, 0);
  if (e < 0) throw Error(fmt::format("io_uring: cannot set up a ring: {}", std::strerror(-e)));
  multishot_ = allow_multishot && setup_buffer_ring();
  // A deferred send posts nothing when it succeeds (kernel 5.17+); without that, every send
  // is waited for in its own call.
  if (ring_.features & IORING_FEAT_CQE_SKIP) {
    stage_.resize(kStageSlots);
    stage_bytes_.reset(new uint8_t[kStageSlots * kDeferMax]);
  }
}

std::optional<std::string> UringTransport::refused() {
  io_uring ring{};
  const int e = io_uring_queue_init(2, &ring, 0);
  if (e < 0) return fmt::format("io_uring_setup: {}", std::strerror(-e));
  io_uring_queue_exit(&ring);
  return std::nullopt;
}

UringTransport::~UringTransport() {
  io_uring_queue_exit(&ring_);  // cancels what is in flight
  if (buf_ring_) ::munmap(buf_ring_, buf_ring_bytes_);
}

bool UringTransport::setup_buffer_ring() {
  buf_ring_bytes_ = kBufCount * sizeof(io_uring_buf);
  void* mem = ::mmap(nullptr, buf_ring_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (mem == MAP_FAILED) return false;
  buf_ring_ = static_cast<io_uring_buf_ring*>(mem);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(buf_ring_);
  reg.ring_entries = kBufCount;
  reg.bgid = kGroup;
  if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) {
    ::munmap(buf_ring_, buf_ring_bytes_);
    buf_ring_ = nullptr;
    return false;
  }
  io_uring_buf_ring_init(buf_ring_);
  buffers_.reset(new uint8_t[kBufCount * kBufSize]);  // untouched until used
  for (uint16_t bid = 0; bid < kBufCount; ++bid) {
    io_uring_buf_ring_add(buf_ring_, buffers_.get() + bid * kBufSize, kBufSize, bid, io_uring_buf_ring_mask(kBufCount), bid);
  }
  io_uring_buf_ring_advance(buf_ring_, kBufCount);
  return true;
}

void UringTransport::give_back(uint16_t bid) {
  io_uring_buf_ring_add(buf_ring_, buffers_.get() + bid * kBufSize, kBufSize, bid, io_uring_buf_ring_mask(kBufCount), 0);
  io_uring_buf_ring_advance(buf_ring_, 1);
}

UringTransport::Socket& UringTransport::socket(uint8_t port) {
  Socket* s = by_port_[port];
  if (!s) throw Error(fmt::format("uring transport: port {} is not wired", port));
  return *s;
}

uint16_t UringTransport::add(uint8_t port, const std::string& bind) {
  auto s = std::make_unique<Socket>();
  s->port = port;
  s->sock = std::make_unique<wire::UdpSocket>(bind, 0);  // the ring receives, not the socket
  s->multishot = multishot_;
  s->layout.msg_namelen = sizeof(sockaddr_storage);
  by_port_[port] = s.get();
  sockets_.push_back(std::move(s));
  return sockets_.back()->sock->local_port();
}

wire::UdpSocket& UringTransport::udp(uint8_t port) { return *socket(port).sock; }

io_uring_sqe* UringTransport::sqe() {
  io_uring_sqe* e = io_uring_get_sqe(&ring_);
  if (!e) {
    submit_all();
    e = io_uring_get_sqe(&ring_);
    if (!e) throw Error("io_uring: no submission queue entry");
  }
  return e;
}

void UringTransport::arm_receive(Socket& s) {
  io_uring_sqe* e = sqe();
  if (s.multishot) {
    io_uring_prep_recvmsg_multishot(e, s.sock->fd(), &s.layout, 0);
    e->flags |= IOSQE_BUFFER_SELECT;
    e->buf_group = kGroup;
  } else {
    if (!s.buf) s.buf.reset(new uint8_t[wire::kMaxUdpPayload]);  // only single-shot receives need one
    s.iov = {s.buf.get(), wire::kMaxUdpPayload};
    s.msg = {};
    s.msg.msg_name = &s.from.storage;
    s.msg.msg_namelen = sizeof(sockaddr_storage);
    s.msg.msg_iov = &s.iov;
    s.msg.msg_iovlen = 1;
    io_uring_prep_recvmsg(e, s.sock->fd(), &s.msg, 0);
  }
  io_uring_sqe_set_data64(e, tag(kRecv, s.port));
}

void UringTransport::arm_writable(Socket& s) {
  if (s.write_waiting) return;
  s.write_waiting = true;
  io_uring_sqe* e = sqe();
  io_uring_prep_poll_add(e, s.sock->fd(), POLLOUT);
  io_uring_sqe_set_data64(e, tag(kWritable, s.port));
}

UringTransport::Mode UringTransport::mode() const {
  return multishot_ && !fell_back_ ? Mode::kMultishot : Mode::kSingleShot;
}

void UringTransport::submit_all() {
  while (io_uring_sq_ready(&ring_) > 0) {
    const int n = io_uring_submit(&ring_);
    if (n == -EBUSY || n == -EAGAIN) {
      stash_completions();  // a full completion queue refuses submissions until it is reaped
    } else if (n < 0 && n != -EINTR) {
      throw Error(fmt::format("io_uring: cannot submit: {}", std::strerror(-n)));
    }
  }
}

void UringTransport::stash_completions() {
  unsigned head = 0, count = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    pending_.push_back({cqe->user_data, cqe->res, cqe->flags});
    ++count;
  }
  io_uring_cq_advance(&ring_, count);
}

void UringTransport::start() {
  for (auto& s : sockets_) arm_receive(*s);
  submit_all();
}

bool UringTransport::defer(Socket& s, std::span<const wire::Datagram> datagrams) {
  if (stage_.empty() || s.write_waiting || datagrams.size() > kStageSlots) return false;
  for (const auto& d : datagrams) {
    if (d.size() > kDeferMax) return false;
  }
  nothing_staged();  // (frees the slots the kernel has taken)
  if (staged_ + datagrams.size() > kStageSlots) {
    submit_all();
    staged_ = 0;
  }
  for (const auto& d : datagrams) {
    Staged& st = stage_[staged_];
    uint8_t* bytes = stage_bytes_.get() + staged_ * kDeferMax;
    d.copy_to(bytes);
    st.iov = {bytes, d.size()};
    st.msg = {};
    const wire::Address* to = s.sock->name_for(d);  // none: the connected peer
    st.msg.msg_name = to ? const_cast<sockaddr_storage*>(&to->storage) : nullptr;
    st.msg.msg_namelen = to ? to->length : 0;
    st.msg.msg_iov = &st.iov;
    st.msg.msg_iovlen = 1;
    io_uring_sqe* e = sqe();
    // Not linked: a failure (only a full socket buffer) loses this datagram alone, as a full
    // receive buffer would, and the TT-link resends it.
    io_uring_prep_sendmsg(e, s.sock->fd(), &st.msg, MSG_DONTWAIT);
    io_uring_sqe_set_data64(e, tag(kDeferredSend, s.port));
    e->flags |= IOSQE_CQE_SKIP_SUCCESS;
    ++staged_;
  }
  return true;
}

bool UringTransport::nothing_staged() {
  // The kernel issues a UDP send while it takes the entry and copies its bytes then, so every
  // slot is free again once it has taken all entries.
  if (io_uring_sq_ready(&ring_) == 0) staged_ = 0;
  return staged_ == 0;
}

// A lone datagram (a hop of a latency-bound write, its answer) goes by its own system call,
// as over UDP: the chip it wakes may then take this CPU at once, while staged it was woken by
// the wait that follows, after this chip slept, on the other CPU (a cross-CPU wake-up, dear on
// a virtual machine). Measured 2026-11-29: per hop 1.29-1.46 of the raw relay against
// 1.77-1.82 staged, 6 hops 317-329 us against 410-659; the Galaxy the same. (Not while others
// wait staged: it would overtake them.)
bool UringTransport::goes_alone(const Socket& s, std::span<const wire::Datagram> datagrams) {
  return !stage_.empty() && !s.write_waiting && datagrams.size() == 1 && datagrams[0].size() <= kDeferMax &&
         nothing_staged();
}

size_t UringTransport::send_now(Socket& s, const wire::Datagram& d) {
  // Gathered from where its pieces lie, as over UDP: the call has read them when it returns.
  batch_.prepare(std::span(&d, 1), s.sock->peer_name(), &s.sock->inbox());
  if (::sendmsg(s.sock->fd(), &batch_.msg(0), MSG_DONTWAIT) >= 0) return 1;
  const int err = errno;
  if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
    arm_writable(s);  // the caller keeps it until the socket drains, as over UDP
    submit_all();
    return 0;
  }
  // A refusal loses this datagram alone: reported as a staged send's failure is, at the next
  // poll, and the TT-link resends it.
  pending_.push_back({tag(kDeferredSend, s.port), -err, 0});
  return 1;
}

size_t UringTransport::send(uint8_t port, std::span<const wire::Datagram> datagrams) {
  Socket& s = socket(port);
  if (goes_alone(s, datagrams)) return send_now(s, datagrams[0]);
  if (defer(s, datagrams)) return datagrams.size();
  size_t done = 0;
  while (done < datagrams.size()) {
    const size_t n = std::min(datagrams.size() - done, kSendBatch);
    batch_.prepare(datagrams.subspan(done, n), s.sock->peer_name(), &s.sock->inbox());
    send_res_.assign(n, 0);
    if (io_uring_sq_space_left(&ring_) < n) submit_all();  // one chain, whole
    for (size_t i = 0; i < n; ++i) {
      msghdr& m = batch_.msg(i);
      io_uring_sqe* e = sqe();
      // MSG_DONTWAIT: a full socket buffer fails the send now instead of waiting in the kernel.
      io_uring_prep_sendmsg(e, s.sock->fd(), &m, MSG_DONTWAIT);
      io_uring_sqe_set_data64(e, tag(kSend, port, static_cast<uint32_t>(i)));
      if (i + 1 < n) e->flags |= IOSQE_IO_LINK;  // a failure cancels the rest: order is kept
    }
    // One call submits the chain and waits for it: the sends after the first are issued as
    // deferred work, which only a call that waits runs. (Other completions may count towards
    // the n; the loop below waits for what is missing.)
    if (io_uring_submit_and_wait(&ring_, static_cast<unsigned>(n)) < 0) submit_all();
    // Other completions met on the way wait for poll().
    for (size_t seen = 0; seen < n;) {
      io_uring_cqe* cqe = nullptr;
      if (const int e = io_uring_wait_cqe(&ring_, &cqe); e < 0) {
        if (e == -EINTR) continue;
        throw Error(fmt::format("io_uring: waiting for sends: {}", std::strerror(-e)));
      }
      const Completion c{cqe->user_data, cqe->res, cqe->flags};
      io_uring_cqe_seen(&ring_, cqe);
      if (kind_of(c.user_data) == kSend && port_of(c.user_data) == port && index_of(c.user_data) < n) {
        send_res_[index_of(c.user_data)] = c.res;
        ++seen;
      } else {
        pending_.push_back(c);
      }
    }
    size_t ok = 0;
    while (ok < n && send_res_[ok] >= 0) ++ok;
    if (ok == n) {
      done += n;
      continue;
    }
    const int32_t err = send_res_[ok];
    if (err == -EAGAIN || err == -ENOBUFS) {
      arm_writable(s);  // the rest waits until the socket drains
      submit_all();
      return done + ok;
    }
    // The wire refused one (the peer's port is gone): like a loss, the TT-link copes; the
    // sends after it were cancelled and go again.
    done += ok + 1;
  }
  return done;
}

void UringTransport::watch(int epoll_fd) {
  epoll_fd_ = epoll_fd;
  epoll_armed_ = false;
}

bool UringTransport::wait(const timespec* timeout) {
  if (epoll_fd_ >= 0 && !epoll_armed_) {
    io_uring_sqe* e = sqe();
    io_uring_prep_poll_add(e, epoll_fd_, POLLIN);
    io_uring_sqe_set_data64(e, tag(kEpoll, 0));
    epoll_armed_ = true;
  }
  if (!pending_.empty()) {
    submit_all();
    return true;
  }
  io_uring_cqe* cqe = nullptr;
  int e = 0;
  if (timeout && timeout->tv_sec == 0 && timeout->tv_nsec == 0) {
    // A look: run what completed and return (a zero wait would still sleep on a timer).
    e = io_uring_submit_and_get_events(&ring_);
  } else if (timeout) {
    __kernel_timespec ts{timeout->tv_sec, timeout->tv_nsec};
    e = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  } else {
    e = io_uring_submit_and_wait(&ring_, 1);
  }
  if (e < 0 && e != -ETIME && e != -EINTR && e != -EAGAIN && e != -EBUSY) {
    throw Error(fmt::format("io_uring: cannot wait: {}", std::strerror(-e)));
  }
  submit_all();  // what a wait interrupted before submitting left
  return io_uring_cq_ready(&ring_) > 0;
}

bool UringTransport::take_epoll_ready() { return std::exchange(epoll_ready_, false); }

void UringTransport::arm_timer(std::chrono::nanoseconds at) {
  timer_at_ = {at.count() / 1'000'000'000, at.count() % 1'000'000'000};
  if (timer_armed_ && (ring_.features & IORING_FEAT_CQE_SKIP)) {
    // Moved in place, posting nothing if it works: a timer removed and added again posts the
    // old one's cancellation, which ends the chip's next wait at once for nothing. If the
    // timer fires first, its firing is handled as any other and the update fails unseen.
    io_uring_sqe* e = sqe();
    io_uring_prep_timeout_update(e, &timer_at_, tag(kTimer, 0, timer_generation_), IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(e, tag(kTimerRemove, 0));
    e->flags |= IOSQE_CQE_SKIP_SUCCESS;
    timer_fired_ = false;
    return;
  }
  if (timer_armed_) {  // replaced: its cancellation posts -ECANCELED under the old generation
    io_uring_sqe* e = sqe();
    io_uring_prep_timeout_remove(e, tag(kTimer, 0, timer_generation_), 0);
    io_uring_sqe_set_data64(e, tag(kTimerRemove, 0));
    if (ring_.features & IORING_FEAT_CQE_SKIP) e->flags |= IOSQE_CQE_SKIP_SUCCESS;
  }
  ++timer_generation_;
  io_uring_sqe* e = sqe();
  io_uring_prep_timeout(e, &timer_at_, 0, IORING_TIMEOUT_ABS);  // CLOCK_MONOTONIC: the steady clock's
  io_uring_sqe_set_data64(e, tag(kTimer, 0, timer_generation_));
  timer_armed_ = true;
  timer_fired_ = false;
}

bool UringTransport::take_timer_fired() { return std::exchange(timer_fired_, false); }

bool UringTransport::has_pending() { return !pending_.empty() || io_uring_cq_ready(&ring_) > 0; }

size_t UringTransport::poll(const Handlers& h) {
  size_t delivered = 0;
  // A few rounds at most: a handler that sends reaps more completions, and under a steady
  // stream the loop's batch end, deadlines and descriptors must get their turn (what is left
  // is still pending: the loop comes back for it).
  for (int round = 0; round < 4; ++round) {
    stash_completions();
    if (pending_.empty()) break;
    handling_.swap(pending_);  // handled off the queue: a delivery may send, and send() reaps too
    for (const auto& c : handling_) handle(c, h, delivered);
    handling_.clear();
  }
  submit_all();
  return delivered;
}

void UringTransport::handle(const Completion& c, const Handlers& h, size_t& delivered) {
  if (kind_of(c.user_data) == kEpoll) {
    epoll_armed_ = false;  // single-shot: armed again at the next wait, after the loop looked
    epoll_ready_ = true;
    return;
  }
  if (kind_of(c.user_data) == kTimer || kind_of(c.user_data) == kTimerRemove) {
    if (kind_of(c.user_data) == kTimer && index_of(c.user_data) == timer_generation_ && c.res != -ECANCELED) {
      timer_armed_ = false;  // fired (or failed: either way nothing is armed)
      timer_fired_ = true;
    }
    return;
  }
  const uint8_t port = port_of(c.user_data);
  Socket* s = by_port_[port];
  if (!s) return;
  switch (kind_of(c.user_data)) {
    case kRecv: {
      const bool more = (c.flags & IORING_CQE_F_MORE) != 0;
      if (c.flags & IORING_CQE_F_BUFFER) {
        const auto bid = static_cast<uint16_t>(c.flags >> IORING_CQE_BUFFER_SHIFT);
        uint8_t* base = buffers_.get() + size_t{bid} * kBufSize;
        if (c.res >= 0) {
          auto* out = io_uring_recvmsg_validate(base, c.res, &s->layout);
          if (out) {
            wire::Address from;
            from.length = std::min<socklen_t>(out->namelen, sizeof(sockaddr_storage));
            std::memcpy(&from.storage, io_uring_recvmsg_name(out), from.length);
            const auto* payload = static_cast<const uint8_t*>(io_uring_recvmsg_payload(out, &s->layout));
            arrive(*s, from, {payload, io_uring_recvmsg_payload_length(out, c.res, &s->layout)}, h, delivered);
          }
        }
        give_back(bid);
      } else if (!s->multishot && c.res >= 0) {
        s->from.length = s->msg.msg_namelen;
        arrive(*s, s->from, {s->buf.get(), static_cast<size_t>(c.res)}, h, delivered);
      } else if (c.res == -EINVAL && s->multishot) {
        s->multishot = false;  // the kernel has no multishot receives: fall back
        fell_back_ = true;
      }
      if (!more) arm_receive(*s);  // single-shot receives never say more
      break;
    }
    case kWritable:
      s->write_waiting = false;
      h.writable(port);
      break;
    case kDeferredSend:  // only failures post
      if (h.dropped) h.dropped(port);
      break;
    default:
      break;  // sends are reaped by send() itself; the epoll poll is handled above
  }
}

void UringTransport::arrive(Socket& s, const wire::Address& from, std::span<const uint8_t> bytes, const Handlers& h,
                            size_t& delivered) {
  if (!s.sock->accepts(from)) {
    h.stray(s.port);
    return;
  }
  h.deliver(s.port, bytes);
  ++delivered;
}

}  // namespace ttemu::process
