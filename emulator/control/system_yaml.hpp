// Reads a system specification (spec section 7) from YAML; the format is in
// docs/topology-format.md. Every problem is reported as ttemu::Error with one line:
// "<file>:<line>: <what is wrong, naming the item>".
#pragma once

#include <string>
#include <string_view>

#include "emulator/control/system.hpp"

namespace ttemu::control {

// Also reads tt-metal's mesh graph descriptors (mesh_graph_descriptor.hpp), told apart by name
// and content.
System load_system(const std::string& path);
System parse_system(std::string_view yaml_text, const std::string& source_name);

}  // namespace ttemu::control
