// tt-metal mesh graph descriptors (topologies/tt-metal/) read as systems: the same chips,
// links and hosts as our own files for the same machines.
#include "emulator/control/mesh_graph_descriptor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "emulator/common/error.hpp"
#include "emulator/control/system_yaml.hpp"
#include "tests/test_support.hpp"

namespace ttemu::control {
namespace {

using routing::parse_port;
using test::load;
using test::TempDir;
using test::write_file;

// What a user relies on, without the names of chip specs and boards (ours say "Wormhole"
// and "N300"; an import names them after the descriptor).
using ChipKey = std::tuple<int, int, int, int, std::string>;  // mesh, device, row, col, host
using LinkKey = std::tuple<std::string, std::string, int>;    // ports (lower first), plane

std::multiset<ChipKey> chips(const System& sys) {
  std::multiset<ChipKey> out;
  for (const auto& c : sys.chips) out.emplace(c.id.mesh, c.id.device, c.coord.row, c.coord.col, c.host);
  return out;
}

std::multiset<LinkKey> links(const System& sys, bool inter_mesh_only = false) {
  std::multiset<LinkKey> out;
  for (const auto& l : sys.links) {
    if (inter_mesh_only && !l.inter_mesh()) continue;
    std::string a = routing::to_string(l.a), b = routing::to_string(l.b);
    if (b < a) std::swap(a, b);
    out.emplace(a, b, l.plane);
  }
  return out;
}

void expect_same_system(const System& imported, const System& ours, bool same_hosts = true) {
  EXPECT_EQ(imported.meshes.size(), ours.meshes.size());
  for (size_t i = 0; i < std::min(imported.meshes.size(), ours.meshes.size()); ++i) {
    EXPECT_EQ(imported.meshes[i].id, ours.meshes[i].id);
    EXPECT_EQ(imported.meshes[i].chips, ours.meshes[i].chips);
  }
  EXPECT_EQ(links(imported), links(ours));
  EXPECT_EQ(imported.planes, ours.planes);
  if (same_hosts) {
    EXPECT_EQ(chips(imported), chips(ours));
    EXPECT_EQ(imported.hosts, ours.hosts);
  }
}

struct Pair {
  const char* descriptor;
  const char* ours;
};

class MeshGraphDescriptorMatches : public ::testing::TestWithParam<Pair> {};

TEST_P(MeshGraphDescriptorMatches, OurTopologyOfTheSameMachine) {
  const System imported = load(GetParam().descriptor);
  EXPECT_EQ(imported.source, test::topo(GetParam().descriptor));  // messages name the descriptor
  expect_same_system(imported, load(GetParam().ours));
}

INSTANTIATE_TEST_SUITE_P(
    All, MeshGraphDescriptorMatches,
    ::testing::Values(Pair{"tt-metal/n300.textproto", "n300.yaml"}, Pair{"tt-metal/t3k.textproto", "t3k.yaml"},
                      Pair{"tt-metal/galaxy.textproto", "galaxy.yaml"}, Pair{"tt-metal/n300_legacy.yaml", "n300.yaml"},
                      Pair{"tt-metal/t3k_legacy.yaml", "t3k.yaml"}),
    [](const auto& param_info) {
      std::string name = param_info.param.descriptor;
      name = name.substr(name.find('/') + 1);
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

// The older YAML's Graph is ours: TG's eight gateway links land on the same ports. Its hosts
// cannot match: the format gives every mesh a host rank, where ours has the Galaxy hostless
// and all four gateways on one host.
TEST(MeshGraphDescriptor, LegacyTgHasOurChipsAndLinksButAHostPerMesh) {
  const System imported = load("tt-metal/tg_legacy.yaml");
  const System ours = load("tg.yaml");
  expect_same_system(imported, ours, false);
  EXPECT_EQ(imported.chips.size(), ours.chips.size());
  EXPECT_EQ(imported.hosts, (std::vector<std::string>{"host0", "host1", "host2", "host3", "host4"}));
  EXPECT_EQ(links(imported, true).size(), 8u);
}

TEST(MeshGraphDescriptor, MultiHostGraphGivesHostsPerBlockAndTheInterMeshLinks) {
  const System sys = load("tt-metal/two_t3k_three_hosts.textproto");
  ASSERT_EQ(sys.meshes.size(), 2u);
  EXPECT_EQ(sys.chips.size(), 16u);
  EXPECT_EQ(sys.hosts, (std::vector<std::string>{"host0", "host1", "host2"}));
  auto host = [&](const char* chip) { return sys.chips.at(static_cast<size_t>(*sys.node(*routing::parse_chip(chip)))).host; };
  EXPECT_EQ(host("M0D0"), "host0");
  EXPECT_EQ(host("M0D7"), "host0");
  EXPECT_EQ(host("M1D0"), "host1");  // columns 0-1 of mesh 1
  EXPECT_EQ(host("M1D5"), "host1");
  EXPECT_EQ(host("M1D2"), "host2");  // columns 2-3
  EXPECT_EQ(host("M1D7"), "host2");
  // The mesh-level connection takes mesh 0's south edge and mesh 1's north edge from their
  // first chips (two channels: both S ports of M0D4, both N ports of M1D0, planes 0 and 1);
  // the named one joins M0D7's first south port to M1D0's first free edge port (west: its
  // north ports are taken). S ports are P4-5, N P0-1, W P6-7 with two per side.
  const std::multiset<LinkKey> expected{{"M0D4P4", "M1D0P0", 0}, {"M0D4P5", "M1D0P1", 1}, {"M0D7P4", "M1D0P6", 0}};
  EXPECT_EQ(links(sys, true), expected);
  EXPECT_EQ(sys.links.size(), 2 * 20u + 3);
}

TEST(MeshGraphDescriptor, ImportedYamlLoadsBackAsTheSameSystem) {
  TempDir dir;
  for (const char* file : {"tt-metal/galaxy.textproto", "tt-metal/two_t3k_three_hosts.textproto", "tt-metal/tg_legacy.yaml"}) {
    const std::string path = test::topo(file);
    const std::string text = test::slurp(path);
    const DescriptorFormat format = descriptor_format(path, text);
    ASSERT_NE(format, DescriptorFormat::None) << file;
    write_file(dir / "imported.yaml", import_mesh_graph_descriptor(text, path, format));
    const System back = load_system((dir / "imported.yaml").string());
    EXPECT_EQ(descriptor_format((dir / "imported.yaml").string(), test::slurp(dir / "imported.yaml")), DescriptorFormat::None);
    expect_same_system(back, load(file));
  }
}

TEST(MeshGraphDescriptor, OurOwnYamlIsNotTakenForADescriptor) {
  for (const char* file : {"n300.yaml", "tg.yaml", "tgg_4host.yaml", "spec_4mesh_3x3.yaml"}) {
    EXPECT_EQ(descriptor_format(test::topo(file), test::slurp(test::topo(file))), DescriptorFormat::None) << file;
  }
}

// Every refusal is one line naming the file and the line of the culprit.
void expect_error(const std::string& name, const std::string& text, const std::string& message) {
  TempDir dir;
  write_file(dir / name, text);
  const std::string path = (dir / name).string();
  try {
    load_system(path);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ":" + message);
  }
}

const char* kMesh = "mesh_descriptors {\n  name: \"M\"\n  device_topology { dims: [1, 2] }\n  channels { count: 1 }\n}\n";

TEST(MeshGraphDescriptor, MalformedTextprotoIsRefusedNamingFileAndLine) {
  expect_error("a.textproto", "mesh_descriptors {\n  name: \"M\"\n", "3: '}' of the message opened on line 1 is missing");
  expect_error("a.textproto", "mesh_descriptors {\n  name \"M\"\n}\n", "2: expected ':' or '{' after 'name', found the string \"M\"");
  expect_error("a.textproto", std::string(kMesh) + "top_level_instance { mesh { mesh_descriptor: \"X\" } }\n",
               "6: mesh descriptor 'X' is not defined");
  expect_error("a.textproto", std::string(kMesh) + "top_level_instanse { mesh { mesh_descriptor: \"M\" } }\n",
               "6: the descriptor: unknown field 'top_level_instanse' (expected mesh_descriptors, graph_descriptors, top_level_instance)");
  expect_error("a.textproto", kMesh, "1: the descriptor has no top_level_instance");
  expect_error("a.textproto", "mesh_descriptors {\n  name: \"M\"\n  device_topology { dims: [1, x2] }\n  channels { count: 1 }\n}\n",
               "3: mesh descriptor 'M' device_topology columns must be a whole number, not 'x2'");
}

TEST(MeshGraphDescriptor, UnsupportedFeaturesAreRefusedByName) {
  expect_error("a.textproto",
               "mesh_descriptors {\n  name: \"M\"\n  device_topology { dims: [1, 2] types: [LINE, RING] }\n"
               "  channels { count: 1 }\n}\ntop_level_instance { mesh { mesh_descriptor: \"M\" } }\n",
               "3: mesh descriptor 'M': RING (torus) dimensions are not supported; only LINE");
  expect_error("a.textproto",
               std::string(kMesh) +
                   "graph_descriptors {\n  name: \"G\"\n  instances { mesh { mesh_descriptor: \"M\" mesh_id: 0 } }\n"
                   "  instances { mesh { mesh_descriptor: \"M\" mesh_id: 1 } }\n  connections {\n"
                   "    nodes { mesh { mesh_descriptor: \"M\" mesh_id: 0 } }\n    nodes { mesh { mesh_descriptor: \"M\" mesh_id: 1 } }\n"
                   "    channels { count: 1 }\n    directional: true\n  }\n}\n"
                   "top_level_instance { graph { graph_descriptor: \"G\" } }\n",
               "14: directional connections are not supported: every link carries both directions");
  // A 1x2 mesh of one channel has 6 edge ports; the seventh link has none left.
  expect_error("a.textproto",
               std::string(kMesh) +
                   "graph_descriptors {\n  name: \"G\"\n  instances { mesh { mesh_descriptor: \"M\" mesh_id: 0 } }\n"
                   "  instances { mesh { mesh_descriptor: \"M\" mesh_id: 1 } }\n"
                   "  connections {\n    nodes { mesh { mesh_descriptor: \"M\" mesh_id: 0 } }\n"
                   "    nodes { mesh { mesh_descriptor: \"M\" mesh_id: 1 } }\n    channels { count: 7 }\n  }\n}\n"
                   "top_level_instance { graph { graph_descriptor: \"G\" } }\n",
               "10: mesh 0 has no free edge port left for link 7 of 7 of this connection");
}

TEST(MeshGraphDescriptor, MalformedLegacyYamlIsRefusedNamingFileAndLine) {
  const std::string head = "ChipSpec: {arch: wormhole_b0, ethernet_ports: {N: 1, E: 1, S: 1, W: 1}}\n"
                           "Board:\n  - {name: B, type: Mesh, topology: [1, 2]}\n";
  expect_error("d.yaml", head + "Mesh:\n  - {id: 0, board: C, topology: [1, 1]}\n", "5: Mesh 0: board 'C' is not defined");
  expect_error("d.yaml", head + "Mesh:\n  - {id: 0, board: B, host_ranks: [[0, 1]]}\n",
               "5: Mesh 0 host_ranks must be 1 row(s) of 1 rank(s), one per host block");
  expect_error("d.yaml", head + "Mesh:\n  - {id: 0, board: B}\nGraph:\n  - [[0, S0], [7, N0]]\n",
               "7: Graph: mesh 7 is not defined");
  expect_error("d.yaml", "ChipSpec: {arch: wormhole_b0, ethernet_ports: {N: 1}}\nBoard:\n  - {name: B, type: Torus, topology: [1, 2]}\nMesh: []\n",
               "3: Board B: type 'Torus' is not supported; only Mesh");
}

}  // namespace
}  // namespace ttemu::control
