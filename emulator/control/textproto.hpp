// A reader for protobuf's text format (textproto), enough for tt-metal's mesh graph
// descriptors: fields `name: value` and `name { ... }` (or `< ... >`), lists `[a, b]` (each
// element becomes one repeated field), strings, numbers, enum words and `#` comments. It knows
// no schema: the caller checks field names and kinds. Malformed text is reported as
// ttemu::Error "<source>:<line>: <what is wrong>".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ttemu::control {

struct TextField {
  enum class Kind { Message, String, Word };  // Word: a number or an enum name, unquoted
  std::string name;
  int line = 0;
  Kind kind = Kind::Word;
  std::string value;              // String / Word
  std::vector<TextField> fields;  // Message
};

// The top-level message: the file's fields, in order.
TextField parse_textproto(std::string_view text, const std::string& source);

}  // namespace ttemu::control
