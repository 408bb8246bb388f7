#include "emulator/chip/segments.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::chip {

namespace bip = boost::interprocess;
namespace fs = std::filesystem;

namespace {

std::string user_prefix() { return fmt::format("ttemu.{}.", getuid()); }

}  // namespace

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

std::string segment_name(const JobId& job, routing::ChipId chip, SegmentKind kind) {
  const char* suffix = kind == SegmentKind::kControl ? "ctl" : kind == SegmentKind::kL1 ? "l1" : "dram";
  return fmt::format("{}{}.{}.{}", user_prefix(), job.text(), routing::to_string(chip), suffix);
}

Segment::Segment(std::string name, std::unique_ptr<bip::mapped_region> region)
    : name_(std::move(name)), region_(std::move(region)) {}
Segment::Segment() = default;
Segment::Segment(Segment&&) noexcept = default;
Segment& Segment::operator=(Segment&&) noexcept = default;
Segment::~Segment() = default;
void* Segment::data() const { return region_ ? region_->get_address() : nullptr; }
size_t Segment::size() const { return region_ ? region_->get_size() : 0; }

Segment Segment::create(const std::string& name, size_t size) {
  try {
    bip::permissions owner_only(0600);
    bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, owner_only);
    shm.truncate(static_cast<bip::offset_t>(size));  // sparse: pages appear when touched
    return Segment(name, std::make_unique<bip::mapped_region>(shm, bip::read_write));
  } catch (const bip::interprocess_exception& e) {
    throw Error(fmt::format("shared memory {}: cannot create {} bytes: {}", name, size, e.what()));
  }
}

Segment Segment::open(const std::string& name) {
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
    return Segment(name, std::make_unique<bip::mapped_region>(shm, bip::read_write));
  } catch (const bip::interprocess_exception& e) {
    throw Error(fmt::format("shared memory {}: cannot open: {}", name, e.what()));
  }
}

bool unlink_segment(const std::string& name) { return bip::shared_memory_object::remove(name.c_str()); }

std::vector<std::string> list_segments() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(user_prefix(), 0) == 0) out.push_back(n);
  }
  return out;
}

void unlink_chip_segments(const JobId& job, routing::ChipId chip) {
  for (auto kind : {SegmentKind::kControl, SegmentKind::kL1, SegmentKind::kDram}) unlink_segment(segment_name(job, chip, kind));
}

bool process_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

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

std::string control_socket_path(const JobId& job) {
  return fmt::format("{}/{}.sock", runtime_dir(), job.text());
}

std::vector<std::string> clean_stale() {
  std::vector<std::string> removed;
  const std::string prefix = user_prefix();
  for (const auto& name : list_segments()) {
    std::string rest = name.substr(prefix.size());
    auto job = JobId::parse(rest.substr(0, rest.find('.')));
    if (job && !job_alive(*job) && unlink_segment(name)) removed.push_back("/dev/shm/" + name);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runtime_dir(), ec)) {
    if (e.path().extension() != ".sock") continue;
    auto job = JobId::parse(e.path().stem().string());
    if (job && !job_alive(*job) && fs::remove(e.path(), ec)) removed.push_back(e.path().string());
  }
  return removed;
}

}  // namespace ttemu::chip
