// The socket side of a TT-link: one UDP socket per ethernet port, moving datagrams in batches
// (recvmmsg / sendmmsg: one system call for many datagrams). Kept behind DatagramPort so an
// io_uring backend can take its place.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ttemu::link {

struct Datagram {
  std::span<const uint8_t> bytes;
  sockaddr_in from;
};

class DatagramPort {
 public:
  virtual ~DatagramPort() = default;
  virtual int fd() const = 0;
  virtual uint16_t local_port() const = 0;
  // Receives up to the batch size without blocking; the spans stay valid until the next call.
  virtual std::span<const Datagram> receive() = 0;
  // Sends datagrams[from...] to the peer without blocking; returns how many went out
  // (fewer when the socket buffer is full: wait until writable and call again).
  virtual size_t send(const std::vector<std::vector<uint8_t>>& datagrams, size_t from) = 0;
  virtual void set_peer(const sockaddr_in& peer) = 0;
};

// Binds a UDP socket to address:0 (an ephemeral port) on the loopback by default.
class UdpPort final : public DatagramPort {
 public:
  explicit UdpPort(const std::string& address = "127.0.0.1", size_t batch = 64);
  ~UdpPort() override;
  UdpPort(const UdpPort&) = delete;
  UdpPort& operator=(const UdpPort&) = delete;

  int fd() const override { return fd_; }
  uint16_t local_port() const override { return port_; }
  std::span<const Datagram> receive() override;
  size_t send(const std::vector<std::vector<uint8_t>>& datagrams, size_t from) override;
  void set_peer(const sockaddr_in& peer) override { peer_ = peer; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  sockaddr_in peer_{};
  std::vector<std::vector<uint8_t>> buffers_;
  std::vector<Datagram> received_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_in> from_;
};

sockaddr_in make_address(const std::string& ip, uint16_t port);
bool same_address(const sockaddr_in& a, const sockaddr_in& b);

}  // namespace ttemu::link
