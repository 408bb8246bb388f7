// One child process with a time bound: its standard output and error go to files; past the
// bound it is killed (a hang is a verdict, not a stuck campaign).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ttemu::tools {

struct ChildResult {
  int exit_status = -1;  // -1: killed by a signal (at the bound, or otherwise)
  bool timed_out = false;
  double seconds = 0;
};

// Runs `program` with `args`; throws Error if it cannot be started. At the bound, `at_bound`
// runs first (to record the hung system's state), then the child gets SIGTERM, and SIGKILL if
// it is still there 5 s later.
ChildResult run_child(const std::string& program, const std::vector<std::string>& args, const std::string& stdout_path,
                      const std::string& stderr_path, double limit_s, const std::function<void()>& at_bound = {});

// The command line as a shell would take it back (arguments quoted where needed); one word.
std::string shell_line(const std::vector<std::string>& words);
std::string shell_word(const std::string& word);

}  // namespace ttemu::tools
