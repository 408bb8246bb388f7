// The io_uring transport (--transport uring): a chip's link sockets driven through one
// io_uring. Receives are multishot recvmsg requests, one per socket, filling buffers the ring
// provides (a registered buffer ring), so a busy socket costs no system call per datagram or
// per batch; where the kernel refuses either, each socket keeps one single-shot recvmsg in
// flight instead (mode() says which, and `ttemu status` shows it).
//
// Sends: small datagrams (up to 2 KiB: a latency-bound write, acknowledgements, credits) are
// copied into staging slots and go out with the chip's next call into the ring, usually the
// wait that follows; a send that succeeds posts nothing (IOSQE_CQE_SKIP_SUCCESS), one that
// fails is counted as a wire drop and the TT-link resends it. A lone one, when nothing is
// staged (so it overtakes nothing), goes at once by sendmsg, as over UDP, and a failure is
// reported the same way. Larger ones are sendmsg requests gathered from the datagrams' pieces,
// linked so that a full socket buffer stops the rest in order, and submitted and waited for in one call
// per batch; they complete before send() returns (a UDP send does not wait), so the
// datagrams' borrowed pieces need live no longer than the call. Both go in order: entries
// are issued as queued.
//
// Waking: the chip's event loop sleeps in this ring (it is the loop's Waiter): one
// io_uring_enter submits what is prepared and waits for the first completion; the loop's
// timer is a timeout request in the ring, armed again only when the loop's deadline (plus its
// slack) comes before it, or after it fired, not with every wait; a timer armed again before
// it fired is moved in place (a timeout update that posts nothing: a removal would post the
// old request's cancellation and end the next wait for nothing). The loop's epoll set
// (control socket, signals, doorbell) is one more source, a poll request on the epoll
// descriptor re-armed after each time it fires. With
// DEFER_TASKRUN (kernel 6.1+), the kernel posts completions only when the chip asks, on its
// way into the wait or a look, so a busy chip is not interrupted by arriving datagrams; older
// kernels get COOP_TASKRUN, or neither. Idle, nothing is in flight but the armed receives and
// the poll (and the loop's timer, until it fires once after the last deadline went away).
#pragma once

#include <liburing.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "emulator/process/event_loop.hpp"
#include "emulator/wire/transport.hpp"
#include "emulator/wire/udp_socket.hpp"

namespace ttemu::process {

class UringTransport final : public wire::Transport, public EventLoop::Waiter {
 public:
  enum class Mode : uint32_t { kMultishot = 1, kSingleShot = 2 };

  // allow_multishot = false forces the single-shot receives (tests of the fallback).
  explicit UringTransport(bool allow_multishot = true);
  ~UringTransport() override;
  UringTransport(const UringTransport&) = delete;
  UringTransport& operator=(const UringTransport&) = delete;

  // kSingleShot once any socket had to fall back (the kernel refused a multishot receive).
  Mode mode() const;

  // Why no ring can be set up here (a kernel without io_uring, io_uring_disabled, a seccomp
  // filter such as a container's), or nothing when one can: the default transport's test.
  static std::optional<std::string> refused();

  // Binds a socket for `port`; returns its UDP port.
  uint16_t add(uint8_t port, const std::string& bind);
  // The port's socket: its peer's lazy inbox (wire::LazyInbox) is set there, and its twin,
  // which takes strays, is read by the owner of the event loop, not by the ring.
  wire::UdpSocket& udp(uint8_t port);
  // Arms the receives of every socket (after each socket's peer is set through udp()).
  void start();

  size_t send(uint8_t port, std::span<const wire::Datagram> datagrams) override;
  bool defers_lazy() const override { return true; }

  struct Handlers {
    std::function<void(uint8_t port, std::span<const uint8_t> bytes)> deliver;  // read in place
    std::function<void(uint8_t port)> writable;  // room again after a short send
    std::function<void(uint8_t port)> stray;     // a datagram from anyone but the peer
    std::function<void(uint8_t port)> dropped;   // a deferred send the wire did not take
  };
  // Handles the completions there are (a bounded number of rounds: handlers that send may
  // bring more); returns how many datagrams it delivered.
  size_t poll(const Handlers& h);
  // Completions wait to be handled (the loop's shared-work check).
  bool has_pending();

  // EventLoop::Waiter.
  void watch(int epoll_fd) override;
  bool wait(const timespec* timeout) override;
  bool take_epoll_ready() override;
  void arm_timer(std::chrono::nanoseconds at) override;
  bool take_timer_fired() override;

 private:
  struct Socket;
  struct Completion {
    uint64_t user_data;
    int32_t res;
    uint32_t flags;
  };
  Socket& socket(uint8_t port);
  io_uring_sqe* sqe();
  void arm_receive(Socket& s);
  void arm_writable(Socket& s);
  // Stages small datagrams to go out with the next call into the ring; false if they do not
  // qualify (too big, the socket is waiting for room, or the kernel cannot skip completions).
  bool defer(Socket& s, std::span<const wire::Datagram> datagrams);
  bool nothing_staged();  // (and frees the slots the kernel has taken)
  // A lone small datagram with nothing staged goes at once by sendmsg (send_now): 1 if the
  // wire took it or refused it (reported as dropped at the next poll), 0 if the socket is
  // full (it waits for room, as over UDP).
  bool goes_alone(const Socket& s, std::span<const wire::Datagram> datagrams);
  size_t send_now(Socket& s, const wire::Datagram& d);
  void handle(const Completion& c, const Handlers& h, size_t& delivered);
  void arrive(Socket& s, const wire::Address& from, std::span<const uint8_t> bytes, const Handlers& h,
              size_t& delivered);
  void give_back(uint16_t bid);
  // Submits every prepared entry (a short submit would strand a chain); a kernel that is busy
  // with completions gets them reaped into pending_ first.
  void submit_all();
  void stash_completions();  // the completion queue, into pending_
  bool setup_buffer_ring();

  io_uring ring_{};
  bool multishot_ = false;  // receives start multishot (a buffer ring was registered)
  bool fell_back_ = false;  // some socket's multishot receive was refused
  std::vector<std::unique_ptr<Socket>> sockets_;
  std::vector<Socket*> by_port_;
  // The provided buffer ring (multishot receives).
  io_uring_buf_ring* buf_ring_ = nullptr;
  size_t buf_ring_bytes_ = 0;
  std::unique_ptr<uint8_t[]> buffers_;
  // Send state, alive during one send() call.
  wire::SendBatch batch_;
  std::vector<int32_t> send_res_;
  // Deferred sends: slots staged since the kernel last took every entry (empty: no deferral).
  struct Staged {
    msghdr msg;
    iovec iov;
  };
  std::vector<Staged> stage_;
  std::unique_ptr<uint8_t[]> stage_bytes_;
  size_t staged_ = 0;
  // Completions of other requests reaped while send() waited for its own, and the ones poll()
  // is handling (both keep their storage).
  std::vector<Completion> pending_, handling_;
  // The event loop's epoll descriptor, watched by a single-shot poll.
  int epoll_fd_ = -1;
  bool epoll_armed_ = false;
  bool epoll_ready_ = false;
  // The loop's timer: one absolute timeout request, the generation in its tag (a replaced
  // one's cancellation, or a late firing, is told apart by it); its time must stay put until
  // the request is submitted.
  __kernel_timespec timer_at_{};
  uint32_t timer_generation_ = 0;
  bool timer_armed_ = false;
  bool timer_fired_ = false;
};

}  // namespace ttemu::process
