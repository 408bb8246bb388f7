// The campaign's report: one self-contained HTML file (no network, readable offline) with the
// verdict table, the failures grouped by invariant and fault with their reproduction lines,
// and plots as inline SVG (docs/campaigns.md, "The report").
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/campaign/campaign_file.hpp"

namespace ttemu::tools {

// `records`: every run's record, as in runs.jsonl (skipped runs included). Throws Error if the
// file cannot be written.
void write_report(const Campaign& c, const std::vector<nlohmann::json>& records, const std::filesystem::path& html);

}  // namespace ttemu::tools
