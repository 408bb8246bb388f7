// Several "hosts" on this one machine, for multi-host integration tests (Open MPI's mpirun
// across hosts, systems whose spec names hosts "host0", "host1", ...). Each host is
//   - a network namespace with `lo` and an `eth0` veth whose other end is on a bridge of ours,
//     eth0 holding 10.x.y.(i+1)/24 in a subnet no route or address of this machine uses (and,
//     with ipv6, fdXX:XXXX:XXXX:XXXX::(i+1)/64, added without duplicate address detection);
//   - a persistent, private mount namespace with a fresh tmpfs on /dev/shm and on ttemu's
//     runtime directory /tmp/ttemu-<uid> (control sockets, descriptions), and its
//     own /etc/hosts that resolves every host's name (host0 ... to its addresses);
//   - a UTS namespace whose hostname is its name ("host0"), so that mpirun knows which host it
//     is on and a program can tell from gethostname().
// Commands enter a host through nsenter (in_host(), run_in()); mpirun enters the others through
// the rsh agent script this object writes (mpirun_args()). Everything is undone by the
// destructor: processes left in the hosts are killed, the namespaces, links, mounts and files
// removed. Root only: unsupported() says why not, for GTEST_SKIP().
//
// The rest of the file system is shared, /tmp included: a build tree under /tmp (CI clones
// there) and a test's TempDir are seen inside the hosts. The harness's own files (namespace
// files, the agent, the hosts' /etc/hosts) live in /run/ttemu-netns-PREFIX. Commands inside a
// host start in "/", with the environment of whoever started them.
#pragma once

#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_support.hpp"

namespace ttemu::test {

class NetnsHosts {
 public:
  // "" when hosts can be made here, else a one-line reason (for GTEST_SKIP()).
  static std::string unsupported() {
    if (geteuid() != 0) return "not root: network and mount namespaces need root";
    for (const char* tool : {"ip", "nsenter", "unshare", "mount", "mpirun"}) {
      if (program(tool).empty()) return std::string("`") + tool + "` is not installed";
    }
    if (!fs::is_directory("/run")) return "no /run directory";
    // Anonymous namespaces, gone when `true` exits: can this process make them at all?
    const RunResult r = run({program("unshare"), "--net", "--mount", "--uts", "true"}, std::chrono::seconds(20));
    if (r.status != 0) return "cannot create namespaces: " + first_line(r.out);
    return "";
  }

  // A program's path, searched in $PATH and the usual bin and sbin directories; "" if none.
  static std::string program(const std::string& name) {
    std::string path = getenv("PATH") ? getenv("PATH") : "";
    path += ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    std::istringstream dirs(path);
    for (std::string d; std::getline(dirs, d, ':');) {
      if (d.empty()) continue;
      const std::string p = d + "/" + name;
      if (access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p;
    }
    return "";
  }

  explicit NetnsHosts(int n, bool ipv6 = false) : n_(n), ipv6_(ipv6), owner_(getpid()) {
    if (n < 1 || n > 250) throw std::invalid_argument("NetnsHosts: 1 to 250 hosts, not " + std::to_string(n));
    ip_ = program("ip");
    nsenter_ = program("nsenter");
    unshare_ = program("unshare");
    if (ip_.empty() || nsenter_.empty() || unshare_.empty()) throw std::runtime_error("NetnsHosts: ip, nsenter or unshare missing");
    try {
      create();
    } catch (...) {
      destroy();
      throw;
    }
  }

  ~NetnsHosts() { destroy(); }
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  int size() const { return n_; }
  std::string name(int i) const { return "host" + std::to_string(i); }
  // "host0,host1,...": every host, for mpirun's --host.
  std::string names() const {
    std::string list;
    for (int i = 0; i < n_; ++i) list += (i ? "," : "") + name(i);
    return list;
  }
  std::string address(int i) const { return net4_ + std::to_string(i + 1); }
  std::string address6(int i) const { return ipv6_ ? net6_ + std::to_string(i + 1) : ""; }  // "" without ipv6
  std::string subnet() const { return net4_ + "0/24"; }
  std::string subnet6() const { return ipv6_ ? net6_ + "/64" : ""; }
  // The names of what this object creates: "ttnXXXXXYY-b" (bridge), "-vI" (host I's veth
  // end on the bridge), "-hI" (host I's network namespace), /run/ttemu-netns-PREFIX.
  const std::string& prefix() const { return prefix_; }
  std::string netns(int i) const { return prefix_ + "-h" + std::to_string(i); }
  std::string bridge() const { return prefix_ + "-b"; }
  std::string veth(int i) const { return prefix_ + "-v" + std::to_string(i); }
  const std::string& dir() const { return dir_; }
  std::string rsh_agent() const { return dir_ + "/rsh-agent"; }

  // argv, to be run inside host i (from this machine or from inside any host).
  std::vector<std::string> in_host(int i, const std::vector<std::string>& argv) const {
    check_index(i);
    std::vector<std::string> out = {nsenter_};
    for (const auto& a : enter_options(i)) out.push_back(a);
    out.push_back("--");
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

  // The options mpirun needs to start ranks in these hosts (to follow with -np, --host
  // host0,host1... and the program): run as root, reach the hosts through our agent, speak TCP
  // only on the hosts' subnet, and bind no rank to a core (every host's daemon would bind its
  // first rank to the same core of this one machine).
  std::vector<std::string> mpirun_args() const {
    return {"--allow-run-as-root",
            "--mca", "plm_rsh_agent", rsh_agent(),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "oob_tcp_if_include", subnet(),
            "--mca", "btl_tcp_if_include", subnet(),
            "--mca", "btl", "self,tcp",
            "--bind-to", "none"};
  }

  // mpirun's output without the one warning it may print under load, and that says nothing
  // wrong: "[host0:PID] plm:rsh: Warning: setpgid(PID,PID) failed in parent with
  // errno=Permission denied(13)" (the agent it forked had already exec'd; Open MPI prints it
  // unconditionally and goes on).
  static std::string without_launch_warnings(const std::string& out) {
    std::string kept;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("plm:rsh: Warning: setpgid(") == std::string::npos) kept += line + "\n";
    }
    return kept;
  }

  // The processes in host i's network namespace.
  std::vector<int> pids(int i) const {
    check_index(i);
    return members({ns_id("/run/netns/" + netns(i))});
  }

  // ttemu's runtime directory when $XDG_RUNTIME_DIR is not set (emulator/job/job.hpp), each
  // host's own.
  static std::string runtime_dir() {
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    return xdg && *xdg ? std::string(xdg) + "/ttemu" : "/tmp/ttemu-" + std::to_string(getuid());
  }
  // The names in host i's own /dev/shm and runtime directory.
  std::vector<std::string> shm_entries(int i) const { return entries(i, "/dev/shm"); }
  std::vector<std::string> runtime_entries(int i) const { return entries(i, runtime_dir()); }

  // Runs `sh -c shell_command` inside host i: its stdout and stderr. *status: the exit status
  // (-1 if it overran timeout_s and was killed). A command that leaves something running in the
  // background must send its output elsewhere (`cmd >/dev/null 2>&1 &`), else this waits for it.
  std::string run_in(int i, const std::string& shell_command, int* status = nullptr, int timeout_s = 60) const {
    const RunResult r = run(in_host(i, {"/bin/sh", "-c", shell_command}), std::chrono::seconds(timeout_s));
    if (status) *status = r.status;
    return r.out;
  }

  // What is still there of the object whose prefix() was `prefix`: "netns NAME", "link NAME",
  // "mount PATH", "dir PATH". Empty once it is destroyed.
  static std::vector<std::string> leftovers(const std::string& prefix) {
    std::vector<std::string> out;
    if (prefix.empty()) return out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/run/netns", ec)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back("netns " + e.path().filename().string());
    }
    for (const auto& e : fs::directory_iterator("/sys/class/net", ec)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back("link " + e.path().filename().string());
    }
    std::istringstream mounts(slurp("/proc/self/mountinfo"));
    for (std::string line; std::getline(mounts, line);) {
      std::istringstream fields(line);
      std::string id, parent, devno, root, point;
      fields >> id >> parent >> devno >> root >> point;
      if (point.find(prefix) != std::string::npos) out.push_back("mount " + point);
    }
    const std::string d = "/run/ttemu-netns-" + prefix;
    if (fs::exists(d, ec)) out.push_back("dir " + d);
    return out;
  }
  std::vector<std::string> leftovers() const { return leftovers(prefix_); }

  // What the destructor does; idempotent, never throws. Kills every process left in the hosts
  // (waiting up to 10 s for them to be gone), then removes the mount namespaces, the veths, the
  // network namespaces, the bridge and the directory: only what this object made.
  void destroy() noexcept {
    try {
      kill_members();
    } catch (...) {
    }
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      try {
        undo(*it);
      } catch (...) {
      }
    }
    made_.clear();
  }

 private:
  enum class Kind { dir, bind_mount, ns_file, bridge, veth, netns };
  struct Made {
    Kind kind;
    std::string what;
  };
  using NsId = std::pair<dev_t, ino_t>;

  int n_;
  bool ipv6_;
  pid_t owner_;  // this process: its /proc/PID/root sees our namespace files from inside any host
  std::string ip_, nsenter_, unshare_;
  std::string prefix_, dir_, net4_, net6_;
  std::vector<Made> made_;  // in the order made; undone in reverse

  static std::string first_line(const std::string& text) {
    const auto end = text.find('\n');
    return end == std::string::npos ? text : text.substr(0, end);
  }

  void check_index(int i) const {
    if (i < 0 || i >= n_) throw std::out_of_range("NetnsHosts: no host " + std::to_string(i));
  }

  // nsenter's options to enter host i. The files are reached through this process's root, so
  // that they are found from inside any host as well (a host's mount namespace has neither our
  // namespace files nor the network namespaces' files of /run/netns).
  std::vector<std::string> enter_options(int i) const {
    const std::string root = "/proc/" + std::to_string(owner_) + "/root";
    return {"--net=" + root + "/run/netns/" + netns(i), "--mount=" + root + ns_file(i, "mnt"),
            "--uts=" + root + ns_file(i, "uts")};
  }
  std::string ns_file(int i, const std::string& kind) const { return dir_ + "/" + name(i) + "." + kind; }

  // Runs a command; throws with the command and its output if it fails.
  static std::string check(const std::vector<std::string>& args, int timeout_s = 30) {
    const RunResult r = run(args, std::chrono::seconds(timeout_s));
    if (r.status != 0) {
      std::string line;
      for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
      throw std::runtime_error("NetnsHosts: `" + line + "` failed (status " + std::to_string(r.status) + "): " + r.out);
    }
    return r.stdout_text;
  }

  static std::string base36(unsigned long v, size_t width) {
    std::string s;
    for (size_t k = 0; k < width; ++k, v /= 36) s.insert(s.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36]);
    return s;
  }

  // Prefixes (addresses as 16 bytes, IPv4 mapped to ::ffff:a.b.c.d) of every route, in every
  // table, and every address of this machine, of one family.
  struct Net {
    std::array<unsigned char, 16> bytes{};
    int len = 0;  // in bits, of the 16 bytes
  };
  static bool parse_net(const std::string& text, int default_len, Net& out) {
    const auto slash = text.find('/');
    const std::string addr = text.substr(0, slash);
    int len = slash == std::string::npos ? default_len : std::atoi(text.c_str() + slash + 1);
    out.bytes.fill(0);
    if (addr.find(':') != std::string::npos) {
      if (inet_pton(AF_INET6, addr.c_str(), out.bytes.data()) != 1) return false;
      out.len = len;
      return true;
    }
    in_addr a{};
    if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return false;
    out.bytes[10] = out.bytes[11] = 0xff;
    std::memcpy(out.bytes.data() + 12, &a, 4);
    out.len = 96 + len;
    return true;
  }
  static bool overlap(const Net& a, const Net& b) {
    const int len = std::min(a.len, b.len);
    for (int bit = 0; bit < len; ++bit) {
      const auto byte = static_cast<size_t>(bit / 8);
      const int mask = 0x80 >> (bit % 8);
      if ((a.bytes[byte] & mask) != (b.bytes[byte] & mask)) return false;
    }
    return true;
  }
  std::vector<Net> used_nets(const std::string& family) const {
    std::vector<Net> nets;
    const int host_len = family == "-4" ? 32 : 128;
    for (const auto& route : nlohmann::json::parse(check({ip_, "-j", family, "route", "show", "table", "all"}))) {
      const std::string dst = route.value("dst", "");
      Net net;
      if (dst != "default" && parse_net(dst, host_len, net)) nets.push_back(net);
    }
    for (const auto& link : nlohmann::json::parse(check({ip_, "-j", family, "addr", "show"}))) {
      if (!link.contains("addr_info")) continue;
      for (const auto& a : link["addr_info"]) {
        Net net;
        if (a.contains("local") && parse_net(a.value("local", "") + "/" + std::to_string(a.value("prefixlen", host_len)), host_len, net)) {
          nets.push_back(net);
        }
      }
    }
    return nets;
  }
  static bool free_net(const std::vector<Net>& used, const std::string& text) {
    Net net;
    if (!parse_net(text, 0, net)) return false;
    for (const auto& u : used) {
      if (overlap(u, net)) return false;
    }
    return true;
  }

  void pick_subnets(std::mt19937_64& rng) {
    const auto used4 = used_nets("-4");
    for (int attempt = 0; net4_.empty(); ++attempt) {
      if (attempt == 2000) throw std::runtime_error("NetnsHosts: no free 10.x.y.0/24 subnet on this machine");
      const auto v = rng();
      const std::string net = "10." + std::to_string(v % 256) + "." + std::to_string((v >> 8) % 256) + ".";
      if (free_net(used4, net + "0/24")) net4_ = net;
    }
    if (!ipv6_) return;
    const auto used6 = used_nets("-6");
    for (int attempt = 0; net6_.empty(); ++attempt) {
      if (attempt == 2000) throw std::runtime_error("NetnsHosts: no free fdXX:XXXX:XXXX:XXXX::/64 subnet on this machine");
      const auto v = rng();
      char text[64];
      std::snprintf(text, sizeof text, "fd%02x:%x:%x:%x::", static_cast<unsigned>(v & 0xff), static_cast<unsigned>((v >> 8) & 0xffff),
                    static_cast<unsigned>((v >> 24) & 0xffff), static_cast<unsigned>((v >> 40) & 0xffff));
      if (free_net(used6, std::string(text) + "/64")) net6_ = text;
    }
  }

  void create() {
    std::random_device seed;
    std::mt19937_64 rng((static_cast<std::uint64_t>(seed()) << 32) ^ seed() ^ static_cast<std::uint64_t>(owner_));
    // "ttn" + the pid + two random characters: fixed length, so that no prefix is the start of
    // another, and short, as interface names have at most 15 characters ("ttnPPPPPRR-v249").
    for (int attempt = 0; prefix_.empty(); ++attempt) {
      const std::string p = "ttn" + base36(static_cast<unsigned long>(owner_), 5) + base36(rng() % (36 * 36), 2);
      if (leftovers(p).empty()) prefix_ = p;
      if (attempt == 100) throw std::runtime_error("NetnsHosts: no free prefix");
    }
    dir_ = "/run/ttemu-netns-" + prefix_;
    if (::mkdir(dir_.c_str(), 0755) != 0) throw std::runtime_error("NetnsHosts: mkdir " + dir_ + ": " + std::strerror(errno));
    made_.push_back({Kind::dir, dir_});
    // Namespace files may only be bound onto a private mount.
    if (::mount(dir_.c_str(), dir_.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      throw std::runtime_error("NetnsHosts: mount --bind " + dir_ + ": " + std::strerror(errno));
    }
    made_.push_back({Kind::bind_mount, dir_});
    if (::mount(nullptr, dir_.c_str(), nullptr, MS_PRIVATE, nullptr) != 0) {
      throw std::runtime_error("NetnsHosts: mount --make-private " + dir_ + ": " + std::strerror(errno));
    }

    pick_subnets(rng);
    write_agent();
    write_hosts_file();

    // The bridge and the root ends of the veths carry no address of this machine (not even an
    // IPv6 link-local one).
    check({ip_, "link", "add", bridge(), "type", "bridge"});
    made_.push_back({Kind::bridge, bridge()});
    check({ip_, "link", "set", bridge(), "addrgenmode", "none"});
    check({ip_, "link", "set", bridge(), "up"});
    for (int i = 0; i < n_; ++i) {
      check({ip_, "netns", "add", netns(i)});
      made_.push_back({Kind::netns, netns(i)});
      check({ip_, "link", "add", veth(i), "type", "veth", "peer", "name", "eth0", "netns", netns(i)});
      made_.push_back({Kind::veth, veth(i)});
      check({ip_, "link", "set", veth(i), "addrgenmode", "none"});
      check({ip_, "link", "set", veth(i), "master", bridge(), "up"});
      check({ip_, "-n", netns(i), "addr", "add", address(i) + "/24", "dev", "eth0"});
      if (ipv6_) check({ip_, "-n", netns(i), "addr", "add", address6(i) + "/64", "dev", "eth0", "nodad"});
      check({ip_, "-n", netns(i), "link", "set", "eth0", "up"});
      check({ip_, "-n", netns(i), "link", "set", "lo", "up"});
    }
    for (int i = 0; i < n_; ++i) make_mount_namespace(i);
  }

  // Host i's mount and UTS namespaces, kept by binding them onto files of ours: its own tmpfs on
  // /dev/shm and runtime directory, its /etc/hosts, its hostname. The copies it starts with of the namespace
  // files mounted in /run/netns and in our directories are dropped (they would keep every other
  // network namespace of the machine alive as long as this one), and an empty /run/netns put
  // in their place, as on a machine of its own (`ip` inside would complain of the files left).
  void make_mount_namespace(int i) {
    for (const char* kind : {"mnt", "uts"}) {
      const std::string file = ns_file(i, kind);
      write_file(file, "");
      if (!fs::exists(file)) throw std::runtime_error("NetnsHosts: cannot create " + file);
    }
    const std::string script =
        "set -e\n"
        "mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm\n"
        "mkdir -p -m 700 " + runtime_dir() + "\n"
        "mount -t tmpfs -o mode=700,nosuid,nodev tmpfs " + runtime_dir() + "\n"
        "mount --bind " + dir_ + "/hosts /etc/hosts\n"
        "echo " + name(i) + " > /proc/sys/kernel/hostname\n"
        "for m in $(cut -d' ' -f5 /proc/self/mountinfo | grep -E '^/run/(netns(/|$)|ttemu-netns-[^/]+/)' | sort -r); do\n"
        "  umount -l \"$m\" 2>/dev/null || true\n"
        "done\n"
        "mkdir -p /run/netns\n"
        "mount -t tmpfs -o mode=755,size=64k tmpfs /run/netns\n";
    try {
      check({unshare_, "--mount=" + ns_file(i, "mnt"), "--uts=" + ns_file(i, "uts"), "--propagation", "private", "/bin/sh", "-c", script});
    } catch (...) {
      // unshare may have bound the files before the script failed.
      made_.push_back({Kind::ns_file, ns_file(i, "mnt")});
      made_.push_back({Kind::ns_file, ns_file(i, "uts")});
      throw;
    }
    made_.push_back({Kind::ns_file, ns_file(i, "mnt")});
    made_.push_back({Kind::ns_file, ns_file(i, "uts")});
  }

  // mpirun's rsh agent: `AGENT HOST COMMAND...` runs COMMAND (words for a shell, as ssh would
  // take them) inside HOST.
  void write_agent() const {
    std::string text =
        "#!/bin/sh\n"
        "# mpirun's rsh agent for the hosts of tests/netns_hosts.hpp (" + prefix_ + "): AGENT HOST COMMAND...\n"
        "host=$1\n"
        "shift\n"
        "case \"$host\" in\n";
    for (int i = 0; i < n_; ++i) {
      std::string options;
      for (const auto& o : enter_options(i)) options += " " + o;
      text += "  " + name(i) + ") exec " + nsenter_ + options + " -- /bin/sh -c \"$*\" ;;\n";
    }
    text += "  *) echo \"$0: no host $host\" >&2; exit 255 ;;\nesac\n";
    write_file(rsh_agent(), text);
    if (::chmod(rsh_agent().c_str(), 0755) != 0) throw std::runtime_error("NetnsHosts: chmod " + rsh_agent());
  }

  void write_hosts_file() const {
    std::string text = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
    for (int i = 0; i < n_; ++i) text += address(i) + "\t" + name(i) + "\n";
    for (int i = 0; ipv6_ && i < n_; ++i) text += address6(i) + "\t" + name(i) + "\n";
    write_file(dir_ + "/hosts", text);
  }

  std::vector<std::string> entries(int i, const std::string& dir) const {
    int status = 0;
    const std::string out = run_in(i, "ls -A " + dir, &status, 30);
    if (status != 0) throw std::runtime_error("NetnsHosts: ls -A " + dir + " in " + name(i) + ": " + out);
    std::vector<std::string> names;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) names.push_back(line);
    }
    return names;
  }

  static NsId ns_id(const std::string& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) return {0, 0};
    return {st.st_dev, st.st_ino};
  }

  // The processes (not zombies: they have left their namespaces) in any of `namespaces`.
  static std::vector<int> members(const std::vector<NsId>& namespaces) {
    std::vector<int> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      const std::string pid = e.path().filename().string();
      if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
      for (const char* kind : {"net", "mnt", "uts"}) {
        const NsId id = ns_id("/proc/" + pid + "/ns/" + kind);
        if (id.second != 0 && std::find(namespaces.begin(), namespaces.end(), id) != namespaces.end()) {
          out.push_back(std::stoi(pid));
          break;
        }
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void kill_members() const {
    std::vector<NsId> namespaces;
    for (const auto& m : made_) {
      NsId id{0, 0};
      if (m.kind == Kind::netns) id = ns_id("/run/netns/" + m.what);
      if (m.kind == Kind::ns_file) id = ns_id(m.what);
      if (id.second != 0) namespaces.push_back(id);
    }
    if (namespaces.empty()) return;
    // Killed processes leave their namespaces at once; new ones may be forked meanwhile, so
    // look again until none is left.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (auto left = members(namespaces); !left.empty() && Clock::now() < deadline; left = members(namespaces)) {
      for (int pid : left) {
        if (pid != getpid()) ::kill(pid, SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  void undo(const Made& m) const {
    switch (m.kind) {
      case Kind::ns_file:
      case Kind::bind_mount:
        if (::umount2(m.what.c_str(), 0) != 0 && errno != EINVAL && errno != ENOENT) ::umount2(m.what.c_str(), MNT_DETACH);
        break;
      case Kind::veth:
      case Kind::bridge:
        if (fs::exists("/sys/class/net/" + m.what)) run({ip_, "link", "del", m.what}, std::chrono::seconds(30));
        break;
      case Kind::netns:
        if (fs::exists("/run/netns/" + m.what)) run({ip_, "netns", "del", m.what}, std::chrono::seconds(30));
        break;
      case Kind::dir: {
        std::error_code ec;
        fs::remove_all(m.what, ec);
        break;
      }
    }
  }
};

}  // namespace ttemu::test
