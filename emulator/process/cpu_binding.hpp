// A chip process's share of its host's CPUs under `ttemu launch --cpu-bind blocks`: the launcher
// gives each chip its rank in the host's locality order (control::locality_order) and the number
// of chips the host runs; the chip takes its run of the CPUs it was started with.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ttemu::process {

// The CPUs of the chip at `rank` of `count` out of `allowed` (ascending): with more chips than
// CPUs, run k of the chips (ranks k*count/P up to (k+1)*count/P) shares allowed[k]; with as many
// CPUs or more, each chip has its own allowed[rank*P/count] up to allowed[(rank+1)*P/count - 1].
// Empty when `allowed` is empty or rank >= count.
std::vector<int> cpu_share(size_t rank, size_t count, const std::vector<int>& allowed);

// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// Binds every thread of this process to `cpus`; an empty string, or why not ("sched_setaffinity
// of thread T: reason").
std::string bind_process(const std::vector<int>& cpus);

// A CPU list as Linux prints one (/proc/PID/status Cpus_allowed_list): "0-3,6".
std::string cpu_list_text(const std::vector<int>& cpus);

// The CPUs process `pid` may run on, as /proc/PID/status lists them; empty if it is gone.
std::string cpus_allowed_of(int pid);

// `ttemu launch --sched batch`: every thread of this process under SCHED_BATCH, so that a chip
// woken by a datagram waits for the running one to sleep instead of preempting it (fewer
// context switches on an oversubscribed host; longer round trips). An empty string, or why not.
std::string schedule_as_batch();
// The scheduling policy of process `pid` as `ttemu status` names it ("normal", "batch",
// "idle", "fifo", "rr"); empty if it is gone.
std::string scheduling_of(int pid);

}  // namespace ttemu::process
