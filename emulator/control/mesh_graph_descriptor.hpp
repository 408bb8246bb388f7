// tt-metal's mesh graph descriptors read as system specifications: the textproto
// MeshGraphDescriptor (tt_metal/fabric/protobuf/mesh_graph_descriptor.proto) and the older YAML
// descriptor (top-level ChipSpec / Board / Mesh / Graph lists). The result is our YAML
// (docs/topology-format.md), which load_system() then reads like any other file; what maps to
// what, and what is refused, is in docs/topology-format.md#tt-metal-mesh-graph-descriptors.
// Every problem is reported as ttemu::Error "<file>:<line>: <what is wrong, naming it>".
#pragma once

#include <string>
#include <string_view>

namespace ttemu::control {

enum class DescriptorFormat { None, TextProto, Yaml };

// Which tt-metal format a file is in: textproto by its extension (.textproto, .txtpb, .pbtxt)
// or its first field, the YAML one by its content (a ChipSpec with ethernet_ports, or Board /
// Mesh given as lists). None: it is not a descriptor (our own YAML, say).
DescriptorFormat descriptor_format(const std::string& path, std::string_view text);

// Our system-specification YAML for a descriptor.
std::string import_mesh_graph_descriptor(std::string_view text, const std::string& source,
                                         DescriptorFormat format);

namespace mgd {
std::string import_textproto(std::string_view text, const std::string& source);
std::string import_yaml(std::string_view text, const std::string& source);
}  // namespace mgd

}  // namespace ttemu::control
