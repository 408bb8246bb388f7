// The benchmarks' command lines (tools/bench/options.hpp), run as a user would: a bad option
// stops the program before it measures anything, with exit status 2 and one line on stderr,
// "ttemu_bench_X: ...", naming the option and the value; --help prints the help and exits 0.
// Only bad options and --help are given here: nothing launches a system.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

struct Bench {
  const char* path;
  std::string name() const { return fs::path(path).filename().string(); }
};
const Bench kFabric{TTEMU_BENCH_FABRIC}, kLink{TTEMU_BENCH_LINK}, kEfc{TTEMU_BENCH_EFC}, kLaunch{TTEMU_BENCH_LAUNCH},
    kLibfabric{TTEMU_BENCH_LIBFABRIC}, kSocket{TTEMU_BENCH_SOCKET}, kHop{TTEMU_BENCH_HOP}, kSim{TTEMU_BENCH_SIM},
    kMultihost{TTEMU_BENCH_MULTIHOST};

// The benchmark with these arguments ("--repeat x"), to completion. A bad option that got
// through would start measuring: the short bound turns that into a failure, not a long wait.
RunResult bench(const Bench& b, const std::string& args) {
  std::vector<std::string> argv = words(args);
  argv.insert(argv.begin(), b.path);
  return run(argv, std::chrono::seconds(20));
}

// The usage error: status 2, one line "NAME: ..." on stderr containing each fragment.
void expect_usage_error(const Bench& b, const std::string& args, const std::vector<std::string>& fragments) {
  SCOPED_TRACE(b.name() + " " + args);
  const RunResult r = bench(b, args);
  EXPECT_EQ(r.status, 2) << r.out;
  for (const auto& f : fragments) expect_one_line_error(r, f, b.name() + ": ");
}

// Before CLI11, std::stoi threw (an abort, status 134) and atoi read "x" as 0, clamped to 1.
TEST(BenchOptions, FabricRejectsANonNumberOrZeroRepeat) {
  expect_usage_error(kFabric, "--repeat x", {"--repeat", "'x'"});
  expect_usage_error(kFabric, "--repeat 0", {"--repeat", "'0'"});
  expect_usage_error(kFabric, "--samples 1e", {"--samples", "'1e'"});
  expect_usage_error(kFabric, "--spin-us -1", {"--spin-us", "'-1'"});
  expect_usage_error(kFabric, "--samples 010", {"--samples", "'010'"});  // CLI11 would read it as octal 8
}

TEST(BenchOptions, FabricNamesAnUnknownTransport) {
  expect_usage_error(kFabric, "--transport foo", {"--transport", "foo"});
  expect_usage_error(kFabric, "--transport udp,foo", {"--transport", "foo"});
}

// The raw chain's mode (run by a launched system's client) checks its two numbers too.
TEST(BenchOptions, FabricRawChainChecksItsNumbers) {
  expect_usage_error(kFabric, "--raw-chain x 0", {"--raw-chain", "'x'"});
  expect_usage_error(kFabric, "--raw-chain 50 x", {"--raw-chain", "'x'"});
  expect_usage_error(kFabric, "--raw-chain 0 0", {"--raw-chain", "'0'"});
  expect_usage_error(kFabric, "--raw-chain 50", {"--raw-chain"});
  expect_usage_error(kFabric, "--raw-chain 50 0 --json", {"--raw-chain", "--json"});
}

TEST(BenchOptions, UnknownOptionIsNamed) {
  expect_usage_error(kFabric, "--bogus", {"--bogus"});
  expect_usage_error(kLink, "--frames 10 stray", {"stray"});
}

TEST(BenchOptions, LinkChecksFerAndPayload) {
  expect_usage_error(kLink, "--fer 2", {"--fer", "'2'"});
  expect_usage_error(kLink, "--fer 1", {"--fer", "'1'"});
  expect_usage_error(kLink, "--payload abc", {"--payload", "'abc'"});
  expect_usage_error(kLink, "--payload 8193", {"--payload", "'8193'"});  // over link::kMaxPayload
  expect_usage_error(kLink, "--frames 0", {"--frames", "'0'"});
  expect_usage_error(kLink, "--repeat 0", {"--repeat", "'0'"});
}

// One bad value for each of the other benchmarks.
TEST(BenchOptions, EveryOtherBenchmarkChecksItsOptions) {
  expect_usage_error(kEfc, "--frames x", {"--frames", "'x'"});
  expect_usage_error(kEfc, "--window 0", {"--window", "'0'"});
  expect_usage_error(kEfc, "--transport foo", {"--transport", "foo"});
  expect_usage_error(kLaunch, "--idle x", {"--idle", "'x'"});
  expect_usage_error(kLaunch, "--systems tgg,nosuch", {"--systems", "'nosuch'"});
  expect_usage_error(kLaunch, "--traffic all_to_all,nosuch", {"--traffic", "'nosuch'"});  // was found after the launches
  expect_usage_error(kLibfabric, "--iterations 9", {"--iterations", "'9'"});  // was clamped to 10
  expect_usage_error(kLibfabric, "--transport tcp", {"--transport", "tcp"});
  expect_usage_error(kSocket, "--mib 0", {"--mib", "'0'"});
  expect_usage_error(kSocket, "--transport udp,foo", {"--transport", "foo"});
  expect_usage_error(kHop, "--rounds x", {"--rounds", "'x'"});
  expect_usage_error(kHop, "--size 4097", {"--size", "'4097'"});  // over one packet
  expect_usage_error(kSim, "--sizes 64,x", {"--sizes", "'x'"});
  expect_usage_error(kSim, "--count 0", {"--count", "'0'"});
  // Parsed by hand before: std::stoi threw (status 134) on "x", and a size `ttemu link test`
  // refuses was found only once the hosts and the systems were up.
  expect_usage_error(kMultihost, "--repeat x", {"--repeat", "'x'"});
  expect_usage_error(kMultihost, "--frames 0", {"--frames", "'0'"});
  expect_usage_error(kMultihost, "--size 3", {"--size", "'3'"});
  expect_usage_error(kMultihost, "--system /nonexistent.yaml", {"--system", "/nonexistent.yaml"});
}

TEST(BenchOptions, HelpExitsZero) {
  for (const Bench& b : {kFabric, kLink, kEfc, kLaunch, kLibfabric, kSocket, kHop, kSim, kMultihost}) {
    SCOPED_TRACE(b.name());
    const RunResult r = bench(b, "--help");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.stdout_text.find("Usage: " + b.name()), std::string::npos) << r.stdout_text;
    EXPECT_EQ(r.stderr_text, "");
  }
  EXPECT_NE(bench(kFabric, "--help").stdout_text.find("--transport"), std::string::npos);
  EXPECT_NE(bench(kLink, "--help").stdout_text.find("--fer"), std::string::npos);
}

}  // namespace
}  // namespace ttemu::test
