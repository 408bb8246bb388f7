#include "tools/campaign/report.hpp"

#include <fstream>
#include <map>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "tools/campaign/report_plots.hpp"
#include "tools/viz/topology_svg.hpp"

namespace ttemu::tools {

using nlohmann::json;

namespace {

std::string esc(const std::string& s) { return viz::escape_xml(s); }

// Everything a page needs, in it: no fonts, scripts or sheets from elsewhere.
constexpr const char* kStyle = R"(
body { font: 14px/1.45 "DejaVu Sans", Arial, sans-serif; color: #222; margin: 0; background: #f6f7f9; }
main { max-width: 1180px; margin: 0 auto; padding: 16px 28px 40px; background: white; }
h1 { font-size: 24px; margin: 8px 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 18px 0 6px; } h4 { font-size: 14px; margin: 12px 0 4px; color: #444; }
.verdict { display: inline-block; padding: 1px 10px; border-radius: 4px; color: white; font-size: 18px; vertical-align: 2px; }
.PASS { background: #2ca02c; } .FAIL { background: #d62728; } .NONE { background: #7f7f7f; }
.muted { color: #666; } nav a { margin-right: 14px; }
table { border-collapse: collapse; margin: 6px 0; } th, td { padding: 3px 10px; border-bottom: 1px solid #e3e3e3; text-align: left; }
th { background: #f0f2f5; } table.sortable th { cursor: pointer; user-select: none; }
th[data-dir="asc"]::after { content: " \25B2"; } th[data-dir="desc"]::after { content: " \25BC"; }
td.n { text-align: right; font-variant-numeric: tabular-nums; } tr.bad td { background: #fdecea; }
.failure { border-left: 4px solid #d62728; padding: 4px 10px; margin: 8px 0; background: #fff8f7; }
.failure dl { display: grid; grid-template-columns: max-content 1fr; gap: 0 10px; align-items: center; margin: 4px 0; }
.failure dt { color: #666; } .failure dd { margin: 0; min-width: 0; }
pre { background: #f3f3f3; padding: 5px 8px; margin: 4px 0; white-space: pre-wrap; word-break: break-all; font-size: 12px; }
figure { margin: 14px 0 22px; } figcaption { color: #444; margin-bottom: 6px; }
svg { max-width: 100%; height: auto; display: block; }
)";

// Sortable tables (a click on a heading), and a sign for whoever loads the page that the script ran.
constexpr const char* kScript = R"(
for (const table of document.querySelectorAll("table.sortable")) {
  const heads = table.querySelectorAll("th");
  heads.forEach((th, i) => th.addEventListener("click", () => {
    const asc = th.dataset.dir !== "asc";
    heads.forEach(h => delete h.dataset.dir);
    th.dataset.dir = asc ? "asc" : "desc";
    const key = row => { const c = row.cells[i]; return c.dataset.v !== undefined ? parseFloat(c.dataset.v) : c.textContent; };
    const rows = Array.from(table.tBodies[0].rows);
    rows.sort((a, b) => { const x = key(a), y = key(b);
      const d = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y)); return asc ? d : -d; });
    rows.forEach(r => table.tBodies[0].appendChild(r));
  }));
}
document.body.dataset.ready = "1";
)";

std::string str(const json& r, const char* key) { return r.contains(key) && r[key].is_string() ? r[key].get<std::string>() : ""; }

// A numeric cell: shown as `shown`, sorted by `v` (a missing value sorts first).
std::string num_cell(double v, const std::string& shown) { return fmt::format("<td class=\"n\" data-v=\"{}\">{}</td>", v, esc(shown)); }

std::string verdict_table(const Campaign& c, const std::vector<json>& ran) {
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> cells;  // (scenario, topology) -> runs, failed
  for (const auto& r : ran) {
    auto& [runs, failed] = cells[{str(r, "scenario"), str(r, "topology")}];
    ++runs;
    failed += !r.value("pass", false);
  }
  std::string s = "<table id=\"verdict-table\" class=\"sortable\"><thead><tr><th>scenario</th><th>topology</th><th>runs</th><th>passed</th>"
                  "<th>failed</th></tr></thead><tbody>\n";
  for (const auto& sc : c.scenarios) {
    for (const auto& t : c.topologies) {
      const auto it = cells.find({sc.name, t.first});
      if (it == cells.end()) continue;
      const auto [runs, failed] = it->second;
      s += fmt::format("<tr{}><td>{}</td><td>{}</td>{}{}{}</tr>\n", failed ? " class=\"bad\"" : "", esc(sc.name), esc(t.first),
                       num_cell(runs, std::to_string(runs)), num_cell(runs - failed, std::to_string(runs - failed)),
                       num_cell(failed, std::to_string(failed)));
    }
  }
  return s + "</tbody></table>\n";
}

// A swarm run's schedule, and what shrinking left of it (with its own reproduction line).
std::string swarm_lines(const json& r) {
  const auto joined = [](const json& faults) {
    std::string out;
    for (const auto& f : faults) out += (out.empty() ? "" : "; ") + f.get<std::string>();
    return out.empty() ? std::string("no faults at all") : out;
  };
  std::string s;
  if (r.contains("schedule")) s += fmt::format("<dt>faults</dt><dd>{}</dd>", esc(joined(r["schedule"])));
  if (!r.contains("shrunk")) return s;
  const json& k = r["shrunk"];
  return s + fmt::format("<dt>shrunk</dt><dd>in {} run(s) to {} of {} fault(s) and {} of {} write(s) per pair: {}</dd>"
                         "<dt>reproduce the shrunk run</dt><dd><pre>{}</pre></dd>",
                         k.value("tries", 0), k["faults"].size(), k.value("of_faults", size_t{0}), k.value("count", 0),
                         k.value("of_count", 0), esc(joined(k["faults"])), esc(str(k, "sim")));
}

// Grouped by the invariant broken, then by scenario; each with its reason and both lines
// that reproduce it.
std::string failures(const std::vector<json>& ran) {
  std::map<std::string, std::map<std::string, std::vector<const json*>>> groups;
  for (const auto& r : ran) {
    if (!r.value("pass", false)) groups[str(r, "invariant")][str(r, "scenario")].push_back(&r);
  }
  if (groups.empty()) return "<p>None: every run kept every invariant.</p>\n";
  std::string s;
  for (const auto& [invariant, scenarios] : groups) {
    size_t n = 0;
    for (const auto& [name, runs] : scenarios) n += runs.size();
    s += fmt::format("<h3>{} <span class=\"muted\">({} run(s))</span></h3>\n", esc(invariant.empty() ? "?" : invariant), n);
    for (const auto& [name, runs] : scenarios) {
      s += fmt::format("<h4>{} <span class=\"muted\">({} run(s))</span></h4>\n", esc(name), runs.size());
      for (const json* r : runs) {
        s += fmt::format("<div class=\"failure\"><b>run {}</b> ({} x {} x seed {}): {}<dl><dt>reproduce</dt><dd><pre>{}</pre></dd>"
                         "<dt>or</dt><dd><pre>{}</pre></dd>{}</dl></div>\n",
                         r->value("id", -1), esc(str(*r, "topology")), esc(str(*r, "pattern")), r->value("seed", uint64_t{0}),
                         esc(str(*r, "reason")), esc(str(*r, "reproduce")), esc(str(*r, "sim")), swarm_lines(*r));
      }
    }
  }
  return s;
}

// Every run with its main figures, one row each.
std::string runs_table(const std::vector<json>& ran) {
  std::string s = "<table id=\"runs-table\" class=\"sortable\"><thead><tr><th>run</th><th>topology</th><th>pattern</th><th>scenario</th>"
                  "<th>seed</th><th>verdict</th><th>GB/s</th><th>p50 us</th><th>p99 us</th><th>frame error rate</th>"
                  "<th>pause ms</th><th>wall s</th></tr></thead><tbody>\n";
  for (const auto& r : ran) {
    const json f = r.value("figures", json::object());
    const json p = f.contains("patterns") && !f["patterns"].empty() ? f["patterns"][0] : json::object();
    const json l = p.value("latency_us", json::object());
    const bool pass = r.value("pass", false);
    const json pause = f.value("pause_ms", json());
    s += fmt::format("<tr{}>{}<td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td>{}{}{}{}{}{}</tr>\n", pass ? "" : " class=\"bad\"",
                     num_cell(r.value("id", -1), std::to_string(r.value("id", -1))), esc(str(r, "topology")), esc(str(r, "pattern")),
                     esc(str(r, "scenario")), num_cell(static_cast<double>(r.value("seed", uint64_t{0})), std::to_string(r.value("seed", uint64_t{0}))),
                     pass ? "pass" : "<b>fail</b>: " + esc(str(r, "invariant")),
                     num_cell(p.value("gb_per_s", 0.0), fmt::format("{:.4g}", p.value("gb_per_s", 0.0))),
                     num_cell(l.value("p50", 0.0), fmt::format("{:g}", l.value("p50", 0.0))),
                     num_cell(l.value("p99", 0.0), fmt::format("{:g}", l.value("p99", 0.0))),
                     num_cell(f.value("fer", 0.0), fmt::format("{:.3g}", f.value("fer", 0.0))),
                     pause.is_number() ? num_cell(pause.get<double>(), fmt::format("{:.4g}", pause.get<double>())) : num_cell(-1, "-"),
                     num_cell(r.value("seconds", 0.0), fmt::format("{:.2f}", r.value("seconds", 0.0))));
  }
  return s + "</tbody></table>\n";
}

std::string figure(const std::string& caption, const std::string& svg) {
  return fmt::format("<figure><figcaption>{}</figcaption>\n{}</figure>\n", caption, svg);
}

}  // namespace

void write_report(const Campaign& c, const std::vector<json>& records, const std::filesystem::path& html) {
  std::vector<json> ran;
  std::vector<int> skipped;
  for (const auto& r : records) {
    if (r.contains("skipped")) skipped.push_back(r.value("id", -1));
    else if (r.is_object() && r.contains("pass")) ran.push_back(r);
  }
  int failed = 0;
  for (const auto& r : ran) failed += !r.value("pass", false);
  const std::string verdict = ran.empty() ? "NONE" : failed ? "FAIL" : "PASS";
  std::string page = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>ttemu campaign {}: {}</title><style>{}</style></head>\n<body><main>\n",
      esc(c.name), verdict, kStyle);
  page += fmt::format("<h1>Campaign {} <span class=\"verdict {}\">{}</span></h1>\n", esc(c.name), verdict,
                      ran.empty() ? "NO RUNS" : verdict);
  page += fmt::format("<p class=\"muted\">{} run(s), {} passed, {} failed{}; from {} ({} topologies x {} workloads x {} scenarios x {} "
                      "seeds). Every run's record: runs.jsonl beside this file.</p>\n",
                      ran.size(), ran.size() - static_cast<size_t>(failed), failed,
                      skipped.empty() ? "" : fmt::format(", {} not run (over the budget)", skipped.size()), esc(c.file),
                      c.topologies.size(), c.workloads.size(), c.scenarios.size(), c.seeds.size());
  page += "<nav><a href=\"#verdict\">verdict</a><a href=\"#failures\">failures</a><a href=\"#plots\">plots</a>"
          "<a href=\"#heatmaps\">heat maps</a><a href=\"#runs\">every run</a></nav>\n";
  page += "<h2 id=\"verdict\">Verdict per scenario and topology</h2>\n" + verdict_table(c, ran);
  if (!skipped.empty()) {
    std::string ids;
    for (int id : skipped) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    page += fmt::format("<p>Not run, over the budget: run(s) {}.</p>\n", ids);
  }
  page += "<h2 id=\"failures\">Failures</h2>\n" + failures(ran);
  page += "<h2 id=\"plots\">Plots</h2>\n";
  page += figure("Goodput against the measured frame error rate (CRC errors per frame received, summed over the run's rate lines). "
                 "Runs with no CRC error stand in the column marked 0.",
                 plot_goodput_against_fer(ran));
  page += figure("Latency per scenario: the spread of the runs' p50 and p99 (single writes timed with their acknowledgement).",
                 plot_latency(c, ran));
  page += figure("Pause after a link cut: from the scenario's first cut (a down window of its fault plan, or a cut) to the first "
                 "move onto the fallback channel, in simulated time.",
                 plot_pause(c, ran));
  page += "<h2 id=\"heatmaps\">Heat maps</h2>\n<p class=\"muted\">Per topology, summed over its runs: links coloured by their CRC "
          "error rate, thick where traffic moved onto the fallback channel, dashed where they went down; chips filled orange "
          "dropped packets. Hover over a link or a chip for its figures.</p>\n";
  for (const auto& [name, path] : c.topologies) page += figure(esc(name), plot_heat_map(name, path, ran));
  page += "<h2 id=\"runs\">Every run</h2>\n<details><summary>" + std::to_string(ran.size()) +
          " run(s); click a heading to sort</summary>\n" + runs_table(ran) + "</details>\n";
  page += fmt::format("</main>\n<script>{}</script>\n</body></html>\n", kScript);
  std::ofstream out(html);
  if (!(out << page) || !out.flush()) throw Error(fmt::format("cannot write the report {}", html.string()));
}

}  // namespace ttemu::tools
