// The error type every ttemu component throws for bad input: the message is one line that names
// the culprit (file and line, device, port, ...), ready to print after "ttemu: error: ".
#pragma once

#include <stdexcept>
#include <string>

namespace ttemu {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ttemu
