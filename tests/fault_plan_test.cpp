// The fault plan parser (docs/fault-plan.md): seeds in range, and every mistake one line that
// names file, line and culprit, with what was found where something else was expected.
#include "emulator/link/fault_plan.hpp"

#include <gtest/gtest.h>

#include "emulator/common/error.hpp"
#include "tests/test_support.hpp"

namespace ttemu::link {
namespace {

const control::System& n300() {
  static const control::System sys = test::load("n300.yaml");
  return sys;
}

FaultPlan parse(const std::string& yaml) { return parse_fault_plan(yaml, "plan.yaml", n300().wiring()); }

void expect_error(const std::string& yaml, int line, const std::string& fragment) {
  try {
    parse(yaml);
    ADD_FAILURE() << "accepted; expected an error containing: " << fragment;
  } catch (const Error& e) {
    std::string msg = e.what();
    std::string where = "plan.yaml:" + std::to_string(line) + ": ";
    EXPECT_EQ(msg.rfind(where, 0), 0u) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
}

TEST(FaultPlan, SeedIsAWholeNumberFromZeroTo9e15) {
  EXPECT_EQ(parse("seed: 0\n").seed, 0u);
  EXPECT_EQ(parse("seed: 9000000000000000\n").seed, 9'000'000'000'000'000u);
  expect_error("seed: -1\n", 1, "seed -1 is out of range (0-9000000000000000)");
  expect_error("seed: 9000000000000001\n", 1, "seed 9000000000000001 is out of range (0-9000000000000000)");
  expect_error("seed: 99999999999999999999999\n", 1, "is out of range (0-9000000000000000)");
  expect_error("seed: 1.5\n", 1, "seed must be a whole number 0-9000000000000000, not '1.5'");
  expect_error("seed: abc\n", 1, "seed must be a whole number 0-9000000000000000, not 'abc'");
}

TEST(FaultPlan, AWrongKindOfNodeSaysWhatWasFoundAndWhatWasExpected) {
  expect_error("seed: [1, 2]\n", 1, "seed must be a whole number 0-9000000000000000, not a list");
  expect_error("seed:\n", 1, "seed must be a whole number 0-9000000000000000, not empty");
  expect_error("links:\n  - link: [M0D0P2]\n", 2, "link must be a port like M0D1P2 (or all), not a list");
  expect_error("links:\n  - link: {a: 1}\n", 2, "link must be a port like M0D1P2 (or all), not a mapping");
  expect_error("links:\n  - link: M0D0P2\n    direction: [out]\n", 3, "direction must be out, in or both, not a list");
  expect_error("links:\n  - link: M0D0P2\n    corrupt: [0.1]\n", 3, "link M0D0P2 corrupt must be a number 0-1, not a list");
  expect_error("defaults: [1]\n", 1, "defaults must be a mapping of faults, not a list");
  expect_error("links: {link: M0D0P2}\n", 1, "links must be a list, not a mapping");
  expect_error("links:\n  - M0D0P2\n", 2, "each links entry must be a mapping with link: MxDyPz (or all), not 'M0D0P2'");
  expect_error("[1, 2]\n", 1, "a fault plan is a mapping with seed, defaults and links, not a list");
  expect_error("? [a]\n: 1\n", 1, "a key must be a word, not a list");
  expect_error("links:\n  - link: M0D0P2\n    down: {at: 1}\n", 3, "link M0D0P2 down must be a list of {at, for}, not a mapping");
  expect_error("links:\n  - link: M0D0P2\n    burst: 0.5\n", 3, "link M0D0P2 burst must be a mapping {enter_bad, leave_bad, corrupt_in_bad}, not '0.5'");
}

TEST(FaultPlan, TextThatIsNotUtf8IsNamedByLine) {
  expect_error("seed: 1\nlinks: \xff\xfe\n", 2, "not UTF-8 text");
  expect_error(std::string("seed: 1\n\x80", 9), 2, "not UTF-8 text (byte 0x80)");
}

TEST(FaultPlan, DeepNestingIsRefusedWithoutCrashing) {
  expect_error(std::string(5000, '['), 1, "nested too deep");
  expect_error(std::string(100000, '{'), 1, "nested too deep");
  std::string block;
  for (int i = 0; i < 5000; ++i) block += std::string(static_cast<size_t>(i), ' ') + "- \n";
  EXPECT_THROW(parse(block), Error) << "block nesting: an error, not a crash";
}

TEST(FaultPlan, LinkAllTakesNoDirection) {
  // docs/fault-plan.md: `all` covers every direction of every link; another direction is refused.
  auto plan = parse("links:\n  - link: all\n    direction: both\n    drop: 0.5\n");
  EXPECT_EQ(plan.tx.size(), 4u) << "both directions of both links";
  expect_error("links:\n  - link: all\n    direction: out\n    drop: 0.5\n", 3,
               "link: all covers both directions of every link; leave out direction");
}

}  // namespace
}  // namespace ttemu::link
