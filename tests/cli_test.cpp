// The `ttemu` binary as a user runs it: exit status, one-line errors, output formats.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

// A command line as a user types it ("topo path FILE M0D0 M0D8"), run to completion.
RunResult cli(const std::string& line) { return ttemu(words(line)); }

// Our systems, and tt-metal's mesh graph descriptors in topologies/tt-metal/ (textproto, and
// the older YAML ones); its fabric test files there are not systems.
TEST(Cli, ValidatesEveryShippedTopology) {
  int validated = 0;
  for (const auto& entry : fs::recursive_directory_iterator(TTEMU_TOPOLOGIES)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" && entry.path().extension() != ".textproto") continue;
    if (name.starts_with("fabric_tests_")) continue;
    ++validated;
    RunResult r = cli("topo validate " + entry.path().string());
    EXPECT_EQ(r.status, 0) << entry.path() << ": " << r.stderr_text;
    EXPECT_NE(r.stdout_text.find(": valid: "), std::string::npos) << r.stdout_text;
  }
  EXPECT_GE(validated, 19) << "12 systems and 7 tt-metal descriptors are shipped";
}

// A tt-metal descriptor is a system file like ours, and `topo import` writes the YAML it is.
TEST(Cli, TopoImportWritesYamlThatValidatesLikeTheDescriptor) {
  TempDir dir;
  const std::string descriptor = topo("tt-metal/two_t3k_three_hosts.textproto");
  RunResult direct = cli("topo validate " + descriptor);
  ASSERT_EQ(direct.status, 0) << direct.stderr_text;
  EXPECT_NE(direct.stdout_text.find(": valid: 2 mesh(es), 16 chip(s), 43 link(s) (3 between meshes), 2 routing plane(s)"),
            std::string::npos) << direct.stdout_text;
  RunResult printed = cli("topo import " + descriptor);
  ASSERT_EQ(printed.status, 0) << printed.stderr_text;
  EXPECT_NE(printed.stdout_text.find("Graph:\n  - \"{0, S0} <-> {1, N0}\""), std::string::npos) << printed.stdout_text;
  const std::string out = (dir / "imported.yaml").string();
  RunResult written = cli("topo import " + descriptor + " -o " + out);
  ASSERT_EQ(written.status, 0) << written.stderr_text;
  EXPECT_EQ(slurp(out), printed.stdout_text);
  RunResult back = cli("topo validate " + out);
  EXPECT_EQ(back.stdout_text.substr(back.stdout_text.find(": valid:")),
            direct.stdout_text.substr(direct.stdout_text.find(": valid:")));
  expect_one_line_error(cli("topo import " + topo("n300.yaml")), "n300.yaml: not a tt-metal mesh graph descriptor");
}

TEST(Cli, RejectsABadFileWithOneLineNamingFileAndLine) {
  TempDir dir;
  write_file(dir / "bad.yaml",
        "ChipSpec:\n  W: {ethernet_ports: {N: 1}}\nBoard:\n  B: {submodule: X, topology: 1x1}\n"
        "Mesh:\n  0: {submodule: B}\n");
  expect_one_line_error(cli("topo validate " + (dir / "bad.yaml").string()),
                        (dir / "bad.yaml").string() + ":4: Board B: unknown submodule 'X'");
  expect_one_line_error(cli("topo show /nonexistent.yaml"), "/nonexistent.yaml: cannot open the file");
  write_file(dir / "garbage.yaml", "\x01\x02{{{: ]]\n");
  expect_one_line_error(cli("topo validate " + (dir / "garbage.yaml").string()), "garbage.yaml:");
  // YAML that is a mapping but no system at all (a tt-metal fabric test file is the likely
  // mix-up): named as the file it is, with the key it does not know, not a parser's internals.
  write_file(dir / "other.yaml", "Tests:\n  - name: x\n");
  expect_one_line_error(cli("topo validate " + (dir / "other.yaml").string()),
                        (dir / "other.yaml").string() + ":1: system specification: unknown key 'Tests'");
  expect_one_line_error(cli("topo validate " + topo("tt-metal/fabric_tests_basic.yaml")), "fabric_tests_basic.yaml:");
}

TEST(Cli, PathAsJsonIsTheRouteOfSpec2_2_3_1_1) {
  RunResult r = cli("topo path " + topo("spec_4mesh_3x3.yaml") + " M0D0 M0D8 --json");
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto doc = nlohmann::json::parse(r.stdout_text);
  nlohmann::json expected = {{"plane", 0},
                             {"hops",
                              {{{"from", "M0D0P2"}, {"to", "M0D1P4"}},
                               {{"from", "M0D1P2"}, {"to", "M0D2P4"}},
                               {{"from", "M0D2P1"}, {"to", "M0D5P3"}},
                               {{"from", "M0D5P1"}, {"to", "M0D8P3"}}}}};
  EXPECT_EQ(doc, expected);
}

TEST(Cli, PathAsTextListsSenderAndReceiverPerHop) {
  RunResult r = cli("topo path " + topo("galaxy.yaml") + " M0D0 M0D9 --plane 2");
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("Route from M0D0 to M0D9 on plane 2: 2 hop(s)"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("M0D0P6"), std::string::npos) << "east port of plane 2: " << r.stdout_text;
}

TEST(Cli, UnreachablePairsAndBadArgumentsFailWithAReason) {
  expect_one_line_error(cli("topo path " + topo("tg.yaml") + " M0D0 M1D0 --plane 1"),
                        "M0D0 cannot reach M1D0 on plane 1: no route at M0D0");
  expect_one_line_error(cli("topo path " + topo("galaxy.yaml") + " M0D0 M0D32"),
                        "device M0D32 is not in");
  expect_one_line_error(cli("topo path " + topo("galaxy.yaml") + " M0D0 chip7"),
                        "'chip7' is not a device name like M0D1");
  expect_one_line_error(cli("topo path " + topo("galaxy.yaml") + " M0D0 M0D1 --plane 4"),
                        "plane 4 does not exist");
  expect_one_line_error(cli("topo path " + topo("n300.yaml") + " M0D0 M0D1 --fail M0D0P2"),
                        "M0D0 cannot reach M0D1 on plane 0");
  RunResult r = cli("topo path " + topo("galaxy.yaml"));
  EXPECT_NE(r.status, 0) << "missing arguments";
  EXPECT_NE(r.stderr_text.find("SRC is required"), std::string::npos) << r.stderr_text;
}

TEST(Cli, PathReroutesAroundFailures) {
  RunResult r = cli("topo path " + topo("galaxy.yaml") + " M0D0 M0D3 --fail M0D1P4 --json");
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto hops = nlohmann::json::parse(r.stdout_text)["hops"];
  EXPECT_EQ(hops.size(), 5u);
  for (const auto& h : hops) EXPECT_NE(h["from"], "M0D1P4");
}

TEST(Cli, TablesAsJsonAndText) {
  RunResult r = cli("topo tables " + topo("spec_4mesh_3x3.yaml") + " --device M0D0 --plane 0 --json");
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto doc = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(doc["routers"].size(), 1u);
  auto l0 = doc["routers"][0]["l0"];
  EXPECT_TRUE(l0[0].is_null());
  EXPECT_EQ(l0[8], 2) << "X first: east (P2) toward M0D8";
  EXPECT_EQ(l0[3], 1) << "same column: south (P1)";
  EXPECT_EQ(doc["routers"][0]["l1"][1], 2) << "toward M1 through the exit node M0D5";

  r = cli("topo tables " + topo("spec_4mesh_3x3.yaml") + " --device M0D0");
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("L0 (intra-mesh)"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("L1 (inter-mesh)"), std::string::npos);
}

TEST(Cli, CheckReportsTheLoopInABrokenTableFile) {
  TempDir dir;
  RunResult r = cli("topo tables " + topo("mesh_4x4.yaml") + " --json");
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto doc = nlohmann::json::parse(r.stdout_text);
  // Spec 5.4: D1 -> D5 -> D6 -> D7 -> D11 -> D10 -> D9 -> D5 for D16 (0-based here).
  const std::pair<int, int> loop[] = {{0, 2}, {4, 1}, {5, 1}, {6, 2}, {10, 3}, {9, 3}, {8, 0}};
  for (auto [device, port] : loop) doc["routers"][static_cast<size_t>(device)]["l0"][15] = port;
  write_file(dir / "t.json", doc.dump());
  r = cli("topo check " + topo("mesh_4x4.yaml") + " --tables " + (dir / "t.json").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.stdout_text.find("forwarding loop: M0D4 -> M0D5 -> M0D6 -> M0D10 -> M0D9 -> M0D8 -> M0D4"),
            std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("failed the checks"), std::string::npos) << r.stderr_text;

  r = cli("topo check " + topo("mesh_4x4.yaml"));
  EXPECT_EQ(r.status, 0) << r.stdout_text << r.stderr_text;
  write_file(dir / "broken.json", "{\"routers\": [");
  expect_one_line_error(cli("topo check " + topo("mesh_4x4.yaml") + " --tables " + (dir / "broken.json").string()),
                        "not valid JSON");
}

TEST(Cli, ShowSummarisesTheSystemAndItsRouting) {
  RunResult r = cli("topo show " + topo("tg.yaml"));
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  for (const char* s : {"5 mesh(es), 36 chip(s)", "exit nodes (*): M0D0 (to mesh 4)",
                        "M0D0P8     <-> M4D0P0", "plane 0: 1260/1260 pairs reachable",
                        "plane 1: 992/1260 pairs reachable (268 have no path on this plane)"}) {
    EXPECT_NE(r.stdout_text.find(s), std::string::npos) << s << "\n" << r.stdout_text;
  }
}

TEST(Cli, DrawWritesAnSvgWithTheRoute) {
  TempDir dir;
  std::string out = (dir / "tg.svg").string();
  RunResult r = cli("topo draw " + topo("tg.yaml") + " --path M0D0 M3D0 -o " + out);
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  std::string svg = slurp(out);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 36, true);
  EXPECT_NE(svg.find("M4D0 (exit node)"), std::string::npos);
  EXPECT_NE(svg.find("hop 1: M0D0P"), std::string::npos) << "the route is drawn hop by hop";
  EXPECT_NE(svg.find("route M0D0 -&gt; M3D0 on plane 0"), std::string::npos);
  expect_one_line_error(cli("topo draw " + topo("tg.yaml") + " --path M0D0 M9D0 -o " + out),
                        "device M9D0 is not in");
  expect_one_line_error(cli("topo draw " + topo("tg.yaml") + " -o /nonexistent/dir/x.svg"),
                        "/nonexistent/dir/x.svg: cannot write the file");
}

TEST(Cli, EveryNumberOnTheCommandLineIsRangeChecked) {
  // No such job: nothing can run, so a bad number must be refused first, naming the option.
  const std::string job = " --job 1-00000001";
  const std::pair<std::string, std::string> cases[] = {
      {"link test M0D0P2 --frames -1", "--frames: must be a whole number 1-100000000, not '-1'"},
      {"link test M0D0P2 --frames 0", "--frames: must be a whole number 1-100000000, not '0'"},
      {"link test M0D0P2 --frames 1.5", "--frames: must be a whole number 1-100000000, not '1.5'"},
      {"link test M0D0P2 --size -1", "--size: must be a whole number 16-8192, not '-1'"},
      {"link test M0D0P2 --size 9000", "--size: must be a whole number 16-8192, not '9000'"},
      {"link ping M0D0P2 --count -1", "--count: must be a whole number 1-1000000, not '-1'"},
      {"link ping M0D0P2 --count 0", "--count: must be a whole number 1-1000000, not '0'"},
      {"link ping M0D0P2 --size 8193", "--size: must be a whole number 16-8192, not '8193'"},
      {"fabric stall M0D0 --fvc -1", "--fvc: must be a whole number 0-8, not '-1'"},
      {"fabric resume M0D0 --fvc 4294967296", "--fvc: must be a whole number 0-8, not '4294967296'"},
      {"fabric stall M0D0 --fvc 1.5", "--fvc: must be a whole number 0-8, not '1.5'"},
      {"traffic --plane -1", "--plane: must be a whole number 0-255, not '-1'"},
      {"traffic --plane 256", "--plane: must be a whole number 0-255, not '256'"},
      {"traffic --fvc -2", "--fvc: must be a whole number -1-7, not '-2'"},
      {"traffic --fvc 8", "--fvc: must be a whole number -1-7, not '8'"},
      {"traffic --seed -1", "--seed: must be a whole number 0-18446744073709551615, not '-1'"},
      {"traffic --latency-samples 0", "--latency-samples: must be a whole number 1-100000, not '0'"},
      {"traffic --latency-samples -1", "--latency-samples: must be a whole number 1-100000, not '-1'"},
      {"traffic --size -1", "--size: must be a whole number 1-1048576, not '-1'"},
      {"traffic --count -1", "--count: must be a whole number 1-100000, not '-1'"},
      // CLI11 converts with base 0: "010" would have been 8 writes, silently.
      {"traffic --count 010", "--count: must be a whole number 1-100000, not '010'"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    RunResult r = cli(args + job);
    expect_one_line_error(r, message);
  }
  const std::pair<std::string, std::string> topo_cases[] = {
      {"topo path " + topo("galaxy.yaml") + " M0D0 M0D1 --plane 4294967296", "--plane: must be a whole number 0-255, not '4294967296'"},
      {"topo path " + topo("galaxy.yaml") + " M0D0 M0D1 --plane 0.5", "--plane: must be a whole number 0-255, not '0.5'"},
      {"topo tables " + topo("galaxy.yaml") + " --plane -1", "--plane: must be a whole number 0-255, not '-1'"},
      {"topo draw " + topo("galaxy.yaml") + " -o x.svg --plane x", "--plane: must be a whole number 0-255, not 'x'"},
  };
  for (const auto& [args, message] : topo_cases) {
    SCOPED_TRACE(args);
    expect_one_line_error(cli(args), message);
  }
}

TEST(Cli, ADirectoryGivenAsAnInputFileIsNamedAsSuch) {
  TempDir dir;
  const std::string d = (dir / "plans").string();
  fs::create_directory(d);
  expect_one_line_error(cli("launch " + d), d + ": is a directory, not a file");
  expect_one_line_error(cli("topo validate " + d), d + ": is a directory, not a file");
  expect_one_line_error(cli("topo check " + topo("n300.yaml") + " --tables " + d), d + ": is a directory, not a file");
  expect_one_line_error(cli("faults apply " + d + " --job 1-00000001"), d + ": is a directory, not a file");
}

TEST(Cli, APlanThatIsNotTextIsRefusedBeforeItIsSent) {
  TempDir dir;
  write_file(dir / "bin.yaml", "seed: 1\n\xff\xfe\x00\x01\n");
  RunResult r = cli("faults apply " + (dir / "bin.yaml").string() + " --job 1-00000001");
  expect_one_line_error(r, (dir / "bin.yaml").string() + ":2: not UTF-8 text (byte 0xff)");
  EXPECT_EQ(r.stderr_text.find("json.exception"), std::string::npos) << r.stderr_text;
}

TEST(Cli, APlanTooLargeForTheControlSocketIsRefusedBeforeItIsSent) {
  TempDir dir;
  std::string big;
  while (big.size() < (2u << 20)) big += "# a comment line that pads the plan out\n";
  write_file(dir / "big.yaml", big);
  expect_one_line_error(cli("faults apply " + (dir / "big.yaml").string() + " --job 1-00000001"),
                        (dir / "big.yaml").string() + ": too large to send");
}

// What a user wrote is quoted in messages; a newline in it must not break the one line (found
// by tests/fuzz/fault_plan_fuzz.cpp).
TEST(Cli, ANewlineInWhatIsQuotedKeepsTheErrorOnOneLine) {
  TempDir dir;
  write_file(dir / "plan.yaml", "l cl\n  \n]");
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --faults " + (dir / "plan.yaml").string()),
                        "a fault plan is a mapping");
  write_file(dir / "key.yaml", "links:\n  - link: M0D0P2\n    \"drop\\nnow\": 0.1\n");
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --faults " + (dir / "key.yaml").string()),
                        "unknown key 'drop\\nnow'");
}

TEST(Cli, DeeplyNestedYamlIsRefusedNamingTheFile) {
  TempDir dir;
  write_file(dir / "deep.yaml", std::string(5000, '['));
  expect_one_line_error(cli("topo validate " + (dir / "deep.yaml").string()),
                        (dir / "deep.yaml").string() + ":1: not valid YAML: nested too deep");
}

}  // namespace
}  // namespace ttemu::test

namespace ttemu::test {
namespace {

// `ttemu sim`: the six patterns on the Galaxy from simulated workers through each chip's
// command buffer, with a fault plan, a chip kill and a link cut (restored later), every byte
// checked: a write either lands bit-exact or was NACKed or never answered (and says so).
TEST(Sim, RunsEveryPatternOnTheGalaxyWithFaultsAKillAndACutAndVerifiesEveryByte) {
  TempDir dir;
  write_file(dir / "plan.yaml", "defaults: {corrupt: 0.01}\nlinks:\n  - link: M0D9P4\n    drop: 0.02\n");
  const std::string args = "sim " + topo("galaxy.yaml") + " --pattern all --json --faults " + (dir / "plan.yaml").string() +
                           " --kill M0D5@3 --cut M0D0P4@2-40 --seed 7";
  RunResult r = cli(args + " --trace " + (dir / "a.trace").string());
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  std::istringstream lines(r.stdout_text);
  std::vector<nlohmann::json> runs;
  for (std::string line; std::getline(lines, line);) runs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(runs.size(), 6u) << r.stdout_text;
  uint64_t nacks = 0;
  for (const auto& p : runs) {
    EXPECT_EQ(p["errors"], 0) << p;
    EXPECT_GT(p["verified"].get<uint64_t>(), 0u) << p;
    // Every byte is accounted for: landed; or its write was NACKed, never answered, or sent to
    // the dead chip; or its source was the dead chip.
    EXPECT_EQ(p["verified"].get<double>() + p["unverified"].get<double>() + p["dead_pair_bytes"].get<double>(),
              p["bytes"].get<double>()) << p;
    nacks += p["nacks"].get<uint64_t>();
    for (const char* key : {"pattern", "pairs", "seconds", "gb_per_s", "latency_us", "mean_hops", "per_hop_us",
                            "link_directions_used", "max_link_gb_per_s", "unanswered"}) {
      EXPECT_TRUE(p.contains(key)) << key;
    }
  }
  EXPECT_GT(nacks, 0u) << "writes to and through the dead chip are NACKed";
  const std::string trace = slurp(dir / "a.trace");
  EXPECT_NE(trace.find("kill M0D5"), std::string::npos);
  EXPECT_NE(trace.find("cut wire M0D0P4"), std::string::npos);
  EXPECT_NE(trace.find("restore wire M0D0P4"), std::string::npos);
  ASSERT_EQ(cli(args + " --trace " + (dir / "b.trace").string()).status, 0);
  EXPECT_EQ(trace, slurp(dir / "b.trace")) << "the same seed, the same trace, byte for byte";
  ASSERT_EQ(cli("sim " + topo("galaxy.yaml") + " --pattern all --json --faults " + (dir / "plan.yaml").string() +
                  " --kill M0D5@3 --cut M0D0P4@2-40 --seed 8 --trace " + (dir / "c.trace").string()).status, 0);
  EXPECT_NE(trace, slurp(dir / "c.trace")) << "another seed, other faults";
}

// Chips that look for more input before they sleep keep part-filled datagrams open (--look-us,
// as chip processes over UDP do): through faults, a kill and a cut every byte is still
// accounted for, and the same seed still gives the same trace.
TEST(Sim, ChipsThatLookBeforeTheySleepAccountForEveryByteThroughFaultsAKillAndACut) {
  TempDir dir;
  write_file(dir / "plan.yaml", "defaults: {corrupt: 0.01}\n");
  const std::string args = "sim " + topo("galaxy.yaml") + " --pattern all_to_all --size 4096 --json --faults " +
                           (dir / "plan.yaml").string() + " --kill M0D5@1 --cut M0D0P4@1-20 --seed 7 --look-us 20";
  std::string first;
  for (const char* name : {"a.trace", "b.trace"}) {
    RunResult r = cli(args + " --trace " + (dir / name).string());
    ASSERT_EQ(r.status, 0) << r.stderr_text;
    const auto p = nlohmann::json::parse(r.stdout_text);
    EXPECT_EQ(p["errors"], 0) << p;
    EXPECT_GT(p["verified"].get<uint64_t>(), 0u) << p;
    EXPECT_GT(p["dead_pair_bytes"].get<uint64_t>(), 0u) << "the kill came while the traffic flowed";
    EXPECT_EQ(p["verified"].get<double>() + p["unverified"].get<double>() + p["dead_pair_bytes"].get<double>(),
              p["bytes"].get<double>()) << p;
    if (first.empty()) first = slurp(dir / name);
  }
  EXPECT_EQ(first, slurp(dir / "b.trace")) << "the same seed, the same trace";
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --look-us -5"), "--look-us: must be a whole number");
}

TEST(Sim, BadSchedulesAndNamesAreOneLineErrors) {
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --kill M9D9@1"), "--kill: 'M9D9' is not a chip of");
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --cut M0D0P2@5-2"), "the restore time must come after the cut");
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --cut M0D0P9@1"), "--cut: 'M0D0P9' is not a wired port");
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --kill M0D1"), "expected NAME@MS");
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --pattern sideways"), "unknown pattern 'sideways'");
  expect_one_line_error(cli("sim " + topo("n300.yaml") + " --trace /nonexistent/dir/t"), "--trace: cannot write");
}


// The quick campaign (tools/campaigns/quick.yaml): every run keeps every invariant, and the
// record has one passing line per run of the matrix.
TEST(Campaign, TheQuickCampaignPasses) {
  TempDir dir;
  RunResult r = ttemu({"campaign", std::string(TTEMU_TOPOLOGIES) + "/../tools/campaigns/quick.yaml", "--out", dir.path().string()});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.stdout_text.find("verdict: PASS"), std::string::npos) << r.out;
  std::set<int> ids;
  std::set<std::string> scenarios;
  for (const auto& run : read_event_log((dir / "runs.jsonl").string())) {
    EXPECT_TRUE(run["pass"].get<bool>()) << run.dump();
    ids.insert(run["id"].get<int>());
    scenarios.insert(run["scenario"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 176u) << "3 topologies x 4 workloads x 11 scenarios (some on one or two topologies, or one pattern) x 2 seeds";
  EXPECT_EQ(scenarios.size(), 11u);
  EXPECT_FALSE(std::filesystem::exists(dir / "runs" / "0")) << "a passing run leaves nothing behind";
}

// A campaign whose expectation the fabric does not meet (a reload where nothing fails) fails
// run by run, each with a line that reproduces it: the line fails the same way, keeps the
// run's files, and two reproductions give the same trace.
TEST(Campaign, AFailingRunPrintsALineThatReproducesIt) {
  TempDir dir;
  write_file(dir / "c.yaml",
             "name: planted\ntopologies: [n300]\nseeds: [5, 6]\nworkloads: [{pattern: all_to_all, count: 2}]\n"
             "scenarios:\n  - {name: clean}\n  - {name: reload_expected, expect_reload: true}\n");
  const std::string out = (dir / "out").string();
  RunResult r = ttemu({"campaign", (dir / "c.yaml").string(), "--out", out, "--jobs", "2"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.stdout_text.find("verdict: FAIL (4 run(s), 2 failed)"), std::string::npos) << r.out;
  const std::string fail = "FAIL run 2 (n300 x all_to_all x reload_expected x seed 5): tables_reloaded:";
  ASSERT_NE(r.stdout_text.find(fail), std::string::npos) << r.out;
  const std::string line = "reproduce: ttemu campaign " + (dir / "c.yaml").string() + " --run 2";
  ASSERT_NE(r.stdout_text.find(line), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "runs" / "2" / "events.jsonl")) << "the failing run's files are kept";
  RunResult again = ttemu({"campaign", (dir / "c.yaml").string(), "--out", out, "--run", "2"});
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.stdout_text.find(fail), std::string::npos) << again.out;
  const std::string trace = slurp(dir / "out" / "runs" / "2" / "trace.txt");
  EXPECT_FALSE(trace.empty());
  ttemu({"campaign", (dir / "c.yaml").string(), "--out", out, "--run", "2"});
  EXPECT_EQ(slurp(dir / "out" / "runs" / "2" / "trace.txt"), trace) << "one seed, one trace";
  expect_one_line_error(cli("campaign " + (dir / "c.yaml").string() + " --out " + out + " --run 9"), "--run 9: the campaign has runs 0 to 3");
}

// A run past its bound is a hang: it fails as one, and keeps where it stopped - every chip's
// routing buffers, credits and links, and the event log up to then. (A Galaxy all_to_all of
// 300 writes per pair takes the simulator seconds; the bound is 1. The writes are small: set-up
// zeroes each chip's L1 for them, and with 100 writes of 4 KiB it took 2.6 s alone here, over
// the 5 s grace after the bound on a loaded machine, which killed the run with its files
// empty. Where exactly it stops
// depends on the machine's speed - on a slow one, while the system is still being set up,
// before any link is up - so neither what the buffers hold nor the links' states are asserted
// here: the processes engine's test, Fabric.AHungRunKeepsItsRoutersState, asserts a stalled FVC.)
TEST(Campaign, ARunPastItsBoundKeepsEveryChipsStateWhereItStopped) {
  TempDir dir;
  write_file(dir / "c.yaml",
             "name: hang\ntopologies: [galaxy]\nseeds: [1]\nlimit_s: 1\nworkloads: [{pattern: all_to_all, count: 300, size: 256}]\n"
             "scenarios:\n  - {name: clean}\n");
  const std::string out = (dir / "out").string();
  RunResult r = ttemu({"campaign", (dir / "c.yaml").string(), "--out", out});
  EXPECT_EQ(r.status, 1) << r.out;
  ASSERT_NE(r.stdout_text.find("FAIL run 0 (galaxy x all_to_all x clean x seed 1): bounded:"), std::string::npos) << r.out;
  const std::filesystem::path run = dir / "out" / "runs" / "0";
  const auto state = nlohmann::json::parse(slurp(run / "state.json"));
  ASSERT_EQ(state["chips"].size(), 32u);
  for (const auto& c : state["chips"]) {
    EXPECT_TRUE(c["buffers"].is_array()) << c["chip"];
    EXPECT_GE(c["ports"].size(), 8u) << c["chip"] << ": every wired port, with its link's state";
    for (const auto& p : c["ports"]) EXPECT_FALSE(p["state"].get<std::string>().empty()) << p;
  }
  EXPECT_GE(state["sim_ns"].get<int64_t>(), 0);
  EXPECT_FALSE(read_event_log((run / "events.jsonl").string()).empty()) << "the event log up to the stop";
  EXPECT_NE(slurp(run / "stderr.txt").find("stopped by signal 15"), std::string::npos) << slurp(run / "stderr.txt");
}

// A swarm scenario whose expectation the fabric does not meet (the fallback channel, with only
// corrupted and dropped frames) fails; the first failure is shrunk to the smallest schedule and
// workload that still fail that way (here: no fault, one write per pair), kept with its trace.
TEST(Campaign, AFailingSwarmRunIsShrunkAndKeptWithItsTrace) {
  TempDir dir;
  write_file(dir / "c.yaml",
             "name: s\ntopologies: [n300]\nseeds: [4]\nworkloads: [{pattern: all_to_all, count: 8}]\n"
             "scenarios:\n  - {name: swarm, swarm: {faults: 4, kinds: [corrupt, drop]}, expect_fallback: true}\n");
  const std::string out = (dir / "out").string();
  RunResult r = ttemu({"campaign", (dir / "c.yaml").string(), "--out", out});
  EXPECT_EQ(r.status, 1) << r.out;
  ASSERT_NE(r.stdout_text.find("FAIL run 0 (n300 x all_to_all x swarm x seed 4): fallback_channel:"), std::string::npos) << r.out;
  EXPECT_NE(r.stdout_text.find("  faults: "), std::string::npos) << "the drawn schedule is printed: " << r.out;
  const auto runs = read_event_log(out + "/runs.jsonl");
  ASSERT_EQ(runs.size(), 1u);
  const auto& shrunk = runs[0]["shrunk"];
  EXPECT_FALSE(runs[0]["schedule"].empty());
  EXPECT_TRUE(shrunk["fails"].get<bool>()) << shrunk.dump();
  EXPECT_TRUE(shrunk["faults"].empty()) << shrunk.dump();
  EXPECT_EQ(shrunk["count"], 1) << shrunk.dump();
  EXPECT_NE(r.stdout_text.find(fmt::format("to 0 of {} fault(s) and 1 of 8 write(s) per pair: no faults at all", runs[0]["schedule"].size())),
            std::string::npos) << r.out;
  EXPECT_NE(r.stdout_text.find("reproduce the shrunk run: ttemu sim "), std::string::npos) << r.out;
  EXPECT_FALSE(slurp(dir / "out" / "runs" / "0" / "shrunk" / "trace.txt").empty());
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "runs" / "0" / "shrinking")) << "the candidates leave nothing";
  const std::string report = slurp(dir / "out" / "report.html");
  EXPECT_NE(report.find("<dt>reproduce the shrunk run</dt>"), std::string::npos) << "the report shows the shrunk run";
  // --run draws the same schedule from the seed.
  RunResult again = ttemu({"campaign", (dir / "c.yaml").string(), "--out", out, "--run", "0"});
  const auto one = read_event_log(out + "/runs/0/run.jsonl");
  ASSERT_EQ(one.size(), 1u) << again.out;
  EXPECT_EQ(one[0]["schedule"], runs[0]["schedule"]);
}

// The planted defect (the `ttemu_planted` binary: M0D1P6's TT-link takes data frames whose CRC
// fails) is found by tools/campaigns/planted.yaml, with a line that reproduces it and a shrunk
// schedule: the one fault on the frames M0D0P2 sends to M0D1P6. The same campaign passes on
// the real binary. The release build builds both.
TEST(Campaign, ThePlantedDefectIsFoundAndShrunkToItsOneFault) {
  const std::string campaign = std::string(TTEMU_TOPOLOGIES) + "/../tools/campaigns/planted.yaml";
  TempDir dir;
  RunResult good = ttemu({"campaign", campaign, "--out", (dir / "good").string()});
  EXPECT_EQ(good.status, 0) << good.out;
  ASSERT_TRUE(std::filesystem::exists(TTEMU_PLANTED_BINARY)) << TTEMU_PLANTED_BINARY
                                                              << " is missing: cmake --build --preset release --target ttemu_planted";
  RunResult bad = run({TTEMU_PLANTED_BINARY, "campaign", campaign, "--out", (dir / "bad").string()});
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.stdout_text.find("no_acknowledged_write_lost:"), std::string::npos) << bad.out;
  size_t shrunk = 0;
  for (const auto& r : read_event_log((dir / "bad" / "runs.jsonl").string())) {
    if (r["pass"].get<bool>()) continue;
    // Every failing run had a fault on what M0D0P2 sends (the frames M0D1P6 takes unchecked).
    const std::string faults = r["schedule"].dump();
    EXPECT_NE(faults.find("what M0D0P2 sends"), std::string::npos) << r.dump();
    // The defect's signature is an acknowledged write lost or corrupted. Corrupted frames it
    // takes may also carry a link's credits or a packet's header, and then a run can stall
    // instead ("ran": no result): that too is the defect, but it is not what is shrunk here.
    if (r["invariant"] != "no_acknowledged_write_lost") {
      EXPECT_EQ(r["invariant"], "ran") << r.dump();
      continue;
    }
    if (!r.contains("shrunk")) continue;
    ++shrunk;
    const auto& s = r["shrunk"];
    EXPECT_TRUE(s["fails"].get<bool>()) << s.dump();
    ASSERT_EQ(s["faults"].size(), 1u) << s.dump();
    EXPECT_NE(s["faults"][0].get<std::string>().find("what M0D0P2 sends"), std::string::npos) << s.dump();
    // The shrunk line reproduces the failure with the planted build: acknowledged bytes corrupted.
    std::vector<std::string> line = words(s["sim"].get<std::string>());
    EXPECT_EQ(line[0], "ttemu_planted") << "the line names the binary that reproduces it";
    line[0] = TTEMU_PLANTED_BINARY;
    const RunResult again = run(line);
    const auto result = nlohmann::json::parse(again.stdout_text.substr(0, again.stdout_text.find('\n')));
    EXPECT_GT(result["errors"].get<double>(), 0) << again.out;
  }
  EXPECT_GE(shrunk, 1u) << "a lost write is shrunk to its one fault";
}

TEST(Campaign, BadCampaignFilesAreOneLineErrors) {
  TempDir dir;
  auto bad = [&](const std::string& text, const std::string& fragment) {
    write_file(dir / "bad.yaml", text);
    expect_one_line_error(cli("campaign " + (dir / "bad.yaml").string() + " --out " + (dir / "out").string()), fragment);
  };
  bad("topologies: [n300]\n", "'workloads' must be a list of one or more");
  bad("topologies: [nowhere]\nworkloads: [{pattern: all_to_all}]\n", "topology 'nowhere' is neither a file");
  bad("topologies: [n300]\nworkloads: [{pattern: sideways}]\n", "unknown pattern 'sideways'");
  bad("topologies: [n300]\nworkloads: [{pattern: all_to_all, size: 0}]\n", "'size' must be from 1 to");
  bad("topologies: [n300]\nworkloads: [{pattern: all_to_all}]\nscenarios: [{name: x, colour: red}]\n", "unknown key 'colour' in a scenario");
  bad("topologies: [n300]\nworkloads: [{pattern: all_to_all}]\nseeds: [a]\n", "'seed' must be a number");
  bad("topologies: [n300]\nworkloads: [{pattern: all_to_all, op: cas}]\n", "op 'cas' is not write, read or atomic");
  // A run the processes engine does not run, asked for by its id, says why.
  write_file(dir / "loop.yaml",
             "topologies: [t3k]\nworkloads: [{pattern: all_to_all}]\nscenarios: [{name: l, loop: ['M0D0:M0D3@0-100']}]\n");
  expect_one_line_error(cli("campaign " + (dir / "loop.yaml").string() + " --engine processes --run 0 --out " + (dir / "out").string()),
                        "run 0 does not run in the processes engine: a forwarding loop runs in the simulator only");
}

// The scenarios of the live control plane (issue 11's processes tests), replayed in ttemu sim
// from a seed: each runs twice, and the two event logs are the same, byte for byte.
struct SimScenario {
  std::vector<nlohmann::json> patterns, events;
  std::string log_path;

  SimScenario(const TempDir& dir, const std::string& args) {
    log_path = (dir / "a.jsonl").string();
    RunResult r = run_sim(args, log_path);
    const RunResult again = run_sim(args, (dir / "b.jsonl").string());
    EXPECT_EQ(slurp(log_path), slurp(dir / "b.jsonl")) << "the same seed, the same event log";
    std::istringstream lines(r.stdout_text);
    for (std::string line; std::getline(lines, line);) patterns.push_back(nlohmann::json::parse(line));
    events = read_event_log(log_path);
    EXPECT_FALSE(patterns.empty()) << r.out;
  }
  static RunResult run_sim(const std::string& args, const std::string& log) {
    RunResult r = ttemu(words("sim " + topo("galaxy.yaml") + " --pattern all_to_all --size 16384 --json --seed 3 " +
                              args + " --events " + log));
    EXPECT_EQ(r.status, 0) << r.out;
    return r;
  }
  std::vector<nlohmann::json> of(const std::string& kind) const {
    std::vector<nlohmann::json> v;
    for (const auto& e : events) {
      if (e["kind"] == kind) v.push_back(e);
    }
    return v;
  }
  // Whether an event of `kind` is about the link with end `port` (either end).
  bool about(const std::string& kind, const std::string& port) const {
    for (const auto& e : of(kind)) {
      if (e.value("port", "") == port || e.value("peer", "") == port) return true;
    }
    return false;
  }
};

// One link of the M0D0-M0D1 pair cut (a fault plan's down window) and restored, a second made
// unreliable, all_to_all on planes 1 and 0: every byte lands, nothing is NACKed, the log
// shows both links onto the fallback channel and the cut one back, and ttemu diagnose names
// the two links.
TEST(Sim, ACutAndAnUnreliableLinkTravelTheFallbackChannelFromASeed) {
  TempDir dir;
  write_file(dir / "plan.yaml",
             "links:\n  - link: M0D0P4\n    direction: both\n    down: [{at: 0.002, for: 0.3}]\n"
             "  - link: M0D0P5\n    direction: both\n    corrupt: 0.2\n");
  SimScenario s(dir, "--plane 1,0 --count 12 --faults " + (dir / "plan.yaml").string());
  for (const auto& p : s.patterns) {
    EXPECT_EQ(p["verified"], p["bytes"]) << p;
    EXPECT_EQ(p["nacks"], 0) << p;
  }
  EXPECT_TRUE(s.about("fallback", "M0D0P4"));
  EXPECT_TRUE(s.about("fallback", "M0D0P5"));
  EXPECT_TRUE(s.about("returned", "M0D0P4"));
  EXPECT_TRUE(s.of("tables_reloaded").empty()) << "the fallback channel's job, not the control plane's";
  EXPECT_TRUE(s.of("dropped").empty());
  RunResult d = ttemu({"diagnose", s.log_path, "--json"});
  ASSERT_EQ(d.status, 0) << d.out;
  const auto diagnosis = nlohmann::json::parse(d.stdout_text);
  std::set<nlohmann::json> named;
  for (const auto& l : diagnosis["links"]) named.insert(l["ends"]);
  EXPECT_TRUE(named.count(nlohmann::json::array({"M0D0P4", "M0D1P12"}))) << d.stdout_text;
  EXPECT_TRUE(named.count(nlohmann::json::array({"M0D0P5", "M0D1P13"}))) << d.stdout_text;
  // The status queues' rates: the unreliable link's receivers raised CRC alarms, and their
  // counts rank it first.
  bool crc_alarm = false;
  for (const auto& e : s.of("error_rate")) {
    crc_alarm |= (e["port"] == "M0D0P5" || e["port"] == "M0D1P13") && e["rate"] == "crc_errors" && e["above"] == true;
  }
  EXPECT_TRUE(crc_alarm) << slurp(s.log_path);
  EXPECT_FALSE(s.of("rates").empty());
  EXPECT_EQ(diagnosis["links"][0]["ends"], nlohmann::json::array({"M0D0P5", "M0D1P13"})) << d.stdout_text;
  EXPECT_GT(diagnosis["links"][0]["crc_errors"].get<uint64_t>(), 0u) << d.stdout_text;
  // ttemu events leaves the periodic rate lines out unless asked.
  RunResult ev = ttemu({"events", s.log_path, "--json"}), with = ttemu({"events", s.log_path, "--json", "--rates"});
  ASSERT_EQ(ev.status, 0) << ev.out;
  EXPECT_EQ(ev.stdout_text.find("\"kind\":\"rates\""), std::string::npos);
  EXPECT_NE(with.stdout_text.find("\"kind\":\"rates\""), std::string::npos);
  EXPECT_NE(ev.stdout_text.find("\"kind\":\"error_rate\""), std::string::npos) << "alarms are events";
  // The picture: the system the log names, the unreliable link red and ranked first.
  RunResult svg = ttemu({"diagnose", s.log_path, "--svg", (dir / "d.svg").string()});
  ASSERT_EQ(svg.status, 0) << svg.out;
  const std::string picture = slurp(dir / "d.svg");
  const size_t at = picture.find("<title>#1 at fault: unreliable");
  ASSERT_NE(at, std::string::npos) << picture;
  const size_t line = picture.rfind("<line ", at);
  EXPECT_NE(picture.substr(line, at - line).find("stroke=\"#d62728\""), std::string::npos) << picture.substr(line, at - line);
  EXPECT_NE(picture.find("M0D0P5 - M0D1P13", at), std::string::npos);
}

// All four links of the pair cut: they go down, the control plane loads tables around the
// pair, and the writes NACKed or lost meanwhile are written again (--retry) and land. One wire
// restored brings the pair back into the tables.
TEST(Sim, AllFourLinksOfAPairCutReloadTheTablesAndRetriedWritesLandFromASeed) {
  TempDir dir;
  SimScenario s(dir, "--count 6 --retry 3 --cut M0D0P4@1-9000 --cut M0D0P5@1 --cut M0D0P6@1 --cut M0D0P7@1");
  ASSERT_EQ(s.patterns.size(), 1u);
  const auto& p = s.patterns[0];
  EXPECT_EQ(p["verified"], p["bytes"]) << p;
  EXPECT_GT(p["retried"].get<uint64_t>(), 0u) << p;
  const auto reloads = s.of("tables_reloaded");
  ASSERT_EQ(reloads.size(), 2u) << slurp(s.log_path);
  EXPECT_EQ(reloads[0]["failed"], "M0D0-M0D1 (4 links)");
  EXPECT_EQ(reloads[0]["unreachable_pairs"], 0);
  EXPECT_EQ(reloads[0]["switch"], "safe");
  EXPECT_EQ(reloads[1]["failed"], "nothing failed") << "M0D0P4 back up";
  EXPECT_GT(reloads[1]["uptime_s"].get<double>(), 9.0);
}

// A corrupted table (--loop) bounces M0D3's packets between M0D0 and its neighbour: TTL runs
// out for them and for no one else, the writes are NACKed, and once the tables are mended the
// retried writes land. (It hung once: the retry waited a simulated second for new tables on a
// clock that an idle system never moved.)
TEST(Sim, AForwardingLoopRunsOutOfTtlAndTheRetriedWritesLandOnceItIsMended) {
  TempDir dir;
  const auto run = [&](const std::string& log) {
    return ttemu(words("sim " + topo("t3k.yaml") + " --pattern all_to_all --size 4096 --count 4 --json --seed 1 --retry 3 " +
                       "--loop M0D0:M0D3@0-3500 --events " + log));
  };
  const RunResult r = run((dir / "a.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto p = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(p["errors"], 0) << p;
  EXPECT_EQ(p["verified"], p["bytes"]) << p;
  EXPECT_GT(p["nacks"].get<uint64_t>(), 0u) << p;
  int expired = 0;
  for (const auto& e : read_event_log((dir / "a.jsonl").string())) {
    if (e["kind"] != "dropped" || e["reason"] != "ttl_expired") continue;
    ++expired;
    EXPECT_EQ(e["dst"], "M0D3") << e;
  }
  EXPECT_GT(expired, 0);
  ASSERT_EQ(run((dir / "b.jsonl").string()).status, 0);
  EXPECT_EQ(slurp(dir / "a.jsonl"), slurp(dir / "b.jsonl")) << "the same seed, the same event log";
}

// Atomic increments through dropped and corrupted frames, a chip killed and restarted, and
// retries: each pair's counter holds every acknowledged increment and at most the unanswered
// ones besides; and blocks written then read back come back as written.
TEST(Sim, AtomicCountersAndReadBacksHoldThroughFaults) {
  TempDir dir;
  write_file(dir / "plan.yaml", "defaults: {corrupt: 0.01, drop: 0.01}\n");
  const std::string base = "sim " + topo("t3k.yaml") + " --pattern all_to_all --json --seed 5 --retry 3 --faults " + (dir / "plan.yaml").string();
  const RunResult a = cli(base + " --op atomic --count 20 --kill M0D5@1 --restart M0D5@20");
  ASSERT_EQ(a.status, 0) << a.out;
  const auto p = nlohmann::json::parse(a.stdout_text);
  EXPECT_EQ(p["op"], "atomic");
  EXPECT_EQ(p["errors"], 0) << p;
  EXPECT_EQ(p["atomic_errors"], 0) << p;
  EXPECT_EQ(p["bytes"].get<double>(), 56 * 20 * 4) << "an increment counts 4 bytes: " << p;
  EXPECT_EQ(p["verified"].get<double>() + p["unverified"].get<double>() + p["dead_pair_bytes"].get<double>(), p["bytes"].get<double>()) << p;
  EXPECT_GT(p["verified"].get<double>(), 0) << p;
  const RunResult r = cli(base + " --op read --count 4 --size 8192");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto q = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(q["read_errors"], 0) << q;
  EXPECT_EQ(q["reads_unanswered"], 0) << q;
  EXPECT_EQ(q["read_verified"], q["read_bytes"]) << q;
  EXPECT_EQ(q["read_bytes"].get<double>(), 56 * 4 * 8192) << q;
}

// `ttemu sim --memory protected`: each chip registers a window of its L1 and every write, read
// and atomic names its destination's key; a request with a missing or wrong key would be
// NACKed, so every byte verified with no NACK means every key was right.
TEST(Sim, ProtectedMemoryVerifiesWritesReadsAndAtomicsThroughKeys) {
  const std::string base = "sim " + topo("t3k.yaml") + " --pattern all_to_all --memory protected --seed 2";
  const RunResult text = cli(base + " --count 1");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.stdout_text.find("seed 2, protected memory, simulated"), std::string::npos) << text.out;
  for (const char* op : {"write", "read", "atomic"}) {
    const RunResult r = cli(base + " --json --count 3 --op " + op);
    ASSERT_EQ(r.status, 0) << r.out;
    const auto p = nlohmann::json::parse(r.stdout_text);
    EXPECT_EQ(p["nacks"], 0) << p;
    EXPECT_EQ(p["errors"], 0) << p;
    EXPECT_GT(p["bytes"].get<double>(), 0) << p;
    EXPECT_EQ(p["verified"], p["bytes"]) << p;
    if (std::string(op) == "read") {
      EXPECT_EQ(p["reads_nacked"], 0) << p;
      EXPECT_EQ(p["read_verified"], p["read_bytes"]) << p;
    }
  }
  expect_one_line_error(cli(base + " --memory secret"), "--memory");
}

// `ttemu sim --op socket`: every pair of all_to_all on the four meshes streams through a
// socket of its own, while readers stall and resume at random (seeded), with small buffers:
// with local handshake, L1CBs of 8 KiB (and a DSCB of 16 KiB), the fabric backs up; end to
// end, the DSCBs take the stalls. Every byte arrives and checks. (Two bugs hung these runs: a
// gate asked about a packet it did not then deliver kept its room reserved; and a reader's
// poke, once a command, waited behind a socket's blocked send for a slot.)
TEST(Sim, SocketStreamsVerifyThroughStallingReadersEitherHandshake) {
  const std::string base = "sim " + topo("spec_4mesh_3x3.yaml") + " --op socket --count 16 --reader-stalls --l1cb-kib 8 --json";
  for (const std::string mode : {" --handshake local --dscb-kib 0", " --handshake local --dscb-kib 16", " --dscb-kib 32"}) {
    SCOPED_TRACE(mode);
    const RunResult r = cli(base + mode);
    ASSERT_EQ(r.status, 0) << r.out;
    const auto p = nlohmann::json::parse(r.stdout_text);
    EXPECT_EQ(p["op"], "socket");
    EXPECT_EQ(p["pairs"], 36 * 35);
    EXPECT_EQ(p["verified"].get<double>(), p["bytes"].get<double>()) << p;
    EXPECT_EQ(p["errors"], 0) << p;
    EXPECT_EQ(p["unverified"], 0) << p;
    if (mode.find("dscb-kib 0") == std::string::npos) {
      EXPECT_GT(p["spilled"].get<double>(), 0) << "the stalls filled the L1CBs: " << p;
    }
  }
  // An SSocket from mesh 0 to mesh 3, its route reserved, its reader stalling at random.
  const RunResult r = cli("sim " + topo("spec_4mesh_3x3.yaml") +
                          " --op socket --socket ssocket --pattern unicast --src M0D0 --dst M3D8 --count 64 --reader-stalls --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto p = nlohmann::json::parse(r.stdout_text);
  EXPECT_EQ(p["socket"], "ssocket");
  EXPECT_EQ(p["verified"].get<double>(), 64 * 4096) << p;
}

// A chip killed mid-traffic and restarted: the pairs among the other chips verify, the tables
// go around the dead chip and back, its neighbours see the restarted peer and their links come
// up again.
TEST(Sim, AChipKilledMidTrafficAndRestartedFromASeed) {
  TempDir dir;
  SimScenario s(dir, "--count 12 --retry 3 --kill M0D5@2 --restart M0D5@40");
  ASSERT_EQ(s.patterns.size(), 1u);
  const auto& p = s.patterns[0];
  EXPECT_EQ(p["errors"], 0) << p;
  EXPECT_EQ(p["dead_chips"], nlohmann::json::array({"M0D5"})) << p;
  EXPECT_EQ(p["verified"].get<double>() + p["dead_pair_bytes"].get<double>(), p["bytes"].get<double>()) << p;
  ASSERT_EQ(s.of("chip_died").size(), 1u);
  ASSERT_EQ(s.of("chip_restarted").size(), 1u);
  const auto reloads = s.of("tables_reloaded");
  ASSERT_EQ(reloads.size(), 2u) << slurp(s.log_path);
  EXPECT_EQ(reloads[0]["failed_chips"], nlohmann::json::array({"M0D5"}));
  EXPECT_EQ(reloads[0]["unreachable_pairs"], 0) << "no pair of live chips lost its route";
  EXPECT_TRUE(reloads[1]["failed_chips"].empty());
  EXPECT_FALSE(s.of("peer_restarted").empty());
  const double restarted = s.of("chip_restarted")[0]["uptime_s"];
  int up_again = 0;
  for (const auto& e : s.of("link_up")) up_again += e["chip"] == "M0D5" && e["uptime_s"].get<double>() >= restarted;
  EXPECT_EQ(up_again, 12) << "every link of the restarted chip handshook again";
}

// A picture needs the system: a log without its job_started line (or whose system is gone)
// says so in one line, and --system supplies it.
TEST(Cli, DiagnoseSvgNamesTheSystemItNeeds) {
  TempDir dir;
  const std::string line = nlohmann::json{{"uptime_s", 1.0}, {"chip", "M0D0"}, {"kind", "link_down"}, {"port", "M0D0P2"},
                                          {"peer", "M0D1P6"}}.dump() + "\n";
  write_file(dir / "log.jsonl", line);
  const std::string svg = (dir / "d.svg").string();
  expect_one_line_error(cli("diagnose " + (dir / "log.jsonl").string() + " --svg " + svg), "names no system");
  EXPECT_FALSE(std::filesystem::exists(svg));
  write_file(dir / "gone.jsonl", nlohmann::json{{"kind", "job_started"}, {"system", (dir / "nowhere.yaml").string()}}.dump() + "\n" + line);
  expect_one_line_error(cli("diagnose " + (dir / "gone.jsonl").string() + " --svg " + svg), "which is gone");
  RunResult r = cli("diagnose " + (dir / "log.jsonl").string() + " --svg " + svg + " --system " + topo("n300.yaml"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(slurp(svg).find("M0D0P2 - M0D1P6"), std::string::npos);
}

// The receivers' rate lines rank links: one whose receiver raised a CRC alarm comes first, a
// cut one (timeouts) next, and one with a stray CRC error and no alarm is not blamed at all.
TEST(Cli, DiagnoseRanksByTheReceiversCrcAlarmsAndIgnoresAStrayError) {
  auto rates = [](const char* port, const char* peer, int crc, int frames) {
    return nlohmann::json{{"uptime_s", 1.0}, {"chip", std::string(port).substr(0, 4)}, {"kind", "rates"}, {"port", port},
                          {"peer", peer}, {"interval_s", 1.0}, {"frames_in", frames}, {"frames_rx", frames - crc},
                          {"crc_errors", crc}, {"frames_tx", frames}, {"retransmits", 0}}.dump() + "\n";
  };
  const std::string alarm = nlohmann::json{{"uptime_s", 1.0}, {"chip", "M0D0"}, {"kind", "error_rate"}, {"port", "M0D0P5"},
                                           {"peer", "M0D1P13"}, {"rate", "crc_errors"}, {"above", true}}.dump() + "\n";
  const std::string cut = nlohmann::json{{"uptime_s", 1.0}, {"chip", "M0D0"}, {"kind", "fallback"}, {"port", "M0D0P4"},
                                         {"peer", "M0D1P12"}, {"via", "M0D0P6"}, {"reason", "timeouts"}}.dump() + "\n";
  TempFile log(rates("M0D0P6", "M0D1P14", 1, 100000) + rates("M0D0P5", "M0D1P13", 300, 10000) + alarm + cut);
  RunResult r = cli("diagnose " + log.path() + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto d = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(d["links"].size(), 2u) << d.dump();
  EXPECT_EQ(d["links"][0]["ends"], nlohmann::json({"M0D0P5", "M0D1P13"})) << d.dump();
  EXPECT_EQ(d["links"][0]["crc_errors"], 300);
  EXPECT_NEAR(d["links"][0]["crc_per_frame"].get<double>(), 0.03, 1e-9);
  EXPECT_EQ(d["links"][1]["ends"], nlohmann::json({"M0D0P4", "M0D1P12"})) << d.dump();
}

// The receiver's own error count names a faulty wire, even when its end first followed the far
// end onto the fallback channel and judged the link itself only there: that judgement counts,
// and ranks the link above one whose ends only timed out (a cut).
TEST(Cli, DiagnoseCountsAJudgementMadeAfterFollowingTheFarEnd) {
  auto line = [](const char* chip, const char* kind, const char* port, const char* peer, const char* reason) {
    return nlohmann::json{{"time", "2026-11-23T00:00:00.000Z"}, {"uptime_s", 1.0}, {"chip", chip}, {"kind", kind},
                          {"port", port}, {"peer", peer}, {"via", "M0D0P6"}, {"reason", reason}}.dump() + "\n";
  };
  TempFile log(line("M0D0", "fallback", "M0D0P4", "M0D1P12", "timeouts") +
               line("M0D1", "fallback", "M0D1P12", "M0D0P4", "timeouts") +
               line("M0D1", "fallback", "M0D1P13", "M0D0P5", "peer") +
               line("M0D1", "fallback", "M0D1P13", "M0D0P5", "error_rate"));
  RunResult r = cli("diagnose " + log.path() + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto d = nlohmann::json::parse(r.stdout_text);
  ASSERT_EQ(d["links"].size(), 2u) << d.dump();
  EXPECT_EQ(d["links"][0]["ends"], nlohmann::json({"M0D0P5", "M0D1P13"})) << d.dump();
  EXPECT_EQ(d["links"][0]["fallbacks"], nlohmann::json({{"error_rate", 1}})) << d.dump();
  EXPECT_EQ(d["links"][0]["followed"], 1);
}

// A log still being written may end in half a line (the launcher's buffer can split a line
// into two writes): diagnose reads the complete lines and says nothing of the half one, but
// still names a complete line that is not JSON.
TEST(Cli, DiagnoseReadsALiveLogUpToItsLastCompleteLine) {
  const std::string down = nlohmann::json{{"uptime_s", 1.0}, {"chip", "M0D0"}, {"kind", "fallback"}, {"port", "M0D0P4"},
                                          {"peer", "M0D1P12"}, {"via", "M0D0P6"}, {"reason", "timeouts"}}.dump() + "\n";
  TempFile live(down + "{\"uptime_s\": 1.5, \"chip\": \"M0D1\", \"ki");
  RunResult r = cli("diagnose " + live.path() + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.stderr_text.find("not a JSON object"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(nlohmann::json::parse(r.stdout_text)["links"].size(), 1u) << r.stdout_text;
  TempFile broken(down + "not json\n" + down);
  RunResult b = cli("diagnose " + broken.path() + " --json");
  ASSERT_EQ(b.status, 0) << b.out;
  EXPECT_NE(b.stderr_text.find(":2: not a JSON object, skipped"), std::string::npos) << b.stderr_text;
}

}  // namespace
}  // namespace ttemu::test
