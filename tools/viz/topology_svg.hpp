// A picture of a system (spec 6.1: visualise the physical state and routes): meshes, chips,
// intra- and inter-mesh links, exit nodes, failed parts, and optionally one route, as SVG.
// Meshes are laid out from the sides their Graph links leave from (a mesh whose south edge
// meets another's north edge is drawn above it).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emulator/control/failures.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_check.hpp"

namespace ttemu::viz {

// One link drawn on its own (ttemu diagnose: links coloured by error rate).
struct LinkPaint {
  std::string colour = "#9aa5b1";
  int width = 2;
  bool dashed = false;
  std::string label;    // beside the link (a rank)
  std::string tooltip;  // what it carried and suffered
};

// One chip drawn with its own fill and a note after its name in the tooltip (the campaign
// report: drops and deaths).
struct ChipPaint {
  std::string fill = "#ffffff";
  std::string tooltip;
};

struct LegendEntry {
  std::string colour;
  std::string text;
  bool dashed = false;
};

struct DrawOptions {
  control::Failures failures;
  std::vector<control::Hop> route;  // highlighted, in order
  std::string title_note;
  // Links by index into System::links. Not empty: every link is drawn on its own, parallel
  // links side by side (the ones not here in the default grey), instead of one line per pair.
  std::map<int, LinkPaint> links;
  std::map<int, ChipPaint> chips;   // by node index; a failed chip stays crossed out
  std::vector<LegendEntry> legend;  // not empty: replaces the default legend
};

std::string draw_svg(const control::System& sys, const DrawOptions& options);

// Text for SVG or HTML: < > & " escaped.
std::string escape_xml(const std::string& text);

// A link's CRC errors per frame received as a colour, one scale for every picture that shows
// it (ttemu diagnose --svg, the campaign report), and that scale's legend entries.
const char* error_rate_colour(double crc_per_frame);
std::vector<LegendEntry> error_rate_legend();

}  // namespace ttemu::viz
