#include "tools/traffic/tt_metal_report.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/control/table_check.hpp"

namespace ttemu::tools {

using nlohmann::json;

namespace {

// The chips' nominal AI clock, which tt-metal's cycles count: Wormhole 1 GHz, Blackhole 1.35 GHz.
double nominal_clock_mhz(const control::System& sys) {
  if (sys.chips.empty()) return 1000;
  return sys.spec_of(0).arch.rfind("blackhole", 0) == 0 ? 1350 : 1000;
}

// tt-metal's num_devices: per direction that carries traffic, the devices of the line (Linear:
// the mesh's rows for N/S, columns for E/W), the ring's devices (Ring), or the mesh's (Mesh);
// it has none for other topologies (0).
std::vector<uint32_t> num_devices(const control::System& sys, const control::ttmetal::Run& run) {
  const control::Dims shape = sys.meshes.empty() ? control::Dims{} : sys.meshes.front().chips;
  const auto rows = static_cast<uint32_t>(shape.rows), cols = static_cast<uint32_t>(shape.cols);
  std::set<uint32_t> out;
  if (run.topology == "Linear") {
    for (auto [s, d] : run.pairs) {
      const auto &a = sys.chips[static_cast<size_t>(s)].coord, &b = sys.chips[static_cast<size_t>(d)].coord;
      if (a.row != b.row) out.insert(rows);
      if (a.col != b.col) out.insert(cols);
    }
  } else if (run.topology == "Ring") {
    out.insert(2 * (rows - 1 + cols - 1));
  } else if (run.topology == "Mesh") {
    out.insert(rows * cols);
  } else {
    out.insert(0);
  }
  return {out.begin(), out.end()};
}

std::string devices_text(const json& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i].get<uint32_t>());
  return s + "]";
}

// The most pairs whose routes on the plane leave through one port (one direction of one link).
uint32_t busiest_streams(const control::System& sys, const control::TableSet& tables, int plane,
                         const std::vector<std::pair<int, int>>& pairs) {
  std::map<routing::PortId, uint32_t> through;
  uint32_t most = 0;
  for (auto [s, d] : pairs) {
    const auto walk = control::walk_route(sys, tables, plane, s, d);
    for (const auto& hop : walk.hops) most = std::max(most, ++through[hop.from]);
  }
  return most;
}

}  // namespace

json tt_metal_run(const control::System& sys, const control::TableSet& tables, int plane, const control::ttmetal::Run& run,
                  const json& result, const std::string& time_base) {
  const double seconds = result.at("seconds").get<double>();
  const uint32_t streams = busiest_streams(sys, tables, plane, run.pairs);
  const double clock = nominal_clock_mhz(sys);
  const double busiest_bytes = static_cast<double>(streams) * run.size * run.num_packets;
  return {{"test", run.test},
          {"iteration", run.iteration},
          {"iterations", run.iterations},
          {"ftype", control::ttmetal::report_ftype(run.ftype)},
          {"ntype", control::ttmetal::report_ntype(run.ntype)},
          {"topology", run.topology},
          {"num_devices", num_devices(sys, run)},
          {"num_links", run.num_links},
          {"packet_size", run.size},
          {"num_packets", run.num_packets},
          {"senders", run.pairs.size()},
          {"ttemu_pattern", run.pattern},
          {"packets", uint64_t{run.num_packets} * run.pairs.size()},
          {"bytes", result.at("bytes")},
          {"seconds", seconds},
          {"time_base", time_base},
          {"clock_mhz", clock},
          {"cycles", seconds * clock * 1e6},
          {"busiest_streams", streams},
          {"bandwidth_gb_s", seconds > 0 ? busiest_bytes / seconds / 1e9 : 0.0},
          {"packets_per_second", seconds > 0 ? static_cast<double>(streams) * run.num_packets / seconds : 0.0},
          {"aggregate_gb_per_s", result.at("gb_per_s")},
          {"verified", result.at("verified")},
          {"errors", result.at("errors")},
          {"result", result}};
}

std::string tt_metal_line(const json& r) {
  const std::string it = r.at("iterations").get<uint32_t>() > 1
                             ? fmt::format(" #{}", r.at("iteration").get<uint32_t>() + 1)
                             : std::string();
  return fmt::format("{}{}  {} {} {} {} links {}: {} sender(s) x {} x {} B = {:.0f} B in {:.6f} s ({}): {:.3f} GB/s "
                     "(busiest direction: {} stream(s)), {:.0f} packets/s, {:.0f} cycles at {:.0f} MHz; "
                     "aggregate {:.3f} GB/s; verified {} B, errors {}",
                     r.at("test").get<std::string>(), it, r.at("ftype").get<std::string>(), r.at("ntype").get<std::string>(),
                     r.at("topology").get<std::string>(), devices_text(r.at("num_devices")), r.at("num_links").get<uint32_t>(),
                     r.at("senders").get<size_t>(), r.at("num_packets").get<uint32_t>(), r.at("packet_size").get<uint32_t>(),
                     r.at("bytes").get<double>(), r.at("seconds").get<double>(), r.at("time_base").get<std::string>(),
                     r.at("bandwidth_gb_s").get<double>(), r.at("busiest_streams").get<uint32_t>(),
                     r.at("packets_per_second").get<double>(), r.at("cycles").get<double>(), r.at("clock_mhz").get<double>(),
                     r.at("aggregate_gb_per_s").get<double>(), r.at("verified").get<uint64_t>(), r.at("errors").get<uint64_t>());
}

void TtMetalSummary::add(const json& run) {
  const std::string name = run.at("test");
  auto it = std::find_if(tests_.begin(), tests_.end(), [&](const json& t) { return t.at("test_name") == name; });
  if (it == tests_.end()) {
    tests_.push_back({{"test_name", name}, {"ftype", run.at("ftype")}, {"ntype", run.at("ntype")}, {"topology", run.at("topology")},
                      {"num_devices", run.at("num_devices")}, {"num_links", run.at("num_links")}, {"packet_size", run.at("packet_size")},
                      {"cycles", json::array()}, {"packets_per_s", json::array()}, {"bandwidth", json::array()},
                      {"verified", uint64_t{0}}, {"errors", uint64_t{0}}, {"time_base", run.at("time_base")}});
    it = tests_.end() - 1;
  }
  (*it)["cycles"].push_back(run.at("cycles"));
  (*it)["packets_per_s"].push_back(run.at("packets_per_second"));
  (*it)["bandwidth"].push_back(run.at("bandwidth_gb_s"));
  (*it)["verified"] = (*it)["verified"].get<uint64_t>() + run.at("verified").get<uint64_t>();
  (*it)["errors"] = (*it)["errors"].get<uint64_t>() + run.at("errors").get<uint64_t>();
}

json TtMetalSummary::to_json() const {
  json out = json::array();
  for (const auto& t : tests_) {
    auto values = [&](const char* k) { return t.at(k).get<std::vector<double>>(); };
    auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return v.empty() ? 0.0 : s / static_cast<double>(v.size());
    };
    const auto bw = values("bandwidth");
    const double bw_mean = mean(bw);
    double var = 0;
    for (double x : bw) var += (x - bw_mean) * (x - bw_mean);
    var = bw.empty() ? 0.0 : var / static_cast<double>(bw.size());
    out.push_back({{"test_name", t.at("test_name")}, {"ftype", t.at("ftype")}, {"ntype", t.at("ntype")}, {"topology", t.at("topology")},
                   {"num_devices", t.at("num_devices")}, {"num_links", t.at("num_links")}, {"packet_size", t.at("packet_size")},
                   {"iterations", bw.size()}, {"avg_cycles", mean(values("cycles"))},
                   {"avg_packets_per_s", mean(values("packets_per_s"))}, {"avg_bandwidth_gigabytes_per_s", bw_mean},
                   {"bw_min_gigabytes_per_s", bw.empty() ? 0.0 : *std::min_element(bw.begin(), bw.end())},
                   {"bw_max_gigabytes_per_s", bw.empty() ? 0.0 : *std::max_element(bw.begin(), bw.end())},
                   {"bw_std_dev_gigabytes_per_s", std::sqrt(var)}, {"tolerance_percent", 1.0},
                   {"verified", t.at("verified")}, {"errors", t.at("errors")}, {"time_base", t.at("time_base")}});
  }
  return out;
}

std::string TtMetalSummary::text() const {
  std::string out = fmt::format("{:<32} {:<13} {:<18} {:<10} {:>8} {:>5} {:>7} {:>4} {:>14} {:>12} {:>9} {:>9} {:>9} {:>9}\n",
                                "test_name", "ftype", "ntype", "topology", "devices", "links", "packet", "iter", "avg_cycles",
                                "packets/s", "avg GB/s", "min GB/s", "max GB/s", "std GB/s");
  for (const auto& t : to_json()) {
    out += fmt::format("{:<32} {:<13} {:<18} {:<10} {:>8} {:>5} {:>7} {:>4} {:>14.0f} {:>12.0f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f}\n",
                       t.at("test_name").get<std::string>(), t.at("ftype").get<std::string>(), t.at("ntype").get<std::string>(),
                       t.at("topology").get<std::string>(), devices_text(t.at("num_devices")), t.at("num_links").get<uint32_t>(),
                       t.at("packet_size").get<uint32_t>(), t.at("iterations").get<size_t>(), t.at("avg_cycles").get<double>(),
                       t.at("avg_packets_per_s").get<double>(), t.at("avg_bandwidth_gigabytes_per_s").get<double>(),
                       t.at("bw_min_gigabytes_per_s").get<double>(), t.at("bw_max_gigabytes_per_s").get<double>(),
                       t.at("bw_std_dev_gigabytes_per_s").get<double>());
  }
  return out;
}

void TtMetalSummary::write_csv(const std::string& path) const {
  std::ofstream f(path, std::ios::trunc);
  if (!f) throw Error(fmt::format("--csv: cannot write '{}'", path));
  f << "test_name,ftype,ntype,topology,num_devices,num_links,packet_size,iterations,avg_cycles,avg_packets_per_s,"
       "avg_bandwidth_gigabytes_per_s,bw_min_gigabytes_per_s,bw_max_gigabytes_per_s,bw_std_dev_gigabytes_per_s,tolerance_percent\n";
  for (const auto& t : to_json()) {
    f << fmt::format("{},{},{},{},\"{}\",{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", t.at("test_name").get<std::string>(),
                     t.at("ftype").get<std::string>(), t.at("ntype").get<std::string>(), t.at("topology").get<std::string>(),
                     devices_text(t.at("num_devices")), t.at("num_links").get<uint32_t>(), t.at("packet_size").get<uint32_t>(),
                     t.at("iterations").get<size_t>(), t.at("avg_cycles").get<double>(), t.at("avg_packets_per_s").get<double>(),
                     t.at("avg_bandwidth_gigabytes_per_s").get<double>(), t.at("bw_min_gigabytes_per_s").get<double>(),
                     t.at("bw_max_gigabytes_per_s").get<double>(), t.at("bw_std_dev_gigabytes_per_s").get<double>(),
                     t.at("tolerance_percent").get<double>());
  }
  f.flush();
  if (!f) throw Error(fmt::format("--csv: writing '{}' failed", path));
}

}  // namespace ttemu::tools
