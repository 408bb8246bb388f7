// ttemu sim --replay (docs/capture.md#replay): the capture of a Galaxy pattern, replayed into
// the same system, delivers what the pattern delivered, pair by pair (packets, bytes, digest
// of what each carried), and so does a capture full of corrupted frames; a capture of one link replays only what crossed that link, and says
// so; a file that is not a capture, a capture without fabric requests, a capture of another
// system and --replay with --pattern are refused, each in one line naming the culprit.
#include <map>
#include <string>

#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

using nlohmann::json;

// The one JSON object a `ttemu sim --json` run of one pattern (or one replay) prints.
json only_result(const RunResult& r) {
  const auto lines = lines_with(r.stdout_text, "{");
  EXPECT_EQ(lines.size(), 1u) << r.out;
  return lines.empty() ? json() : json::parse(lines.front());
}

// A deliveries record's pairs by "SRC->DST".
std::map<std::string, json> by_pair(const json& deliveries) {
  std::map<std::string, json> out;
  for (const auto& p : deliveries.at("by_pair")) out[p.at("src").get<std::string>() + "->" + p.at("dst").get<std::string>()] = p;
  return out;
}

TEST(Replay, GalaxyAllToAllCaptureReplaysTheSameDeliveries) {
  TempDir dir;
  const std::string cap = (dir / "all_to_all.pcapng").string();
  const auto pattern = ttemu({"sim", topo("galaxy.yaml"), "--pattern", "all_to_all", "--count", "2", "--capture", cap, "--json"});
  ASSERT_EQ(pattern.status, 0) << pattern.out;
  const json p = only_result(pattern);
  const json& delivered = p.at("deliveries");
  ASSERT_GE(delivered.at("pairs").get<size_t>(), p.at("pairs").get<size_t>());  // 992: every ordered pair of 32 chips
  ASSERT_EQ(delivered.at("pairs").get<size_t>(), 32u * 31u);
  // Each pair's two writes of 4096 B, and the latency probes.
  EXPECT_GE(delivered.at("bytes").get<uint64_t>(), 32u * 31u * 2 * 4096);

  const auto replay = ttemu({"sim", topo("galaxy.yaml"), "--replay", cap, "--json"});
  ASSERT_EQ(replay.status, 0) << replay.out;
  EXPECT_EQ(replay.stderr_text, "");  // no warning: every link end is in the capture
  const json r = only_result(replay);
  EXPECT_TRUE(r.at("complete").get<bool>());
  EXPECT_TRUE(r.at("idle").get<bool>());
  EXPECT_EQ(r.at("injections").get<uint64_t>(), delivered.at("packets").get<uint64_t>());
  EXPECT_EQ(r.at("nacks"), 0);
  EXPECT_EQ(r.at("deliveries").at("digest"), delivered.at("digest"));
  EXPECT_EQ(r.at("deliveries"), delivered);  // pair by pair: packets, bytes, digest

  // The text report says the same (the pattern's and the replay's lines name one digest).
  const auto text = ttemu({"sim", topo("galaxy.yaml"), "--replay", cap});
  ASSERT_EQ(text.status, 0) << text.out;
  const auto lines = lines_with(text.stdout_text, "deliveries: ");
  ASSERT_EQ(lines.size(), 1u) << text.out;
  EXPECT_NE(lines[0].find("digest " + delivered.at("digest").get<std::string>()), std::string::npos) << lines[0];
}

// Frames corrupted on the wire (a fault plan's CRC errors) show with bad CRCs and are sent
// again: the replay skips the bad ones and takes each packet once, and, replayed without the
// faults, delivers what the faulty run delivered.
TEST(Replay, CorruptedFramesAndTheirRetransmissionsAreOneInjection) {
  TempDir dir;
  const std::string cap = (dir / "crc.pcapng").string();
  write_file(dir / "plan.yaml", "defaults: {corrupt: 0.05}\n");
  const auto pattern = ttemu({"sim", topo("t3k.yaml"), "--pattern", "all_to_all", "--count", "3", "--faults",
                              (dir / "plan.yaml").string(), "--capture", cap, "--json"});
  ASSERT_EQ(pattern.status, 0) << pattern.out;
  const json p = only_result(pattern);
  ASSERT_EQ(p.at("nacks"), 0) << "corrupted frames are sent again by the link, not dropped by the fabric";
  const json& delivered = p.at("deliveries");
  ASSERT_EQ(delivered.at("pairs").get<size_t>(), 8u * 7u);

  const auto replay = ttemu({"sim", topo("t3k.yaml"), "--replay", cap, "--json"});
  ASSERT_EQ(replay.status, 0) << replay.out;
  const json r = only_result(replay);
  EXPECT_GT(r.at("bad_frames").get<uint64_t>(), 0u);
  EXPECT_EQ(r.at("injections").get<uint64_t>(), delivered.at("packets").get<uint64_t>());
  EXPECT_EQ(r.at("deliveries"), delivered);
}

// A capture of one link has only what crossed it: the replay delivers a part of what the
// pattern delivered (no pair more than it had), reports the capture incomplete and warns.
TEST(Replay, OneLinkCaptureReplaysOnlyWhatCrossedIt) {
  TempDir dir;
  const std::string cap = (dir / "one_link.pcapng").string();
  // one_to_all from M0D0: its writes east go over M0D0's link to M0D1 first, the rest not.
  const auto route = ttemu({"topo", "path", topo("galaxy.yaml"), "M0D0", "M0D1"});
  ASSERT_EQ(route.status, 0) << route.out;
  const auto hop = lines_with(route.stdout_text, "M0D1P");
  ASSERT_EQ(hop.size(), 1u) << route.out;
  const std::string port = words(hop[0]).at(1);  // "  1  M0D0P2  M0D1P4": the sender
  const auto pattern = ttemu({"sim", topo("galaxy.yaml"), "--pattern", "one_to_all", "--count", "2", "--capture", cap,
                              "--capture-link", port, "--json"});
  ASSERT_EQ(pattern.status, 0) << pattern.out;
  const json delivered = only_result(pattern).at("deliveries");
  ASSERT_GE(delivered.at("pairs").get<size_t>(), 31u);

  const auto replay = ttemu({"sim", topo("galaxy.yaml"), "--replay", cap, "--json"});
  ASSERT_EQ(replay.status, 0) << replay.out;
  EXPECT_NE(replay.stderr_text.find("warning: --replay " + cap + " has 2 of the "), std::string::npos) << replay.stderr_text;
  const json r = only_result(replay);
  EXPECT_FALSE(r.at("complete").get<bool>());
  EXPECT_EQ(r.at("link_ends_captured"), 2);
  const json& again = r.at("deliveries");
  EXPECT_NE(again, delivered);
  EXPECT_GT(again.at("pairs").get<size_t>(), 0u);
  EXPECT_LT(again.at("pairs").get<size_t>(), delivered.at("pairs").get<size_t>());
  const auto all = by_pair(delivered);
  for (const auto& [pair, d] : by_pair(again)) {
    ASSERT_TRUE(all.count(pair)) << pair << " was not delivered in the captured run";
    EXPECT_EQ(d, all.at(pair)) << pair << ": what crossed the link is the pair's whole traffic";
  }
}

TEST(Replay, RefusesWhatIsNotAReplayableCapture) {
  TempDir dir;
  // Not pcapng at all.
  const std::string text = (dir / "notes.txt").string();
  write_file(text, "not a capture\n");
  expect_one_line_error(ttemu({"sim", topo("n300.yaml"), "--replay", text}), text + ": not a pcapng file");
  // No such file.
  expect_one_line_error(ttemu({"sim", topo("n300.yaml"), "--replay", (dir / "absent.pcapng").string()}), "cannot read the capture");

  // A capture of the N300's second link while the pattern uses the first (plane 0): hellos and
  // credits' links, no fabric request.
  const std::string idle = (dir / "idle_link.pcapng").string();
  const auto quiet = ttemu({"sim", topo("n300.yaml"), "--pattern", "unicast", "--count", "1", "--capture", idle,
                            "--capture-link", "M0D0P3"});
  ASSERT_EQ(quiet.status, 0) << quiet.out;
  expect_one_line_error(ttemu({"sim", topo("n300.yaml"), "--replay", idle}), "no fabric request in ");

  // The N300's traffic, replayed into one chip: M0D1 is not there.
  const std::string n300 = (dir / "n300.pcapng").string();
  const auto busy = ttemu({"sim", topo("n300.yaml"), "--pattern", "unicast", "--count", "1", "--capture", n300});
  ASSERT_EQ(busy.status, 0) << busy.out;
  expect_one_line_error(ttemu({"sim", topo("n150.yaml"), "--replay", n300}), "chip M0D1 is not in " + topo("n150.yaml"));

  // Cut short in the middle of a block.
  const std::string whole = slurp(n300);
  const std::string cut = (dir / "cut.pcapng").string();
  write_file(cut, whole.substr(0, whole.size() - 10));
  expect_one_line_error(ttemu({"sim", topo("n300.yaml"), "--replay", cut}), cut + ": pcapng: a bad block length");

  // A replay's traffic is the capture's: no pattern besides.
  expect_one_line_error(ttemu({"sim", topo("n300.yaml"), "--replay", n300, "--pattern", "unicast"}), "--pattern excludes --replay");
  // The capture replayed as it should be, for contrast: the same file is accepted.
  EXPECT_EQ(ttemu({"sim", topo("n300.yaml"), "--replay", n300}).status, 0);
}

}  // namespace
}  // namespace ttemu::test
