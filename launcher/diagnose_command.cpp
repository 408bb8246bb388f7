#include "launcher/diagnose_command.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launcher/events_command.hpp"

namespace ttemu::launcher {

using nlohmann::json;

namespace {

struct DiagnoseOptions {
  std::string what, dir;
  bool json = false;
};

// What the log says about one link (both ends).
struct LinkFindings {
  std::string a, b;                        // its ends, in name order
  std::map<std::string, int> judged;       // fallbacks by the reason an end judged itself
  int followed = 0;                        // fallbacks of an end that followed the far end
  int returns = 0, downs = 0;
  bool off_at_end = false;                 // an end was still on the fallback channel
  // How strongly the log points at this link's wire: an error rate is the receiver's own
  // count of bad frames; timeouts and downs say the wire stopped carrying anything.
  int score() const {
    auto n = [&](const char* r) { auto it = judged.find(r); return it == judged.end() ? 0 : it->second; };
    return 10 * n("error_rate") + 5 * (n("timeouts") + n("link_down")) + 3 * downs;
  }
  std::string verdict() const {
    if (judged.count("error_rate")) return "unreliable: its receiver counted errors over the threshold";
    if (!judged.empty()) return "broken: it stopped carrying frames";
    return "down";
  }
};

json diagnose(const std::vector<json>& log) {
  std::set<std::string> dead;  // chips that died: their links' downs are theirs, not the wires'
  std::map<std::string, int> drops;  // "chip reason" -> count
  json died = json::array();
  for (const auto& e : log) {
    if (e.value("kind", "") == "chip_died") {
      dead.insert(e.value("chip", "?"));
      died.push_back({{"chip", e.value("chip", "?")}, {"how", e.value("how", "?")}, {"uptime_s", e.value("uptime_s", 0.0)}});
    }
  }
  std::map<std::pair<std::string, std::string>, LinkFindings> links;
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
  for (auto& [key, l] : links) {
    l.off_at_end = !on_fallback[l.a].empty() || !on_fallback[l.b].empty();
    if (l.score() > 0) ranked.push_back(l);
  }
  // A receiver's own count of bad frames names its wire: such links come first whatever the
  // timeouts and downs of a cut elsewhere add up to (TNet: the faulty hop is the one whose
  // receiver counts errors).
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    const bool ex = x.judged.count("error_rate") > 0, ey = y.judged.count("error_rate") > 0;
    return ex != ey ? ex : x.score() > y.score();
  });
  json out{{"events", log.size()}, {"links", json::array()}, {"chips_died", died}, {"drops", json::array()}};
  for (const auto& l : ranked) {
    out["links"].push_back({{"ends", {l.a, l.b}}, {"verdict", l.verdict()}, {"fallbacks", l.judged},
                            {"followed", l.followed}, {"returns", l.returns}, {"downs", l.downs},
                            {"on_fallback_at_end", l.off_at_end}, {"score", l.score()}});
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
  }
  for (const auto& c : d["chips_died"]) {
    fmt::print("chip died: {} at {:.3f} s ({})\n", c["chip"].get<std::string>(), c["uptime_s"].get<double>(), c["how"].get<std::string>());
  }
  for (const auto& r : d["drops"]) {
    fmt::print("router drops: {} x{} at {}\n", r["reason"].get<std::string>(), r["count"].get<int>(), r["chip"].get<std::string>());
  }
}

}  // namespace

void add_diagnose_command(CLI::App& app) {
  auto o = std::make_shared<DiagnoseOptions>();
  auto* cmd = app.add_subcommand("diagnose", "Name the places at fault from an event log: links, chips, routers");
  cmd->add_option("JOB|FILE", o->what, "A job id or an event log file (default: the running system's, else the newest log)");
  cmd->add_option("--dir", o->dir, "Where the logs are (default: $TTEMU_EVENTS_DIR, else $XDG_STATE_HOME/ttemu/events, else ~/.local/state/ttemu/events)");
  cmd->add_flag("--json", o->json, "One JSON object");
  cmd->callback([o] {
    const std::string path = find_event_log(o->what, o->dir);
    const json d = diagnose(read_event_lines(path));
    if (o->json) fmt::print("{}\n", d.dump());
    else print(d, path);
  });
}

}  // namespace ttemu::launcher
