// One link endpoint's UDP socket: non-blocking, moving datagrams in batches (recvmmsg /
// sendmmsg: one system call for many), or one at a time where that is all there is. IPv4 or
// IPv6, by the address it is bound to; only datagrams from the peer's address and port are the
// link's (accepts() tells).
//
// Once the peer is known the socket is connected to it: the kernel then keeps the route
// instead of looking it up for every send, and hands the socket the peer's datagrams only, so
// that a lone one is read without asking who sent it. Anyone else's datagrams to the port go to
// the socket's twin, bound to the same address and port (SO_REUSEPORT), where receive_stray()
// reads them: strays are still seen and counted, as before the connection.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "emulator/wire/datagram.hpp"

namespace ttemu::wire {

// A socket address of either family, with the name of where it came from for messages.
struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  bool operator==(const Address& other) const;
};
// A numeric IPv4 or IPv6 address and a port; throws Error naming the text otherwise.
Address make_address(const std::string& ip, uint16_t port);

// Where a datagram goes: a lazy one to the peer chip's inbox if there is one (lazy_inbox.hpp),
// any other to the peer (nullptr: the peer a connected socket sends to without a name).
inline const Address* destination(const Datagram& d, const Address* peer, const Address* inbox) {
  return d.lazy && inbox && inbox->length ? inbox : peer;
}

inline constexpr size_t kMaxUdpPayload = 65507;  // IPv4's limit; receive buffers hold this

struct Received {
  std::span<const uint8_t> bytes;
  const Address* from;
};

// The messages that send a batch of datagrams to one peer, each gathered from its datagram's
// pieces (no copy): msg(i) sends datagrams[i]. Storage is reused from batch to batch; the
// messages stay valid until the next prepare(). They are sendmmsg's entries, so a socket
// passes them on as they are.
class SendBatch {
 public:
  // Lazy datagrams go to `inbox` when there is one (lazy_inbox.hpp), the others to `peer`
  // (nullptr: no name, for a connected socket's peer).
  void prepare(std::span<const Datagram> datagrams, const Address* peer, const Address* inbox = nullptr);
  msghdr& msg(size_t i) { return msgs_[i].msg_hdr; }
  mmsghdr* mmsgs() { return msgs_.data(); }

 private:
  std::vector<iovec> iov_;
  std::vector<size_t> first_;  // datagram i's pieces are iov_[first_[i], first_[i + 1])
  std::vector<mmsghdr> msgs_;
};

class UdpSocket {
 public:
  // Binds to address:0 (an ephemeral port), on the loopback by default.
  explicit UdpSocket(const std::string& address = "127.0.0.1", size_t batch = 64);
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  int fd() const { return fd_; }
  uint16_t local_port() const { return port_; }
  // The peer, again when it restarted elsewhere: the socket is connected to it, with its twin
  // for strays. Where that cannot be done (no twin can be bound, the connection is refused)
  // the socket stays unconnected and names every datagram's sender and destination, as it did
  // before.
  void set_peer(const Address& peer);
  bool connected() const { return connected_; }
  bool accepts(const Address& from) const { return from == peer_; }
  // Where the peer's chip takes lazy datagrams (its LazyInbox); none (the default): with the rest.
  void set_inbox(const Address& inbox) { inbox_ = inbox; }
  const Address& inbox() const { return inbox_; }
  // The name to send the peer's datagrams to: none once connected (the kernel's route is kept).
  const Address* peer_name() const { return connected_ ? nullptr : &peer_; }
  const Address* name_for(const Datagram& d) const { return destination(d, peer_name(), &inbox_); }
  // Receives up to the batch size without blocking; the spans stay valid until the next call.
  // With `one`, at most one datagram, by recvmsg: when only one waits (a sparse link, a hop on
  // a latency path) that costs less than recvmmsg, which tries again for a second.
  std::span<const Received> receive(bool one = false);
  // The twin's descriptor (-1 while unconnected), and its next datagram if one waits: someone
  // other than the peer, or the peer itself in the moment of a reconnection. Strays are rare,
  // so they are read one at a time, into a buffer of their own.
  int strays_fd() const { return twin_; }
  std::optional<Received> receive_stray();
  // Sends datagrams to the peer without blocking, each gathered from its pieces (no copy in
  // user space); returns how many went out (fewer when the socket buffer is full: wait until
  // writable and call again with the rest).
  size_t send(std::span<const Datagram> datagrams);

 private:
  bool open_twin();
  void close_twin();

  int fd_ = -1;
  int twin_ = -1;
  uint16_t port_ = 0;
  Address local_, peer_, inbox_;
  bool connected_ = false;
  // Set by a connection: datagrams that came before it may be anyone's, so reads name their
  // senders until the queue has been seen empty once.
  bool unchecked_ = false;
  std::unique_ptr<uint8_t[]> stray_buf_;
  Address stray_from_;
  // batch x kMaxUdpPayload bytes, not zero-filled: a page costs memory only once a datagram
  // has landed in it (a Galaxy has 416 sockets).
  std::unique_ptr<uint8_t[]> buffers_;
  std::vector<Received> received_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  SendBatch batch_;
  std::vector<Address> from_;
};

}  // namespace ttemu::wire
