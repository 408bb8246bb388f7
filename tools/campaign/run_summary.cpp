#include "tools/campaign/run_summary.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include <yaml-cpp/yaml.h>

namespace ttemu::tools {

using nlohmann::json;

namespace {

// What the log says about one port (its end of a link). Only ports with something to say go
// into the record, and only their non-zero counts: a Galaxy has 416 ports.
struct PortFigures {
  uint64_t frames_in = 0, crc_errors = 0, retransmits = 0;
  int fallbacks = 0, link_downs = 0, drops = 0;
  bool notable() const { return crc_errors || retransmits || fallbacks || link_downs || drops; }
  json to_json() const {
    json j = json::object();
    auto put = [&](const char* key, auto n) {
      if (n) j[key] = n;
    };
    if (crc_errors) put("frames_in", frames_in);  // the base of its error rate
    put("crc_errors", crc_errors);
    put("retransmits", retransmits);
    put("fallbacks", fallbacks);
    put("link_downs", link_downs);
    put("drops", drops);
    return j;
  }
};

// The earliest down window of a fault plan (its `at`, seconds since the link started), if any.
std::optional<double> first_down(const std::string& faults_yaml) {
  std::optional<double> first;
  auto windows = [&](const YAML::Node& faults) {
    // (A missing key is a node that throws when asked its type: test it first.)
    if (!faults || !faults.IsMap() || !faults["down"] || !faults["down"].IsSequence()) return;
    for (const auto& w : faults["down"]) {
      if (!w.IsMap() || !w["at"]) continue;
      const double at = w["at"].as<double>();
      first = first ? std::min(*first, at) : at;
    }
  };
  try {
    const YAML::Node plan = YAML::Load(faults_yaml);
    if (!plan.IsMap()) return first;
    windows(plan["defaults"]);
    if (plan["links"] && plan["links"].IsSequence()) {
      for (const auto& l : plan["links"]) windows(l);
    }
  } catch (const YAML::Exception&) {
    // The campaign file was checked when loaded; a plan that does not read has no window.
  }
  return first;
}

// When the scenario first takes a link away, in simulated seconds: a down window of its fault
// plan, or a `--cut PORT@MS`.
std::optional<double> first_cut_s(const Scenario& s) {
  std::optional<double> first = s.faults_yaml.empty() ? std::nullopt : first_down(s.faults_yaml);
  for (const auto& cut : s.cuts) {
    const size_t at = cut.rfind('@');
    if (at == std::string::npos) continue;
    try {
      const double t = std::stod(cut.substr(at + 1)) / 1000;
      first = first ? std::min(*first, t) : t;
    } catch (const std::exception&) {
    }
  }
  return first;
}

}  // namespace

json summarise_run(const Scenario& s, const std::vector<json>& results, const std::vector<json>& events) {
  json patterns = json::array();
  for (const auto& r : results) {
    json latency = json::object();
    for (const char* k : {"min", "avg", "p50", "p99"}) {
      if (r.contains("latency_us") && r["latency_us"].contains(k)) latency[k] = r["latency_us"][k];
    }
    patterns.push_back({{"pattern", r.value("pattern", "?")}, {"plane", r.value("plane", 0)},
                        {"gb_per_s", r.value("gb_per_s", 0.0)}, {"latency_us", latency}});
  }
  std::map<std::string, PortFigures> ports;
  std::map<std::string, int> chip_drops;  // drops the router made with no port named
  uint64_t frames_in = 0, crc_errors = 0, retransmits = 0;
  int fallbacks = 0, link_downs = 0, drops = 0, reloads = 0, chip_deaths = 0;
  const std::optional<double> cut = first_cut_s(s);
  std::optional<double> fallback_after_cut;
  for (const auto& e : events) {
    const std::string kind = e.value("kind", "");
    const std::string port = e.value("port", "");
    if (kind == "rates") {  // per port; router_rates are the same figures summed
      PortFigures& p = ports[port];
      p.frames_in += e.value("frames_in", uint64_t{0});
      p.crc_errors += e.value("crc_errors", uint64_t{0});
      p.retransmits += e.value("retransmits", uint64_t{0});
      frames_in += e.value("frames_in", uint64_t{0});
      crc_errors += e.value("crc_errors", uint64_t{0});
      retransmits += e.value("retransmits", uint64_t{0});
    } else if (kind == "fallback") {
      ++fallbacks;
      ++ports[port].fallbacks;
      const double t = e.value("uptime_s", 0.0);
      if (cut && t >= *cut && !fallback_after_cut) fallback_after_cut = t;
    } else if (kind == "link_down") {
      ++link_downs;
      ++ports[port].link_downs;
    } else if (kind == "dropped") {
      ++drops;
      if (port.empty()) ++chip_drops[e.value("chip", "?")];
      else ++ports[port].drops;
    } else if (kind == "tables_reloaded") {
      ++reloads;
    } else if (kind == "chip_died") {
      ++chip_deaths;
    }
  }
  json links = json::object();
  for (const auto& [port, p] : ports) {
    if (p.notable() && !port.empty()) links[port] = p.to_json();
  }
  // CRC errors per frame that arrived (a frame that fails its CRC arrived too).
  const double fer = crc_errors ? static_cast<double>(crc_errors) / static_cast<double>(std::max(frames_in, crc_errors)) : 0.0;
  return {{"patterns", patterns},
          {"frames_in", frames_in},
          {"crc_errors", crc_errors},
          {"fer", fer},
          {"retransmits", retransmits},
          {"cut_s", cut ? json(*cut) : json(nullptr)},
          {"pause_ms", fallback_after_cut ? json(std::round((*fallback_after_cut - *cut) * 1e6) / 1e3) : json(nullptr)},  // to the us
          {"fallbacks", fallbacks},
          {"link_downs", link_downs},
          {"drops", drops},
          {"reloads", reloads},
          {"chip_deaths", chip_deaths},
          {"links", links},
          {"chip_drops", chip_drops}};
}

}  // namespace ttemu::tools
