#include "tools/viz/live_picture.hpp"

#include <map>
#include <string>

#include <fmt/format.h>

namespace ttemu::viz {

namespace {

constexpr const char* kIdle = "#c7c7c7";

std::string link_tooltip(const TopLink& l) {
  return fmt::format("{} - {}: {}; {:.1f} MB/s -> , {:.1f} MB/s <- ({:.2g}% of line rate); {:.0f} frames/s, {:.0f} CRC errors/s, "
                     "{:.0f} retransmissions/s{}",
                     l.a, l.b, l.state, l.ab_bytes_s / 1e6, l.ba_bytes_s / 1e6, 100 * l.utilisation, l.frames_s, l.crc_errors_s,
                     l.retransmits_s, l.fallbacks ? fmt::format("; took a fallback channel {} time(s)", l.fallbacks) : "");
}

}  // namespace

const char* utilisation_colour(double u) {
  return u <= 0 ? kIdle : u < 0.01 ? "#9ecae1" : u < 0.1 ? "#4292c6" : u < 0.5 ? "#ff7f0e" : "#d62728";
}

std::vector<LegendEntry> utilisation_legend() {
  return {{kIdle, "idle"}, {"#9ecae1", "< 1% of line rate"}, {"#4292c6", "< 10%"}, {"#ff7f0e", "< 50%"}, {"#d62728", ">= 50%"}};
}

const char* occupancy_colour(uint64_t packets) {
  return packets == 0 ? "#ffffff" : packets < 8 ? "#fff3b0" : packets < 64 ? "#ffc46b" : "#ff7b5c";
}

std::vector<LegendEntry> occupancy_legend() {
  return {{"#fff3b0", "chip: 1-7 packets buffered"}, {"#ffc46b", "8-63"}, {"#ff7b5c", "64 or more"}};
}

DrawOptions live_picture(const control::System& sys, const TopFrame& frame, LinkColouring by) {
  DrawOptions draw;
  std::map<std::string, const TopLink*> by_end;
  for (const auto& l : frame.links_by_use) by_end[l.a] = by_end[l.b] = &l;
  for (size_t i = 0; i < sys.links.size(); ++i) {
    const auto it = by_end.find(routing::to_string(sys.links[i].a));
    LinkPaint paint;
    if (it == by_end.end()) {  // (a status from another system would have none of its names)
      paint.colour = kIdle;
      paint.dashed = true;
      paint.tooltip = routing::to_string(sys.links[i].a) + ": not in the system's status";
    } else {
      const TopLink& l = *it->second;
      const double received = l.frames_s + l.crc_errors_s;
      paint.colour = by == LinkColouring::kUtilisation ? utilisation_colour(l.utilisation)
                     : received > 0                   ? error_rate_colour(l.crc_errors_s / received)
                                                      : kIdle;
      paint.dashed = l.state != "up";
      paint.tooltip = link_tooltip(l);
    }
    draw.links[static_cast<int>(i)] = paint;
  }
  for (const auto& c : frame.chips_by_load) {
    const auto id = routing::parse_chip(c.name);
    const auto v = id ? sys.node(*id) : std::nullopt;
    if (!v) continue;
    if (!c.alive) draw.failures.nodes.insert(*v);
    draw.chips[*v] = {occupancy_colour(c.buffered),
                      fmt::format("{} packet(s) buffered; {:.0f} injected/s, {:.0f} delivered/s", c.buffered, c.injected_s, c.delivered_s)};
  }
  draw.title_note = fmt::format("live at {:.1f} s (job {}), rates over {:.2f} s: {} of {} link(s) up, {:.1f} MB/s in the fabric",
                                frame.uptime_s, frame.job, frame.interval_s, frame.links_up, frame.links, frame.fabric_bytes_s / 1e6);
  draw.legend = by == LinkColouring::kUtilisation ? utilisation_legend() : error_rate_legend();
  if (by == LinkColouring::kErrors) draw.legend.insert(draw.legend.begin(), LegendEntry{kIdle, "no frames"});
  const auto chips = occupancy_legend();
  draw.legend.insert(draw.legend.end(), chips.begin(), chips.end());
  draw.legend.push_back({"#555555", "not up", true});
  return draw;
}

}  // namespace ttemu::viz
