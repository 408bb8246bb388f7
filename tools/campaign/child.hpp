// One child process with a time bound: its standard output and error go to files; past the
// bound it is killed (a hang is a verdict, not a stuck campaign).
#pragma once

#include <string>
#include <vector>

namespace ttemu::tools {

struct ChildResult {
  int exit_status = -1;  // -1: killed by a signal (at the bound, or otherwise)
  bool timed_out = false;
  double seconds = 0;
};

// Runs `program` with `args`; throws Error if it cannot be started.
ChildResult run_child(const std::string& program, const std::vector<std::string>& args, const std::string& stdout_path,
                      const std::string& stderr_path, double limit_s);

// The command line as a shell would take it back (arguments quoted where needed).
std::string shell_line(const std::vector<std::string>& words);

}  // namespace ttemu::tools
