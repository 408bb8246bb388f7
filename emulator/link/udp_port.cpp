#include "emulator/link/udp_port.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/link/frame.hpp"

namespace ttemu::link {

sockaddr_in make_address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) {
    throw Error(fmt::format("'{}' is not an IPv4 address", ip));
  }
  return a;
}

bool same_address(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
}

UdpPort::UdpPort(const std::string& address, size_t batch)
    : buffers_(batch, std::vector<uint8_t>(kMaxDatagram + 64)) {
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw Error(fmt::format("cannot create a UDP socket: {}", std::strerror(errno)));
  // Large buffers absorb bursts while a busy chip process is scheduled out.
  int size = 4 << 20;
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  sockaddr_in local = make_address(address, 0);
  socklen_t len = sizeof(local);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    int e = errno;
    ::close(fd_);
    throw Error(fmt::format("cannot bind a UDP socket to {}: {}", address, std::strerror(e)));
  }
  port_ = ntohs(local.sin_port);
  received_.reserve(batch);
  // The headers are set up once: after a wake-up the cache is cold, and touching a batch's
  // worth of headers per receive costs more than the receive itself.
  msgs_.resize(batch);
  iov_.resize(batch);
  from_.resize(batch);
  for (size_t i = 0; i < batch; ++i) {
    iov_[i] = {buffers_[i].data(), buffers_[i].size()};
    msgs_[i] = {};
    msgs_[i].msg_hdr.msg_iov = &iov_[i];
    msgs_[i].msg_hdr.msg_iovlen = 1;
    msgs_[i].msg_hdr.msg_name = &from_[i];
    msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
  }
}

UdpPort::~UdpPort() {
  if (fd_ >= 0) ::close(fd_);
}

std::span<const Datagram> UdpPort::receive() {
  received_.clear();
  int got = ::recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(msgs_.size()), MSG_DONTWAIT, nullptr);
  for (size_t i = 0; got > 0 && i < static_cast<size_t>(got); ++i) {
    // A datagram longer than the buffer arrives truncated; the parser rejects what is cut off.
    received_.push_back({{buffers_[i].data(), msgs_[i].msg_len}, from_[i]});
    msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);  // the kernel wrote the length it used
  }
  return received_;
}

size_t UdpPort::send(const std::vector<std::vector<uint8_t>>& datagrams, size_t from) {
  size_t sent = from;
  while (sent < datagrams.size()) {
    const size_t n = std::min<size_t>(datagrams.size() - sent, 64);
    mmsghdr msgs[64];
    iovec iov[64];
    for (size_t i = 0; i < n; ++i) {
      const auto& d = datagrams[sent + i];
      iov[i] = {const_cast<uint8_t*>(d.data()), d.size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &peer_;
      msgs[i].msg_hdr.msg_namelen = sizeof(peer_);
    }
    int out = ::sendmmsg(fd_, msgs, static_cast<unsigned>(n), MSG_DONTWAIT);
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
  return sent - from;
}

}  // namespace ttemu::link
