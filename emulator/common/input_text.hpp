// Input files as text: read whole, refused with a one-line error naming them when they cannot
// be (a directory reads as empty through an ifstream, so it is caught here), and checked to be
// UTF-8 before a parser quotes their bytes into messages or JSON.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu {

inline std::string read_text_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(fmt::format("{}: cannot open the file: {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw Error(fmt::format("{}: is a directory, not a file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open the file: {}", path, std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: cannot read the file", path));
  return buf.str();
}

// The offset of the first byte that does not belong to well-formed UTF-8 (no overlong forms,
// no surrogates, nothing above U+10FFFF), or text.size() if there is none.
inline size_t first_bad_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (b < 0x80) len = 1;
    else if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) len = 3, lo = 0xA0;
    else if (b >= 0xE1 && b <= 0xEC) len = 3;
    else if (b == 0xED) len = 3, hi = 0x9F;
    else if (b >= 0xEE && b <= 0xEF) len = 3;
    else if (b == 0xF0) len = 4, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) len = 4, hi = 0x8F;
    else return i;
    if (i + len > text.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return i;
    }
    i += len;
  }
  return i;
}

// A whole number written in decimal, all of `text` (a sign allowed); nullopt for anything else.
inline std::optional<long> whole_number(const std::string& text) {
  size_t used = 0;
  long n = 0;
  try {
    n = std::stol(text, &used, 10);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return n;
}

// Throws "<source>:<line>: not UTF-8 text (byte 0xff)" for text that is not UTF-8.
inline void check_utf8(std::string_view text, const std::string& source) {
  const size_t at = first_bad_utf8(text);
  if (at == text.size()) return;
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  throw Error(fmt::format("{}:{}: not UTF-8 text (byte {:#04x})", source, line, static_cast<unsigned char>(text[at])));
}

}  // namespace ttemu
