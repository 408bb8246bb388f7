#include "emulator/chip/doorbell.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::chip {

namespace {

// Abstract namespace: sun_path starts with a NUL; the length, not a terminator, ends the name.
socklen_t doorbell_address(const JobId& job, routing::ChipId chip, sockaddr_un& a) {
  const std::string name = fmt::format("ttemu.{}.{}.{}.bell", getuid(), job.text(), routing::to_string(chip));
  a = {};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof(a.sun_path) - 1));
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::min(name.size(), sizeof(a.sun_path) - 1));
}

// A datagram socket bound to (listen) or connected to (ring) the chip's doorbell name.
int doorbell_socket(const JobId& job, routing::ChipId chip, bool listen) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(fmt::format("doorbell: cannot create a socket: {}", std::strerror(errno)));
  sockaddr_un a;
  const socklen_t len = doorbell_address(job, chip, a);
  const auto* addr = reinterpret_cast<const sockaddr*>(&a);
  if ((listen ? ::bind(fd, addr, len) : ::connect(fd, addr, len)) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(listen ? fmt::format("doorbell of {}: cannot bind: {}", routing::to_string(chip), std::strerror(e))
                       : fmt::format("device {} has no router listening: {}", routing::to_string(chip), std::strerror(e)));
  }
  return fd;
}

}  // namespace

DoorbellListener::DoorbellListener(const JobId& job, routing::ChipId chip) : fd_(doorbell_socket(job, chip, true)) {}

DoorbellListener::~DoorbellListener() { ::close(fd_); }

int DoorbellListener::drain() {
  // Rings are empty datagrams; with should_ring there is mostly one. All are read: the chip
  // hears a ring as an edge, and a full socket would refuse the next ring.
  std::array<mmsghdr, 16> msgs{};
  int read = 0, n = 0;
  do {
    n = ::recvmmsg(fd_, msgs.data(), msgs.size(), MSG_DONTWAIT, nullptr);
    read += std::max(n, 0);
  } while (n == static_cast<int>(msgs.size()));
  return read;
}

DoorbellRinger::DoorbellRinger(const JobId& job, routing::ChipId chip) : fd_(doorbell_socket(job, chip, false)) {}

DoorbellRinger::~DoorbellRinger() { ::close(fd_); }

bool DoorbellRinger::ring() {
  // EAGAIN: the chip has rings it has not read yet, so it is waking anyway.
  return ::send(fd_, "", 0, MSG_NOSIGNAL) == 0;
}

}  // namespace ttemu::chip
