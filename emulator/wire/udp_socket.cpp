#include "emulator/wire/udp_socket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::wire {

Address make_address(const std::string& ip, uint16_t port) {
  Address a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    a.length = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    a.length = sizeof(sockaddr_in6);
  } else {
    throw Error(fmt::format("'{}' is not an IPv4 or IPv6 address", ip));
  }
  return a;
}

bool Address::operator==(const Address& o) const {
  if (storage.ss_family != o.storage.ss_family) return false;
  if (storage.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(storage);
    const auto& b = reinterpret_cast<const sockaddr_in&>(o.storage);
    return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
  }
  if (storage.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(storage);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(o.storage);
    return a.sin6_port == b.sin6_port && std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof a.sin6_addr) == 0;
  }
  return false;
}

UdpSocket::UdpSocket(const std::string& address, size_t batch)
    : buffers_(new uint8_t[batch * kMaxUdpPayload]) {
  Address local = make_address(address, 0);
  fd_ = ::socket(local.storage.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw Error(fmt::format("cannot create a UDP socket: {}", std::strerror(errno)));
  // Large buffers absorb bursts while a busy chip process is scheduled out.
  int size = 4 << 20;
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  socklen_t len = sizeof(local.storage);
  if (::bind(fd_, local.get(), local.length) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&local.storage), &len) != 0) {
    int e = errno;
    ::close(fd_);
    throw Error(fmt::format("cannot bind a UDP socket to {}: {}", address, std::strerror(e)));
  }
  local_ = local;
  port_ = ntohs(local.storage.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(local.storage).sin_port
                                                   : reinterpret_cast<sockaddr_in6&>(local.storage).sin6_port);
  received_.reserve(batch);
  // The headers are set up once: after a wake-up the cache is cold, and touching a batch's
  // worth of headers per receive costs more than the receive itself.
  msgs_.resize(batch);
  iov_.resize(batch);
  from_.resize(batch);
  for (size_t i = 0; i < batch; ++i) {
    iov_[i] = {buffers_.get() + i * kMaxUdpPayload, kMaxUdpPayload};
    msgs_[i] = {};
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_name = &from_[i].storage;
    msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
  }
}

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) ::close(fd_);
  if (twin_ >= 0) ::close(twin_);
}

// The twin joins the socket's port. The socket itself takes SO_REUSEPORT only now, after its
// ephemeral bind: binding with the option, it could have been given a port that another
// socket with the option holds. (A later ephemeral bind with the option, by the same user,
// may still land on this port; the peer's datagrams then still reach the connected socket
// alone.)
bool UdpSocket::open_twin() {
  static constexpr int kOn = 1;
  if (::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &kOn, sizeof kOn) != 0) return false;
  const int twin = ::socket(local_.storage.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (twin >= 0 && ::setsockopt(twin, SOL_SOCKET, SO_REUSEPORT, &kOn, sizeof kOn) == 0 &&
      ::bind(twin, local_.get(), local_.length) == 0) {
    twin_ = twin;
    return true;
  }
  if (twin >= 0) ::close(twin);
  close_twin();
  return false;
}

// Back to one socket on the port, which takes everything (as before a connection).
void UdpSocket::close_twin() {
  static constexpr int kOff = 0;
  if (twin_ >= 0) ::close(twin_);
  twin_ = -1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &kOff, sizeof kOff);
}

void UdpSocket::set_peer(const Address& peer) {
  peer_ = peer;
  // The twin first, so that no stray is refused in between (the kernel refuses a datagram for
  // a port whose only socket is connected to someone else).
  const bool fresh = twin_ < 0;
  if (fresh && !open_twin()) return;
  connected_ = ::connect(fd_, peer.get(), peer.length) == 0;
  unchecked_ = connected_;
  if (connected_) return;
  // Not left connected to a former peer; and a twin nobody watches yet goes, so that the
  // socket takes everything again. (One already watched stays: the two sockets then share the
  // datagrams, each named, and both are read.)
  sockaddr none{};
  none.sa_family = AF_UNSPEC;
  ::connect(fd_, &none, sizeof none);
  if (fresh) close_twin();
}

std::optional<Received> UdpSocket::receive_stray() {
  if (twin_ < 0) return std::nullopt;
  if (!stray_buf_) stray_buf_.reset(new uint8_t[kMaxUdpPayload]);
  stray_from_.length = sizeof stray_from_.storage;
  const ssize_t n = ::recvfrom(twin_, stray_buf_.get(), kMaxUdpPayload, MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&stray_from_.storage), &stray_from_.length);
  if (n < 0) return std::nullopt;
  return Received{{stray_buf_.get(), static_cast<size_t>(n)}, &stray_from_};
}

std::span<const Received> UdpSocket::receive(bool one) {
  received_.clear();
  if (one && connected_ && !unchecked_) {
    // Only the peer's datagrams reach a connected socket: no need to ask whose it is.
    const ssize_t n = ::recv(fd_, buffers_.get(), kMaxUdpPayload, MSG_DONTWAIT);
    if (n >= 0) received_.push_back({{buffers_.get(), static_cast<size_t>(n)}, &peer_});
    return received_;
  }
  int got = 0;
  if (one && !unchecked_) {
    const ssize_t n = ::recvmsg(fd_, &msgs_[0].msg_hdr, MSG_DONTWAIT);
    if (n >= 0) msgs_[0].msg_len = static_cast<unsigned>(n), got = 1;
  } else {
    got = ::recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(msgs_.size()), MSG_DONTWAIT, nullptr);
    // Nothing left, and what came before the connection has been read. A short batch alone
    // does not say so (an error of the connection, a refusal by the peer's host, cuts a batch
    // short and is reported before what is queued): a look without reading does.
    if (unchecked_ && got >= 0 && static_cast<size_t>(got) < msgs_.size()) {
      if (::recv(fd_, nullptr, 0, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) unchecked_ = false;
    } else if (unchecked_ && got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      unchecked_ = false;
    }
  }
  for (size_t i = 0; got > 0 && i < static_cast<size_t>(got); ++i) {
    // A datagram longer than the buffer arrives truncated; the parser rejects what is cut off.
    from_[i].length = msgs_[i].msg_hdr.msg_namelen;
    received_.push_back({{buffers_.get() + i * kMaxUdpPayload, msgs_[i].msg_len}, &from_[i]});
    msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);  // the kernel wrote the length it used
  }
  return received_;
}

void SendBatch::prepare(std::span<const Datagram> datagrams, const Address* peer, const Address* inbox) {
  iov_.clear();
  first_.clear();
  for (const auto& d : datagrams) {
    first_.push_back(iov_.size());
    d.gather(iov_);
  }
  first_.push_back(iov_.size());
  msgs_.assign(datagrams.size(), mmsghdr{});
  for (size_t i = 0; i < datagrams.size(); ++i) {  // after gathering: iov_ no longer moves
    msghdr& m = msgs_[i].msg_hdr;
    m.msg_iov = iov_.data() + first_[i];
    m.msg_iovlen = first_[i + 1] - first_[i];
    const Address* to = destination(datagrams[i], peer, inbox);
    m.msg_name = to ? const_cast<sockaddr_storage*>(&to->storage) : nullptr;
    m.msg_namelen = to ? to->length : 0;
  }
}

size_t UdpSocket::send(std::span<const Datagram> datagrams) {
  size_t sent = 0;
  while (sent < datagrams.size()) {
    const size_t n = std::min<size_t>(datagrams.size() - sent, 64);
    batch_.prepare(datagrams.subspan(sent, n), peer_name(), &inbox_);
    // One datagram goes by sendmsg, which costs less than sendmmsg's loop around it.
    const int out = n == 1 ? (::sendmsg(fd_, &batch_.msg(0), MSG_DONTWAIT) >= 0 ? 1 : -1)
                           : ::sendmmsg(fd_, batch_.mmsgs(), static_cast<unsigned>(n), MSG_DONTWAIT);
    if (out <= 0) {
      if (out < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) {
        // The wire refused the datagram (e.g. the peer's port is gone): like a loss, ARQ copes.
        ++sent;
        continue;
      }
      break;
    }
    sent += static_cast<size_t>(out);
  }
  return sent;
}

}  // namespace ttemu::wire
