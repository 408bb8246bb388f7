// What `ttemu top` shows, without a terminal: one frame computed from two `ttemu status`
// replies taken `interval` apart (rates are their counters' differences), a snapshot (routing
// buffer occupancy per chip) and the newest event lines; rendered as lines of a given width and
// height, or as JSON. No I/O, so that it is tested as it is.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ttemu::viz {

// Wormhole's ethernet line rate per direction (12.5 GB/s): a link's utilisation is its busier
// direction's goodput over this.
inline constexpr double kLineRateBytesPerSecond = 12.5e9;

struct TopLink {
  std::string a, b;        // its ends, MxDyPz
  std::string state;       // "up" when both ends are up, else the worse end's state
  double ab_bytes_s = 0;   // payload bytes per second from a to b (a's bytes_tx)
  double ba_bytes_s = 0;
  double utilisation = 0;  // 0-1: the busier direction over kLineRateBytesPerSecond
  double retransmits_s = 0, crc_errors_s = 0;  // both ends together
  double frames_s = 0;     // frames received without error, both ends together
  uint64_t fallbacks = 0;  // times either end's traffic took a fallback channel, ever
};

struct TopChip {
  std::string name;
  bool alive = true;
  uint64_t buffered = 0;  // packets in its routing buffers now
  double injected_s = 0, delivered_s = 0;
};

struct TopFrame {
  std::string job, system;
  double uptime_s = 0, interval_s = 0;
  int tables_version = 0;
  int chips = 0, chips_alive = 0, links = 0, links_up = 0;
  double fabric_bytes_s = 0;  // over every link direction
  uint64_t router_events = 0;
  std::vector<TopLink> links_by_use;   // busiest first, then by errors, then by name
  std::vector<TopChip> chips_by_load;  // most buffered first, then by name
  std::vector<std::string> events;     // newest last
};

// `before` and `now` are status replies (the same job); `snapshot` a snapshot reply or null;
// `events` event lines in words, newest last.
TopFrame top_frame(const nlohmann::json& before, const nlohmann::json& now, const nlohmann::json& snapshot,
                   std::vector<std::string> events);
nlohmann::json to_json(const TopFrame& f);
// At most `rows` lines of at most `cols` characters: a header, the busiest links, the most
// loaded chips, and as many of the newest events as fit.
std::vector<std::string> render(const TopFrame& f, int cols, int rows);

}  // namespace ttemu::viz
