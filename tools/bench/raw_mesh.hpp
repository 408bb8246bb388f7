// The Galaxy's all_to_all with no emulator: a process per node of a mesh, relaying raw bytes,
// as the most an emulator with a process per chip could move on this machine. Every node sends
// `per_pair` bytes to every other node in chunks of `chunk` bytes, each behind an 8-byte header
// naming its destination and its CRC32; every node relays what is not for it along an X-then-Y
// route (the routes' mean length is the fabric's on a full mesh), packing up to 15 chunks per
// next hop into one datagram, as TT-link packs frames. No acknowledgements, no routing tables,
// no credits and no flow control: the wire is made large enough to hold a whole run instead.
//
// Two wires, as the chips have:
// - raw_mesh_all_to_all: UDP sockets on the loopback; nodes wait in epoll as chips do.
// - raw_shm_mesh_all_to_all: a single-producer single-consumer ring per direction of each
//   mesh link (wire::ShmRing, the shm transport's), in memory the nodes share; a node with
//   nothing to do sleeps on a futex and is woken by the first neighbour that fills a ring.
//
// How much of TT-link's work a node does (RelayWork):
// - kCheckCrc: the one piece that no design can skip: a source computes each chunk's CRC and
//   every node that receives it checks it, once per crossing (a relay forwards the CRC it
//   checked, as a frame's CRC can be carried over a hop whose header changes by combining CRCs);
//   nothing else (UDP: chunks go on by iovec from the datagram they came in, so the kernel's
//   copies are the only ones; shm: the ring's copy in is the only one).
// - kTtLinkLeast: the least the issue's cost model grants TT-link ("a CRC on each side, the
//   payload copied in and out", "at most one copy per forwarding hop"): every crossing checks
//   the CRC on arrival and computes it again on departure; a source copies each chunk out of
//   its memory, a relay copies it once on its way (UDP: into what it sends on; shm: into the
//   next ring), a destination copies it into its memory.
#pragma once

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>


#include "emulator/chip/doorbell.hpp"
#include "emulator/common/futex.hpp"
#include "emulator/wire/datagram.hpp"
#include "emulator/wire/shm_ring.hpp"
#include "tools/bench/raw_udp.hpp"

namespace ttemu::bench {

enum class RelayWork { kCheckCrc, kTtLinkLeast };

struct RawMeshResult {
  double crossings_per_s = 0;  // payload bytes x hops per second
  double mean_hops = 0;
  bool complete = false;       // every byte arrived before the deadline
  bool crc_errors = false;     // a chunk failed its check, or a wire overflowed
};

namespace raw_mesh_detail {

constexpr size_t kHeader = 8;  // destination node, then the payload's CRC32 (uint32 each)
constexpr size_t kPack = 15;   // chunks per datagram
constexpr size_t kOwnPerTurn = 4 * kPack;

inline int distance(int a, int b, int cols) { return std::abs(a / cols - b / cols) + std::abs(a % cols - b % cols); }

inline int next_hop(int self, int dst, int cols) {
  const int r = self / cols, c = self % cols, dr = dst / cols, dc = dst % cols;
  if (c != dc) return r * cols + (dc > c ? c + 1 : c - 1);
  return (dr > r ? r + 1 : r - 1) * cols + c;
}

// One node's share of the run, and the chunk work both wires do alike.
struct Node {
  int self, cols, n;
  size_t chunk, unit;
  bool copy;  // TT-link's least work
  uint64_t expect, arrived = 0, own_left, own_next = 0;
  bool bad = false;
  // Own chunks: destination by destination, interleaved (one chunk per destination per turn),
  // each from its own place in a source buffer (as sources send from distinct memory).
  std::vector<uint8_t> source, sink;  // sink: where a destination commits (with copy)

  Node(int self_, int rows, int cols_, size_t per_pair, size_t chunk_, RelayWork w)
      : self(self_), cols(cols_), n(rows * cols_), chunk(chunk_), unit(kHeader + chunk_),
        copy(w == RelayWork::kTtLinkLeast) {
    const size_t chunks_per_pair = (per_pair + chunk - 1) / chunk;
    expect = own_left = static_cast<uint64_t>(n - 1) * chunks_per_pair;
    source.assign(static_cast<size_t>(n - 1) * chunks_per_pair * chunk, 0xA5);  // written: faulted in
    for (size_t i = 0; i < source.size(); i += 64) source[i] = static_cast<uint8_t>(i >> 6);
    if (copy) sink.assign(source.size(), 0);
  }
  // The next own chunk: its destination and bytes.
  int own_dst() const {
    int d = static_cast<int>(own_next % static_cast<uint64_t>(n - 1));
    return d + (d >= self ? 1 : 0);
  }
  uint8_t* own_bytes() { return source.data() + static_cast<size_t>(own_next) * chunk; }
  // A chunk that arrived (header and payload): checked, then committed (true) or to be relayed.
  bool arrive(const uint8_t* u, uint32_t& dst) {
    uint32_t sum = 0;
    std::memcpy(&dst, u, 4);
    std::memcpy(&sum, u + 4, 4);
    if (link::crc32({u + kHeader, chunk}) != sum) bad = true;
    if (static_cast<int>(dst) != self) return false;
    if (copy) std::memcpy(sink.data() + (arrived % (sink.size() / chunk)) * chunk, u + kHeader, chunk);
    ++arrived;
    return true;
  }
  // The CRC a chunk leaves with: computed (at its source, and again at every relay with least
  // work), else carried from the header it arrived with.
  uint32_t departing_crc(const uint8_t* payload, const uint8_t* header) const {
    if (copy || !header) return link::crc32({payload, chunk});
    uint32_t sum = 0;
    std::memcpy(&sum, header + 4, 4);
    return sum;
  }
  bool done() const { return arrived >= expect || bad; }
};

// Starts a node per mesh position (body(i, go_fd, done_fd) never returns), waits until each is
// ready (wait_for_go), lets them go at once, and times them until each has received everything
// (or failed, or the deadline passed).
inline RawMeshResult run(int rows, int cols, size_t per_pair, std::chrono::seconds deadline,
                         const std::function<void(int, int, int)>& body) {
  const int n = rows * cols;
  RawMeshResult r;
  int go[2], done[2];
  if (pipe(go) != 0) return r;
  if (pipe(done) != 0) {
    close(go[0]), close(go[1]);
    return r;
  }
  // A node says it is ready on `done` too (a byte of 2), before it waits for go.
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork_baseline();
    if (pid == 0) {
      body(i, go[0], done[1]);
      _exit(1);
    }
    pids.push_back(pid);
  }
  double hops = 0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) hops += distance(a, b, cols);
  r.mean_hops = hops / (n * (n - 1));
  const auto wait_for = [&](int count, Clock::time_point since, auto&& take) {
    for (pollfd p{done[0], POLLIN, 0}; count > 0;) {
      const auto left = deadline - (Clock::now() - since);
      if (left <= Clock::duration::zero() ||
          poll(&p, 1, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count()) + 1) <= 0) {
        return false;
      }
      char c[64];
      const ssize_t k = read(done[0], c, sizeof c);
      for (ssize_t i = 0; i < k; ++i) take(c[i]);
      if (k > 0) count -= static_cast<int>(k);
    }
    return true;
  };
  bool all_ready = true;
  const bool ready = wait_for(n, Clock::now(), [&](char c) { all_ready = all_ready && c == 2; }) && all_ready;
  const std::string starts(static_cast<size_t>(n), 'g');
  const auto t0 = Clock::now();
  if (ready && write(go[1], starts.data(), starts.size()) == static_cast<ssize_t>(starts.size())) {
    const bool all = wait_for(n, t0, [&](char c) { r.crc_errors = r.crc_errors || c != 0; });
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    r.complete = all && !r.crc_errors;
    const double bytes = static_cast<double>(n) * (n - 1) * static_cast<double>(per_pair);
    if (r.complete) r.crossings_per_s = bytes * r.mean_hops / secs;
  }
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (int fd : {go[0], go[1], done[0], done[1]}) close(fd);
  return r;
}

// Says the node is ready (everything in place: its memory written, its pages faulted in), then
// blocks until the parent says go.
inline void wait_for_go(int go_fd, int done_fd) {
  const char ready = 2;
  if (write(done_fd, &ready, 1) != 1) _exit(1);
  char go = 0;
  if (read(go_fd, &go, 1) != 1) _exit(1);
}
// Writes one byte to `done_fd` once: 0 when every byte addressed to it arrived, 1 on a failure.
inline void report(const Node& me, int done_fd, bool& reported) {
  if (reported || !me.done()) return;
  reported = true;
  const char c = me.bad ? 1 : 0;
  if (write(done_fd, &c, 1) != 1) _exit(1);
}

// A UDP node: relays and sends until killed.
[[noreturn]] inline void udp_node(Node me, const std::vector<Socket>& s, int go_fd, int done_fd, Waiting waiting) {
  const int n = me.n, self = me.self;
  const size_t unit = me.unit;
  const int fd = s[static_cast<size_t>(self)].fd;
  std::vector<std::array<uint32_t, 2>> headers(kOwnPerTurn);  // this turn's own chunks
  bool reported = false;
  // Receive side: 64 datagrams of up to 15 chunks.
  constexpr size_t kBatch = 64;
  std::vector<std::vector<uint8_t>> bufs(kBatch, std::vector<uint8_t>(kPack * unit));
  std::vector<iovec> riov(kBatch);
  std::vector<mmsghdr> rmsg(kBatch);
  // Send side: per neighbour, the iovecs of the chunks waiting for it; with copy, the bytes too
  // (sized for a turn's worst case and written once beforehand, so that the iovecs pointing
  // into them stay valid and no page is first touched during the run).
  std::vector<std::vector<iovec>> out(static_cast<size_t>(n));
  struct Stage {
    std::vector<uint8_t> bytes;
    size_t used = 0;
  };
  std::vector<Stage> stage(static_cast<size_t>(n));
  if (me.copy) {
    for (int d = 0; d < n; ++d) {
      if (d == self) continue;
      auto& b = stage[static_cast<size_t>(next_hop(self, d, me.cols))].bytes;
      if (b.empty()) b.assign((kBatch + 4) * kPack * unit, 0);
    }
  }
  const auto send_copy = [&](int nb, uint32_t dst, const uint8_t* payload) {
    auto& st = stage[static_cast<size_t>(nb)];
    uint8_t* u = st.bytes.data() + st.used;
    st.used += unit;
    std::memcpy(u + kHeader, payload, me.chunk);  // the one copy of this crossing
    const uint32_t sum = me.departing_crc(u + kHeader, nullptr);
    std::memcpy(u, &dst, 4);
    std::memcpy(u + 4, &sum, 4);
    out[static_cast<size_t>(nb)].push_back({u, unit});
  };
  std::vector<sockaddr_in> to(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) to[static_cast<size_t>(d)] = loopback(s[static_cast<size_t>(d)].port);
  std::vector<mmsghdr> smsg;
  wait_for_go(go_fd, done_fd);
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
      uint8_t* b = bufs[static_cast<size_t>(i)].data();
      for (size_t at = 0; at + unit <= rmsg[static_cast<size_t>(i)].msg_len; at += unit) {
        uint32_t dst = 0;
        if (me.arrive(b + at, dst)) continue;
        const int nb = next_hop(self, static_cast<int>(dst), me.cols);
        if (me.copy) {
          send_copy(nb, dst, b + at + kHeader);
        } else {
          out[static_cast<size_t>(nb)].push_back({b + at, unit});
        }
      }
    }
    // Own traffic after what is passing through: up to one datagram per neighbour per turn.
    for (size_t k = 0; k < headers.size() && me.own_left > 0; ++k, --me.own_left, ++me.own_next) {
      const int d = me.own_dst(), nb = next_hop(self, d, me.cols);
      uint8_t* p = me.own_bytes();
      if (me.copy) {
        send_copy(nb, static_cast<uint32_t>(d), p);
        continue;
      }
      headers[k] = {static_cast<uint32_t>(d), me.departing_crc(p, nullptr)};
      auto& q = out[static_cast<size_t>(nb)];
      q.push_back({headers[k].data(), kHeader});
      q.push_back({p, me.chunk});
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
      stage[static_cast<size_t>(nb)].used = 0;
      sent = true;
    }
    report(me, done_fd, reported);
    if (got <= 0 && !sent && me.own_left == 0) rx.wait();  // idle: as a chip waits
  }
}

// The shm wire: a ring per direction of each mesh link, and a bell per node.
struct ShmMesh {
  static constexpr size_t kRing = size_t{16} << 20;  // holds the busiest link's share of a run
  static constexpr size_t kWarm = size_t{2} << 20;   // mapped beforehand: no first touch in the run
  struct alignas(64) Bell {
    std::atomic<uint32_t> asleep, word;
  };
  int n = 0;
  void* memory = nullptr;
  size_t bytes = 0;
  Bell* bells = nullptr;
  std::vector<wire::ShmRing> rings;
  std::vector<int> slot;  // a*n + b: the ring from a to b, or -1

  ShmMesh(int rows, int cols) : n(rows * cols), slot(static_cast<size_t>(n) * static_cast<size_t>(n), -1) {
    size_t count = 0;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (distance(a, b, cols) == 1) slot[static_cast<size_t>(a * n + b)] = static_cast<int>(count++);
    bytes = ring_offset(count);
    memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) {
      memory = nullptr;
      return;
    }
    bells = new (memory) Bell[static_cast<size_t>(n)];
    for (size_t i = 0; i < count; ++i) {
      std::memset(ring_memory(i), 0, kWarm);
      rings.push_back(wire::ShmRing::create(ring_memory(i), kRing));
    }
  }
  ~ShmMesh() {
    if (memory) munmap(memory, bytes);
  }
  ShmMesh(const ShmMesh&) = delete;
  ShmMesh& operator=(const ShmMesh&) = delete;
  wire::ShmRing& ring(int a, int b) { return rings[static_cast<size_t>(slot[static_cast<size_t>(a * n + b)])]; }
  // Maps the first pages of the ring from a to b into the calling process (a fork does not
  // copy a shared mapping's page tables: each node would otherwise fault them in while timed).
  void warm(int a, int b) { madvise(ring_memory(static_cast<size_t>(slot[static_cast<size_t>(a * n + b)])), kWarm, MADV_POPULATE_WRITE); }
  // The bells take the first pages; the rings follow.
  size_t ring_offset(size_t i) const {
    return (static_cast<size_t>(n) * sizeof(Bell) + 4095) / 4096 * 4096 + i * wire::ShmRing::bytes_for(kRing);
  }
  uint8_t* ring_memory(size_t i) const { return static_cast<uint8_t*>(memory) + ring_offset(i); }
  bool linked(int a, int b) const { return slot[static_cast<size_t>(a * n + b)] >= 0; }
};

// A shm node: relays and sends until killed.
[[noreturn]] inline void shm_node(Node me, ShmMesh& mesh, int go_fd, int done_fd) {
  const int n = me.n, self = me.self;
  std::vector<int> nbrs;
  for (int b = 0; b < n; ++b)
    if (mesh.linked(self, b)) nbrs.push_back(b), mesh.warm(self, b), mesh.warm(b, self);
  std::vector<wire::Datagram> dg(static_cast<size_t>(n));
  std::vector<size_t> packed(static_cast<size_t>(n), 0);
  bool reported = false;
  const auto flush = [&](int nb) {
    auto& d = dg[static_cast<size_t>(nb)];
    if (d.empty()) return;
    if (!mesh.ring(self, nb).push(d)) me.bad = true;  // the ring is sized for a whole run
    auto& bell = mesh.bells[nb];
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (chip::should_ring(bell.asleep)) {  // as chips are rung: once per sleep
      bell.word.fetch_add(1);
      futex_wake(bell.word);
    }
    d.clear();
    packed[static_cast<size_t>(nb)] = 0;
  };
  // A chunk for neighbour nb: its header (owned) and its payload (borrowed until the push,
  // which is the crossing's one copy).
  const auto add = [&](int nb, uint32_t dst, uint32_t sum, const uint8_t* payload) {
    auto& d = dg[static_cast<size_t>(nb)];
    const auto h = d.append_owned(kHeader);
    std::memcpy(h.data(), &dst, 4);
    std::memcpy(h.data() + 4, &sum, 4);
    d.append_borrowed({payload, me.chunk});
    if (++packed[static_cast<size_t>(nb)] == kPack) flush(nb);
  };
  wait_for_go(go_fd, done_fd);
  for (;;) {
    bool worked = false;
    for (int from : nbrs) {
      worked = mesh.ring(from, self).consume(64, [&](std::span<const uint8_t> b) {
                 for (size_t at = 0; at + me.unit <= b.size(); at += me.unit) {
                   uint32_t dst = 0;
                   if (me.arrive(b.data() + at, dst)) continue;
                   const uint8_t* payload = b.data() + at + kHeader;
                   add(next_hop(self, static_cast<int>(dst), me.cols), dst, me.departing_crc(payload, b.data() + at), payload);
                 }
                 for (int nb : nbrs) flush(nb);  // before the ring frees what they borrow
               }) > 0 || worked;
    }
    for (size_t k = 0; k < kOwnPerTurn && me.own_left > 0; ++k, --me.own_left, ++me.own_next, worked = true) {
      const int d = me.own_dst();
      const uint8_t* p = me.own_bytes();
      add(next_hop(self, d, me.cols), static_cast<uint32_t>(d), me.departing_crc(p, nullptr), p);
    }
    for (int nb : nbrs) flush(nb);
    report(me, done_fd, reported);
    if (worked) continue;
    // Idle: say so, look once more, then sleep until a neighbour rings.
    auto& bell = mesh.bells[self];
    const uint32_t word = bell.word.load();
    bell.asleep.store(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool empty = true;
    for (int from : nbrs) empty = empty && mesh.ring(from, self).empty();
    if (empty) futex_wait(bell.word, word);
    bell.asleep.store(0);
  }
}

}  // namespace raw_mesh_detail

// Raw UDP all_to_all over a rows x cols mesh (see above); gives up after `deadline`.
inline RawMeshResult raw_mesh_all_to_all(int rows, int cols, size_t per_pair, size_t chunk, RelayWork work,
                                         Waiting waiting = {}, std::chrono::seconds deadline = std::chrono::seconds(60)) {
  namespace d = raw_mesh_detail;
  std::vector<Socket> s;
  for (int i = 0; i < rows * cols; ++i) {
    s.push_back(udp_socket());
    int size = 256 << 20;  // a whole run's share fits: nothing is dropped for want of flow control
    setsockopt(s.back().fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
  }
  const auto r = d::run(rows, cols, per_pair, deadline, [&](int i, int go, int done) {
    d::udp_node(d::Node(i, rows, cols, per_pair, chunk, work), s, go, done, waiting);
  });
  for (auto& x : s) close(x.fd);
  return r;
}

// The same over shared-memory rings (see above).
inline RawMeshResult raw_shm_mesh_all_to_all(int rows, int cols, size_t per_pair, size_t chunk, RelayWork work,
                                             std::chrono::seconds deadline = std::chrono::seconds(60)) {
  namespace d = raw_mesh_detail;
  d::ShmMesh mesh(rows, cols);
  if (!mesh.memory) return {};
  return d::run(rows, cols, per_pair, deadline, [&](int i, int go, int done) {
    d::shm_node(d::Node(i, rows, cols, per_pair, chunk, work), mesh, go, done);
  });
}

}  // namespace ttemu::bench
