// tt-metal's fabric test descriptions (test_tt_fabric's YAML) run against ttemu:
// - TtMetalParse: the shipped samples read field by field, and mapped onto the N300, the T3K
//   and the Galaxy (which chips, which pairs, what shape, how many iterations);
// - TtMetalErrors: every kind of file ttemu cannot honour is refused in one line naming the
//   file, the test and the key, by the reader and by the ttemu binary;
// - TtMetalSim: `ttemu sim --tt-metal` on the T3K: per run the bytes and packets the test asks
//   for, every byte verified, tt-metal's bandwidth figure from the busiest direction, the
//   summary and its CSV; and tt-metal's pattern names as --pattern aliases;
// - TtMetalLaunch: `ttemu traffic --tt-metal` inside a launched N300 (chip processes).
#include <map>
#include <set>
#include <string>

#include "emulator/common/error.hpp"
#include "emulator/control/tt_metal_tests.hpp"
#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

using nlohmann::json;
namespace tm = control::ttmetal;

std::string sample(const std::string& name) { return topo("tt-metal/" + name); }

const tm::Test& test_named(const tm::File& f, const std::string& name) {
  for (const auto& t : f.tests) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no test " + name);
}

std::vector<const tm::Run*> runs_named(const std::vector<tm::Run>& runs, const std::string& name) {
  std::vector<const tm::Run*> out;
  for (const auto& r : runs) {
    if (r.test == name) out.push_back(&r);
  }
  return out;
}

std::set<std::pair<int, int>> as_set(const std::vector<std::pair<int, int>>& v) { return {v.begin(), v.end()}; }

TEST(TtMetalParse, BasicSampleMapsEveryField) {
  const tm::File f = tm::parse_file(sample("fabric_tests_basic.yaml"));
  ASSERT_EQ(f.tests.size(), 6u);

  const tm::Test& simple = test_named(f, "SimpleUnicast");
  EXPECT_EQ(simple.topology, "Linear");
  EXPECT_EQ(simple.num_links, 1u);
  ASSERT_EQ(simple.senders.size(), 1u);
  EXPECT_EQ(simple.senders[0].device.kind, tm::Device::kChipId);
  EXPECT_EQ(simple.senders[0].device.chip, 0);
  ASSERT_EQ(simple.senders[0].patterns.size(), 1u);
  const tm::SenderPattern& p = simple.senders[0].patterns[0];
  EXPECT_EQ(p.traffic.ftype, "unicast");
  EXPECT_EQ(p.traffic.ntype, "unicast_write");
  EXPECT_EQ(p.traffic.size, 4096u);
  EXPECT_EQ(p.traffic.num_packets, 16u);
  ASSERT_TRUE(p.destination.has_value());
  EXPECT_EQ(p.destination->kind, tm::Device::kChipId);
  EXPECT_EQ(p.destination->chip, 1);

  const tm::Test& coord = test_named(f, "MeshCoordinateUnicast");
  EXPECT_EQ(coord.topology, "Mesh");
  EXPECT_EQ(coord.defaults.size, 2048u);
  EXPECT_EQ(coord.defaults.num_packets, 8u);
  EXPECT_EQ(coord.senders[0].device.kind, tm::Device::kMeshCoord);
  EXPECT_EQ(coord.senders[0].device.row, 0);
  EXPECT_EQ(coord.senders[0].device.col, 1);
  EXPECT_FALSE(coord.senders[0].patterns[0].traffic.size.has_value());  // from defaults, merged later

  const tm::Test& a2a = test_named(f, "AllToAll");
  ASSERT_EQ(a2a.patterns.size(), 1u);
  EXPECT_EQ(a2a.patterns[0].type, "all_to_all_unicast");
  ASSERT_EQ(a2a.parametrization.size(), 1u);
  EXPECT_EQ(a2a.parametrization[0].first, "size");
  EXPECT_EQ(a2a.parametrization[0].second, (std::vector<std::string>{"1024", "4096"}));
  EXPECT_FALSE(a2a.defaults.size.has_value());

  EXPECT_EQ(test_named(f, "OneToAll").patterns[0].type, "one_to_all");
  EXPECT_EQ(test_named(f, "NeighborExchange").patterns[0].type, "neighbor_exchange");
  const tm::Test& pairing = test_named(f, "FullDevicePairing");
  EXPECT_EQ(pairing.seed, 7u);
  EXPECT_EQ(pairing.patterns[0].type, "full_device_random_pairing");
  EXPECT_EQ(pairing.patterns[0].iterations, 2u);
}

TEST(TtMetalParse, BasicSampleOnTheT3kAndTheN300) {
  const tm::File f = tm::parse_file(sample("fabric_tests_basic.yaml"));
  const control::System t3k = load("t3k.yaml");
  const auto runs = tm::expand(f, t3k, 1);
  ASSERT_EQ(runs.size(), 8u);  // AllToAll twice (two sizes), FullDevicePairing twice (two iterations)

  const auto simple = runs_named(runs, "SimpleUnicast");
  ASSERT_EQ(simple.size(), 1u);
  EXPECT_EQ(simple[0]->pairs, (std::vector<std::pair<int, int>>{{0, 1}}));
  EXPECT_EQ(simple[0]->size, 4096u);
  EXPECT_EQ(simple[0]->num_packets, 16u);
  EXPECT_EQ(simple[0]->pattern, "unicast");
  EXPECT_EQ(simple[0]->topology, "Linear");

  const auto coord = runs_named(runs, "MeshCoordinateUnicast");
  ASSERT_EQ(coord.size(), 1u);
  EXPECT_EQ(coord[0]->pairs, (std::vector<std::pair<int, int>>{{node(t3k, "M0D1"), node(t3k, "M0D0")}}));
  EXPECT_EQ(coord[0]->size, 2048u);  // the defaults'
  EXPECT_EQ(coord[0]->num_packets, 8u);

  for (const char* name : {"AllToAll_size_1024", "AllToAll_size_4096"}) {
    const auto a2a = runs_named(runs, name);
    ASSERT_EQ(a2a.size(), 1u) << name;
    EXPECT_EQ(a2a[0]->pairs.size(), 8u * 7u) << name;
    EXPECT_EQ(a2a[0]->pattern, "all_to_all");
    EXPECT_EQ(a2a[0]->num_packets, 4u);
  }
  EXPECT_EQ(runs_named(runs, "AllToAll_size_1024")[0]->size, 1024u);
  EXPECT_EQ(runs_named(runs, "AllToAll_size_4096")[0]->size, 4096u);

  const auto one = runs_named(runs, "OneToAll");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]->pairs.size(), 7u);
  for (auto [s, d] : one[0]->pairs) EXPECT_EQ(s, 0);

  // The 2x4 mesh has 10 neighbouring pairs of chips, each exchanged both ways.
  const auto ne = runs_named(runs, "NeighborExchange");
  ASSERT_EQ(ne.size(), 1u);
  EXPECT_EQ(ne[0]->pairs.size(), 20u);
  EXPECT_TRUE(as_set(ne[0]->pairs).count({node(t3k, "M0D0"), node(t3k, "M0D4")}));  // one row down
  EXPECT_FALSE(as_set(ne[0]->pairs).count({node(t3k, "M0D0"), node(t3k, "M0D5")}));  // diagonal

  // Each iteration pairs every chip with one other, one way, drawn again.
  const auto pairing = runs_named(runs, "FullDevicePairing");
  ASSERT_EQ(pairing.size(), 2u);
  for (const tm::Run* r : pairing) {
    EXPECT_EQ(r->iterations, 2u);
    EXPECT_EQ(r->pairs.size(), 4u);
    std::set<int> chips;
    for (auto [s, d] : r->pairs) chips.insert(s), chips.insert(d);
    EXPECT_EQ(chips.size(), 8u);
  }
  EXPECT_EQ(pairing[0]->iteration, 0u);
  EXPECT_EQ(pairing[1]->iteration, 1u);
  EXPECT_NE(as_set(pairing[0]->pairs), as_set(pairing[1]->pairs));
  // The test's own seed, not the one given: the same pairs whatever --seed says.
  EXPECT_EQ(runs_named(tm::expand(f, t3k, 99), "FullDevicePairing")[0]->pairs, pairing[0]->pairs);

  const auto n300 = tm::expand(f, load("n300.yaml"), 1);
  EXPECT_EQ(runs_named(n300, "AllToAll_size_4096")[0]->pairs.size(), 2u);
  EXPECT_EQ(runs_named(n300, "NeighborExchange")[0]->pairs.size(), 2u);
  EXPECT_EQ(runs_named(n300, "FullDevicePairing")[0]->pairs.size(), 1u);
}

TEST(TtMetalParse, GalaxySampleMapsMeshChipIdsLinearPairsAndIterations) {
  const tm::File f = tm::parse_file(sample("fabric_tests_galaxy.yaml"));
  const control::System g = load("galaxy.yaml");
  const auto runs = tm::expand(f, g, 1);

  const auto corner = runs_named(runs, "CornerToCornerUnicast");
  ASSERT_EQ(corner.size(), 1u);
  EXPECT_EQ(corner[0]->pairs, (std::vector<std::pair<int, int>>{{node(g, "M0D0"), node(g, "M0D31")}, {node(g, "M0D31"), node(g, "M0D0")}}));
  EXPECT_EQ(corner[0]->num_packets, 32u);

  // Linear keeps the pairs in one row or column of the 4x8 mesh: 3 + 7 partners per chip.
  const auto linear = runs_named(runs, "LinearAllToAll");
  ASSERT_EQ(linear.size(), 1u);
  EXPECT_EQ(linear[0]->pairs.size(), 32u * 10u);
  for (auto [s, d] : linear[0]->pairs) {
    const auto &a = g.chips[static_cast<size_t>(s)].coord, &b = g.chips[static_cast<size_t>(d)].coord;
    EXPECT_TRUE(a.row == b.row || a.col == b.col);
  }

  // all_to_one: chip 0 in the first iteration, chip 1 in the second.
  const auto to_one = runs_named(runs, "AllToOne");
  ASSERT_EQ(to_one.size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(to_one[i]->pairs.size(), 31u);
    for (auto [s, d] : to_one[i]->pairs) EXPECT_EQ(d, static_cast<int>(i));
  }

  EXPECT_EQ(runs_named(runs, "OneToAll_num_packets_4")[0]->num_packets, 4u);
  EXPECT_EQ(runs_named(runs, "OneToAll_num_packets_16")[0]->num_packets, 16u);
  EXPECT_EQ(runs_named(runs, "OneToAll_num_packets_16")[0]->pairs.size(), 31u);
  EXPECT_EQ(runs_named(runs, "NeighborExchange")[0]->pairs.size(), 2u * (4u * 7u + 8u * 3u));
}

// A test around `body` (YAML under a test's keys), named "T".
std::string one_test(const std::string& body) { return "Tests:\n  - name: T\n" + body; }

const std::string kMesh = "    fabric_setup: {topology: Mesh}\n";
const std::string kShape = "    defaults: {ftype: unicast, ntype: unicast_write, size: 1024, num_packets: 4}\n";

TEST(TtMetalErrors, EachFileTtemuCannotHonourIsOneLineNamingTestAndKey) {
  struct Case {
    std::string yaml, fragment;
  };
  const std::vector<Case> cases = {
      {"Tests: [\n", "bad.yaml:"},  // not YAML
      {"tests: []\n", "bad.yaml:1: tests: unknown key"},
      {"allocation_policies: {}\n", "Tests: missing"},
      {one_test(kShape + "    patterns: [{type: all_to_all}]\n"), "test 'T': fabric_setup: missing"},
      {one_test("    fabric_setup: {topology: Dragonfly}\n" + kShape + "    patterns: [{type: all_to_all}]\n"),
       "test 'T': fabric_setup.topology: unknown topology 'Dragonfly'"},
      {one_test("    fabric_setup: {topology: Mesh, num_links: 2}\n" + kShape + "    patterns: [{type: all_to_all}]\n"),
       "test 'T': fabric_setup.num_links: several links"},
      {one_test(kMesh + kShape + "    patterns: [{type: full_ring}]\n"), "test 'T': patterns[0].type: pattern 'full_ring' is not mapped"},
      {one_test(kMesh + kShape + "    patterns: [{type: ring_of_fire}]\n"), "test 'T': patterns[0].type: unknown pattern 'ring_of_fire'"},
      {one_test(kMesh + "    defaults: {ftype: unicast, ntype: atomic_inc, size: 4, num_packets: 4}\n    patterns: [{type: all_to_all}]\n"),
       "test 'T': defaults.ntype: ntype atomic_inc is not mapped"},
      {one_test(kMesh + "    defaults: {ftype: unicast, ntype: teleport, size: 4, num_packets: 4}\n    patterns: [{type: all_to_all}]\n"),
       "test 'T': defaults.ntype: unknown ntype 'teleport'"},
      {one_test(kMesh + "    defaults: {ftype: mcast, ntype: unicast_write, size: 4, num_packets: 4}\n    patterns: [{type: all_to_all}]\n"),
       "test 'T': defaults.ftype: ftype mcast is not mapped"},
      {one_test(kMesh + "    defaults: {ftype: unicast, ntype: unicast_write, size: 0, num_packets: 4}\n    patterns: [{type: all_to_all}]\n"),
       "test 'T': defaults.size: '0' is not a whole number"},
      {one_test(kMesh + kShape + "    sendrs: []\n"), "test 'T': sendrs: unknown key"},
      {one_test(kMesh + kShape), "test 'T': patterns: the test has neither patterns nor senders"},
      {one_test(kMesh + kShape + "    senders:\n      - device: 0\n        patterns:\n          - destination: {hops: {E: 1}}\n"),
       "test 'T': senders[0].patterns[0].destination.hops: a destination by hops is not mapped"},
      {one_test(kMesh + kShape + "    senders:\n      - device: 0\n        link_id: 1\n        patterns:\n          - destination: {device: 1}\n"),
       "test 'T': senders[0].link_id: links other than 0"},
      {one_test(kMesh + kShape + "    latency_test_mode: true\n    senders:\n      - device: 0\n        patterns:\n          - destination: {device: 1}\n"),
       "test 'T': latency_test_mode:"},
      {one_test(kMesh + kShape + "    senders:\n      - device: [0, [0, 1, 2]]\n        patterns:\n          - destination: {device: 1}\n"),
       "test 'T': senders[0].device: expected a chip id, [mesh, chip] or [mesh, [row, col]]"},
      {one_test(kMesh + kShape + "    patterns: [{type: all_to_all}]\n") + "  - name: T\n" + kMesh + kShape + "    patterns: [{type: all_to_all}]\n",
       "test 'T': name: a second test of this name"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    const std::string path = (dir / "bad.yaml").string();
    write_file(path, c.yaml);
    try {
      tm::parse_file(path);
      ADD_FAILURE() << "accepted:\n" << c.yaml;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(c.fragment), std::string::npos) << m << "\nexpected: " << c.fragment;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      EXPECT_EQ(m.rfind(path, 0), 0u) << m;  // the file first
    }
  }
}

// What reads well but does not map onto the system given: chips it lacks, pairs twice, shapes
// that differ inside one test, parameters nowhere given.
TEST(TtMetalErrors, WhatTheSystemCannotRunIsOneLineNamingTestAndKey) {
  const control::System n300 = load("n300.yaml");
  struct Case {
    std::string yaml, fragment;
  };
  const std::string unicast = "          - {ftype: unicast, ntype: unicast_write, size: 64, num_packets: 2, destination: {device: DST}}\n";
  auto sender = [&](const std::string& src, const std::string& dst) {
    std::string p = unicast;
    p.replace(p.find("DST"), 3, dst);
    return "      - device: " + src + "\n        patterns:\n" + p;
  };
  const std::vector<Case> cases = {
      {one_test(kMesh + "    senders:\n" + sender("0", "5")), "test 'T': senders[0].patterns[0].destination.device: device 5: "},
      {one_test(kMesh + "    senders:\n" + sender("[0, 9]", "0")), "test 'T': senders[0].device: device [0, 9]: "},
      {one_test(kMesh + "    senders:\n" + sender("[1, 0]", "0")), "test 'T': senders[0].device: device [1, 0]: "},
      {one_test(kMesh + "    senders:\n" + sender("[0, [1, 0]]", "0")), "test 'T': senders[0].device: device [0, [1, 0]]: "},
      {one_test(kMesh + "    senders:\n" + sender("0", "0")), "device 0 is the sender itself"},
      {one_test(kMesh + "    senders:\n" + sender("0", "1") + sender("0", "[0, 1]")),
       "test 'T': senders[1].patterns[0]: M0D0 -> M0D1 is driven twice (also by senders[0].patterns[0])"},
      {one_test(kMesh + "    defaults: {ftype: unicast, ntype: unicast_write, size: 64}\n    patterns: [{type: neighbor_exchange}]\n"),
       "test 'T': patterns[0]: no num_packets"},
      {one_test(kMesh + kShape + "    patterns: [{type: one_to_all}]\n    senders:\n" + sender("1", "0")),
       "test 'T': senders[0].patterns[0]: its ftype/ntype/size/num_packets (unicast/unicast_write/64/2) differ from patterns[0]'s"},
      {one_test("    fabric_setup: {topology: Ring}\n" + kShape + "    patterns: [{type: neighbor_exchange}]\n"),
       "test 'T': patterns[0].type: neighbor_exchange on a Ring topology"},
  };
  for (const auto& c : cases) {
    const tm::File f = tm::parse_text(c.yaml, "bad.yaml");
    try {
      tm::expand(f, n300, 1);
      ADD_FAILURE() << "mapped:\n" << c.yaml;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(c.fragment), std::string::npos) << m << "\nexpected: " << c.fragment;
      EXPECT_EQ(m.rfind("bad.yaml:", 0), 0u) << m;
    }
  }
  // A multi-mesh system: tt-metal's all_to_all keeps adjacent meshes only, which is not mapped.
  const tm::File f = tm::parse_text(one_test(kMesh + kShape + "    patterns: [{type: all_to_all}]\n"), "bad.yaml");
  EXPECT_THROW(tm::expand(f, load("tg.yaml"), 1), Error);
}

TEST(TtMetalErrors, TheBinaryRefusesInOneLineBeforeRunning) {
  TempDir dir;
  const std::string bad = (dir / "bad.yaml").string();
  write_file(bad, one_test(kMesh + kShape + "    senders:\n      - device: 0\n        patterns:\n          - destination: {device: 7}\n"));
  expect_one_line_error(ttemu({"sim", topo("n300.yaml"), "--tt-metal", bad}), "test 'T': senders[0].patterns[0].destination.device: device 7");
  write_file(bad, one_test(kMesh + kShape + "    patterns: [{type: half_ring}]\n"));
  expect_one_line_error(ttemu({"sim", topo("n300.yaml"), "--tt-metal", bad}), "pattern 'half_ring' is not mapped");
  // ttemu traffic reads the file before it launches a system for the run.
  expect_one_line_error(ttemu({"traffic", "--system", topo("n300.yaml"), "--tt-metal", bad}), "pattern 'half_ring' is not mapped");
  const auto both = ttemu({"sim", topo("n300.yaml"), "--tt-metal", bad, "--pattern", "all_to_all"});
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.stderr_text.find("--pattern"), std::string::npos) << both.out;
}

// Each run's report against what its test asks for; `time_base` is "simulated" or "emulated".
void expect_run_accounts(const json& r, const std::string& time_base) {
  const auto senders = r.at("senders").get<uint64_t>(), packets = r.at("num_packets").get<uint64_t>(),
             size = r.at("packet_size").get<uint64_t>();
  EXPECT_EQ(r.at("packets").get<uint64_t>(), senders * packets) << r.dump();
  EXPECT_EQ(r.at("bytes").get<double>(), static_cast<double>(senders * packets * size)) << r.dump();
  EXPECT_EQ(r.at("verified").get<uint64_t>(), senders * packets * size) << r.dump();  // every byte checked
  EXPECT_EQ(r.at("errors").get<uint64_t>(), 0u) << r.dump();
  EXPECT_EQ(r.at("ftype"), "CHIP_UNICAST");
  EXPECT_EQ(r.at("ntype"), "NOC_UNICAST_WRITE");
  EXPECT_EQ(r.at("time_base"), time_base);
  const double seconds = r.at("seconds").get<double>();
  ASSERT_GT(seconds, 0.0) << r.dump();
  const auto streams = r.at("busiest_streams").get<uint64_t>();
  ASSERT_GE(streams, 1u) << r.dump();
  EXPECT_LE(streams, senders) << r.dump();
  EXPECT_NEAR(r.at("bandwidth_gb_s").get<double>(), static_cast<double>(streams * packets * size) / seconds / 1e9, 1e-9);
  EXPECT_NEAR(r.at("packets_per_second").get<double>(), static_cast<double>(streams * packets) / seconds, 1e-3);
  EXPECT_NEAR(r.at("cycles").get<double>(), seconds * 1e9, 1.0);  // Wormhole's 1 GHz nominal clock
  EXPECT_EQ(r.at("result").at("verified"), r.at("verified"));
}

// The JSON lines of a --json run: the runs, and the summary last.
std::pair<std::vector<json>, json> runs_and_summary(const RunResult& r) {
  std::vector<json> runs;
  json summary;
  for (const auto& line : lines_with(r.stdout_text, "{")) {
    json j = json::parse(line);
    if (j.contains("tt_metal_summary")) summary = j.at("tt_metal_summary");
    else runs.push_back(j);
  }
  return {runs, summary};
}

TEST(TtMetalSim, T3kRunsTheBasicSampleVerifiedWithTtMetalsFigures) {
  TempDir dir;
  const std::string csv = (dir / "summary.csv").string();
  const auto r = ttemu({"sim", topo("t3k.yaml"), "--tt-metal", sample("fabric_tests_basic.yaml"), "--json", "--csv", csv});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto [runs, summary] = runs_and_summary(r);
  ASSERT_EQ(runs.size(), 8u) << r.out;
  std::map<std::string, json> by_name;
  for (const auto& run : runs) {
    expect_run_accounts(run, "simulated");
    by_name[run.at("test").get<std::string>() + "#" + std::to_string(run.at("iteration").get<int>())] = run;
  }
  // What each test asked for, run for run.
  EXPECT_EQ(by_name.at("SimpleUnicast#0").at("senders"), 1);
  EXPECT_EQ(by_name.at("SimpleUnicast#0").at("packets"), 16);
  EXPECT_EQ(by_name.at("SimpleUnicast#0").at("bytes"), 16.0 * 4096);
  EXPECT_EQ(by_name.at("SimpleUnicast#0").at("busiest_streams"), 1);
  EXPECT_EQ(by_name.at("SimpleUnicast#0").at("topology"), "Linear");
  EXPECT_EQ(by_name.at("SimpleUnicast#0").at("num_devices"), json::array({4}));  // one row of the 2x4 mesh, east-west
  EXPECT_EQ(by_name.at("MeshCoordinateUnicast#0").at("bytes"), 8.0 * 2048);
  EXPECT_EQ(by_name.at("AllToAll_size_1024#0").at("senders"), 56);
  EXPECT_EQ(by_name.at("AllToAll_size_1024#0").at("bytes"), 56.0 * 4 * 1024);
  EXPECT_EQ(by_name.at("AllToAll_size_1024#0").at("num_devices"), json::array({8}));
  EXPECT_GT(by_name.at("AllToAll_size_4096#0").at("busiest_streams").get<int>(), 1);  // routes share links
  EXPECT_EQ(by_name.at("OneToAll#0").at("packets"), 7 * 8);
  EXPECT_EQ(by_name.at("NeighborExchange#0").at("senders"), 20);
  EXPECT_EQ(by_name.at("NeighborExchange#0").at("busiest_streams"), 1);  // one hop each: a link direction each
  EXPECT_EQ(by_name.at("FullDevicePairing#1").at("senders"), 4);

  // The summary: one row per test, the pairing's two iterations in one.
  ASSERT_EQ(summary.size(), 7u) << r.out;
  for (const auto& row : summary) {
    EXPECT_EQ(row.at("errors"), 0);
    EXPECT_EQ(row.at("iterations").get<int>(), row.at("test_name") == "FullDevicePairing" ? 2 : 1) << row.dump();
    EXPECT_LE(row.at("bw_min_gigabytes_per_s").get<double>(), row.at("avg_bandwidth_gigabytes_per_s").get<double>());
    EXPECT_GE(row.at("bw_max_gigabytes_per_s").get<double>(), row.at("avg_bandwidth_gigabytes_per_s").get<double>());
  }
  // tt-metal's bandwidth summary CSV: its columns, a row per test.
  const auto lines = lines_with(slurp(csv), ",");
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[0],
            "test_name,ftype,ntype,topology,num_devices,num_links,packet_size,iterations,avg_cycles,avg_packets_per_s,"
            "avg_bandwidth_gigabytes_per_s,bw_min_gigabytes_per_s,bw_max_gigabytes_per_s,bw_std_dev_gigabytes_per_s,tolerance_percent");
  EXPECT_EQ(lines[1].rfind("SimpleUnicast,CHIP_UNICAST,NOC_UNICAST_WRITE,Linear,\"[4]\",1,4096,1,", 0), 0u) << lines[1];

  // The text report: a line per run and the summary table.
  const auto text = ttemu({"sim", topo("n300.yaml"), "--tt-metal", sample("fabric_tests_basic.yaml")});
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_EQ(lines_with(text.stdout_text, "(busiest direction:").size(), 8u) << text.out;
  EXPECT_EQ(lines_with(text.stdout_text, "tt-metal bandwidth summary").size(), 1u) << text.out;
  EXPECT_EQ(lines_with(text.stdout_text, "errors 0").size(), 8u) << text.out;
}

TEST(TtMetalSim, TtMetalPatternNamesAreAliases) {
  const auto r = ttemu({"sim", topo("n300.yaml"), "--pattern", "all_to_all_unicast,one_to_all_unicast", "--count", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto lines = lines_with(r.stdout_text, "{");
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(json::parse(lines[0]).at("pattern"), "all_to_all");
  EXPECT_EQ(json::parse(lines[1]).at("pattern"), "one_to_all");
}

TEST(TtMetalLaunch, N300ChipProcessesRunTheBasicSample) {
  TempDir dir;
  const std::string csv = (dir / "summary.csv").string();
  const auto r = ttemu({"launch", topo("n300.yaml"), "--", TTEMU_BINARY, "traffic", "--tt-metal", sample("fabric_tests_basic.yaml"),
                        "--json", "--csv", csv, "--latency-samples", "4"});
  ASSERT_EQ(r.status, 0) << r.out;
  const auto [runs, summary] = runs_and_summary(r);
  ASSERT_EQ(runs.size(), 8u) << r.out;
  for (const auto& run : runs) expect_run_accounts(run, "emulated");
  EXPECT_EQ(runs[0].at("test"), "SimpleUnicast");
  EXPECT_EQ(runs[0].at("bytes"), 16.0 * 4096);
  ASSERT_EQ(summary.size(), 7u) << r.out;
  EXPECT_EQ(lines_with(slurp(csv), ",").size(), 8u);
}

}  // namespace
}  // namespace ttemu::test
