// A chip's lazy inbox, for links over sockets: one more UDP socket per chip process, where its
// peers send the datagrams that need not wake it (Datagram::lazy: acknowledgements that can
// wait). The chip never waits on it, so they cost it no wake-up; it reads the inbox when it
// is awake anyway (ready()) and before a deadline fires (a retransmission timeout that such
// an acknowledgement makes moot). A datagram from anyone but a known peer is dropped and
// counted (foreign()).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "emulator/wire/udp_socket.hpp"

namespace ttemu::wire {

class LazyInbox {
 public:
  using Time = std::chrono::nanoseconds;
  // How often a chip that is awake anyway reads it (a system call each time, which over
  // io_uring delays the chip's sends: they go with its next wait). Well inside the shortest
  // retransmission timeout (2 ms plus the far end's hold), and it is read before any deadline.
  static constexpr Time kInterval = std::chrono::microseconds(2000);

  explicit LazyInbox(const std::string& bind) : socket_(bind) {}
  uint16_t local_port() const { return socket_.local_port(); }
  // Datagrams from `from` are `port`'s (its peer's socket address).
  void set_peer(uint8_t port, const Address& from) {
    for (auto& p : peers_) {
      if (p.second == port) return void(p.first = from);
    }
    peers_.emplace_back(from, port);
  }
  // A read is due: kInterval has passed since the last one.
  bool ready(Time now) const { return now - last_ >= kInterval; }
  // Hands what has come to deliver(port, bytes) (read in place); returns how many.
  template <class Deliver>
  size_t read(Time now, Deliver&& deliver) {
    last_ = now;
    size_t n = 0;
    for (int round = 0; round < 16; ++round) {
      const auto batch = socket_.receive();
      for (const auto& d : batch) {
        const uint8_t* port = port_of(*d.from);
        if (!port) {  // not a peer's
          ++foreign_;
          continue;
        }
        deliver(*port, d.bytes);
        ++n;
      }
      if (batch.size() < 64) break;
    }
    return n;
  }
  // Datagrams read from anyone but a peer (dropped), since the inbox was made.
  uint64_t foreign() const { return foreign_; }

 private:
  const uint8_t* port_of(const Address& from) const {
    for (const auto& p : peers_) {
      if (p.first == from) return &p.second;
    }
    return nullptr;
  }
  UdpSocket socket_;
  std::vector<std::pair<Address, uint8_t>> peers_;
  Time last_{};
  uint64_t foreign_ = 0;
};

}  // namespace ttemu::wire
