// ttemu top's view (tools/viz/top_view.hpp): rates from two status replies, the busiest links
// first, buffer occupancy from a snapshot, and a screen that never outgrows the terminal.
#include <gtest/gtest.h>

#include "tests/test_support.hpp"
#include "tools/viz/live_picture.hpp"
#include "tools/viz/top_view.hpp"

namespace ttemu::viz {
namespace {

using nlohmann::json;

json end(const std::string& port, const std::string& state, uint64_t bytes_tx, uint64_t retransmits = 0) {
  return {{"port", port}, {"state", state}, {"counters", {{"bytes_tx", bytes_tx}, {"retransmits", retransmits}, {"crc_errors", 0}}}};
}

json status(double uptime, uint64_t busy_bytes, uint64_t quiet_retransmits, const std::string& quiet_state = "up") {
  return {{"job", "1-ab"}, {"system", "n300.yaml"}, {"uptime_s", uptime}, {"tables_version", 2},
          {"chips", {{{"name", "M0D0"}, {"alive", true}, {"packets_injected", 10 * busy_bytes / 4096}},
                     {{"name", "M0D1"}, {"alive", true}, {"packets_injected", 0}}}},
          {"links", {{{"a", "M0D0P6"}, {"b", "M0D1P6"}, {"ends", {end("M0D0P6", "up", 0, quiet_retransmits), end("M0D1P6", quiet_state, 0)}}},
                     {{"a", "M0D0P7"}, {"b", "M0D1P7"}, {"ends", {end("M0D0P7", "up", busy_bytes), end("M0D1P7", "up", busy_bytes / 2)}}}}}};
}

TEST(TopView, RatesAreCounterDifferencesOverTheIntervalBusiestLinkFirst) {
  const json before = status(10.0, 1'000'000'000, 0);
  const json now = status(12.0, 7'250'000'000, 40, "down");  // 6.25 GB in 2 s: half the line rate
  json snap = {{"chips", {{{"chip", "M0D1"}, {"buffers", {{{"packets", 3}}, {{"packets", 4}}}}}}}};
  const TopFrame f = top_frame(before, now, snap, {"e1", "e2"});
  EXPECT_DOUBLE_EQ(f.interval_s, 2.0);
  EXPECT_EQ(f.links, 2);
  EXPECT_EQ(f.links_up, 1);
  ASSERT_EQ(f.links_by_use.size(), 2u);
  const TopLink& busy = f.links_by_use[0];
  EXPECT_EQ(busy.a, "M0D0P7");
  EXPECT_DOUBLE_EQ(busy.ab_bytes_s, 3.125e9);
  EXPECT_DOUBLE_EQ(busy.ba_bytes_s, 3.125e9 / 2);
  EXPECT_DOUBLE_EQ(busy.utilisation, 0.25);
  const TopLink& quiet = f.links_by_use[1];
  EXPECT_EQ(quiet.state, "down");
  EXPECT_DOUBLE_EQ(quiet.retransmits_s, 20.0);
  ASSERT_EQ(f.chips_by_load.size(), 2u);
  EXPECT_EQ(f.chips_by_load[0].name, "M0D1");  // 7 packets buffered
  EXPECT_EQ(f.chips_by_load[0].buffered, 7u);
  EXPECT_DOUBLE_EQ(f.fabric_bytes_s, 3.125e9 * 1.5);
  const json j = to_json(f);
  EXPECT_EQ(j["link_rows"][0]["a"], "M0D0P7");
  EXPECT_EQ(j["events"].size(), 2u);
}

TEST(TopView, TheFirstFrameHasNoRatesAndAChipThatRestartedCountsFromZero) {
  const json s = status(5.0, 4096, 0);
  const TopFrame first = top_frame(s, s, json(), {});
  EXPECT_DOUBLE_EQ(first.fabric_bytes_s, 0.0);
  json restarted = status(6.0, 0, 0);  // counters went back to zero: no negative rate
  const TopFrame f = top_frame(s, restarted, json(), {});
  for (const auto& l : f.links_by_use) EXPECT_GE(l.ab_bytes_s, 0.0);
}

TEST(TopView, TheScreenFitsTheTerminalAndShowsTheNewestEvents) {
  std::vector<std::string> events;
  for (int i = 0; i < 50; ++i) events.push_back("event " + std::to_string(i));
  const TopFrame f = top_frame(status(1.0, 0, 0), status(2.0, 5'000'000'000, 0), json(), events);
  for (auto [cols, rows] : {std::pair{80, 24}, std::pair{40, 10}, std::pair{200, 60}}) {
    const auto lines = render(f, cols, rows);
    EXPECT_LE(static_cast<int>(lines.size()), rows);
    for (const auto& l : lines) EXPECT_LE(static_cast<int>(l.size()), cols) << l;
    EXPECT_NE(lines[0].find("job 1-ab"), std::string::npos);
  }
  const auto lines = render(f, 120, 40);
  EXPECT_EQ(lines.back(), "event 49");  // the newest, last
  bool busiest_row = false;
  for (const auto& l : lines) busiest_row |= l.rfind("M0D0P7", 0) == 0 && l.find("###") != std::string::npos;
  EXPECT_TRUE(busiest_row);
}

// ttemu topo draw --live: a frame's links and chips painted on the system's picture. The busy
// link (a quarter of the line rate) is orange by use; the quiet one is down, so dashed; by
// errors, the link with 2% CRC errors is red; M0D1, holding 7 packets, is filled.
TEST(LivePicture, LinksAreColouredByUseOrErrorsAndChipsByWhatTheyHold) {
  const auto sys = test::load("n300.yaml");
  // The N300's links are M0D0P2 - M0D1P6 and M0D0P3 - M0D1P7.
  auto as_n300 = [](const json& s) {
    std::string text = s.dump();
    for (const auto& [from, to] : {std::pair{"M0D0P6", "M0D0P2"}, std::pair{"M0D0P7", "M0D0P3"}}) {
      for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, 6, to);
    }
    return json::parse(text);
  };
  const json before = as_n300(status(10.0, 1'000'000'000, 0));
  json now = as_n300(status(12.0, 7'250'000'000, 40, "down"));
  now["links"][1]["ends"][0]["counters"]["frames_rx"] = 1000;
  now["links"][1]["ends"][0]["counters"]["crc_errors"] = 20;
  const json snap = {{"chips", {{{"chip", "M0D1"}, {"buffers", {{{"packets", 3}}, {{"packets", 4}}}}}}}};
  const TopFrame f = top_frame(before, now, snap, {});
  auto link_on = [&](const std::string& port) {
    for (size_t i = 0; i < sys.links.size(); ++i) {
      if (routing::to_string(sys.links[i].a) == port || routing::to_string(sys.links[i].b) == port) return static_cast<int>(i);
    }
    ADD_FAILURE() << port << " is not wired";
    return -1;
  };
  const int busy = link_on("M0D0P3"), quiet = link_on("M0D0P2");

  const DrawOptions use = live_picture(sys, f, LinkColouring::kUtilisation);
  ASSERT_EQ(use.links.size(), sys.links.size());
  EXPECT_EQ(use.links.at(busy).colour, std::string(utilisation_colour(0.25)));
  EXPECT_EQ(use.links.at(busy).colour, "#ff7f0e");
  EXPECT_FALSE(use.links.at(busy).dashed);
  EXPECT_TRUE(use.links.at(quiet).dashed) << "down";
  EXPECT_NE(use.links.at(busy).tooltip.find("3125.0 MB/s"), std::string::npos) << use.links.at(busy).tooltip;
  EXPECT_EQ(use.chips.at(*sys.node({0, 1})).fill, "#fff3b0");
  EXPECT_EQ(use.chips.at(*sys.node({0, 0})).fill, "#ffffff");
  EXPECT_NE(draw_svg(sys, use).find("live at 12.0 s (job 1-ab)"), std::string::npos);

  const DrawOptions errors = live_picture(sys, f, LinkColouring::kErrors);
  EXPECT_EQ(errors.links.at(busy).colour, "#d62728") << "10 CRC errors/s against 500 frames/s";
  EXPECT_EQ(errors.links.at(quiet).colour, "#c7c7c7") << "no frames: nothing to judge";
}

}  // namespace
}  // namespace ttemu::viz
