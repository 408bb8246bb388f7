#include "emulator/job/job.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::job {

namespace fs = std::filesystem;

namespace {

std::string user_prefix() { return fmt::format("ttemu.{}.", getuid()); }

}  // namespace

bool process_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

bool process_running(int pid) {
  if (!process_alive(pid)) return false;
  // /proc/PID/stat: "PID (COMM) STATE ..."; COMM may hold spaces and parentheses, STATE
  // follows the last ')'.
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;  // unreadable: assume it runs
  if (stat[close + 2] != 'Z') return true;
  // The first thread's state: a zombie whose other threads run is a running process.
  size_t threads = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++threads;
  }
  return threads > 1;
}

uint64_t pid_namespace() {
  struct stat st{};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? st.st_ino : 0;
}

std::string JobId::text() const { return fmt::format("{}-{:08x}", pid, nonce); }

JobId JobId::create() {
  std::random_device rd;
  return JobId{static_cast<int>(getpid()), static_cast<uint32_t>(rd()) | 1u};
}

std::optional<JobId> JobId::parse(const std::string& text) {
  int pid = 0;
  unsigned nonce = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d-%8x%c", &pid, &nonce, &tail) != 2 || pid <= 0) return std::nullopt;
  return JobId{pid, nonce};
}

std::string runtime_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  std::string dir = xdg && *xdg ? fmt::format("{}/ttemu", xdg) : fmt::format("/tmp/ttemu-{}", getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error(fmt::format("{}: cannot create the runtime directory", dir));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
      (st.st_mode & 077) != 0) {
    throw Error(fmt::format("{}: not a private directory of this user", dir));
  }
  return dir;
}

std::string control_socket_path(const JobId& job) { return fmt::format("{}/{}.sock", runtime_dir(), job.text()); }
std::string description_path(const JobId& job) { return fmt::format("{}/{}.json", runtime_dir(), job.text()); }
std::string segment_prefix(const JobId& job) { return user_prefix() + job.text() + "."; }

bool job_alive(const JobId& job) {
  if (!process_alive(job.pid)) return false;
  // A pid outlives its process: after a crash it may name some other program by now. A job
  // is alive only while its pid runs the ttemu binary, under its usual name or under this
  // process's own (a renamed copy); when /proc cannot tell, assume it does.
  auto comm = [](const std::string& pid) {
    std::ifstream in("/proc/" + pid + "/comm");
    std::string name;
    return std::getline(in, name) ? std::optional<std::string>(name) : std::nullopt;
  };
  const auto name = comm(std::to_string(job.pid));
  if (!name) return true;
  if (*name == "ttemu" || *name == comm("self").value_or("ttemu")) return true;
  // Under another name (valgrind, a symlink): alive if its control socket still answers.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string path = control_socket_path(job);
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  const bool answers = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return answers;
}

std::vector<JobId> live_jobs() {
  std::vector<JobId> live;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runtime_dir(), ec)) {
    auto id = JobId::parse(e.path().stem().string());
    if (e.path().extension() == ".sock" && id && job_alive(*id)) live.push_back(*id);
  }
  return live;
}

JobId find_job(const std::optional<std::string>& named) {
  // A client started by `ttemu launch ... -- CMD` talks to its own system.
  std::optional<std::string> text = named;
  if (!text) {
    if (const char* env = std::getenv("TTEMU_JOB"); env && *env) text = env;
  }
  if (text) {
    auto id = JobId::parse(*text);
    if (!id) throw Error(fmt::format("'{}' is not a job id (like 12345-1a2b3c4d)", *text));
    if (!fs::exists(control_socket_path(*id))) throw Error(fmt::format("no running job {}", *text));
    return *id;
  }
  const std::vector<JobId> live = live_jobs();
  if (live.empty()) throw Error("no running system: start one with 'ttemu launch'");
  if (live.size() > 1) {
    std::string names;
    for (const auto& j : live) names += " " + j.text();
    throw Error(fmt::format("{} systems are running; name one with --job:{}", live.size(), names));
  }
  return live.front();
}

std::vector<std::string> clean_stale() {
  std::vector<std::string> removed;
  const std::string prefix = user_prefix();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    auto job = JobId::parse(rest.substr(0, rest.find('.')));
    if (job && !job_alive(*job) && ::shm_unlink(name.c_str()) == 0) removed.push_back("/dev/shm/" + name);
  }
  for (const auto& e : fs::directory_iterator(runtime_dir(), ec)) {
    const auto ext = e.path().extension();
    if (ext != ".sock" && ext != ".json") continue;
    auto job = JobId::parse(e.path().stem().string());
    if (job && !job_alive(*job) && fs::remove(e.path(), ec)) removed.push_back(e.path().string());
  }
  return removed;
}

}  // namespace ttemu::job
