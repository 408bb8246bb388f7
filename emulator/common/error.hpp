// The error type every ttemu component throws for bad input: the message is one line that names
// the culprit (file and line, device, port, ...), ready to print after "ttemu: error: ".
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ttemu {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(one_line(what)) {}
  explicit Error(const char* what) : Error(std::string(what)) {}

  // A message quotes what the user gave (a key, a name, a value), which may hold a newline or
  // other control characters: they are written as escapes, so the message stays one line.
  static std::string one_line(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\x%02x", c);
        out += esc;
      } else {
        out += ch;
      }
    }
    return out;
  }
};

}  // namespace ttemu
