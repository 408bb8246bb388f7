#include "emulator/control/system_yaml.hpp"

#include <gtest/gtest.h>

#include "emulator/common/error.hpp"
#include "tests/test_support.hpp"

namespace ttemu::control {
namespace {

using routing::parse_chip;
using routing::parse_port;
using test::load;

struct Shipped {
  const char* file;
  size_t meshes, chips, links;
  int planes;
};

// Links follow from the boards: a RxC board of k ports per side has ((R*(C-1) + (R-1)*C) * k)
// links, plus one per Graph connection (written from both ends).
class ShippedTopology : public ::testing::TestWithParam<Shipped> {};

TEST_P(ShippedTopology, LoadsWithTheExpectedShape) {
  const Shipped& s = GetParam();
  System sys = load(s.file);
  EXPECT_EQ(sys.meshes.size(), s.meshes);
  EXPECT_EQ(sys.chips.size(), s.chips);
  EXPECT_EQ(sys.links.size(), s.links);
  EXPECT_EQ(sys.planes, s.planes);
  // Every link is indexed from both of its ports, and no port carries two links.
  for (size_t i = 0; i < sys.links.size(); ++i) {
    for (const auto& end : {sys.links[i].a, sys.links[i].b}) {
      EXPECT_EQ(sys.link_at(*sys.node(end.chip), end.port), static_cast<int>(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, ShippedTopology,
    ::testing::Values(Shipped{"n150.yaml", 1, 1, 0, 1}, Shipped{"n300.yaml", 1, 2, 2, 2},
                      Shipped{"t3k.yaml", 1, 8, (2 * 3 + 1 * 4) * 2, 2},
                      Shipped{"galaxy.yaml", 1, 32, (4 * 7 + 3 * 8) * 4, 4},
                      Shipped{"tg.yaml", 5, 36, 208 + 8, 4},
                      Shipped{"tgg.yaml", 10, 72, 2 * 208 + 8 + 8 + 16, 4},
                      Shipped{"quanta2_galaxy.yaml", 1, 64, (8 * 7 + 7 * 8) * 4, 4},
                      Shipped{"blackhole_2x4.yaml", 1, 8, (2 * 3 + 1 * 4) * 2, 2},
                      Shipped{"spec_4mesh_3x3.yaml", 4, 36, 4 * 12 + 4, 1},
                      Shipped{"mesh_4x4.yaml", 1, 16, 24, 1}),
    [](const auto& param_info) {
      std::string name = param_info.param.file;
      name = name.substr(0, name.find('.'));
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

bool linked(const System& sys, const std::string& a, const std::string& b) {
  auto peer = sys.peer(*parse_port(a));
  return peer && *peer == *parse_port(b);
}

TEST(SystemSpec, DeviceIdsAreRowMajorAndPortsNumberedBySide) {
  System sys = load("galaxy.yaml");
  const Chip& d9 = sys.chips[static_cast<size_t>(*sys.node(*parse_chip("M0D9")))];
  EXPECT_EQ(d9.coord, (Coord{1, 1, 0}));
  // East ports P4-P7 meet the west ports P12-P15 of the next chip in the row, plane k for k.
  for (int k = 0; k < 4; ++k) {
    std::string east = "M0D9P" + std::to_string(4 + k), west = "M0D10P" + std::to_string(12 + k);
    EXPECT_TRUE(linked(sys, east, west)) << east;
    EXPECT_EQ(sys.links[static_cast<size_t>(sys.link_at(*sys.node(*parse_chip("M0D9")),
                                                        static_cast<uint8_t>(4 + k)))].plane, k);
  }
  EXPECT_TRUE(linked(sys, "M0D9P8", "M0D17P0")) << "south P8 meets the north P0 of the row below";
  EXPECT_FALSE(sys.peer(*parse_port("M0D0P0"))) << "the north edge is unwired";
  EXPECT_EQ(d9.host, "host0");
}

TEST(SystemSpec, GraphEndpointsCountAlongTheMeshEdge) {
  System tg = load("tg.yaml");
  // {0, S1} <-> {4, N4}: the gateway's second south port, port 0 of the Galaxy's second chip.
  EXPECT_TRUE(linked(tg, "M0D0P9", "M4D1P0"));
  EXPECT_TRUE(linked(tg, "M3D0P9", "M4D7P0"));
  EXPECT_TRUE(tg.is_exit_node(*tg.node(*parse_chip("M4D7"))));
  EXPECT_FALSE(tg.is_exit_node(*tg.node(*parse_chip("M4D8"))));
  EXPECT_EQ(tg.chips[static_cast<size_t>(*tg.node(*parse_chip("M4D0")))].host, "")
      << "the TG Galaxy has no host of its own";

  System tgg = load("tgg.yaml");
  // {9, S4} <-> {4, N1}: Galaxy 9's south edge, second chip (row 3, column 1 = device 25).
  EXPECT_TRUE(linked(tgg, "M9D25P8", "M4D0P1"));
  EXPECT_TRUE(linked(tgg, "M8D24P8", "M9D0P0")) << "Galaxies meet south to north";
  EXPECT_TRUE(linked(tgg, "M8D24P9", "M9D0P1"));
  EXPECT_FALSE(tgg.peer(*parse_port("M8D24P10"))) << "only two links per Galaxy chip pair";
  EXPECT_EQ(tgg.chips[static_cast<size_t>(*tgg.node(*parse_chip("M4D0")))].host, "host1");
  EXPECT_EQ(tgg.chips[static_cast<size_t>(*tgg.node(*parse_chip("M0D0")))].host, "host0");

  System spec = load("spec_4mesh_3x3.yaml");
  EXPECT_TRUE(linked(spec, "M0D5P2", "M1D3P4")) << "the M0-M1 link of spec 2.2.3.2.1";
  EXPECT_TRUE(linked(spec, "M0D7P1", "M2D1P3"));
}

TEST(SystemSpec, BoardsTileIntoOneMeshWithOneHostPerBoard) {
  System sys = load("quanta2_galaxy.yaml");
  EXPECT_EQ(sys.meshes[0].chips, (Dims{8, 8, 1}));
  EXPECT_TRUE(linked(sys, "M0D24P8", "M0D32P0")) << "the two boxes meet with four links";
  EXPECT_TRUE(linked(sys, "M0D24P11", "M0D32P3"));
  EXPECT_EQ(sys.chips[static_cast<size_t>(*sys.node(*parse_chip("M0D31")))].host, "host0");
  EXPECT_EQ(sys.chips[static_cast<size_t>(*sys.node(*parse_chip("M0D32")))].host, "host1");
}

TEST(SystemSpec, CountsTakeTheNumbersExplicitListsLeaveFree) {
  System sys = parse_system(R"(
ChipSpec:
  C: {ethernet_ports: {N: 1, E: [0], S: 2, W: [7]}}
Board:
  B: {submodule: C, topology: 2x2}
Mesh:
  0: {submodule: B}
)",
                            "mixed.yaml");
  const ChipSpec& c = sys.chip_specs[0];
  EXPECT_EQ(c.ports[0], std::vector<uint8_t>{1});
  EXPECT_EQ(c.ports[1], std::vector<uint8_t>{0});
  EXPECT_EQ(c.ports[2], (std::vector<uint8_t>{2, 3}));
  EXPECT_EQ(c.ports[3], std::vector<uint8_t>{7});
  EXPECT_TRUE(linked(sys, "M0D0P0", "M0D1P7")) << "east meets west";
  EXPECT_TRUE(linked(sys, "M0D0P2", "M0D2P1")) << "one link south: as many as the north side has";
}

TEST(SystemSpec, ThreeDimensionalMeshesLinkUpAndDown) {
  System sys = parse_system(R"(
ChipSpec:
  Chip3D: {arch: blackhole, ethernet_ports: {N: 1, E: 1, S: 1, W: 1, U: 1, D: 1}}
Board:
  Cube: {submodule: Chip3D, topology: 2x2x2}
Mesh:
  0: {submodule: Cube}
)",
                            "cube.yaml");
  EXPECT_EQ(sys.chips.size(), 8u);
  EXPECT_EQ(sys.links.size(), 12u);
  // Ports: N=P0 E=P1 S=P2 W=P3 U=P4 D=P5; device 4 is layer 1 above device 0.
  EXPECT_TRUE(linked(sys, "M0D0P4", "M0D4P5"));
  EXPECT_EQ(sys.chips[7].coord, (Coord{1, 1, 1}));
}

// --- every validation error: one line naming file, line and culprit -------------------------

const char* kHead = R"(ChipSpec:
  Wormhole:
    arch: wormhole_b0
    ethernet_ports: {N: 4, E: 4, S: 4, W: 4}
Board:
  Galaxy:
    submodule: Wormhole
    topology: 4x8
  Gateway:
    submodule: Wormhole
    topology: 1x1
)";  // 11 lines

const char* kTwoMeshes = R"(Mesh:
  0: {submodule: Gateway}
  1: {submodule: Galaxy}
)";  // lines 12-14

// kHead with its first `from` replaced by `to`.
std::string head_with(const std::string& from, const std::string& to) {
  std::string yaml = kHead;
  yaml.replace(yaml.find(from), from.size(), to);
  return yaml;
}

void expect_error(const std::string& yaml, int line, const std::string& fragment) {
  try {
    parse_system(yaml, "bad.yaml");
    ADD_FAILURE() << "accepted; expected an error containing: " << fragment;
  } catch (const Error& e) {
    std::string msg = e.what();
    std::string where = line > 0 ? "bad.yaml:" + std::to_string(line) + ": " : "bad.yaml:";
    EXPECT_EQ(msg.rfind(where, 0), 0u) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(SystemSpecErrors, UnreadableYaml) {
  expect_error("ChipSpec:\n  Wormhole: {arch: [unclosed\n", 0, "not valid YAML");
  expect_error("a: b: c\n", 1, "not valid YAML");
  expect_error("", 1, "the file is empty");
  expect_error("- just\n- a list\n", 1, "must be a mapping");
}

TEST(SystemSpecErrors, AWrongKindOfNodeSaysWhatWasFound) {
  expect_error("- just\n- a list\n", 1, "system specification must be a mapping of keys to values, not a list");
  expect_error(head_with("arch: wormhole_b0", "arch: [wormhole_b0]") + kTwoMeshes, 3,
               "ChipSpec Wormhole arch must be a single value, not a list");
  expect_error(std::string(kHead) + "Mesh: [0]\n", 12, "Mesh must map mesh ids to meshes, not a list");
  expect_error(std::string(kHead) + kTwoMeshes + "Graph: {a: 1}\n", 15, "Graph must be a list of connections, not a mapping");
}

TEST(SystemSpecErrors, DeepNestingAndTextThatIsNotUtf8) {
  expect_error(std::string(5000, '['), 1, "nested too deep");
  expect_error(std::string(kHead) + "\xff\xfe\n", 12, "not UTF-8 text (byte 0xff)");
}

TEST(SystemSpecErrors, MissingSectionsAndUnknownKeys) {
  expect_error(kHead, 1, "no Mesh section");
  expect_error(std::string(kHead) + "Meshes: {}\n", 12, "unknown key 'Meshes'");
  expect_error(std::string(kHead) + "Mesh:\n  0: {submodule: Gateway, topolgy: 1x1}\n", 13,
               "unknown key 'topolgy'");
}

TEST(SystemSpecErrors, UnknownSubmodule) {
  expect_error(head_with("submodule: Wormhole", "submodule: Wormhol") + kTwoMeshes, 7, "Board Galaxy: unknown submodule 'Wormhol'");
  expect_error(std::string(kHead) + "Mesh:\n  0: {submodule: Galaxi}\n", 13,
               "Mesh 0: unknown submodule 'Galaxi'");
}

TEST(SystemSpecErrors, BadTopology) {
  expect_error(head_with("4x8", "4y8") + kTwoMeshes, 8, "'4y8' is not of the form RxC");
  expect_error(head_with("4x8", "0x8") + kTwoMeshes, 8, "each dimension must be 1-1024");
}

TEST(SystemSpecErrors, PortOutOfRangeForTheChip) {
  std::string graph = "Graph:\n  - [[0, S0], [1, N32]]\n  - [[1, N32], [0, S0]]\n";
  expect_error(std::string(kHead) + kTwoMeshes + graph, 16,
               "port {1, N32} is out of range: mesh 1's N edge has 32 port(s)");
  expect_error(std::string(kHead) + kTwoMeshes + "Graph:\n  - \"{0, S4} <-> {1, N0}\"\n", 16,
               "port {0, S4} is out of range");
  expect_error(head_with("{N: 4, E: 4", "{N: [16], E: 4") + kTwoMeshes, 4, "port 16 is out of range (0-15)");
  expect_error(head_with("{N: 4, E: 4", "{N: 5, E: 4") + kTwoMeshes, 4, "more than 16 ethernet ports");
  expect_error(head_with("{N: 4, E: 4", "{N: [1, 1], E: 4") + kTwoMeshes, 4, "port 1 is listed twice");
}

TEST(SystemSpecErrors, PortUsedTwice) {
  std::string graph =
      "Graph:\n"
      "  - \"{0, S0} <-> {1, N0}\"\n"   // 16
      "  - \"{1, N0} <-> {0, S0}\"\n"   // 17
      "  - \"{0, S0} <-> {1, N4}\"\n";  // 18
  expect_error(std::string(kHead) + kTwoMeshes + graph, 18,
               "port {0, S0} (M0D0P8) is used twice: here and at line 17");
}

TEST(SystemSpecErrors, OneSidedConnection) {
  std::string graph =
      "Graph:\n"
      "  - \"{0, S0} <-> {1, N0}\"\n"
      "  - \"{1, N0} <-> {0, S0}\"\n"
      "  - \"{0, S1} <-> {1, N4}\"\n";  // 18: no reverse entry
  expect_error(std::string(kHead) + kTwoMeshes + graph, 18,
               "connection {0, S1} <-> {1, N4} is one-sided: add {1, N4} <-> {0, S1}");
}

TEST(SystemSpecErrors, DuplicateConnection) {
  std::string graph =
      "Graph:\n"
      "  - [[0, S0], [1, N0]]\n"        // 16
      "  - [[1, N0], [0, S0]]\n"
      "  - \"{0, S0} <---> {1, N0}\"\n";  // 18: the same as line 16, other notation
  expect_error(std::string(kHead) + kTwoMeshes + graph, 18,
               "duplicate connection {0, S0} <-> {1, N0} (first listed at line 16)");
}

TEST(SystemSpecErrors, ConnectionsInsideOneMeshOrToUnknownMeshes) {
  expect_error(std::string(kHead) + kTwoMeshes + "Graph:\n  - \"{1, N0} <-> {1, S0}\"\n", 16,
               "joins mesh 1 to itself");
  expect_error(std::string(kHead) + kTwoMeshes + "Graph:\n  - \"{0, S0} <-> {7, N0}\"\n", 16,
               "names mesh 7, which is not declared");
  expect_error(std::string(kHead) + kTwoMeshes + "Graph:\n  - \"{0, Q0} <-> {1, N0}\"\n", 16,
               "is not an endpoint like {4, N0}");
}

TEST(SystemSpecErrors, MeshesThatCannotReachEachOther) {
  expect_error(std::string(kHead) + kTwoMeshes, 14, "meshes 0 and 1 cannot reach each other");
  std::string three = std::string(kHead) + kTwoMeshes + "  2: {submodule: Gateway}\n" +
                      "Graph:\n  - \"{0, S0} <-> {1, N0}\"\n  - \"{1, N0} <-> {0, S0}\"\n";
  expect_error(three, 15, "meshes 0 and 2 cannot reach each other");
}

TEST(SystemSpecErrors, TooManyDevicesOrMeshes) {
  expect_error(head_with("4x8", "32x33") + "Mesh:\n  0: {submodule: Galaxy}\n", 13,
               "Mesh 0 has 1056 devices; a mesh holds at most 1024");
  System largest = parse_system(std::string(kHead) + "Mesh:\n  0: {submodule: Galaxy, topology: 8x4}\n",
                                "largest.yaml");
  EXPECT_EQ(largest.chips.size(), 1024u) << "8x4 Galaxies of 4x8 chips: the most a mesh holds";
  expect_error(std::string(kHead) + "Mesh:\n  1024: {submodule: Gateway}\n", 13,
               "Mesh id 1024 is out of range (0-1023)");
}

TEST(SystemSpecErrors, HostsAndHostMappings) {
  std::string hosts = "Host: [host0]\n";
  expect_error(std::string(kHead) + hosts + "Mesh:\n  0: {submodule: Gateway, host_mapping: [[host9]]}\n",
               14, "Mesh 0: unknown host 'host9'");
  expect_error(std::string(kHead) + hosts +
                   "Mesh:\n  0: {submodule: Gateway, topology: 1x2, host_mapping: [[host0]]}\n",
               14, "host_mapping must have 1 row(s) of 2 host(s)");
}

TEST(SystemSpecErrors, UnreadableFile) {
  try {
    load_system("/nonexistent/ttemu.yaml");
    ADD_FAILURE() << "accepted a missing file";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/ttemu.yaml: cannot open the file: No such file or directory");
  }
}

}  // namespace
}  // namespace ttemu::control
