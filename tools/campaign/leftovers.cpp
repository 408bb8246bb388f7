#include "tools/campaign/leftovers.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "emulator/job/job.hpp"

namespace ttemu::tools {

namespace fs = std::filesystem;

std::vector<std::string> leftovers(const std::string& job) {
  std::vector<std::string> out;
  const auto id = job::JobId::parse(job);
  if (!id) return {fmt::format("the job id '{}' could not be read", job)};
  if (job::job_alive(*id)) out.push_back(fmt::format("launcher {} still runs", id->pid));
  // Chip processes name their job on their command line: ttemu chip run --job JOB ...
  const std::string mark = std::string("--job") + '\0' + job + '\0';
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(::getpid())) continue;
    std::ifstream f(e.path() / "cmdline", std::ios::binary);
    const std::string cmdline{std::istreambuf_iterator<char>(f), {}};
    if (cmdline.find(mark) == std::string::npos) continue;
    std::string words = cmdline;
    std::replace(words.begin(), words.end(), '\0', ' ');
    out.push_back(fmt::format("process {} ({})", pid, words.substr(0, words.find_last_not_of(' ') + 1)));
  }
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    if (e.path().filename().string().rfind(job::segment_prefix(*id), 0) == 0) out.push_back(e.path().string());
  }
  for (const std::string& p : {job::control_socket_path(*id), job::description_path(*id)}) {
    if (fs::exists(p, ec)) out.push_back(p);
  }
  return out;
}

}  // namespace ttemu::tools
