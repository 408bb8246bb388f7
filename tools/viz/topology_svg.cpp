#include "tools/viz/topology_svg.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

namespace ttemu::viz {

using namespace ttemu::control;

namespace {

constexpr int kCell = 84;   // pixels per chip-grid unit
constexpr int kChip = 58;   // chip box size
constexpr int kMargin = 40;
constexpr int kTitle = 56;

struct Rect {
  int x, y, w, h;  // grid units
  bool overlaps(const Rect& o) const {
    return x < o.x + o.w + 1 && o.x < x + w + 1 && y < o.y + o.h + 1 && o.y < y + h + 1;
  }
};

struct Point {
  int x, y;
};

class Layout {
 public:
  explicit Layout(const System& sys) : sys_(sys) { place(); }

  // Grid position of a chip (layers of a 3-D mesh side by side).
  Point grid(int node) const {
    const Chip& c = sys_.chips[static_cast<size_t>(node)];
    const Mesh& m = sys_.mesh_of(node);
    const Rect& r = rects_.at(m.id);
    return {r.x + c.coord.layer * (m.chips.cols + 1) + c.coord.col, r.y + c.coord.row};
  }
  Point centre(int node) const {
    Point g = grid(node);
    return {kMargin + g.x * kCell + kCell / 2, kTitle + kMargin + g.y * kCell + kCell / 2};
  }
  const Rect& rect(int mesh) const { return rects_.at(mesh); }
  int width() const { return 2 * kMargin + max_x_ * kCell; }
  int height() const { return kTitle + 2 * kMargin + max_y_ * kCell; }

 private:
  static Rect size_of(const Mesh& m) {
    return {0, 0, m.chips.cols * m.chips.layers + (m.chips.layers - 1), m.chips.rows};
  }
  static Point step(Side s) {
    switch (s) {
      case Side::N: return {0, -1};
      case Side::S: return {0, 1};
      case Side::E: return {1, 0};
      case Side::W: return {-1, 0};
      case Side::U: return {1, 0};
      case Side::D: return {-1, 0};
    }
    return {0, 1};
  }

  void place() {
    std::set<int> placed;
    for (const Mesh& start : sys_.meshes) {
      if (placed.count(start.id)) continue;
      Rect r = size_of(start);
      r.x = max_x_ + (placed.empty() ? 0 : 2);  // unconnected parts side by side
      r.y = 0;
      put(start.id, r, {1, 0});
      placed.insert(start.id);
      std::deque<int> queue{start.id};
      while (!queue.empty()) {
        int a = queue.front();
        queue.pop_front();
        for (const Link& l : sys_.links) {
          if (!l.inter_mesh()) continue;
          for (auto [from, to] : {std::pair{l.a, l.b}, std::pair{l.b, l.a}}) {
            if (from.chip.mesh != a || placed.count(to.chip.mesh)) continue;
            int fn = *sys_.node(from.chip), tn = *sys_.node(to.chip);
            Side side = *sys_.spec_of(fn).side_of(from.port);
            Point d = step(side), at = grid(fn);
            const Mesh& mb = *sys_.mesh(to.chip.mesh);
            Rect rb = size_of(mb);
            // The entry chip lands two cells beyond the exit chip, in the link's direction.
            const Chip& tc = sys_.chips[static_cast<size_t>(tn)];
            rb.x = at.x + 2 * d.x - (tc.coord.layer * (mb.chips.cols + 1) + tc.coord.col);
            rb.y = at.y + 2 * d.y - tc.coord.row;
            put(mb.id, rb, d.x == 0 && d.y == 0 ? Point{1, 0} : d);
            placed.insert(mb.id);
            queue.push_back(mb.id);
          }
        }
      }
    }
    // Shift everything to start at (0, 0).
    int min_x = 0, min_y = 0;
    for (auto& [id, r] : rects_) min_x = std::min(min_x, r.x), min_y = std::min(min_y, r.y);
    max_x_ = max_y_ = 0;
    for (auto& [id, r] : rects_) {
      r.x -= min_x;
      r.y -= min_y;
      max_x_ = std::max(max_x_, r.x + r.w);
      max_y_ = std::max(max_y_, r.y + r.h);
    }
  }

  void put(int id, Rect r, Point push) {
    for (int tries = 0; tries < 4096; ++tries) {
      bool clash = std::any_of(rects_.begin(), rects_.end(),
                               [&](const auto& kv) { return kv.second.overlaps(r); });
      if (!clash) break;
      r.x += push.x;
      r.y += push.y;
    }
    rects_[id] = r;
    max_x_ = std::max(max_x_, r.x + r.w);
  }

  const System& sys_;
  std::map<int, Rect> rects_;
  int max_x_ = 0, max_y_ = 0;
};

// Every link on its own (DrawOptions::links), parallel ones side by side across the line
// between their chips; their labels go to `labels`, drawn after the chips.
std::string draw_each_link(const System& sys, const Layout& layout, const std::map<int, LinkPaint>& paints, std::string& labels) {
  std::string svg;
  // Pairs in one orientation (lower node first), whichever end a link names first.
  std::map<std::pair<int, int>, int> drawn, links_of;
  std::map<std::pair<int, int>, std::pair<int, int>> labelled;  // labels so far on each side of a pair
  auto pair_of = [&](const Link& l) {
    const int x = *sys.node(l.a.chip), y = *sys.node(l.b.chip);
    return std::pair<int, int>{std::min(x, y), std::max(x, y)};
  };
  for (const Link& l : sys.links) ++links_of[pair_of(l)];
  for (size_t i = 0; i < sys.links.size(); ++i) {
    const auto [a, b] = pair_of(sys.links[i]);
    const Link& l = sys.links[i];
    const int count = links_of[{a, b}], k = drawn[{a, b}]++;
    const Point p = layout.centre(a), q = layout.centre(b);
    const double dx = q.x - p.x, dy = q.y - p.y, len = std::max(1.0, std::hypot(dx, dy));
    const double off = (k - (count - 1) / 2.0) * 7.0;  // pixels across the line
    const double ox = -dy / len * off, oy = dx / len * off;
    const auto it = paints.find(static_cast<int>(i));
    const LinkPaint paint = it == paints.end() ? LinkPaint{} : it->second;
    const std::string tip = paint.tooltip.empty() ? routing::to_string(l.a) + " - " + routing::to_string(l.b) : paint.tooltip;
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"{}\"{}><title>{}</title></line>\n",
        p.x + ox, p.y + oy, q.x + ox, q.y + oy, paint.colour, paint.width, paint.dashed ? " stroke-dasharray=\"6,4\"" : "",
        escape_xml(tip));
    if (!paint.label.empty()) {
      // Beside the middle of the bundle, on the link's own side, stacked outwards.
      const double side = off >= 0 ? 1 : -1;
      auto& [before, after] = labelled[{a, b}];
      const int nth = side > 0 ? after++ : before++;
      const double out = (count - 1) / 2.0 * 7.0 + 12 + 13 * nth;
      labels += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" font-weight=\"bold\" fill=\"{}\" stroke=\"white\" "
          "stroke-width=\"3\" paint-order=\"stroke\" text-anchor=\"middle\">{}</text>\n",
          (p.x + q.x) / 2.0 + side * -dy / len * out, (p.y + q.y) / 2.0 + side * dx / len * out + 4, paint.colour,
          escape_xml(paint.label));
    }
  }
  return svg;
}

}  // namespace

std::string draw_svg(const System& sys, const DrawOptions& o) {
  Layout layout(sys);
  const int legend_h = 30;
  int inter = 0;
  for (const auto& l : sys.links) inter += l.inter_mesh();
  const std::string subtitle = fmt::format(
      "{} mesh(es), {} chips, {} links ({} between meshes), {} routing plane(s){}", sys.meshes.size(),
      sys.chips.size(), sys.links.size(), inter, sys.planes,
      o.title_note.empty() ? "" : "; " + o.title_note);
  // A legend entry's width: its swatch and its text.
  auto entry_w = [](const LegendEntry& e) { return 46 + 7 * static_cast<int>(e.text.size()); };
  int legend_w = 2 * kMargin;
  for (const auto& e : o.legend) legend_w += entry_w(e);
  int width = std::max({layout.width(), 760, 2 * kMargin + 7 * static_cast<int>(subtitle.size()), legend_w});
  int height = layout.height() + legend_h;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  // The route's arrowhead, only where an arrow is drawn (several pictures in one page would
  // otherwise share the id).
  if (!o.route.empty() || o.legend.empty()) {
    svg += "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"14\" "
           "markerHeight=\"14\" markerUnits=\"userSpaceOnUse\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" "
           "fill=\"#d62728\"/></marker></defs>\n";
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"28\" font-size=\"18\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"{}\" y=\"48\" font-size=\"13\" fill=\"#444\">{}</text>\n",
      kMargin, escape_xml(sys.source), kMargin, escape_xml(subtitle));

  // Meshes.
  for (const Mesh& m : sys.meshes) {
    const Rect& r = layout.rect(m.id);
    const Board& b = sys.boards[static_cast<size_t>(m.board)];
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"10\" fill=\"#eef3fb\" "
        "stroke=\"#8aa4c8\"/>\n<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#3a5a88\">Mesh {} "
        "({})</text>\n",
        kMargin + r.x * kCell + 4, kTitle + kMargin + r.y * kCell + 4, r.w * kCell - 8,
        r.h * kCell - 8, kMargin + r.x * kCell + 10, kTitle + kMargin + r.y * kCell - 4, m.id,
        escape_xml(b.name));
  }

  // Links: each on its own when painted, else one line per chip pair with the number of
  // parallel links (planes) and failures.
  std::string labels;  // drawn last, over the chips
  if (!o.links.empty()) {
    svg += draw_each_link(sys, layout, o.links, labels);
  } else {
    std::map<std::pair<int, int>, std::pair<int, int>> pairs;  // (a, b) -> (links, failed)
    for (size_t i = 0; i < sys.links.size(); ++i) {
      const Link& l = sys.links[i];
      int a = *sys.node(l.a.chip), b = *sys.node(l.b.chip);
      auto& [count, failed] = pairs[{a, b}];
      ++count;
      failed += !o.failures.link_ok(sys, static_cast<int>(i));
    }
    for (const auto& [ab, cf] : pairs) {
      Point p = layout.centre(ab.first), q = layout.centre(ab.second);
      bool inter_mesh = sys.chips[static_cast<size_t>(ab.first)].id.mesh !=
                        sys.chips[static_cast<size_t>(ab.second)].id.mesh;
      std::string colour = cf.second == cf.first ? "#d62728" : inter_mesh ? "#1f77b4" : "#9aa5b1";
      std::string dash = cf.second ? " stroke-dasharray=\"6,4\"" : "";
      svg += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}><title>{} link(s), "
          "{} failed</title></line>\n",
          p.x, p.y, q.x, q.y, colour, inter_mesh ? 3 : 2 + cf.first / 2, dash, cf.first, cf.second);
    }
  }

  // Chips.
  for (int v = 0; v < sys.node_count(); ++v) {
    const Chip& c = sys.chips[static_cast<size_t>(v)];
    Point p = layout.centre(v);
    bool failed = !o.failures.chip_ok(v), exit = sys.is_exit_node(v);
    const auto paint = o.chips.find(v);
    const std::string fill = failed ? "#f3c6c6" : paint != o.chips.end() ? paint->second.fill : "#ffffff";
    const std::string note = paint != o.chips.end() && !paint->second.tooltip.empty() ? ": " + paint->second.tooltip : "";
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\" fill=\"{}\" stroke=\"{}\" "
        "stroke-width=\"{}\"><title>{}{}{}{}</title></rect>\n"
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n",
        p.x - kChip / 2, p.y - kChip / 2, kChip, kChip, escape_xml(fill),
        exit ? "#ff7f0e" : "#4a5a6a", exit ? 3 : 1, routing::to_string(c.id),
        exit ? " (exit node)" : "", c.host.empty() ? "" : ", host " + escape_xml(c.host), escape_xml(note), p.x, p.y + 4,
        routing::to_string(c.id));
    if (failed) {
      svg += fmt::format("<path d=\"M{} {} L{} {} M{} {} L{} {}\" stroke=\"#d62728\" stroke-width=\"2\"/>\n",
                         p.x - 20, p.y - 20, p.x + 20, p.y + 20, p.x + 20, p.y - 20, p.x - 20, p.y + 20);
    }
  }

  svg += labels;

  // The highlighted route, hop by hop with sender and receiver ports.
  for (size_t i = 0; i < o.route.size(); ++i) {
    const Hop& h = o.route[i];
    Point p = layout.centre(*sys.node(h.from.chip)), q = layout.centre(*sys.node(h.to.chip));
    int dx = q.x - p.x, dy = q.y - p.y;
    int len = std::max(1, std::abs(dx) + std::abs(dy));
    int sx = p.x + dx * (kChip / 2) / len, sy = p.y + dy * (kChip / 2) / len;
    int ex = q.x - dx * (kChip / 2 + 2) / len, ey = q.y - dy * (kChip / 2 + 2) / len;
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#d62728\" stroke-width=\"4\" "
        "marker-end=\"url(#arrow)\"><title>hop {}: {} -> {}</title></line>\n"
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#d62728\" text-anchor=\"middle\">{}: P{}&#8594;P{}</text>\n",
        sx, sy, ex, ey, i + 1, routing::to_string(h.from), routing::to_string(h.to),
        (p.x + q.x) / 2 + (dy != 0 ? 30 : 0), dy != 0 ? (p.y + q.y) / 2 + 4 : p.y - kChip / 2 - 4, i + 1,
        h.from.port, h.to.port);
  }

  // Legend.
  int ly = height - legend_h + 10;
  if (!o.legend.empty()) {
    int x = kMargin;
    svg += "<g font-size=\"12\">";
    for (const auto& e : o.legend) {
      svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"4\"{}/>"
                         "<text x=\"{}\" y=\"{}\">{}</text>",
                         x, ly + 7, x + 28, ly + 7, e.colour, e.dashed ? " stroke-dasharray=\"6,4\"" : "", x + 34, ly + 12,
                         escape_xml(e.text));
      x += entry_w(e);
    }
    svg += "</g>\n</svg>\n";
    return svg;
  }
  svg += fmt::format(
      "<g font-size=\"12\"><rect x=\"{0}\" y=\"{1}\" width=\"14\" height=\"14\" fill=\"white\" "
      "stroke=\"#ff7f0e\" stroke-width=\"3\"/><text x=\"{2}\" y=\"{3}\">exit node</text>"
      "<line x1=\"{4}\" y1=\"{5}\" x2=\"{6}\" y2=\"{5}\" stroke=\"#9aa5b1\" stroke-width=\"3\"/>"
      "<text x=\"{7}\" y=\"{3}\">links in a mesh</text>"
      "<line x1=\"{8}\" y1=\"{5}\" x2=\"{9}\" y2=\"{5}\" stroke=\"#1f77b4\" stroke-width=\"3\"/>"
      "<text x=\"{10}\" y=\"{3}\">links between meshes</text>"
      "<line x1=\"{11}\" y1=\"{5}\" x2=\"{12}\" y2=\"{5}\" stroke=\"#d62728\" stroke-width=\"3\" "
      "stroke-dasharray=\"6,4\"/><text x=\"{13}\" y=\"{3}\">failed</text>"
      "<line x1=\"{14}\" y1=\"{5}\" x2=\"{15}\" y2=\"{5}\" stroke=\"#d62728\" stroke-width=\"4\" "
      "marker-end=\"url(#arrow)\"/><text x=\"{16}\" y=\"{3}\">route</text></g>\n",
      kMargin, ly, kMargin + 20, ly + 12, kMargin + 100, ly + 7, kMargin + 130, kMargin + 136,
      kMargin + 250, kMargin + 280, kMargin + 286, kMargin + 440, kMargin + 470, kMargin + 476,
      kMargin + 530, kMargin + 565, kMargin + 571);
  svg += "</svg>\n";
  return svg;
}

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* error_rate_colour(double r) { return r == 0 ? "#2ca02c" : r < 1e-4 ? "#bcbd22" : r < 1e-2 ? "#ff7f0e" : "#d62728"; }

std::vector<LegendEntry> error_rate_legend() {
  return {{"#2ca02c", "no CRC errors"}, {"#bcbd22", "< 0.01%"}, {"#ff7f0e", "< 1%"}, {"#d62728", ">= 1% of frames"}};
}

}  // namespace ttemu::viz
