// A picture of a system (spec 6.1: visualise the physical state and routes): meshes, chips,
// intra- and inter-mesh links, exit nodes, failed parts, and optionally one route, as SVG.
// Meshes are laid out from the sides their Graph links leave from (a mesh whose south edge
// meets another's north edge is drawn above it).
#pragma once

#include <string>
#include <vector>

#include "emulator/control/failures.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/table_check.hpp"

namespace ttemu::viz {

struct DrawOptions {
  control::Failures failures;
  std::vector<control::Hop> route;  // highlighted, in order
  std::string title_note;
};

std::string draw_svg(const control::System& sys, const DrawOptions& options);

}  // namespace ttemu::viz
