#include "launcher/diagnose_command.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/error.hpp"
#include "emulator/control/system_yaml.hpp"
#include "launcher/events_command.hpp"
#include "tools/viz/topology_svg.hpp"

namespace ttemu::launcher {

using nlohmann::json;

namespace {

struct DiagnoseOptions {
  std::string what, dir;
  std::string svg, system;
  bool json = false;
};

// What the log says about one link (both ends).
struct LinkFindings {
  std::string a, b;                        // its ends, in name order
  std::map<std::string, int> judged;       // fallbacks by the reason an end judged itself
  int followed = 0;                        // fallbacks of an end that followed the far end
  int returns = 0, downs = 0;
  bool off_at_end = false;                 // an end was still on the fallback channel
  // The ends' rate lines, summed: what the link carried and suffered (both directions).
  uint64_t frames_rx = 0, frames_in = 0, crc_errors = 0, frames_tx = 0, retransmits = 0;
  std::map<std::string, int> alarms;       // error_rate alarms raised, by rate
  // CRC errors per frame that arrived (any type, good or bad), retransmissions per data frame sent.
  double crc_per_frame() const {
    return crc_errors ? static_cast<double>(crc_errors) / static_cast<double>(std::max(frames_in, crc_errors)) : 0.0;
  }
  double retransmits_per_frame() const {
    return retransmits ? static_cast<double>(retransmits) / static_cast<double>(frames_tx + retransmits) : 0.0;
  }
  // The receivers' own judgement of their wire (TNet: the faulty hop is the one whose receiver
  // counts errors): an error rate over the EFC's threshold, or a CRC alarm. A stray CRC error
  // is not one (and a link on the fallback channel counts its carrier's).
  bool receiver_evidence() const { return judged.count("error_rate") || alarm("crc_errors") > 0; }
  // How strongly the log points at this link's wire: an error rate is the receiver's own
  // count of bad frames; timeouts and downs say the wire stopped carrying anything.
  int score() const {
    auto n = [&](const char* r) { auto it = judged.find(r); return it == judged.end() ? 0 : it->second; };
    return 10 * n("error_rate") + 5 * (n("timeouts") + n("link_down")) + 3 * downs + 10 * alarm("crc_errors");
  }
  int alarm(const char* rate) const {
    auto it = alarms.find(rate);
    return it == alarms.end() ? 0 : it->second;
  }
  std::string verdict() const {
    if (receiver_evidence() && crc_errors > 0) {
      return fmt::format("unreliable: its receivers counted {} CRC error(s) in {} frame(s) ({:.3g}%)", crc_errors,
                         std::max(frames_in, crc_errors), 100 * crc_per_frame());
    }
    if (receiver_evidence()) return "unreliable: its receiver counted errors over the threshold";
    if (!judged.empty()) return "broken: it stopped carrying frames";
    return "down";
  }
};

using LinkKey = std::pair<std::string, std::string>;  // a link's ends, in name order

// The diagnosis as JSON; `links` gets what the log says about every link it mentions.
json diagnose(const std::vector<json>& log, std::map<LinkKey, LinkFindings>& links) {
  std::set<std::string> dead;  // chips that died: their links' downs are theirs, not the wires'
  std::map<std::string, int> drops;  // "chip reason" -> count
  json died = json::array();
  std::set<std::string> dead_at_end;  // died, and not restarted since
  for (const auto& e : log) {
    if (e.value("kind", "") == "chip_died") {
      dead.insert(e.value("chip", "?"));
      dead_at_end.insert(e.value("chip", "?"));
      died.push_back({{"chip", e.value("chip", "?")}, {"how", e.value("how", "?")}, {"uptime_s", e.value("uptime_s", 0.0)}});
    }
    if (e.value("kind", "") == "chip_restarted") dead_at_end.erase(e.value("chip", "?"));
  }
  std::map<std::string, std::string> on_fallback;  // by port: why it left its own wire ("": it did not)
  std::set<std::pair<std::string, std::string>> out_of_service;  // links the operator took down
  for (const auto& e : log) {
    const std::string kind = e.value("kind", "");
    if (kind == "dropped") {
      ++drops[e.value("chip", "?") + " " + e.value("reason", "?")];
      continue;
    }
    if (!e.contains("port") || !e.contains("peer")) continue;
    const std::string port = e["port"], peer = e["peer"];
    auto key = std::minmax(port, peer);
    LinkFindings& l = links[{key.first, key.second}];
    l.a = key.first;
    l.b = key.second;
    if (kind == "rates") {
      l.frames_rx += e.value("frames_rx", uint64_t{0});
      l.frames_in += e.value("frames_in", uint64_t{0});
      l.crc_errors += e.value("crc_errors", uint64_t{0});
      l.frames_tx += e.value("frames_tx", uint64_t{0});
      l.retransmits += e.value("retransmits", uint64_t{0});
      continue;
    }
    if (kind == "error_rate") {
      if (e.value("above", false)) ++l.alarms[e.value("rate", "?")];
      continue;
    }
    const std::string peer_chip = peer.substr(0, peer.find('P'));
    if (kind == "link_admin") {  // the operator's doing, not the wire's, until back in service
      if (e.value("down", false)) out_of_service.insert(key);
      else out_of_service.erase(key);
      continue;
    }
    if (out_of_service.count(key) && (kind == "fallback" || kind == "link_down")) continue;
    if (kind == "fallback") {
      const std::string why = e.value("reason", "?");
      // Onto another carrier is the same fallback; but an end that followed its far end and
      // then judged the link itself (it stays on the channel) brings its own evidence.
      const std::string& was = on_fallback[port];
      if (!was.empty() && (was != "peer" || why == "peer")) continue;
      if (why == "peer") ++l.followed;
      else ++l.judged[why];
      on_fallback[port] = why;
    } else if (kind == "returned") {
      ++l.returns;
      on_fallback[port].clear();
    } else if (kind == "link_down" && !dead.count(peer_chip) && !dead.count(e.value("chip", ""))) {
      ++l.downs;
    }
  }
  std::vector<LinkFindings> ranked;
  json retransmitting = json::array();
  for (auto& [key, l] : links) {
    l.off_at_end = !on_fallback[l.a].empty() || !on_fallback[l.b].empty();
    if (l.score() > 0) ranked.push_back(l);
    else if (l.alarm("retransmits") > 0) {
      // Frames lost or late with no CRC error and no down: a lossy wire, or a busy host's
      // timers. Shown, not blamed.
      retransmitting.push_back({{"ends", {l.a, l.b}}, {"retransmits", l.retransmits}, {"frames_tx", l.frames_tx},
                                {"retransmits_per_frame", l.retransmits_per_frame()}, {"alarms", l.alarm("retransmits")}});
    }
  }
  // A receiver's own count of bad frames names its wire: such links come first, most errors
  // per frame first, whatever the timeouts and downs of a cut elsewhere add up to (TNet: the
  // faulty hop is the one whose receiver counts errors). Then by the rest of the evidence.
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    const bool ex = x.receiver_evidence(), ey = y.receiver_evidence();
    if (ex != ey) return ex;
    if (x.crc_per_frame() != y.crc_per_frame()) return x.crc_per_frame() > y.crc_per_frame();
    if (x.score() != y.score()) return x.score() > y.score();
    return x.retransmits_per_frame() > y.retransmits_per_frame();
  });
  json out{{"events", log.size()}, {"links", json::array()}, {"chips_died", died}, {"dead_at_end", dead_at_end}, {"drops", json::array()},
           {"retransmitting", retransmitting}};
  for (const auto& l : ranked) {
    out["links"].push_back({{"ends", {l.a, l.b}}, {"verdict", l.verdict()}, {"fallbacks", l.judged},
                            {"followed", l.followed}, {"returns", l.returns}, {"downs", l.downs},
                            {"on_fallback_at_end", l.off_at_end}, {"score", l.score()},
                            {"frames_rx", l.frames_rx}, {"frames_in", l.frames_in}, {"crc_errors", l.crc_errors}, {"crc_per_frame", l.crc_per_frame()},
                            {"frames_tx", l.frames_tx}, {"retransmits", l.retransmits},
                            {"retransmits_per_frame", l.retransmits_per_frame()}, {"alarms", l.alarms}});
  }
  for (const auto& [where, n] : drops) {
    const size_t sp = where.find(' ');
    out["drops"].push_back({{"chip", where.substr(0, sp)}, {"reason", where.substr(sp + 1)}, {"count", n}});
  }
  return out;
}

void print(const json& d, const std::string& path) {
  fmt::print("event log: {} ({} events)\n", path, d["events"].get<size_t>());
  if (d["links"].empty()) fmt::print("links at fault: none\n");
  else fmt::print("links at fault, most suspect first:\n");
  int rank = 0;
  for (const auto& l : d["links"]) {
    std::string reasons;
    for (const auto& [why, n] : l["fallbacks"].items()) reasons += fmt::format("{}{} x{}", reasons.empty() ? "" : ", ", why, n.get<int>());
    fmt::print("  {}. {} - {}  {}\n     fallbacks: {}; returns: {}; downs: {}{}\n", ++rank, l["ends"][0].get<std::string>(),
               l["ends"][1].get<std::string>(), l["verdict"].get<std::string>(), reasons.empty() ? "none" : reasons,
               l["returns"].get<int>(), l["downs"].get<int>(),
               l["on_fallback_at_end"].get<bool>() ? "; still on the fallback channel at the end" : "");
    if (l["frames_tx"].get<uint64_t>() + l["frames_rx"].get<uint64_t>() > 0) {
      fmt::print("     carried {} frame(s); {} retransmission(s) ({:.3g}% of data frames sent)\n",
                 std::max(l["frames_in"].get<uint64_t>(), l["crc_errors"].get<uint64_t>()), l["retransmits"].get<uint64_t>(),
                 100 * l["retransmits_per_frame"].get<double>());
    }
  }
  for (const auto& l : d["retransmitting"]) {
    fmt::print("retransmission alarms (no CRC errors, no downs: a lossy wire or a busy host): {} - {}, {:.3g}% of {} frame(s) sent again\n",
               l["ends"][0].get<std::string>(), l["ends"][1].get<std::string>(), 100 * l["retransmits_per_frame"].get<double>(),
               l["frames_tx"].get<uint64_t>());
  }
  for (const auto& c : d["chips_died"]) {
    fmt::print("chip died: {} at {:.3f} s ({})\n", c["chip"].get<std::string>(), c["uptime_s"].get<double>(), c["how"].get<std::string>());
  }
  for (const auto& r : d["drops"]) {
    fmt::print("router drops: {} x{} at {}\n", r["reason"].get<std::string>(), r["count"].get<int>(), r["chip"].get<std::string>());
  }
}

// The system the log is about: --system, else the one its job_started line names.
control::System system_of(const std::vector<json>& log, const std::string& given, const std::string& path) {
  std::string file = given;
  for (size_t i = 0; file.empty() && i < log.size() && i < 8; ++i) {
    if (log[i].value("kind", "") == "job_started") file = log[i].value("system", "");
  }
  if (file.empty()) throw Error(fmt::format("{} names no system (no job_started line): give --system FILE", path));
  if (!std::filesystem::exists(file)) throw Error(fmt::format("{} names the system {}, which is gone: give --system FILE", path, file));
  return control::load_system(file);
}

// CRC errors per frame received, as a colour: the scale of the picture's legend.
const char* error_colour(const LinkFindings& l) {
  if (l.frames_in + l.frames_tx + l.crc_errors == 0) return "#c7c7c7";  // the log says nothing it carried
  return viz::error_rate_colour(l.crc_per_frame());
}

// The topo draw picture with every link coloured by its error rate, the links at fault thick
// and numbered by rank, dead chips crossed out.
std::string picture(const control::System& sys, const json& d, const std::map<LinkKey, LinkFindings>& links,
                    const std::string& path) {
  viz::DrawOptions draw;
  std::map<LinkKey, int> rank;
  for (size_t i = 0; i < d["links"].size(); ++i) {
    rank[{d["links"][i]["ends"][0].get<std::string>(), d["links"][i]["ends"][1].get<std::string>()}] = static_cast<int>(i) + 1;
  }
  for (size_t i = 0; i < sys.links.size(); ++i) {
    const std::string x = routing::to_string(sys.links[i].a), y = routing::to_string(sys.links[i].b);
    const LinkKey key = x < y ? LinkKey{x, y} : LinkKey{y, x};
    const auto it = links.find(key);
    if (it == links.end()) {
      viz::LinkPaint none;
      none.colour = "#c7c7c7";
      none.tooltip = key.first + " - " + key.second + ": not in the log";
      draw.links[static_cast<int>(i)] = none;
      continue;
    }
    const LinkFindings& l = it->second;
    viz::LinkPaint paint;
    paint.colour = error_colour(l);
    paint.dashed = l.downs > 0 || l.judged.count("timeouts") || l.judged.count("link_down");
    paint.tooltip = fmt::format("{} - {}: {} frame(s) received, {} CRC error(s) ({:.3g}%); {} retransmission(s) ({:.3g}%)",
                                key.first, key.second, std::max(l.frames_in, l.crc_errors), l.crc_errors, 100 * l.crc_per_frame(),
                                l.retransmits, 100 * l.retransmits_per_frame());
    if (const auto r = rank.find(key); r != rank.end()) {
      paint.width = 5;
      paint.label = fmt::format("#{}", r->second);
      paint.tooltip = fmt::format("#{} at fault: {}; {}", r->second, l.verdict(), paint.tooltip);
    }
    draw.links[static_cast<int>(i)] = paint;
  }
  for (const auto& c : d["dead_at_end"]) {  // a restarted chip is not crossed out
    if (const auto id = routing::parse_chip(c.get<std::string>())) {
      if (const auto v = sys.node(*id)) draw.failures.nodes.insert(*v);
    }
  }
  draw.title_note = fmt::format("diagnosis of {}: {} link(s) at fault, {} chip death(s)",
                                std::filesystem::path(path).filename().string(), d["links"].size(), d["chips_died"].size());
  draw.legend = viz::error_rate_legend();
  draw.legend.insert(draw.legend.end(), {{"#c7c7c7", "no traffic logged"}, {"#555555", "went down or stopped carrying", true}});
  return viz::draw_svg(sys, draw);
}

}  // namespace

void add_diagnose_command(CLI::App& app) {
  auto o = std::make_shared<DiagnoseOptions>();
  auto* cmd = app.add_subcommand("diagnose", "Name the places at fault from an event log: links, chips, routers");
  cmd->add_option("JOB|FILE", o->what, "A job id or an event log file (default: the running system's, else the newest log)");
  cmd->add_option("--dir", o->dir, "Where the logs are (default: $TTEMU_EVENTS_DIR, else $XDG_STATE_HOME/ttemu/events, else ~/.local/state/ttemu/events)");
  cmd->add_flag("--json", o->json, "One JSON object");
  cmd->add_option("--svg", o->svg, "Also draw the system with its links coloured by error rate, the links at fault numbered, to FILE");
  cmd->add_option("--system", o->system, "The system specification to draw (default: the one the log names)");
  cmd->callback([o] {
    const std::string path = find_event_log(o->what, o->dir);
    const std::vector<json> log = read_event_lines(path);
    std::map<LinkKey, LinkFindings> links;
    const json d = diagnose(log, links);
    if (!o->svg.empty()) {
      const std::string svg = picture(system_of(log, o->system, path), d, links, path);
      std::ofstream out(o->svg);
      if (!(out << svg) || !(out.flush())) throw Error(fmt::format("--svg: cannot write {}", o->svg));
    }
    if (o->json) fmt::print("{}\n", d.dump());
    else print(d, path);
  });
}

}  // namespace ttemu::launcher
