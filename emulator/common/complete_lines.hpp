// Reading a file that another process is still appending to (an event log): only whole lines.
#pragma once

#include <functional>
#include <istream>
#include <string>

namespace ttemu {

// Calls `each` with every complete line `in` holds from where it stands; a partial last line
// (the file is being written: a writer's buffer can split a line into two writes) stays for
// the next call.
inline void read_complete_lines(std::istream& in, const std::function<void(const std::string&)>& each) {
  std::string line;
  while (true) {
    const auto at = in.tellg();
    if (!std::getline(in, line)) break;
    if (in.eof()) {  // no newline yet: read it again once it is complete
      in.clear();
      in.seekg(at);
      break;
    }
    each(line);
  }
  in.clear();
}

}  // namespace ttemu
