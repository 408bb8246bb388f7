// Loading YAML input and describing its nodes in errors, the same way for every file format
// (system specifications, fault plans). Include only where yaml-cpp is linked.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"

namespace ttemu {

// What a node is, for "X must be ..., not <this>": a list, a mapping, empty, or its text.
inline std::string yaml_kind(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "empty";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  std::string text = n.Scalar();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return "'" + text + "'";
}

// Parses text that must be UTF-8 YAML. Errors are one line, "<source>:<line>: not valid YAML:
// ...". yaml-cpp's parser recurses per level of nesting; its guard stops it (at a few hundred
// levels) before the stack runs out, with the message "bad file": reported as what it is.
inline YAML::Node load_yaml(std::string_view text, const std::string& source) {
  check_utf8(text, source);
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    throw Error(fmt::format("{}:{}: not valid YAML: nested too deep", source, std::max(e.mark.line, 0) + 1));
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: not valid YAML: {}", source, std::max(e.mark.line, 0) + 1, e.msg));
  }
}

}  // namespace ttemu
