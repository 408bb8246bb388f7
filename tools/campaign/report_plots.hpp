// The campaign report's plots (docs/campaigns.md, "The report"), each one inline <svg> element
// with its id, drawn from the records of the runs that ran and their figures (run_summary.hpp).
// A plot with nothing to show says "no data" instead. Every data mark (a point, a box, a
// link) carries a <title>: its tooltip.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/campaign/campaign_file.hpp"

namespace ttemu::tools {

// id "plot-goodput-fer": each run's goodput per pattern against its measured frame error rate
// (log axes; error-free runs in a column of their own), coloured by pass or fail.
std::string plot_goodput_against_fer(const std::vector<nlohmann::json>& runs);
// id "plot-latency": per scenario, the spread of the runs' p50 and p99 latencies (log axis).
std::string plot_latency(const Campaign& c, const std::vector<nlohmann::json>& runs);
// id "plot-pause": per scenario that cuts a link, each run's pause from the cut to the first
// fallback move.
std::string plot_pause(const Campaign& c, const std::vector<nlohmann::json>& runs);
// id "heatmap-NAME" (NAME reduced to letters, digits, - and _): the topology drawn with its
// links coloured by CRC error rate, thick where traffic moved onto the fallback channel, dashed
// where they went down, and chips that dropped packets filled, summed over its runs.
std::string plot_heat_map(const std::string& topology, const std::string& path, const std::vector<nlohmann::json>& runs);

// A name as an HTML id: letters, digits, - and _ kept, anything else as _.
std::string html_id(const std::string& name);

}  // namespace ttemu::tools
