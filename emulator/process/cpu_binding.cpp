#include "emulator/process/cpu_binding.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

namespace ttemu::process {

std::vector<int> cpu_share(size_t rank, size_t count, const std::vector<int>& allowed) {
  const size_t p = allowed.size();
  if (p == 0 || rank >= count) return {};
  const size_t lo = rank * p / count, hi = std::max(lo + 1, (rank + 1) * p / count);
  return {allowed.begin() + static_cast<std::ptrdiff_t>(lo), allowed.begin() + static_cast<std::ptrdiff_t>(hi)};
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(static_cast<size_t>(c), &set)) cpus.push_back(c);
  }
  return cpus;
}

namespace {

// Applies `set` to every thread the process has now (threads started later inherit what their
// creator has); an empty string, or "<call> of thread T: reason".
std::string for_every_thread(const char* call, const std::function<int(pid_t)>& set) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const pid_t tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
    if (set(tid) != 0 && errno != ESRCH) return fmt::format("{} of thread {}: {}", call, tid, std::strerror(errno));
  }
  if (ec) return fmt::format("cannot list /proc/self/task: {}", ec.message());
  return "";
}

}  // namespace

std::string bind_process(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return fmt::format("CPU {} is out of range", c);
    CPU_SET(static_cast<size_t>(c), &set);
  }
  return for_every_thread("sched_setaffinity", [&](pid_t tid) { return sched_setaffinity(tid, sizeof set, &set); });
}

std::string schedule_as_batch() {
  const sched_param none{};
  return for_every_thread("sched_setscheduler", [&](pid_t tid) { return sched_setscheduler(tid, SCHED_BATCH, &none); });
}

std::string scheduling_of(int pid) {
  switch (sched_getscheduler(pid)) {
    case SCHED_OTHER: return "normal";
    case SCHED_BATCH: return "batch";
    case SCHED_IDLE: return "idle";
    case SCHED_FIFO: return "fifo";
    case SCHED_RR: return "rr";
    case -1: return "";
    default: return "other";
  }
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string cpus_allowed_of(int pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  const std::string key = "Cpus_allowed_list:";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t at = line.find_first_not_of(" \t", key.size());
    return at == std::string::npos ? "" : line.substr(at);
  }
  return "";
}

}  // namespace ttemu::process
