// The report of `ttemu traffic --tt-metal` and `ttemu sim --tt-metal`: each run of a tt-metal
// fabric test with the figures tt-metal's test_tt_fabric prints and writes to its bandwidth
// summary CSV (packet size, packets, cycles, bandwidth GB/s, packets per second; per test the
// mean, min, max and standard deviation over its iterations), next to ttemu's own (aggregate
// goodput, every byte verified).
//
// tt-metal's bandwidth is not aggregate goodput: it is the payload that crosses the busiest
// device boundary in one direction (its "traffic count" of streams there x packet size x
// packets) over the slowest sender's time. ttemu computes the same from the system's routing
// tables (the most pairs whose route leaves one port) over the run's duration. tt-metal counts
// device cycles; ttemu's time is the emulated run's wall-clock time (ttemu traffic) or the
// simulated time (ttemu sim), and its "cycles" are that time at the chip's nominal clock.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system.hpp"
#include "emulator/control/tt_metal_tests.hpp"

namespace ttemu::tools {


// One run's report: tt-metal's fields and ttemu's (`result` is the pattern's own JSON object);
// `time_base` says what the seconds are ("emulated" or "simulated").
nlohmann::json tt_metal_run(const control::System& sys, const control::TableSet& tables, int plane,
                            const control::ttmetal::Run& run, const nlohmann::json& result, const std::string& time_base);

// The line `ttemu traffic|sim --tt-metal` prints for a run.
std::string tt_metal_line(const nlohmann::json& run);

// tt-metal's bandwidth summary: one row per test over its iterations.
class TtMetalSummary {
 public:
  void add(const nlohmann::json& run);
  nlohmann::json to_json() const;
  std::string text() const;  // a heading and one line per test
  // The CSV of tt-metal's bandwidth_summary_results_<arch>.csv: the same columns, in order.
  void write_csv(const std::string& path) const;

 private:
  std::vector<nlohmann::json> tests_;  // first run of each test, with its iterations' figures
};

}  // namespace ttemu::tools
