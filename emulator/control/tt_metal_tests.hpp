// tt-metal's fabric test descriptions (the YAML files its `test_tt_fabric` tool reads: `Tests:`,
// each with `fabric_setup`, `defaults`, high-level `patterns` and explicit `senders`), read and
// mapped onto ttemu's traffic: each test becomes runs of (source, destination) pairs of chips
// with a write size and a number of writes per pair. What ttemu cannot do as tt-metal means it
// (multicast, atomics, several links, patterns ttemu has no equivalent of, a chip the system
// lacks) is refused in one line naming the file, the test and the key. docs/user-guide.md has
// the mapping table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "emulator/control/system.hpp"

namespace ttemu::control::ttmetal {

// A device as the file names it: a chip id (`3`), `[mesh, chip]` or `[mesh, [row, col]]`.
struct Device {
  enum Kind { kChipId, kMeshChip, kMeshCoord };
  Kind kind = kChipId;
  int mesh = 0, chip = 0, row = 0, col = 0;
  std::string text;  // as written, for messages
  std::string key;   // where: "senders[0].device"
};

// A traffic pattern's parameters, each where the file gave it (defaults merged in later).
struct Traffic {
  std::optional<std::string> ftype, ntype;
  std::optional<uint32_t> size, num_packets;
  bool operator==(const Traffic&) const = default;
};

struct SenderPattern {
  Traffic traffic;
  std::optional<Device> destination;
  std::string key;  // "senders[0].patterns[1]"
};

struct Sender {
  Device device;
  std::vector<SenderPattern> patterns;
};

struct HighLevelPattern {
  std::string type;
  uint32_t iterations = 1;
  std::string key;  // "patterns[0]"
};

struct Test {
  std::string name;
  int line = 0;
  std::string topology;  // Linear, Ring, Mesh, Torus, NeighborExchange
  uint32_t num_links = 1;
  Traffic defaults;
  std::vector<HighLevelPattern> patterns;
  std::vector<Sender> senders;
  // parametrization_params, in file order: key -> values (as text: sizes and names alike).
  std::vector<std::pair<std::string, std::vector<std::string>>> parametrization;
  uint32_t top_level_iterations = 1;
  std::optional<uint64_t> seed;
};

struct File {
  std::string source;
  std::vector<Test> tests;
};

// Reads a file, or text named `source`; throws Error ("FILE:LINE: test 'NAME': KEY: why") for
// a malformed file or a key ttemu cannot honour.
File parse_file(const std::string& path);
File parse_text(const std::string& text, const std::string& source);

// One run of one test on a system: what ttemu drives, and what tt-metal's report names.
struct Run {
  std::string test;            // the test's name (a parametrized one with "_KEY_VALUE" suffixes)
  std::string ftype, ntype;    // tt-metal's names: "unicast", "unicast_write"
  std::string topology;
  uint32_t num_links = 1;
  uint32_t size = 0, num_packets = 0;
  std::string pattern;         // the ttemu pattern the pairs are ("unicast" for explicit senders)
  std::vector<std::pair<int, int>> pairs;  // (source, destination) node indices
  uint32_t iteration = 0, iterations = 1;
};

// Every run of every test of the file on the system, in order (a test's iterations one after
// the other). `seed` draws full_device_random_pairing when the test has no seed of its own.
// Throws Error for what cannot be mapped onto this system.
std::vector<Run> expand(const File& file, const System& sys, uint64_t seed);

// tt-metal's spellings in its reports: CHIP_UNICAST, NOC_UNICAST_WRITE.
std::string report_ftype(const std::string& ftype);
std::string report_ntype(const std::string& ntype);

}  // namespace ttemu::control::ttmetal
