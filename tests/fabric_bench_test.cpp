// ttemu_bench_fabric's raw relay, the yardstick of the per-hop latency: it must cross as many
// processes as the fabric's routes do, in the same order, or the ratio compares unlike shapes
// (the mesh's routes from 4 hops on answer over other chips than the write crossed).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_support.hpp"

namespace ttemu::test {
namespace {

nlohmann::json last_json_line(const RunResult& r) {
  const std::string& out = r.stdout_text;
  const auto end = out.find_last_not_of('\n');
  const auto start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1));
}

TEST(FabricBench, TheRawRelayFollowsTheChipsTheWriteAndItsAcknowledgementCross) {
  const RunResult r = run({TTEMU_BENCH_FABRIC, "--route-shapes"}, std::chrono::seconds(20));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json shapes = last_json_line(r);
  // Along row 0 the acknowledgement retraces the write: one relay per chip, crossed twice.
  EXPECT_EQ(shapes.at("M0D3"), nlohmann::json({0, 1, 2, 3, 2, 1, 0}));
  // X first both ways: M0D0 -> M0D1, M0D2, M0D3, M0D7, M0D11, M0D15 and back through M0D14,
  // M0D13, M0D12, M0D8, M0D4: eleven chips besides M0D0, each crossed once.
  const auto six = shapes.at("M0D15").get<std::vector<int>>();
  ASSERT_EQ(six.size(), 13u);
  EXPECT_EQ(six.front(), 0);
  EXPECT_EQ(six.back(), 0);
  EXPECT_EQ(std::set<int>(six.begin() + 1, six.end() - 1).size(), 11u);
}

TEST(FabricBench, TheRawRelayCompletesEveryRoute) {
  const RunResult r = run({TTEMU_BENCH_FABRIC, "--raw-chain", "20", "0"}, std::chrono::seconds(60));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto p50 = last_json_line(r).at("raw_chain_p50_us_by_hops").get<std::vector<double>>();
  ASSERT_EQ(p50.size(), 6u);
  for (double us : p50) EXPECT_GT(us, 0.0);
}

}  // namespace
}  // namespace ttemu::test
