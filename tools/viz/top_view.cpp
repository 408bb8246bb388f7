#include "tools/viz/top_view.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace ttemu::viz {

using nlohmann::json;

namespace {

uint64_t counter(const json& end, const char* name) {
  const auto c = end.find("counters");
  return c == end.end() ? 0 : c->value(name, uint64_t{0});
}

// A reply's array `key` (an empty one if it has none), by reference: pointers into it stay good.
const json& array_of(const json& reply, const char* key) {
  static const json empty = json::array();
  const auto it = reply.is_object() ? reply.find(key) : reply.end();
  return it != reply.end() && it->is_array() ? *it : empty;
}

// The same end's counter in `before`, by port name (0 if it was not there: a new chip process).
using EndCounters = std::map<std::string, const json*>;

EndCounters ends_of(const json& status) {
  EndCounters out;
  for (const auto& l : array_of(status, "links")) {
    for (const auto& e : l["ends"]) out[e.value("port", "")] = &e;
  }
  return out;
}

double rate(const json& end, const EndCounters& before, const char* name, double seconds) {
  const uint64_t now = counter(end, name);
  const auto it = before.find(end.value("port", ""));
  const uint64_t then = it == before.end() ? 0 : counter(*it->second, name);
  return seconds > 0 && now >= then ? static_cast<double>(now - then) / seconds : 0.0;
}

std::string fit(std::string s, size_t cols) {
  if (s.size() > cols) s.resize(cols);
  return s;
}

std::string bar(double share, int width) {
  const int n = std::clamp(static_cast<int>(share * width + 0.5), share > 0 ? 1 : 0, width);
  return std::string(static_cast<size_t>(n), '#') + std::string(static_cast<size_t>(width - n), '.');
}

}  // namespace

TopFrame top_frame(const json& before, const json& now, const json& snapshot, std::vector<std::string> events) {
  TopFrame f;
  f.job = now.value("job", "");
  f.system = now.value("system", "");
  f.uptime_s = now.value("uptime_s", 0.0);
  f.interval_s = std::max(0.0, f.uptime_s - before.value("uptime_s", f.uptime_s));
  f.tables_version = now.value("tables_version", 0);
  const EndCounters then = ends_of(before);
  std::map<std::string, TopChip> chips;
  std::map<std::string, const json*> chips_before;
  for (const auto& c : array_of(before, "chips")) chips_before[c.value("name", "")] = &c;
  for (const auto& c : array_of(now, "chips")) {
    TopChip t;
    t.name = c.value("name", "");
    t.alive = c.value("alive", false);
    f.router_events += c.value("router_events", uint64_t{0});
    if (const auto b = chips_before.find(t.name); b != chips_before.end() && f.interval_s > 0) {
      auto per_s = [&](const char* k) {
        const uint64_t x = c.value(k, uint64_t{0}), y = b->second->value(k, uint64_t{0});
        return x >= y ? static_cast<double>(x - y) / f.interval_s : 0.0;
      };
      t.injected_s = per_s("packets_injected");
      t.delivered_s = per_s("packets_delivered");
    }
    ++f.chips;
    f.chips_alive += t.alive;
    chips[t.name] = std::move(t);
  }
  for (const auto& c : array_of(snapshot, "chips")) {
    const auto it = chips.find(c.value("chip", ""));
    if (it == chips.end()) continue;
    for (const auto& b : array_of(c, "buffers")) it->second.buffered += b.value("packets", uint64_t{0});
  }
  for (const auto& l : array_of(now, "links")) {
    const json& a = l["ends"][0];
    const json& b = l["ends"][1];
    TopLink t;
    t.a = l.value("a", "");
    t.b = l.value("b", "");
    const std::string sa = a.value("state", "?"), sb = b.value("state", "?");
    t.state = sa == "up" && sb == "up" ? "up" : sa != "up" ? sa : sb;
    t.ab_bytes_s = rate(a, then, "bytes_tx", f.interval_s);
    t.ba_bytes_s = rate(b, then, "bytes_tx", f.interval_s);
    t.utilisation = std::min(1.0, std::max(t.ab_bytes_s, t.ba_bytes_s) / kLineRateBytesPerSecond);
    for (const json* e : {&a, &b}) {
      t.retransmits_s += rate(*e, then, "retransmits", f.interval_s);
      t.crc_errors_s += rate(*e, then, "crc_errors", f.interval_s);
      t.frames_s += rate(*e, then, "frames_rx", f.interval_s);
      t.fallbacks += counter(*e, "fallbacks");
    }
    ++f.links;
    f.links_up += t.state == "up";
    f.fabric_bytes_s += t.ab_bytes_s + t.ba_bytes_s;
    f.links_by_use.push_back(std::move(t));
  }
  std::stable_sort(f.links_by_use.begin(), f.links_by_use.end(), [](const TopLink& x, const TopLink& y) {
    const double ex = x.retransmits_s + x.crc_errors_s, ey = y.retransmits_s + y.crc_errors_s;
    if (x.utilisation != y.utilisation) return x.utilisation > y.utilisation;
    if (ex != ey) return ex > ey;
    return x.a < y.a;
  });
  for (auto& [name, c] : chips) f.chips_by_load.push_back(std::move(c));
  std::stable_sort(f.chips_by_load.begin(), f.chips_by_load.end(), [](const TopChip& x, const TopChip& y) {
    if (x.buffered != y.buffered) return x.buffered > y.buffered;
    return x.injected_s + x.delivered_s > y.injected_s + y.delivered_s;
  });
  f.events = std::move(events);
  return f;
}

json to_json(const TopFrame& f) {
  json links = json::array(), chips = json::array();
  for (const auto& l : f.links_by_use) {
    links.push_back({{"a", l.a}, {"b", l.b}, {"state", l.state}, {"ab_bytes_per_s", l.ab_bytes_s}, {"ba_bytes_per_s", l.ba_bytes_s},
                     {"utilisation", l.utilisation}, {"retransmits_per_s", l.retransmits_s}, {"crc_errors_per_s", l.crc_errors_s},
                     {"fallbacks", l.fallbacks}});
  }
  for (const auto& c : f.chips_by_load) {
    chips.push_back({{"chip", c.name}, {"alive", c.alive}, {"buffered_packets", c.buffered},
                     {"injected_per_s", c.injected_s}, {"delivered_per_s", c.delivered_s}});
  }
  return {{"job", f.job}, {"system", f.system}, {"uptime_s", f.uptime_s}, {"interval_s", f.interval_s},
          {"tables_version", f.tables_version}, {"chips", f.chips}, {"chips_alive", f.chips_alive}, {"links", f.links},
          {"links_up", f.links_up}, {"fabric_bytes_per_s", f.fabric_bytes_s}, {"router_events", f.router_events},
          {"link_rows", links}, {"chip_rows", chips}, {"events", f.events}};
}

std::vector<std::string> render(const TopFrame& f, int cols, int rows) {
  const auto width = static_cast<size_t>(std::max(cols, 20));
  std::vector<std::string> out;
  auto line = [&](std::string s) {
    if (static_cast<int>(out.size()) < rows) out.push_back(fit(std::move(s), width));
  };
  line(fmt::format("ttemu top  job {}  {}  up {:.1f} s  tables v{}   (q quits)", f.job, f.system, f.uptime_s, f.tables_version));
  line(fmt::format("chips {}/{} running  links {}/{} up  fabric {:.3f} GB/s  router events {}", f.chips_alive, f.chips,
                   f.links_up, f.links, f.fabric_bytes_s / 1e9, f.router_events));
  line("");
  // Links, then chips, then events share what is left; events get at least a few lines.
  const int left = rows - static_cast<int>(out.size());
  const int event_rows = std::min(static_cast<int>(f.events.size()) + 2, std::max(3, left / 4));
  const int chip_rows = std::min(static_cast<int>(f.chips_by_load.size()) + 2, std::max(3, left / 4));
  const int link_rows = std::max(2, left - event_rows - chip_rows);
  line(fmt::format("{:<10} {:<10} {:<9} {:>10} {:>10}  {:<10} {:>9} {:>7} {:>5}", "link", "peer", "state", "a>b MB/s",
                   "b>a MB/s", "use", "retrans/s", "crc/s", "efc"));
  for (int i = 0; i + 1 < link_rows && i < static_cast<int>(f.links_by_use.size()); ++i) {
    const TopLink& l = f.links_by_use[static_cast<size_t>(i)];
    line(fmt::format("{:<10} {:<10} {:<9} {:>10.1f} {:>10.1f}  {} {:>9.0f} {:>7.0f} {:>5}", l.a, l.b, l.state, l.ab_bytes_s / 1e6,
                     l.ba_bytes_s / 1e6, bar(l.utilisation, 10), l.retransmits_s, l.crc_errors_s, l.fallbacks));
  }
  line("");
  line(fmt::format("{:<8} {:<6} {:>9} {:>12} {:>12}", "chip", "alive", "buffered", "injected/s", "delivered/s"));
  for (int i = 0; i + 2 < chip_rows && i < static_cast<int>(f.chips_by_load.size()); ++i) {
    const TopChip& c = f.chips_by_load[static_cast<size_t>(i)];
    line(fmt::format("{:<8} {:<6} {:>9} {:>12.0f} {:>12.0f}", c.name, c.alive ? "yes" : "DEAD", c.buffered, c.injected_s, c.delivered_s));
  }
  line("");
  line("events (newest last)");
  const int shown = std::max(0, std::min(static_cast<int>(f.events.size()), rows - static_cast<int>(out.size())));
  for (size_t i = f.events.size() - static_cast<size_t>(shown); i < f.events.size(); ++i) line(f.events[i]);
  return out;
}

}  // namespace ttemu::viz
