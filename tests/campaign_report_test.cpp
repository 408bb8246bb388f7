// ttemu campaign's report (docs/campaigns.md, "The report"): the figures summed up from one
// run (summarise_run, on hand-made results and event lines), the page written from records
// (write_report), and a real small campaign's report.html as headless Chromium renders it.
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "emulator/common/error.hpp"
#include "tests/test_support.hpp"
#include "tools/campaign/report.hpp"
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

// The <svg> element with this id, up to its end ("" if there is none).
std::string svg_of(const std::string& html, const std::string& id) {
  const size_t at = html.find("<svg id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t end = html.find("</svg>", at);
  return end == std::string::npos ? "" : html.substr(at, end - at);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

tools::Campaign small_campaign() {
  tools::Campaign c;
  c.name = "<b>bold</b>";
  c.file = "/tmp/c.yaml";
  c.topologies = {{"n300", topo("n300.yaml")}};
  c.workloads.resize(1);
  c.scenarios.resize(1);
  c.scenarios[0].name = "clean";
  c.seeds = {1};
  return c;
}

// Text from the records is text: a reason that looks like markup stays words on the page. Plots
// with nothing to draw say so.
TEST(CampaignReport, ThePageEscapesRecordsAndSaysNoDataWhereThereIsNone) {
  TempDir dir;
  const std::vector<json> records{
      {{"id", 0}, {"skipped", "over the budget"}},
      {{"id", 1}, {"topology", "n300"}, {"pattern", "all_to_all"}, {"scenario", "clean"}, {"seed", 1}, {"pass", false},
       {"invariant", "ran"}, {"reason", "<script>alert(\"x\")</script>"}, {"seconds", 0.1},
       {"reproduce", "ttemu campaign /tmp/c.yaml --run 1"}, {"sim", "ttemu sim a&b"}, {"figures", json::object()}}};
  tools::write_report(small_campaign(), records, dir / "report.html");
  const std::string html = slurp(dir / "report.html");
  EXPECT_EQ(count(html, "<script"), 1u) << "only the page's own script";
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;bold&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("ttemu sim a&amp;b"), std::string::npos);
  EXPECT_NE(html.find("ttemu campaign /tmp/c.yaml --run 1"), std::string::npos);
  EXPECT_NE(html.find("Not run, over the budget: run(s) 0"), std::string::npos);
  EXPECT_NE(html.find("verdict FAIL"), std::string::npos);
  for (const char* id : {"plot-goodput-fer", "plot-latency", "plot-pause"}) {
    EXPECT_NE(svg_of(html, id).find("no data"), std::string::npos) << id;
  }
  EXPECT_GE(count(svg_of(html, "heatmap-n300"), "<line"), 2u) << "n300's two links, with nothing logged";
}

TEST(CampaignReport, AnEmptyCampaignHasAPageToo) {
  TempDir dir;
  tools::write_report(small_campaign(), {}, dir / "report.html");
  const std::string html = slurp(dir / "report.html");
  EXPECT_NE(html.find("NO RUNS"), std::string::npos);
  for (const char* id : {"plot-goodput-fer", "plot-latency", "plot-pause", "heatmap-n300"}) {
    EXPECT_NE(svg_of(html, id).find("no data"), std::string::npos) << id;
  }
  EXPECT_THROW(tools::write_report(small_campaign(), {}, dir / "no" / "such" / "dir.html"), Error);
}

// --- the page in a browser ---------------------------------------------------------------

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d) / name;
    if (!d.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

struct Browser {
  int status = -1;
  bool timed_out = false;
  std::string out, err;
};

// Runs the browser in a process group of its own, its output into files (helpers that outlive
// it keep no pipe open), bounded by `limit`: then, or once it has exited, whatever is left of
// the group is killed.
Browser run_browser(const std::vector<std::string>& args, const fs::path& dir, std::chrono::seconds limit) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY), o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
              e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0) _exit(126);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever runs first
  Browser b;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    const auto deadline = Clock::now() + limit;
    int ready = 0;
    while (ready == 0 && Clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      ready = ::poll(&p, 1, static_cast<int>(std::max<long long>(left, 1)));
      if (ready < 0 && errno == EINTR) ready = 0;
    }
    b.timed_out = ready == 0;
    ::close(pidfd);
  }
  ::kill(-pid, SIGKILL);  // the group: the browser if it overran, its helpers if any are left
  int status = 0;
  ::waitpid(pid, &status, 0);
  b.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  b.out = slurp(out);
  b.err = slurp(err);
  return b;
}

// A PNG's width and height from its header (0, 0 if it is not one).
std::pair<uint32_t, uint32_t> png_size(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return {0, 0};
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(png[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

// A real campaign, small (n300 and the Galaxy; clean, CRC errors, a cut, a planted failure; one
// seed), and its report rendered by headless Chromium: the script ran without a console error,
// every plot has data marks, the failure is there with both lines, and the screenshot is a page.
TEST(CampaignReport, ARealCampaignsReportRendersInHeadlessChromium) {
  const std::string chromium = find_program("chromium");
  ASSERT_FALSE(chromium.empty()) << "chromium is not on the PATH: the report's test needs it (bash tools/dev build installs it)";
  TempDir dir;
  write_file(dir / "c.yaml",
             "name: report_check\ntopologies: [n300, galaxy]\nseeds: [1]\nworkloads: [{pattern: all_to_all, size: 4096, count: 2}]\n"
             "scenarios:\n"
             "  - name: clean\n"
             "  - {name: crc_errors, faults: {defaults: {corrupt: 0.02}}}\n"
             "  - name: cut_one_of_a_pair\n    only: [galaxy]\n    faults: {links: [{link: M0D0P4, down: [{at: 0.0005, for: 0.3}]}]}\n"
             "    expect_fallback: true\n"
             "  - {name: reload_expected, only: [n300], expect_reload: true}   # nothing fails: a planted failure\n");
  const fs::path out = dir / "out";
  const RunResult r = ttemu({"campaign", (dir / "c.yaml").string(), "--out", out.string(), "--jobs", "2"});
  ASSERT_EQ(r.status, 1) << r.out;
  ASSERT_NE(r.stdout_text.find("verdict: FAIL (6 run(s), 1 failed)"), std::string::npos) << r.out;
  // The figures of real runs: the Galaxy's CRC errors measured, its cut followed by a pause.
  for (const auto& run : read_event_log((out / "runs.jsonl").string())) {
    ASSERT_TRUE(run.contains("figures")) << run.dump();
    const json& f = run["figures"];
    EXPECT_FALSE(f["patterns"].empty()) << run.dump();
    if (run["topology"] == "galaxy" && run["scenario"] == "crc_errors") {
      EXPECT_GT(f["fer"].get<double>(), 0) << run.dump();
    }
    if (run["scenario"] == "cut_one_of_a_pair") {
      EXPECT_GT(f["pause_ms"].get<double>(), 0) << run.dump();
    }
    if (run["scenario"] == "clean") {
      EXPECT_TRUE(f["cut_s"].is_null()) << run.dump();
    }
  }

  const fs::path html = out / "report.html", png = dir / "report.png", profile = dir / "browser";
  ASSERT_TRUE(fs::exists(html));
  fs::create_directories(profile);
  const Browser b = run_browser({chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile.string(),
                                 "--enable-logging=stderr", "--v=0", "--window-size=1280,4000", "--screenshot=" + png.string(),
                                 "--dump-dom", "file://" + html.string()},
                                dir.path(), std::chrono::seconds(60));
  ASSERT_FALSE(b.timed_out) << "chromium did not finish within 60 s: " << b.err;
  EXPECT_EQ(b.status, 0) << b.err;
  // The page's script logs nothing: any console line is an error it threw or reported.
  std::istringstream lines(b.err);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_TRUE(line.find("CONSOLE") == std::string::npos && line.find("Uncaught") == std::string::npos) << line;
  }
  const std::string& dom = b.out;
  EXPECT_NE(dom.find("data-ready=\"1\""), std::string::npos) << "the page's script did not finish";
  // Every plot, with its data marks (points, boxes; a heat map's links, one line each).
  const std::vector<std::pair<std::string, size_t>> marks{{"plot-goodput-fer", 6}, {"plot-latency", 4}, {"plot-pause", 1}};
  for (const auto& [id, least] : marks) {
    const std::string svg = svg_of(dom, id);
    ASSERT_FALSE(svg.empty()) << id << " is not in the page";
    EXPECT_EQ(svg.find("no data"), std::string::npos) << id;
    EXPECT_GE(count(svg, "class=\"datum\""), least) << id;
  }
  for (const auto& [id, links] : std::vector<std::pair<std::string, size_t>>{{"heatmap-n300", 2}, {"heatmap-galaxy", 208}}) {
    const std::string svg = svg_of(dom, id);
    ASSERT_FALSE(svg.empty()) << id << " is not in the page";
    EXPECT_GE(count(svg, "<line"), links) << id;
    EXPECT_GE(count(svg, "<rect"), 2u) << id << ": its chips";
  }
  EXPECT_NE(dom.find("ttemu campaign " + (dir / "c.yaml").string() + " --run 2"), std::string::npos) << "the failure's reproduction";
  EXPECT_NE(dom.find("ttemu sim "), std::string::npos) << "and its sim line";
  EXPECT_NE(dom.find("tables_reloaded"), std::string::npos) << "grouped under its invariant";
  const std::string shot = slurp(png);
  EXPECT_EQ(png_size(shot), std::make_pair(1280u, 4000u));
  EXPECT_GT(shot.size(), 50'000u) << "a blank page is a few kB";

  // One run alone (a reproduction) gets its own page beside its files.
  const RunResult one = ttemu({"campaign", (dir / "c.yaml").string(), "--out", out.string(), "--run", "5"});
  EXPECT_EQ(one.status, 0) << one.out;
  EXPECT_NE(slurp(out / "runs" / "5" / "report.html").find("cut_one_of_a_pair"), std::string::npos);
}

}  // namespace
}  // namespace ttemu::test
