#include "emulator/wire/capture_stream.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/wire/udp_socket.hpp"

namespace ttemu::wire {

namespace {

constexpr size_t kBatch = 32;
constexpr size_t kRecordBytes = sizeof(CaptureRecord) + kMaxUdpPayload;

// The abstract name's address: a leading NUL, then the name (no terminator).
socklen_t abstract_address(const std::string& name, sockaddr_un& a) {
  if (name.empty() || name.size() + 1 > sizeof a.sun_path) throw Error(fmt::format("'{}' is not a capture sink's name", name));
  std::memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// A blocking datagram socket connected to the sink `name`; -1 (errno set) when none listens.
int connect_to(const std::string& name) {
  sockaddr_un a;
  const socklen_t len = abstract_address(name, a);
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

uint64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

bool capture_sink_exists(const std::string& name) {
  const int fd = connect_to(name);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

CaptureSink::CaptureSink() : buffers_(kBatch * kRecordBytes), msgs_(kBatch), iov_(kBatch) {
  for (size_t i = 0; i < kBatch; ++i) {
    iov_[i] = {buffers_.data() + i * kRecordBytes, kRecordBytes};
    msgs_[i] = {};
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  static std::atomic<unsigned> next{0};
  name_ = fmt::format("ttemu-capture-{}-{}", ::getpid(), next++);
  sockaddr_un a;
  const socklen_t len = abstract_address(name_, a);
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw Error(fmt::format("cannot open the capture socket {}: {}", name_, why));
  }
  int size = 8 << 20;  // room for bursts while the capturer writes the file
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

CaptureSink::~CaptureSink() {
  if (fd_ >= 0) ::close(fd_);
}

size_t CaptureSink::receive(const std::function<void(const CaptureRecord&, std::span<const uint8_t>)>& f) {
  const int n = ::recvmmsg(fd_, msgs_.data(), kBatch, MSG_DONTWAIT, nullptr);
  if (n <= 0) return 0;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const uint8_t* bytes = buffers_.data() + i * kRecordBytes;
    const size_t size = msgs_[i].msg_len;
    CaptureRecord r;
    if (size < sizeof r || (msgs_[i].msg_hdr.msg_flags & MSG_TRUNC)) {
      ++stray_;
      continue;
    }
    std::memcpy(&r, bytes, sizeof r);
    if (r.magic != kCaptureMagic) {
      ++stray_;
      continue;
    }
    f(r, {bytes + sizeof r, size - sizeof r});
  }
  return static_cast<size_t>(n);
}

CaptureTap::~CaptureTap() { stop(); }

void CaptureTap::start(const std::string& sink, uint16_t mesh, uint16_t device, const std::vector<uint8_t>& ports) {
  stop();
  fd_ = connect_to(sink);
  if (fd_ < 0) throw Error(fmt::format("no capture listens at '{}': {}", sink, std::strerror(errno)));
  // A record the capturer does not take within kCaptureStall is dropped (the header's promise).
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(kCaptureStall).count();
  timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  header_ = CaptureRecord{};
  header_.mesh = mesh;
  header_.device = device;
  tapped_.reset();
  for (uint8_t p : ports) tapped_.set(p);
  recorded_ = dropped_ = 0;
  sink_lost_ = false;
  drop_until_ = {};
}

void CaptureTap::stop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

size_t CaptureTap::send(uint8_t port, std::span<const Datagram> datagrams) {
  const size_t sent = inner_.send(port, datagrams);
  if (fd_ >= 0 && tapped_[port] && sent > 0) {
    const uint64_t ns = realtime_ns();  // (handed over together: one time for the batch)
    for (size_t i = 0; i < sent && fd_ >= 0; ++i) record(port, ns, datagrams[i]);
  }
  return sent;
}

void CaptureTap::record(uint8_t port, uint64_t ns, const Datagram& d) {
  if (drop_until_ != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() < drop_until_) {
    ++dropped_;
    return;
  }
  drop_until_ = {};
  header_.port = port;
  header_.ns = ns;
  iov_.clear();
  iov_.push_back({&header_, sizeof header_});
  if (d.pieces() + 1 <= Datagram::kMaxPieces) {
    d.gather(iov_);
  } else {
    d.copy_to(flat_);
    iov_.push_back({flat_.data(), flat_.size()});
  }
  msghdr m{};
  m.msg_iov = iov_.data();
  m.msg_iovlen = iov_.size();
  ssize_t n;
  do {
    n = ::sendmsg(fd_, &m, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n >= 0) {
    ++recorded_;
    return;
  }
  ++dropped_;
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    // Stalled for kCaptureStall: the next second's records go without waiting.
    drop_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  } else if (errno == ECONNREFUSED || errno == ENOTCONN || errno == EPIPE) {
    sink_lost_ = true;
    stop();
  }
}

}  // namespace ttemu::wire
