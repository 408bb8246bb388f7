// For worker programs run as `ttemu launch FILE -- PROGRAM` (tests/socket_client.cpp,
// tests/memory_keys_client.cpp): a worker handle that closes itself, and `ttemu status` of the
// system they run in.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "libfabric_tt/tt_fabric.h"

namespace ttemu::test {

struct Handle {
  tt_fabric* f = nullptr;
  ~Handle() { tt_fabric_close(f); }
};

// Opens a worker on `core` of chip d of the running system ($TTEMU_JOB) into h; a failure
// fails the test, naming the reason.
inline void open_on(Handle& h, tt_fabric_device d, uint16_t core) {
  char err[256] = {};
  h.f = tt_fabric_open(nullptr, d.mesh, d.device, core, err, sizeof err);
  ASSERT_NE(h.f, nullptr) << "M" << d.mesh << "D" << d.device << ": " << err;
}

// The output of `ttemu ARGS` (a command of the running system); empty if it could not run. The
// launcher that started the program is the ttemu binary (it execs its command directly), and
// TTEMU_JOB names the job.
inline std::string ttemu_output(const std::string& args) {
  char exe[4096] = {};
  const ssize_t n = readlink(("/proc/" + std::to_string(getppid()) + "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return {};
  FILE* p = popen((std::string(exe) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return {};
  std::string out;
  char buf[4096];
  for (size_t k; (k = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, k);
  pclose(p);
  return out;
}

// The output of `ttemu status ARGS`.
inline std::string status_text(const std::string& args) { return ttemu_output("status " + args); }

}  // namespace ttemu::test
