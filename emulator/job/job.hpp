// What a job is: one `ttemu launch` and everything it owns on this host. Its id, its private
// runtime directory (control socket, published description), the names of its shared-memory
// segments, whether it still lives, and the cleaning of what dead jobs left. Launcher, chips,
// clients and `ttemu clean` all find a job here, and nowhere else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ttemu::job {

// A job's id embeds the launcher's pid, so stale jobs can be recognised: "<pid>-<nonce hex>".
struct JobId {
  int pid = 0;
  uint32_t nonce = 0;
  std::string text() const;
  uint64_t hash() const { return (static_cast<uint64_t>(pid) << 32) | nonce; }
  static JobId create();
  static std::optional<JobId> parse(const std::string& text);
  bool operator==(const JobId&) const = default;
};

// The user's private runtime directory ($XDG_RUNTIME_DIR/ttemu, else /tmp/ttemu-<uid>), made
// if missing; throws Error unless it is a directory of this user's, mode 0700.
std::string runtime_dir();
std::string control_socket_path(const JobId& job);
// Where the launcher publishes the job's SystemDescription (description.hpp).
std::string description_path(const JobId& job);
// The first part of every shared-memory segment name of the job: "ttemu.<uid>.<job>.".
std::string segment_prefix(const JobId& job);

// Whether the launcher of a job still runs: its pid is alive and is a ttemu process (or, under
// another name, its control socket answers).
bool job_alive(const JobId& job);
// Whether a process with this pid exists (a pid of 0 or less: no).
bool process_alive(int pid);
// Whether it exists and still runs: a process that ended but was not yet reaped by its parent
// (a zombie) does not; one whose first thread ended while others run does.
bool process_running(int pid);
// This process's pid namespace (the inode of /proc/self/ns/pid), 0 if it cannot be read.
uint64_t pid_namespace();
// This user's jobs whose launchers run (none when the runtime directory does not exist yet).
std::vector<JobId> live_jobs();
// The job named, else $TTEMU_JOB, else the only live job of this user; throws Error saying
// which is missing or that several run.
JobId find_job(const std::optional<std::string>& named);
// Removes the segments, control sockets and descriptions of this user's jobs whose launcher
// is gone; returns what it removed.
std::vector<std::string> clean_stale();

}  // namespace ttemu::job
