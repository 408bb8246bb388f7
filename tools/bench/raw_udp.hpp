// Raw UDP baselines between two processes on the loopback, measured in the same run as the
// emulator: throughput with sendmmsg/recvmmsg, ping-pong round trips, and a relay along a
// route of processes. Latency baselines wait for datagrams as chip processes do (Waiting).
#pragma once

#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/link/frame.hpp"

namespace ttemu::bench {

using Clock = std::chrono::steady_clock;

struct Socket {
  int fd;
  uint16_t port;
};

// A UDP socket bound to `address` (IPv4, any port), made in the calling thread's network
// namespace, where it stays.
inline Socket udp_socket(const std::string& address = "127.0.0.1") {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  int size = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a UDP socket to " + address);
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return {fd, ntohs(a.sin_port)};
}

// How a process waits for its next datagram, the way a chip process does: in epoll, after
// polling for `spin` (yielding between polls) since it last had work. The baseline then differs
// from the emulator only in the work done per message.
struct Waiting {
  std::chrono::microseconds spin{0};
};

class Receiver {
 public:
  Receiver(int fd, Waiting w) : fd_(fd), w_(w), ep_(epoll_create1(EPOLL_CLOEXEC)) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }
  ~Receiver() { close(ep_); }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  // Returns once the socket is readable: spinning (yielding) for the spin, then in epoll.
  void wait() {
    const auto spin_end = Clock::now() + w_.spin;
    for (epoll_event ev;;) {
      const bool spinning = w_.spin.count() > 0 && Clock::now() < spin_end;
      const int n = epoll_wait(ep_, &ev, 1, spinning ? 0 : -1);
      if (n > 0) break;
      if (n == 0) sched_yield();
    }
  }
  ssize_t recv(void* buf, size_t size) {
    wait();
    return ::recv(fd_, buf, size, MSG_DONTWAIT);
  }

 private:
  int fd_;
  Waiting w_;
  int ep_;
};

// fork(), with the child killed when the benchmark dies (a benchmark killed by SIGKILL would
// otherwise leave its relays waiting in epoll).
inline pid_t fork_baseline() {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)) _exit(1);
  return pid;
}

inline sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// What each side of a raw stream does besides moving datagrams. Nothing, or TT-link's least
// work as the issue's cost model grants it ("a CRC on each side, the payload copied in and
// out"), and less: the sender computes each frame's CRC over its source memory and gathers
// header and payload into the datagram (the kernel's copy is the copy in), the receiver checks
// each frame's CRC and copies the payload out into its own memory. Frames are `payload` bytes
// behind an 8-byte header (number, CRC32), `per_datagram` to a datagram as TT-link packs them;
// each side cycles through 4 MiB of its own memory. No acknowledgements, windows or resends.
struct LeastWork {
  size_t payload = 0;  // 0: nothing (raw)
  size_t per_datagram = 1;  // at most kMaxFrames
  static constexpr size_t kHeader = 8;
  // As many frames as TT-link packs at most (three pieces a frame, 1024 a datagram); two
  // iovecs a frame stay within the kernel's 1024 (UIO_MAXIOV).
  static constexpr size_t kMaxFrames = 341;
  static constexpr size_t kMemory = size_t{4} << 20;
  size_t datagram() const { return per_datagram * (kHeader + payload); }
};

// Raw UDP throughput between two sockets the caller made (in network namespaces of their own,
// say): a child receives on `rx` with recvmmsg until an end marker; the parent sends `bytes`
// from `tx` to `to` in datagrams of `size` with sendmmsg (with `work`, datagrams of its frames).
// Both sockets are closed. Returns received payload bytes per second (0 if a CRC failed).
inline double raw_throughput(Socket rx, Socket tx, sockaddr_in to, size_t size, size_t bytes, LeastWork work = {}) {
  work.per_datagram = std::clamp<size_t>(work.per_datagram, 1, LeastWork::kMaxFrames);
  if (work.payload > 0) size = work.datagram();
  const size_t frame = LeastWork::kHeader + work.payload;
  const size_t slots = work.payload > 0 ? LeastWork::kMemory / work.payload : 0;
  int result[2];
  if (pipe(result) != 0) return 0;
  pid_t pid = fork_baseline();
  if (pid == 0) {
    std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(65536));
    std::vector<mmsghdr> msgs(64);
    std::vector<iovec> iov(64);
    std::vector<uint8_t> sink(work.payload > 0 ? LeastWork::kMemory : 0);
    size_t got = 0, frames = 0;
    bool failed = false;
    Clock::time_point first{};
    bool started = false, done = false;
    while (!done) {
      for (size_t i = 0; i < 64; ++i) {
        iov[i] = {bufs[i].data(), bufs[i].size()};
        msgs[i] = {};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      int n = recvmmsg(rx.fd, msgs.data(), 64, MSG_WAITFORONE, nullptr);
      for (size_t i = 0; i < static_cast<size_t>(std::max(n, 0)); ++i) {
        const size_t len = msgs[i].msg_len;
        if (len == 1) {
          done = true;
          continue;
        }
        if (!started) first = Clock::now(), started = true;
        if (work.payload == 0) {
          got += len;
          continue;
        }
        for (size_t at = 0; at + frame <= len; at += frame, ++frames) {
          uint32_t sum = 0;
          std::memcpy(&sum, bufs[i].data() + at + 4, 4);
          const uint8_t* p = bufs[i].data() + at + LeastWork::kHeader;
          failed |= link::crc32({p, work.payload}) != sum;
          std::memcpy(sink.data() + (frames % slots) * work.payload, p, work.payload);
          got += work.payload;
        }
      }
    }
    double secs = std::chrono::duration<double>(Clock::now() - first).count();
    double rate = secs > 0 && !failed ? static_cast<double>(got) / secs : 0;
    if (write(result[1], &rate, sizeof rate) != sizeof rate) _exit(1);
    _exit(0);
  }
  close(rx.fd);  // the child's now
  std::vector<uint8_t> payload(work.payload > 0 ? LeastWork::kMemory : size, 0xA5);
  if (work.payload > 0) {
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  }
  const size_t per = work.payload > 0 ? 2 * work.per_datagram : 1;  // iovecs per datagram
  std::vector<mmsghdr> msgs(32);
  std::vector<iovec> iov(32 * per);
  std::vector<std::array<uint32_t, 2>> headers(32 * work.per_datagram);
  for (size_t i = 0; i < 32; ++i) {
    iov[i * per] = {payload.data(), size};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i * per];
    msgs[i].msg_hdr.msg_iovlen = per;
    msgs[i].msg_hdr.msg_name = &to;
    msgs[i].msg_hdr.msg_namelen = sizeof to;
  }
  for (size_t sent = 0, number = 0; sent < bytes;) {
    if (work.payload > 0) {  // the next 32 datagrams' frames: a CRC each, gathered from memory
      for (size_t f = 0; f < 32 * work.per_datagram; ++f, ++number) {
        uint8_t* p = payload.data() + (number % slots) * work.payload;
        headers[f] = {static_cast<uint32_t>(number), link::crc32({p, work.payload})};
        iov[2 * f] = {headers[f].data(), LeastWork::kHeader};
        iov[2 * f + 1] = {p, work.payload};
      }
    }
    int n = sendmmsg(tx.fd, msgs.data(), 32, 0);
    if (n > 0) sent += static_cast<size_t>(n) * (work.payload > 0 ? work.per_datagram * work.payload : size);
  }
  uint8_t end = 0;
  for (int i = 0; i < 50; ++i) sendto(tx.fd, &end, 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  double rate = 0;
  if (read(result[0], &rate, sizeof rate) != sizeof rate) rate = 0;
  waitpid(pid, nullptr, 0);
  close(tx.fd);
  close(result[0]);
  close(result[1]);
  return rate;
}

// The same between two processes on the loopback.
inline double raw_throughput(size_t size, size_t bytes, LeastWork work = {}) {
  Socket rx = udp_socket();
  Socket tx = udp_socket();
  return raw_throughput(rx, tx, loopback(rx.port), size, bytes, work);
}

// Raw UDP round trips of `size` bytes between two processes.
inline std::vector<double> raw_round_trips(size_t size, int count, Waiting waiting = {}) {
  Socket a = udp_socket(), b = udp_socket();
  pid_t pid = fork_baseline();
  if (pid == 0) {
    std::vector<uint8_t> buf(65536);
    sockaddr_in back = loopback(a.port);
    Receiver rx(b.fd, waiting);
    for (int i = 0; i < count; ++i) {
      ssize_t n = rx.recv(buf.data(), buf.size());
      if (n > 0) sendto(b.fd, buf.data(), static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&back), sizeof back);
    }
    _exit(0);
  }
  std::vector<uint8_t> msg(size, 1), buf(65536);
  sockaddr_in to = loopback(b.port);
  std::vector<double> rtt;
  Receiver rx(a.fd, waiting);
  for (int i = 0; i < count; ++i) {
    auto t0 = Clock::now();
    sendto(a.fd, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (rx.recv(buf.data(), buf.size()) <= 0) break;
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  waitpid(pid, nullptr, 0);
  close(a.fd);
  close(b.fd);
  return rtt;
}


// Round trips of `size`-byte messages along `route`, relayed by a process per node: the nodes
// a message visits, from node 0 (the caller, which times it) back to node 0. A node may appear
// more than once (a route whose answer retraces its request). The benchmark gives it the
// shape of a fabric route, one node per chip that the write and its acknowledgement cross, so
// that the raw relay and the chips wake as many processes, in the same order.
inline std::vector<double> raw_route_round_trips(const std::vector<int>& route, size_t size, int count,
                                                 Waiting waiting = {}) {
  const bool shaped = route.size() >= 3 && route.size() <= 255 && route.front() == 0 && route.back() == 0 &&
                      std::all_of(route.begin() + 1, route.end() - 1, [](int n) { return n > 0; });
  if (!shaped || size < 1) {
    throw std::invalid_argument("a raw route goes from node 0 through other nodes back to node 0, in at most 254 steps");
  }
  const int nodes = *std::max_element(route.begin(), route.end()) + 1;
  std::vector<Socket> s;
  for (int i = 0; i < nodes; ++i) s.push_back(udp_socket());
  // Where step k sends: route[k]'s socket (the relays' loop then only looks it up).
  std::vector<sockaddr_in> step_to;
  for (int n : route) step_to.push_back(loopback(s[static_cast<size_t>(n)].port));
  std::vector<pid_t> relays;
  for (int i = 1; i < nodes; ++i) {
    pid_t pid = fork_baseline();
    if (pid == 0) {
      std::vector<uint8_t> buf(65536);
      Receiver rx(s[static_cast<size_t>(i)].fd, waiting);
      for (;;) {  // until the caller kills it
        const ssize_t got = rx.recv(buf.data(), buf.size());
        if (got <= 0) continue;
        // Byte 0: the step the message has reached; the next node is route[step + 1].
        const size_t next = ++buf[0];
        if (next >= route.size()) continue;
        sendto(s[static_cast<size_t>(i)].fd, buf.data(), static_cast<size_t>(got), 0,
               reinterpret_cast<const sockaddr*>(&step_to[next]), sizeof step_to[next]);
      }
    }
    relays.push_back(pid);
  }
  std::vector<uint8_t> msg(size, 1), buf(65536);
  const sockaddr_in& first = step_to[1];
  std::vector<double> rtt;
  Receiver rx(s[0].fd, waiting);
  for (int i = 0; i < count; ++i) {
    msg[0] = 1;
    auto t0 = std::chrono::steady_clock::now();
    sendto(s[0].fd, msg.data(), msg.size(), 0, reinterpret_cast<const sockaddr*>(&first), sizeof first);
    if (rx.recv(buf.data(), buf.size()) <= 0) break;
    rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  for (pid_t pid : relays) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  for (auto& x : s) close(x.fd);
  return rtt;
}

// Runs a shell command and returns what it printed on stdout.
inline std::string capture(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  std::string out;
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// Runs a shell command and returns the JSON objects it printed, one per line.
inline std::vector<nlohmann::json> capture_json_lines(const std::string& command) {
  const std::string out = capture(command);
  std::vector<nlohmann::json> docs;
  size_t at = 0;
  while ((at = out.find('{', at)) != std::string::npos) {
    size_t end = out.find('\n', at);
    auto doc = nlohmann::json::parse(out.substr(at, end - at), nullptr, false);
    if (!doc.is_discarded()) docs.push_back(doc);
    at = end == std::string::npos ? out.size() : end;
  }
  return docs;
}

// The JSON lines that `ttemu launch TOPOLOGY OPTIONS -- COMMAND` printed: COMMAND runs against
// the launched system (a ttemu client, or `sh -c '...'` for several); stderr is dropped.
inline std::vector<nlohmann::json> launch_json(const std::string& ttemu, const std::string& topology,
                                               const std::string& options, const std::string& command) {
  return capture_json_lines(fmt::format("{} launch {} {} -- {} 2>/dev/null", ttemu, topology, options, command));
}

// A file of the benchmark's own (a fault plan), removed when it goes, however the run ends.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& text) {
    char name[] = "/tmp/ttemu-bench-XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    path_ = name;
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!ok) throw std::runtime_error("cannot write " + path_);
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace ttemu::bench
