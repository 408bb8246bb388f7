// A running system drawn as it is now (ttemu topo draw --live, spec 6.1's picture of the
// physical state): each link coloured by its busier direction's utilisation over a TopFrame's
// interval, or by its CRC error rate, dashed when it is not up or its traffic travels a
// fallback channel; each chip filled by the packets in its routing buffers; dead chips crossed
// out. No I/O: a TopFrame in (top_view.hpp), what draw_svg draws out.
#pragma once

#include <cstdint>
#include <vector>

#include "emulator/control/system.hpp"
#include "tools/viz/top_view.hpp"
#include "tools/viz/topology_svg.hpp"

namespace ttemu::viz {

enum class LinkColouring { kUtilisation, kErrors };

DrawOptions live_picture(const control::System& sys, const TopFrame& frame, LinkColouring by);

// The scales, one for every picture that shows them, and their legends.
const char* utilisation_colour(double utilisation);
std::vector<LegendEntry> utilisation_legend();
const char* occupancy_colour(uint64_t packets);
std::vector<LegendEntry> occupancy_legend();

}  // namespace ttemu::viz
