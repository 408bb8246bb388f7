#include "tools/campaign/report_plots.hpp"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/routing/address.hpp"
#include "tools/viz/topology_svg.hpp"

namespace ttemu::tools {

using nlohmann::json;

namespace {

constexpr const char* kPass = "#2ca02c";
constexpr const char* kFail = "#d62728";
constexpr const char* kFont = "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\"";

std::string esc(const std::string& s) { return viz::escape_xml(s); }

// One axis: values to pixels, linear or log10.
struct Axis {
  double lo = 0, hi = 1;  // values (log: both > 0)
  double from = 0, to = 1;  // pixels
  bool log = false;

  double at(double v) const {
    const double f = log ? (std::log10(std::max(v, lo)) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return from + std::clamp(f, 0.0, 1.0) * (to - from);
  }
  std::vector<double> ticks() const {
    std::vector<double> t;
    if (log) {
      for (double d = lo; d <= hi * 1.001; d *= 10) t.push_back(d);
      return t;
    }
    const double raw = (hi - lo) / 5, mag = std::pow(10, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      step = m * mag;
      if (step >= raw) break;
    }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-6; v += step) t.push_back(v);
    return t;
  }
};

// The decades around [min, max] (both > 0).
Axis log_axis(double min, double max, double from, double to) {
  double lo = std::pow(10, std::floor(std::log10(min))), hi = std::pow(10, std::ceil(std::log10(max)));
  if (hi <= lo) hi = lo * 10;
  return {lo, hi, from, to, true};
}

std::string tick_label(double v) { return fmt::format("{:g}", v); }

std::string open_svg(const std::string& id, int w, int h, const std::string& label) {
  return fmt::format(
      "<svg id=\"{0}\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{1}\" height=\"{2}\" viewBox=\"0 0 {1} {2}\" "
      "role=\"img\" aria-label=\"{3}\" {4}>\n<rect width=\"{1}\" height=\"{2}\" fill=\"white\"/>\n",
      id, w, h, esc(label), kFont);
}

// The plot's place, saying why there is nothing in it.
std::string no_data(const std::string& id, const std::string& label, const std::string& why) {
  return open_svg(id, 900, 80, label) +
         fmt::format("<rect x=\"1\" y=\"1\" width=\"898\" height=\"78\" fill=\"#fafafa\" stroke=\"#bbb\" stroke-dasharray=\"4,3\"/>"
                     "<text x=\"450\" y=\"45\" text-anchor=\"middle\" font-size=\"14\" fill=\"#666\">no data: {}</text>\n</svg>\n",
                     esc(why));
}

// A horizontal axis at pixel row y (ticks, grid lines up to `top`, labels, title).
std::string x_axis(const Axis& a, double y, double top, const std::string& title) {
  std::string s = fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\"/>\n", a.from, y, a.to, y);
  for (double v : a.ticks()) {
    const double x = a.at(v);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e5e5e5\"/>"
                     "<line x1=\"{0:.1f}\" y1=\"{2:.1f}\" x2=\"{0:.1f}\" y2=\"{3:.1f}\" stroke=\"#333\"/>"
                     "<text x=\"{0:.1f}\" y=\"{4:.1f}\" text-anchor=\"middle\">{5}</text>\n",
                     x, top, y, y + 5, y + 18, tick_label(v));
  }
  return s + fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n", (a.from + a.to) / 2, y + 38,
                         esc(title));
}

// A vertical axis at pixel column x (ticks, grid lines to `right`, labels, title).
std::string y_axis(const Axis& a, double x, double right, const std::string& title) {
  std::string s = fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333\"/>\n", x, a.from, x, a.to);
  for (double v : a.ticks()) {
    const double y = a.at(v);
    s += fmt::format("<line x1=\"{1:.1f}\" y1=\"{0:.1f}\" x2=\"{2:.1f}\" y2=\"{0:.1f}\" stroke=\"#e5e5e5\"/>"
                     "<line x1=\"{3:.1f}\" y1=\"{0:.1f}\" x2=\"{1:.1f}\" y2=\"{0:.1f}\" stroke=\"#333\"/>"
                     "<text x=\"{4:.1f}\" y=\"{5:.1f}\" text-anchor=\"end\">{6}</text>\n",
                     y, x, right, x - 5, x - 8, y + 4, tick_label(v));
  }
  return s + fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
                         x - 58, (a.from + a.to) / 2, esc(title));
}

std::string pass_fail_legend(double x, double y) {
  return fmt::format("<circle cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"5\" fill=\"{2}\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\">passed</text>"
                     "<circle cx=\"{5:.1f}\" cy=\"{1:.1f}\" r=\"5\" fill=\"{6}\"/><text x=\"{7:.1f}\" y=\"{4:.1f}\">failed</text>\n",
                     x, y, kPass, x + 9, y + 4, x + 70, kFail, x + 79);
}

std::string run_words(const json& r) {
  return fmt::format("run {} ({} x {} x {} x seed {})", r.value("id", -1), r.value("topology", "?"), r.value("pattern", "?"),
                     r.value("scenario", "?"), r.value("seed", uint64_t{0}));
}

// An object member of `j`, or an empty object: something to loop over that outlives the loop.
const json& member(const json& j, const char* key) {
  static const json none = json::object();
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : none;
}

const json& figures(const json& r) { return member(r, "figures"); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A small spread of points that share a place, the same for the same run every time.
double jitter(int id, double width) { return (static_cast<double>((id * 7919) % 31) / 30.0 - 0.5) * width; }

// The scenarios of the campaign, in its order, that have values in `by`.
template <class T>
std::vector<std::pair<std::string, const T*>> in_order(const Campaign& c, const std::map<std::string, T>& by) {
  std::vector<std::pair<std::string, const T*>> rows;
  for (const auto& s : c.scenarios) {
    if (const auto it = by.find(s.name); it != by.end()) rows.emplace_back(s.name, &it->second);
  }
  return rows;
}

}  // namespace

std::string html_id(const std::string& name) {
  std::string id;
  for (char ch : name) id += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ? ch : '_';
  return id;
}

std::string plot_goodput_against_fer(const std::vector<json>& runs) {
  const std::string id = "plot-goodput-fer", label = "goodput against the measured frame error rate";
  struct Point {
    double fer, gb;
    bool pass;
    int id;
    std::string tip;
  };
  std::vector<Point> points;
  for (const auto& r : runs) {
    const json& f = figures(r);
    if (!f.contains("patterns")) continue;
    for (const auto& p : f["patterns"]) {
      const double gb = p.value("gb_per_s", 0.0), fer = f.value("fer", 0.0);
      if (gb <= 0) continue;
      points.push_back({fer, gb, r.value("pass", false), r.value("id", 0),
                        fmt::format("{}: {} {:.4g} GB/s, frame error rate {:.3g}", run_words(r), p.value("pattern", "?"), gb, fer)});
    }
  }
  if (points.empty()) return no_data(id, label, "no run measured a goodput");
  const int w = 900, h = 400, left = 90, right = 20, top = 30, bottom = 60;
  double fer_min = 1, fer_max = 0, gb_min = points[0].gb, gb_max = points[0].gb;
  bool zeros = false;
  for (const auto& p : points) {
    if (p.fer > 0) fer_min = std::min(fer_min, p.fer), fer_max = std::max(fer_max, p.fer);
    else zeros = true;
    gb_min = std::min(gb_min, p.gb), gb_max = std::max(gb_max, p.gb);
  }
  if (fer_max == 0) fer_min = 1e-6, fer_max = 1e-1;  // nothing measured: a usual range around the zero column
  // Error-free runs have no place on a log axis: they get a column of their own at its left.
  const double zero_x = left + 30;
  const Axis x = log_axis(fer_min, fer_max, left + (zeros ? 90 : 15), w - right - 10);
  const Axis y = log_axis(gb_min, gb_max, h - bottom, top);
  std::string s = open_svg(id, w, h, label);
  s += x_axis(x, h - bottom, top, "measured frame error rate (CRC errors per frame received; log)");
  s += y_axis(y, left, w - right, "goodput per pattern (GB/s; log)");
  if (zeros) {
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"44\" height=\"{}\" fill=\"#f4f4f4\"/>"
                     "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">0</text>\n",
                     zero_x - 22, top, h - bottom - top, zero_x, h - bottom + 18);
  }
  for (const auto& p : points) {
    const double px = p.fer > 0 ? x.at(p.fer) : zero_x + jitter(p.id, 36);
    s += fmt::format("<circle class=\"datum\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"{}\" fill-opacity=\"0.75\" stroke=\"white\" "
                     "stroke-width=\"0.8\"><title>{}</title></circle>\n",
                     px, y.at(p.gb), p.pass ? kPass : kFail, esc(p.tip));
  }
  return s + pass_fail_legend(w - right - 150, top - 14) + "</svg>\n";
}

std::string plot_latency(const Campaign& c, const std::vector<json>& runs) {
  const std::string id = "plot-latency", label = "latency per scenario";
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;  // scenario -> p50s, p99s
  double lo = 0, hi = 0;
  for (const auto& r : runs) {
    const json& f = figures(r);
    if (!f.contains("patterns")) continue;
    for (const auto& p : f["patterns"]) {
      const json& l = member(p, "latency_us");
      const double p50 = l.value("p50", 0.0), p99 = l.value("p99", 0.0);
      if (p50 <= 0 || p99 <= 0) continue;
      auto& [p50s, p99s] = by[r.value("scenario", "?")];
      p50s.push_back(p50);
      p99s.push_back(p99);
      lo = lo > 0 ? std::min(lo, p50) : p50;
      hi = std::max(hi, p99);
    }
  }
  const auto rows = in_order(c, by);
  if (rows.empty()) return no_data(id, label, "no run measured a latency");
  const int row = 34, left = 200, right = 30, top = 20, bottom = 60, w = 900;
  const int h = top + row * static_cast<int>(rows.size()) + bottom;
  const Axis x = log_axis(lo, hi, left + 10, w - right);
  std::string s = open_svg(id, w, h, label);
  s += x_axis(x, h - bottom, top, "latency (us; log): whisker smallest p50 to largest p99, box median p50 to median p99");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [name, values] = rows[i];
    const auto& [p50s, p99s] = *values;
    const double cy = top + row * (static_cast<double>(i) + 0.5);
    const double m50 = median(p50s), m99 = median(p99s);
    const double min50 = *std::min_element(p50s.begin(), p50s.end()), max99 = *std::max_element(p99s.begin(), p99s.end());
    const std::string tip = fmt::format("{}: {} pattern run(s); p50 median {:.4g} us (from {:.4g}); p99 median {:.4g} us (up to {:.4g})",
                                        name, p50s.size(), m50, min50, m99, max99);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8, cy + 4, esc(name));
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#7f7f7f\"/>", x.at(min50), cy, x.at(max99), cy);
    s += fmt::format("<rect class=\"datum\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"16\" fill=\"#aec7e8\" stroke=\"#1f77b4\">"
                     "<title>{}</title></rect>",
                     x.at(m50), cy - 8, std::max(2.0, x.at(m99) - x.at(m50)), esc(tip));
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#08306b\" stroke-width=\"2\"/>\n", x.at(m50),
                     cy - 8, cy + 8);
  }
  return s + "</svg>\n";
}

std::string plot_pause(const Campaign& c, const std::vector<json>& runs) {
  const std::string id = "plot-pause", label = "pause after a link cut";
  struct Row {
    std::vector<const json*> paused;
    int without = 0;  // runs that cut a link and saw no fallback move
  };
  std::map<std::string, Row> by;
  double hi = 0;
  for (const auto& r : runs) {
    const json& f = figures(r);
    if (!f.contains("cut_s") || f["cut_s"].is_null()) continue;
    Row& row = by[r.value("scenario", "?")];
    if (f.contains("pause_ms") && f["pause_ms"].is_number()) {
      row.paused.push_back(&r);
      hi = std::max(hi, f["pause_ms"].get<double>());
    } else {
      ++row.without;
    }
  }
  const auto rows = in_order(c, by);
  if (rows.empty()) return no_data(id, label, "no run cut a link");
  const int row = 40, left = 200, right = 190, top = 30, bottom = 60, w = 900;
  const int h = top + row * static_cast<int>(rows.size()) + bottom;
  const Axis x{0, std::max(1.0, hi * 1.1), left + 10.0, static_cast<double>(w - right), false};
  std::string s = open_svg(id, w, h, label);
  s += x_axis(x, h - bottom, top, "simulated ms from the first link cut to the first move onto the fallback channel");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [name, r] = rows[i];
    const double cy = top + row * (static_cast<double>(i) + 0.5);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8, cy + 4, esc(name));
    for (const json* run : r->paused) {
      const double ms = (*run)["figures"]["pause_ms"].get<double>();
      s += fmt::format("<circle class=\"datum\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"{}\" fill-opacity=\"0.75\" stroke=\"white\" "
                       "stroke-width=\"0.8\"><title>{}: {:.4g} ms</title></circle>\n",
                       x.at(ms), cy + jitter(run->value("id", 0), 18), run->value("pass", false) ? kPass : kFail, esc(run_words(*run)),
                       ms);
    }
    if (r->without) {
      s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"#666\">{} run(s) with no fallback</text>\n", w - right + 12, cy + 4, r->without);
    }
  }
  return s + pass_fail_legend(w - right - 150, top - 14) + "</svg>\n";
}

std::string plot_heat_map(const std::string& topology, const std::string& path, const std::vector<json>& runs) {
  const std::string id = "heatmap-" + html_id(topology), label = "errors, reroutes and drops on " + topology;
  std::vector<const json*> mine;
  for (const auto& r : runs) {
    if (r.value("topology", "") == topology) mine.push_back(&r);
  }
  if (mine.empty()) return no_data(id, label, "no run of " + topology + " finished");
  control::System sys;
  try {
    sys = control::load_system(path);
  } catch (const Error& e) {
    return no_data(id, label, e.what());
  }
  std::map<std::string, int> link_of;  // port name -> link index
  for (size_t i = 0; i < sys.links.size(); ++i) {
    link_of[routing::to_string(sys.links[i].a)] = static_cast<int>(i);
    link_of[routing::to_string(sys.links[i].b)] = static_cast<int>(i);
  }
  struct Sum {
    uint64_t frames_in = 0, crc_errors = 0, retransmits = 0, fallbacks = 0, link_downs = 0, drops = 0;
  };
  std::map<int, Sum> links;
  std::map<int, uint64_t> chip_drops;  // by node
  Sum all;
  for (const json* r : mine) {
    const json& f = figures(*r);
    for (const auto& [port, fig] : member(f, "links").items()) {
      const auto it = link_of.find(port);
      if (it == link_of.end()) continue;
      for (Sum* sum : {&links[it->second], &all}) {
        sum->frames_in += fig.value("frames_in", uint64_t{0});
        sum->crc_errors += fig.value("crc_errors", uint64_t{0});
        sum->retransmits += fig.value("retransmits", uint64_t{0});
        sum->fallbacks += fig.value("fallbacks", uint64_t{0});
        sum->link_downs += fig.value("link_downs", uint64_t{0});
        sum->drops += fig.value("drops", uint64_t{0});
      }
    }
    for (const auto& [chip, n] : member(f, "chip_drops").items()) {
      const auto c = routing::parse_chip(chip);
      const auto v = c ? sys.node(*c) : std::nullopt;
      if (v) chip_drops[*v] += n.get<uint64_t>();
      all.drops += n.get<uint64_t>();
    }
  }
  viz::DrawOptions draw;
  for (size_t i = 0; i < sys.links.size(); ++i) {
    const std::string ends = routing::to_string(sys.links[i].a) + " - " + routing::to_string(sys.links[i].b);
    viz::LinkPaint paint;
    const auto it = links.find(static_cast<int>(i));
    if (it == links.end()) {
      paint.colour = "#c7c7c7";
      paint.tooltip = fmt::format("{}: nothing logged over {} run(s)", ends, mine.size());
    } else {
      const Sum& l = it->second;
      const double fer = l.crc_errors ? static_cast<double>(l.crc_errors) / static_cast<double>(std::max(l.frames_in, l.crc_errors)) : 0.0;
      paint.colour = viz::error_rate_colour(fer);
      paint.width = l.fallbacks ? 5 : 3;
      paint.dashed = l.link_downs > 0;
      paint.tooltip = fmt::format("{} over {} run(s): {} CRC error(s) ({:.3g}% of frames received), {} retransmission(s), "
                                  "{} fallback move(s), {} link down(s), {} drop(s)",
                                  ends, mine.size(), l.crc_errors, 100 * fer, l.retransmits, l.fallbacks, l.link_downs, l.drops);
    }
    draw.links[static_cast<int>(i)] = paint;
  }
  for (const auto& [v, n] : chip_drops) {
    viz::ChipPaint paint;
    paint.fill = "#ffbb78";
    paint.tooltip = fmt::format("{} packet(s) dropped over {} run(s)", n, mine.size());
    draw.chips[v] = paint;
  }
  draw.title_note = fmt::format("over {} run(s): {} CRC errors, {} fallback moves, {} link downs, {} drops", mine.size(), all.crc_errors,
                                all.fallbacks, all.link_downs, all.drops);
  draw.legend = viz::error_rate_legend();
  draw.legend.insert(draw.legend.end(), {{"#c7c7c7", "nothing logged"}, {"#555555", "went down", true}});
  std::string svg = viz::draw_svg(sys, draw);
  svg.insert(4, fmt::format(" id=\"{}\" class=\"heatmap\"", id));  // after "<svg"
  return svg;
}

}  // namespace ttemu::tools
