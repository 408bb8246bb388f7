// Raw UDP all_to_all over a mesh, a process per node: what an emulator that did no work at all
// would move in the Galaxy's all_to_all on this machine. Every node sends `per_pair` bytes to
// every other node in chunks of `chunk` bytes, each behind an 8-byte header naming its
// destination; every node relays what is not for it along an X-then-Y route (the routes'
// mean length is the fabric's on a full mesh), packing up to 15 chunks per next hop into one
// datagram, as TT-link packs frames. No acknowledgements, no copies in user space (chunks go
// out by iovec from the datagram they arrived in), no flow control: socket buffers are made
// large enough to hold a whole run instead. Nodes wait in epoll as chips do. With `crc`, the
// one piece of TT-link's work that no design can skip: a source computes each chunk's CRC32
// (the header carries it) and every node that receives a chunk checks it, once per crossing
// (a relay forwards the CRC it checked, as a frame's CRC can be carried over a hop whose
// header changes by combining CRCs).
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include <isa-l/crc.h>

#include "tools/bench/raw_udp.hpp"

namespace ttemu::bench {

struct RawMeshResult {
  double crossings_per_s = 0;  // payload bytes x hops per second
  double mean_hops = 0;
  bool complete = false;       // every byte arrived before the deadline
  bool crc_errors = false;     // a chunk failed its check (with crc)
};

namespace raw_mesh_detail {

constexpr size_t kHeader = 8;  // destination node, then the payload's CRC32 (uint32 each)
constexpr int kPack = 15;      // chunks per datagram

inline int next_hop(int self, int dst, int cols) {
  const int r = self / cols, c = self % cols, dr = dst / cols, dc = dst % cols;
  if (c != dc) return r * cols + (dc > c ? c + 1 : c - 1);
  return (dr > r ? r + 1 : r - 1) * cols + c;
}

// One node's life: relay and send until killed; write one byte to `done_fd` once every byte
// addressed to it has arrived.
// (A byte of 1 instead when a chunk failed its CRC check.)
[[noreturn]] inline void node(int self, int rows, int cols, size_t per_pair, size_t chunk, bool crc,
                              const std::vector<Socket>& s, int go_fd, int done_fd, Waiting waiting) {
  const int n = rows * cols;
  const int fd = s[static_cast<size_t>(self)].fd;
  const size_t unit = kHeader + chunk;
  const size_t chunks_per_pair = (per_pair + chunk - 1) / chunk;
  const uint64_t expect = static_cast<uint64_t>(n - 1) * chunks_per_pair;
  uint64_t arrived = 0;
  bool reported = false;
  // Own chunks: destination by destination, interleaved (one chunk per destination per turn),
  // each from its own place in a source buffer (as sources send from distinct memory).
  std::vector<uint8_t> source(static_cast<size_t>(n - 1) * chunks_per_pair * chunk, 0xA5);
  for (size_t i = 0; i < source.size(); i += 64) source[i] = static_cast<uint8_t>(i >> 6);
  std::vector<std::array<uint32_t, 2>> headers(4 * kPack);  // this turn's own chunks
  uint64_t own_left = expect, own_next = 0;
  bool bad = false;
  // Receive side: 64 datagrams of up to 15 chunks.
  constexpr size_t kBatch = 64;
  std::vector<std::vector<uint8_t>> bufs(kBatch, std::vector<uint8_t>(kPack * unit));
  std::vector<iovec> riov(kBatch);
  std::vector<mmsghdr> rmsg(kBatch);
  // Send side: per neighbour, the iovecs of the chunks waiting for it.
  std::vector<std::vector<iovec>> out(static_cast<size_t>(n));
  std::vector<sockaddr_in> to(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) to[static_cast<size_t>(d)] = loopback(s[static_cast<size_t>(d)].port);
  std::vector<mmsghdr> smsg;
  // Everything is in place (the source written, its pages faulted in) before the start.
  char go = 0;
  if (read(go_fd, &go, 1) != 1) _exit(1);
  Receiver rx(fd, waiting);
  for (;;) {
    for (size_t i = 0; i < kBatch; ++i) {
      riov[i] = {bufs[i].data(), bufs[i].size()};
      rmsg[i] = {};
      rmsg[i].msg_hdr.msg_iov = &riov[i];
      rmsg[i].msg_hdr.msg_iovlen = 1;
    }
    const int got = recvmmsg(fd, rmsg.data(), kBatch, MSG_DONTWAIT, nullptr);
    for (int i = 0; i < got; ++i) {
      const uint8_t* b = bufs[static_cast<size_t>(i)].data();
      for (size_t at = 0; at + unit <= rmsg[static_cast<size_t>(i)].msg_len; at += unit) {
        uint32_t dst = 0, sum = 0;
        std::memcpy(&dst, b + at, 4);
        std::memcpy(&sum, b + at + 4, 4);
        if (crc && crc32_gzip_refl(0, b + at + kHeader, chunk) != sum) bad = true;
        if (static_cast<int>(dst) == self) {
          ++arrived;
        } else {
          out[static_cast<size_t>(next_hop(self, static_cast<int>(dst), cols))].push_back({const_cast<uint8_t*>(b + at), unit});
        }
      }
    }
    // Own traffic after what is passing through: up to one datagram per neighbour per turn.
    for (size_t k = 0; k < headers.size() && own_left > 0; ++k, --own_left, ++own_next) {
      int d = static_cast<int>(own_next % static_cast<uint64_t>(n - 1));
      d += d >= self ? 1 : 0;
      uint8_t* p = source.data() + static_cast<size_t>(own_next) * chunk;
      headers[k] = {static_cast<uint32_t>(d), crc ? crc32_gzip_refl(0, p, chunk) : 0};
      auto& q = out[static_cast<size_t>(next_hop(self, d, cols))];
      q.push_back({headers[k].data(), kHeader});
      q.push_back({p, chunk});
    }
    bool sent = false;
    for (int nb = 0; nb < n; ++nb) {
      auto& q = out[static_cast<size_t>(nb)];
      if (q.empty()) continue;
      // Datagrams of up to kPack chunks (an own chunk takes two iovecs, a relayed one one).
      smsg.clear();
      size_t first = 0;
      while (first < q.size()) {
        size_t end = first, bytes = 0;
        while (end < q.size() && bytes + q[end].iov_len <= kPack * unit) bytes += q[end++].iov_len;
        mmsghdr m{};
        m.msg_hdr.msg_iov = &q[first];
        m.msg_hdr.msg_iovlen = end - first;
        m.msg_hdr.msg_name = &to[static_cast<size_t>(nb)];
        m.msg_hdr.msg_namelen = sizeof(sockaddr_in);
        smsg.push_back(m);
        first = end;
      }
      for (size_t at = 0; at < smsg.size();) {
        const int k = sendmmsg(fd, smsg.data() + at, static_cast<unsigned>(smsg.size() - at), 0);
        if (k <= 0) break;
        at += static_cast<size_t>(k);
      }
      q.clear();
      sent = true;
    }
    if (!reported && (arrived >= expect || bad)) {
      reported = true;
      const char c = bad ? 1 : 0;
      if (write(done_fd, &c, 1) != 1) _exit(1);
    }
    if (got <= 0 && !sent && own_left == 0) rx.wait();  // idle: as a chip waits
  }
}

}  // namespace raw_mesh_detail

// Raw UDP all_to_all over a rows x cols mesh (see above); gives up after `deadline`.
// `per_pair` is a multiple of `chunk`.
inline RawMeshResult raw_mesh_all_to_all(int rows, int cols, size_t per_pair, size_t chunk, bool crc, Waiting waiting = {},
                                         std::chrono::seconds deadline = std::chrono::seconds(60)) {
  namespace d = raw_mesh_detail;
  const int n = rows * cols;
  std::vector<Socket> s;
  for (int i = 0; i < n; ++i) {
    s.push_back(udp_socket());
    int size = 256 << 20;  // a whole run's share fits: nothing is dropped for want of flow control
    setsockopt(s.back().fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
  }
  int go[2], done[2];
  if (pipe(go) != 0) return {};
  if (pipe(done) != 0) return {};
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid == 0) d::node(i, rows, cols, per_pair, chunk, crc, s, go[0], done[1], waiting);
    pids.push_back(pid);
  }
  RawMeshResult r;
  double hops = 0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) hops += std::abs(a / cols - b / cols) + std::abs(a % cols - b % cols);
  r.mean_hops = hops / (n * (n - 1));
  const std::string starts(static_cast<size_t>(n), 'g');
  const auto t0 = Clock::now();
  if (write(go[1], starts.data(), starts.size()) == static_cast<ssize_t>(starts.size())) {
    int reported = 0;
    for (pollfd p{done[0], POLLIN, 0}; reported < n;) {
      const auto left = deadline - (Clock::now() - t0);
      if (left <= Clock::duration::zero() ||
          poll(&p, 1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()) + 1) <= 0) {
        break;
      }
      char c[64];
      const ssize_t k = read(done[0], c, sizeof c);
      for (ssize_t i = 0; i < k; ++i) r.crc_errors = r.crc_errors || c[i] != 0;
      if (k > 0) reported += static_cast<int>(k);
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    r.complete = reported == n && !r.crc_errors;
    const double bytes = static_cast<double>(n) * (n - 1) * static_cast<double>(per_pair);
    if (r.complete) r.crossings_per_s = bytes * r.mean_hops / secs;
  }
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (int fd : {go[0], go[1], done[0], done[1]}) close(fd);
  for (auto& x : s) close(x.fd);
  return r;
}

}  // namespace ttemu::bench
