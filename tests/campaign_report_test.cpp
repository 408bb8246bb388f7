// ttemu campaign's report (docs/campaigns.md, "The report"): the figures summed up from one
// run (summarise_run, on hand-made results and event lines).
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/test_support.hpp"
#include "tools/campaign/run_summary.hpp"

namespace ttemu::test {
namespace {

using nlohmann::json;
using tools::Scenario;
using tools::summarise_run;

// An event line as ttemu sim writes it: its kind, simulated time, and the fields of its kind.
json event(const std::string& kind, double uptime_s, json fields = json::object()) {
  fields["kind"] = kind;
  fields["uptime_s"] = uptime_s;
  return fields;
}

json rates(const std::string& port, uint64_t frames_in, uint64_t crc_errors, uint64_t retransmits) {
  return event("rates", 1.0, {{"chip", port.substr(0, port.find('P'))}, {"port", port}, {"frames_in", frames_in},
                              {"crc_errors", crc_errors}, {"retransmits", retransmits}});
}

Scenario scenario(const std::string& faults_yaml, std::vector<std::string> cuts = {}) {
  Scenario s;
  s.name = "s";
  s.faults_yaml = faults_yaml;
  s.cuts = std::move(cuts);
  return s;
}

TEST(CampaignReport, NothingHappenedGivesZerosAndNulls) {
  const json f = summarise_run(scenario(""), {}, {});
  EXPECT_TRUE(f["patterns"].empty());
  EXPECT_EQ(f["fer"], 0.0);
  EXPECT_EQ(f["frames_in"], 0);
  EXPECT_TRUE(f["cut_s"].is_null());
  EXPECT_TRUE(f["pause_ms"].is_null());
  for (const char* k : {"crc_errors", "retransmits", "fallbacks", "link_downs", "drops", "reloads", "chip_deaths"}) EXPECT_EQ(f[k], 0) << k;
  EXPECT_TRUE(f["links"].empty());
  EXPECT_TRUE(f["chip_drops"].empty());
}

TEST(CampaignReport, APatternsGoodputAndLatencyAreKept) {
  const json result{{"pattern", "all_to_all"}, {"plane", 1}, {"gb_per_s", 0.25}, {"bytes", 1e6},
                    {"latency_us", {{"min", 5.0}, {"avg", 8.0}, {"p50", 7.5}, {"p99", 40.0}}}};
  const json f = summarise_run(scenario(""), {result}, {});
  ASSERT_EQ(f["patterns"].size(), 1u);
  EXPECT_EQ(f["patterns"][0]["pattern"], "all_to_all");
  EXPECT_EQ(f["patterns"][0]["plane"], 1);
  EXPECT_EQ(f["patterns"][0]["gb_per_s"], 0.25);
  EXPECT_EQ(f["patterns"][0]["latency_us"]["p50"], 7.5);
  EXPECT_EQ(f["patterns"][0]["latency_us"]["p99"], 40.0);
  EXPECT_FALSE(f["patterns"][0].contains("bytes")) << "the figures stay small";
}

// CRC errors per frame that arrived, summed over the ports' rate lines (the routers' lines sum
// the same frames again and do not count); a port with errors keeps its own count and base.
TEST(CampaignReport, CrcErrorsGiveTheMeasuredFrameErrorRate) {
  const std::vector<json> events{rates("M0D0P4", 1000, 10, 12), rates("M0D1P12", 1000, 0, 0), rates("M0D0P4", 2000, 20, 0),
                                 event("router_rates", 1.0, {{"chip", "M0D0"}, {"frames_in", 3000}, {"crc_errors", 30}})};
  const json f = summarise_run(scenario("{defaults: {corrupt: 0.01}}"), {}, events);
  EXPECT_EQ(f["frames_in"], 4000);
  EXPECT_EQ(f["crc_errors"], 30);
  EXPECT_DOUBLE_EQ(f["fer"].get<double>(), 30.0 / 4000);
  EXPECT_EQ(f["retransmits"], 12);
  EXPECT_EQ(f["links"]["M0D0P4"], json({{"frames_in", 3000}, {"crc_errors", 30}, {"retransmits", 12}}));
  EXPECT_FALSE(f["links"].contains("M0D1P12")) << "a port with nothing to say is left out";
  EXPECT_TRUE(f["cut_s"].is_null()) << "a plan with no down window cuts nothing";
}

// From the first down window of the fault plan to the first fallback move after it; an earlier
// move (an unreliable link elsewhere) is not the cut's.
TEST(CampaignReport, ACutFollowedByAFallbackGivesThePause) {
  const Scenario s = scenario(
      "links:\n  - {link: M0D0P4, down: [{at: 0.0005, for: 0.3}]}\n  - {link: M0D2P4, down: [{at: 0.5, for: 0.1}]}\n");
  const std::vector<json> events{event("fallback", 0.0001, {{"port", "M0D5P4"}, {"reason", "error_rate"}}),
                                 event("fallback", 0.301, {{"port", "M0D0P4"}, {"reason", "timeouts"}}),
                                 event("fallback", 0.302, {{"port", "M0D1P12"}, {"reason", "peer"}}),
                                 event("returned", 0.316, {{"port", "M0D0P4"}, {"reason", "probed"}})};
  const json f = summarise_run(s, {}, events);
  EXPECT_DOUBLE_EQ(f["cut_s"].get<double>(), 0.0005);
  EXPECT_DOUBLE_EQ(f["pause_ms"].get<double>(), 300.5);
  EXPECT_EQ(f["fallbacks"], 3);
  EXPECT_EQ(f["links"]["M0D0P4"]["fallbacks"], 1);
  EXPECT_EQ(f["links"]["M0D1P12"]["fallbacks"], 1);
}

TEST(CampaignReport, ACutOnTheCommandLineCountsInSimulatedMilliseconds) {
  const std::vector<json> events{event("fallback", 0.0035, {{"port", "M0D0P4"}})};
  const json f = summarise_run(scenario("", {"M0D0P5@3", "M0D0P4@1"}), {}, events);
  EXPECT_DOUBLE_EQ(f["cut_s"].get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(f["pause_ms"].get<double>(), 2.5);
  const json none = summarise_run(scenario("", {"M0D0P4@1"}), {}, {});
  EXPECT_DOUBLE_EQ(none["cut_s"].get<double>(), 0.001);
  EXPECT_TRUE(none["pause_ms"].is_null()) << "a cut with no fallback move has no pause";
}

TEST(CampaignReport, DownsDropsReloadsAndDeathsAreCounted) {
  const std::vector<json> events{
      event("link_down", 0.5, {{"chip", "M0D0"}, {"port", "M0D0P4"}}), event("dropped", 0.5, {{"chip", "M0D0"}, {"reason", "link_down"}}),
      event("dropped", 0.5, {{"chip", "M0D0"}, {"reason", "link_down"}}),
      event("dropped", 0.6, {{"chip", "M0D2"}, {"port", "M0D2P4"}, {"reason", "timeout"}}), event("tables_reloaded", 0.7),
      event("chip_died", 0.1, {{"chip", "M0D1"}})};
  const json f = summarise_run(scenario(""), {}, events);
  EXPECT_EQ(f["link_downs"], 1);
  EXPECT_EQ(f["drops"], 3);
  EXPECT_EQ(f["reloads"], 1);
  EXPECT_EQ(f["chip_deaths"], 1);
  EXPECT_EQ(f["links"]["M0D0P4"], json({{"link_downs", 1}}));
  EXPECT_EQ(f["links"]["M0D2P4"], json({{"drops", 1}}));
  EXPECT_EQ(f["chip_drops"], json({{"M0D0", 2}}));
}

}  // namespace
}  // namespace ttemu::test
