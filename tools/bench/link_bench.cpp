// TT-link against raw UDP, measured in one run on this machine (the yardstick is the machine,
// not an absolute figure): throughput between two processes with 4 KiB datagrams and with the
// datagram size TT-link packs to, TT-link goodput between two chip processes (clean and at a
// frame error rate), and small-message round trips both ways. Prints raw, emulated, ratio.
//
//   ttemu_bench_link [--frames N] [--payload B] [--fer P] [--repeat R] [--json]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Socket {
  int fd;
  uint16_t port;
};

Socket udp_socket() {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  int size = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return {fd, ntohs(a.sin_port)};
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Raw UDP throughput: a child receives with recvmmsg until an end marker; the parent sends
// `bytes` in datagrams of `size` with sendmmsg. Returns received payload bytes per second.
double raw_throughput(size_t size, size_t bytes) {
  Socket rx = udp_socket();
  int result[2];
  if (pipe(result) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<std::vector<uint8_t>> bufs(64, std::vector<uint8_t>(65536));
    std::vector<mmsghdr> msgs(64);
    std::vector<iovec> iov(64);
    size_t got = 0;
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
      for (int i = 0; i < n; ++i) {
        if (msgs[static_cast<size_t>(i)].msg_len == 1) done = true;
        else {
          if (!started) first = Clock::now(), started = true;
          got += msgs[static_cast<size_t>(i)].msg_len;
        }
      }
    }
    double secs = std::chrono::duration<double>(Clock::now() - first).count();
    double rate = secs > 0 ? static_cast<double>(got) / secs : 0;
    if (write(result[1], &rate, sizeof rate) != sizeof rate) _exit(1);
    _exit(0);
  }
  Socket tx = udp_socket();
  sockaddr_in to = loopback(rx.port);
  std::vector<uint8_t> payload(size, 0xA5);
  std::vector<mmsghdr> msgs(32);
  std::vector<iovec> iov(32);
  for (size_t i = 0; i < 32; ++i) {
    iov[i] = {payload.data(), payload.size()};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_name = &to;
    msgs[i].msg_hdr.msg_namelen = sizeof to;
  }
  for (size_t sent = 0; sent < bytes;) {
    int n = sendmmsg(tx.fd, msgs.data(), 32, 0);
    if (n > 0) sent += static_cast<size_t>(n) * size;
  }
  uint8_t end = 0;
  for (int i = 0; i < 50; ++i) sendto(tx.fd, &end, 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  double rate = 0;
  if (read(result[0], &rate, sizeof rate) != sizeof rate) rate = 0;
  waitpid(pid, nullptr, 0);
  close(rx.fd);
  close(tx.fd);
  close(result[0]);
  close(result[1]);
  return rate;
}

// Raw UDP round trips of `size` bytes between two processes, blocking receives both ways.
std::vector<double> raw_round_trips(size_t size, int count) {
  Socket a = udp_socket(), b = udp_socket();
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<uint8_t> buf(65536);
    sockaddr_in back = loopback(a.port);
    for (int i = 0; i < count; ++i) {
      ssize_t n = recv(b.fd, buf.data(), buf.size(), 0);
      if (n > 0) sendto(b.fd, buf.data(), static_cast<size_t>(n), 0, reinterpret_cast<sockaddr*>(&back), sizeof back);
    }
    _exit(0);
  }
  std::vector<uint8_t> msg(size, 1), buf(65536);
  sockaddr_in to = loopback(b.port);
  std::vector<double> rtt;
  for (int i = 0; i < count; ++i) {
    auto t0 = Clock::now();
    sendto(a.fd, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    if (recv(a.fd, buf.data(), buf.size(), 0) <= 0) break;
    rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  waitpid(pid, nullptr, 0);
  close(a.fd);
  close(b.fd);
  return rtt;
}

json run_ttemu(const std::string& ttemu, const std::string& topology, const std::string& extra,
               const std::string& client) {
  std::string cmd = fmt::format("{} launch {} {} -- {} {} 2>/dev/null", ttemu, topology, extra, ttemu, client);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  auto at = out.rfind("\n{");
  if (at == std::string::npos) at = out.find('{');
  else ++at;
  if (at == std::string::npos) throw std::runtime_error("no result from: " + cmd + "\n" + out);
  return json::parse(out.substr(at));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t frames = 100000, payload = 4096;
  double fer = 1e-3;
  bool as_json = false;
  int repeat = 3;
  std::string ttemu = TTEMU_BINARY, topology = TTEMU_TOPOLOGIES "/n300.yaml";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--frames" && i + 1 < argc) frames = std::stoul(argv[++i]);
    else if (a == "--payload" && i + 1 < argc) payload = std::stoul(argv[++i]);
    else if (a == "--fer" && i + 1 < argc) fer = std::stod(argv[++i]);
    else if (a == "--json") as_json = true;
    else if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::stoi(argv[++i]));
    else {
      fmt::print(stderr, "usage: ttemu_bench_link [--frames N] [--payload B] [--fer P] [--repeat R] [--json]\n");
      return 2;
    }
  }
  const size_t bytes = frames * payload;
  const size_t frame = payload + 20;
  const size_t packed = std::max<size_t>(frame, (65000 / frame) * frame);

  // Each figure is the median of `repeat` runs: this machine is shared and noisy.
  auto med = [&](auto f) {
    std::vector<double> v;
    for (int i = 0; i < repeat; ++i) v.push_back(f());
    return median(v);
  };
  double raw_small = med([&] { return raw_throughput(payload, bytes); });
  double raw_packed = med([&] { return raw_throughput(packed, bytes); });
  std::string client = fmt::format("link test M0D0P2 --frames {} --size {} --json", frames, payload);
  json clean, lossy;
  double clean_rate = med([&] {
    clean = run_ttemu(ttemu, topology, "", client);
    return clean["gb_per_s"].get<double>();
  });
  std::string plan_path = fmt::format("/tmp/ttemu-bench-plan-{}.yaml", getpid());
  std::ofstream(plan_path) << fmt::format("links:\n  - link: all\n    corrupt: {}\n", fer);
  uint64_t lossy_verified = 0, lossy_errors = 0;
  double lossy_rate = med([&] {
    lossy = run_ttemu(ttemu, topology, "--faults " + plan_path + " --seed 1", client);
    lossy_verified += lossy["verified"].get<uint64_t>();
    lossy_errors += lossy["errors"].get<uint64_t>();
    return lossy["gb_per_s"].get<double>();
  });
  std::filesystem::remove(plan_path);
  auto raw_rtt = raw_round_trips(64, 2000);
  json ping = run_ttemu(ttemu, topology, "", "link ping M0D0P2 --count 2000 --size 64 --json");

  const double tt_clean = clean_rate * 1e9;
  const double tt_lossy = lossy_rate * 1e9;
  const double raw_p50 = median(raw_rtt), tt_p50 = ping["p50_us"].get<double>();
  json result = {
      {"payload_bytes", payload}, {"frames", frames},
      {"raw_udp_gb_per_s", raw_small / 1e9}, {"raw_udp_packed_gb_per_s", raw_packed / 1e9},
      {"packed_datagram_bytes", packed},
      {"ttlink_gb_per_s", tt_clean / 1e9}, {"ttlink_vs_raw", tt_clean / raw_small},
      {"ttlink_vs_raw_packed", tt_clean / raw_packed},
      {"fer", fer}, {"ttlink_lossy_gb_per_s", tt_lossy / 1e9}, {"lossy_vs_clean", tt_lossy / tt_clean},
      {"lossy_crc_errors", lossy["crc_errors"]}, {"lossy_retransmits", lossy["retransmits"]},
      {"raw_rtt_p50_us", raw_p50}, {"ttlink_rtt_p50_us", tt_p50}, {"rtt_ratio", tt_p50 / raw_p50},
      {"repeat", repeat},
      {"verified", clean["verified"].get<uint64_t>() + lossy_verified},
      {"errors", clean["errors"].get<uint64_t>() + lossy_errors}};
  if (as_json) {
    fmt::print("{}\n", result.dump());
  } else {
    fmt::print("TT-link vs raw UDP on this machine, {} payloads of {} B (median of {} runs)\n", frames, payload, repeat);
    fmt::print("  {:<44} {:>10} {:>10} {:>7}\n", "", "raw", "ttemu", "ratio");
    fmt::print("  {:<44} {:>7.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", fmt::format("throughput, raw datagrams of {} B", payload),
               raw_small / 1e9, tt_clean / 1e9, tt_clean / raw_small);
    fmt::print("  {:<44} {:>7.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", fmt::format("throughput, raw datagrams of {} B", packed),
               raw_packed / 1e9, tt_clean / 1e9, tt_clean / raw_packed);
    fmt::print("  {:<44} {:>7.3f} GB/s {:>5.3f} GB/s {:>7.2f}\n", fmt::format("goodput at frame error rate {} vs clean", fer),
               tt_clean / 1e9, tt_lossy / 1e9, tt_lossy / tt_clean);
    fmt::print("  {:<44} {:>8.1f} us {:>7.1f} us {:>7.2f}\n", "round trip, 64 B, median", raw_p50, tt_p50, tt_p50 / raw_p50);
    fmt::print("  (lossy run: {} CRC errors, {} retransmissions; every payload verified: {})\n",
               lossy["crc_errors"].get<uint64_t>(), lossy["retransmits"].get<uint64_t>(),
               result["errors"] == 0 ? "yes" : "NO");
  }
  return result["errors"] == 0 ? 0 : 1;
}
