#include "emulator/process/owner_watch.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace ttemu::process {

OwnerWatch::~OwnerWatch() {
  for (const auto& [pid, fd] : fds_) {
    loop_.forget(fd);
    ::close(fd);
  }
}

void OwnerWatch::watch(uint32_t pid) {
  if (pid == 0 || fds_.contains(pid)) return;
  // (glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage for C++.)
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
  if (fd < 0) {
    if (errno == ESRCH) gone_(pid);  // it died before we looked
    else unwatchable_(pid, errno);
    return;
  }
  fds_.emplace(pid, fd);
  // A pidfd is readable once its process has ended.
  loop_.watch(fd, EPOLLIN, [this, pid](uint32_t) { ended(pid); });
}

void OwnerWatch::ended(uint32_t pid) {
  const auto it = fds_.find(pid);
  if (it == fds_.end()) return;
  loop_.forget(it->second);
  ::close(it->second);
  fds_.erase(it);
  gone_(pid);
}

}  // namespace ttemu::process
