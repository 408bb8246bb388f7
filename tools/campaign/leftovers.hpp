// What a job left behind once its launcher is gone (the processes engine's last invariant):
// its launcher or chip processes still running, its shared-memory segments, its control
// socket and published description (emulator/job names them all).
#pragma once

#include <string>
#include <vector>

namespace ttemu::tools {

// Each thing left, in words ("process 1234 (ttemu chip run ... M0D3)", "/dev/shm/..."); empty
// when nothing was. `job` is the job id as the event log's job_started line gives it.
std::vector<std::string> leftovers(const std::string& job);

}  // namespace ttemu::tools
