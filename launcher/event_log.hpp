// The control plane's event log (spec 1.1.2.1): every status message the chips push into their
// status queues, and what the launcher sees itself (a chip that died, a lost entry count), one
// JSON object per line, in one file per job that is kept after the job ends.
//
// Each line has "time" (UTC, ISO 8601 with milliseconds; ttemu sim writes "sim_ns" instead),
// "uptime_s" (since the launch, or simulated),
// "chip" (MxDy, but for lines about the whole system), "kind", and the fields of its kind.
// The first line, about the whole system: "job_started" ("system", "chips", "links"; the
// launcher's adds "job" and "transport", ttemu sim's "seed").
// From the chips' status queues, each about a port ("port" MxDyPz, and "peer", its far end):
// "link_up", "link_down"; "fallback" ("via", "reason") and "returned" ("reason");
// "peer_restarted" ("abandoned"); "dropped" ("reason", "command", "packet_id", "src",
// "dst", "fvc", "ttl"); while traffic flows, at a fixed interval, "rates" ("interval_s",
// "frames_tx", "bytes_tx", "frames_rx", "bytes_rx", "frames_in", "crc_errors", "retransmits") and, about
// the chip's router, "router_rates" (the same summed over its ports, and "injected",
// "delivered", "dropped" packets); and "error_rate" ("rate": crc_errors or retransmits,
// "above", "threshold", "count", "frames", "interval_s") when a rate crosses its alarm
// threshold. The launcher's own: "status_lost" ("lost": entries a full queue
// overwrote); "chip_died" ("pid", "how"); "chip_killed"; "chip_restarted" ("pid");
// "link_admin" ("port", "peer", "down", and "at_restart": ends that take it when their chip
// restarts); and, about the whole system, "tables_reloaded"
// ("version", "cause", "failed", "failed_links", "failed_chips", "unreachable_pairs",
// "switch") and "injection" ("paused"). docs/architecture.md ("The status queue") describes the path.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "emulator/chip/status_queue.hpp"
#include "emulator/control/live_routes.hpp"
#include "emulator/control/system.hpp"
#include "emulator/routing/address.hpp"

namespace ttemu::launcher {

// $TTEMU_EVENTS_DIR, else $XDG_STATE_HOME/ttemu/events, else ~/.local/state/ttemu/events.
std::string default_events_dir();

class EventLog {
 public:
  // Creates the directory if needed and the job's file; throws Error naming what failed.
  EventLog(const std::string& dir, const std::string& job);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  const std::string& path() const { return path_; }
  // One line, written through (a kill of the launcher loses nothing already appended).
  void append(const nlohmann::json& event);

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// An entry from a chip's status queue as a log line, without its time: the chip, the kind, the
// port and its far end, the figures of the kind.
nlohmann::json status_event(const chip::StatusEntry& e, routing::ChipId chip, const control::System& sys);
// The first line: which system (its specification's absolute path, for ttemu diagnose --svg),
// without the time.
nlohmann::json job_started_event(const control::System& sys, const std::string& system_path);
// A line of the chips' periodic figures ("rates", "router_rates"), not an event as such:
// views of the log leave them out unless asked.
bool is_rates(const nlohmann::json& event);
// New routing tables in force, without the time.
nlohmann::json tables_reloaded_event(const control::System& sys, const control::Reload& r, const char* cause);
// A line's time, from the launcher: "time" (UTC, `ago` before now) and "uptime_s" (since the
// launch).
nlohmann::json& stamp(nlohmann::json& event, double uptime_s, std::chrono::nanoseconds ago = {});
// A line's time in the simulator (ttemu sim): "sim_ns" and "uptime_s", simulated; no wall time,
// so that one seed gives one log, byte for byte.
nlohmann::json& stamp_simulated(nlohmann::json& event, std::chrono::nanoseconds at);
// A line about one chip (a chip that died, lost entries), without its time: the chip, the kind.
nlohmann::json chip_event(routing::ChipId chip, const char* kind);
// The same, from the launcher, stamped now.
nlohmann::json launcher_event(routing::ChipId chip, const char* kind, double uptime_s);
// A line about the whole system (tables reloaded, injection paused): the time and the kind.
nlohmann::json system_event(const char* kind, double uptime_s);
// A tables_reloaded line in words: "routing tables vN loaded (CAUSE): around WHAT; switch S".
std::string reload_summary(const nlohmann::json& reloaded);
// One line of the log file, as written (invalid UTF-8 replaced).
std::string event_line(const nlohmann::json& event);
// A dropped packet's line: "REASON at CHIP: COMMAND packet ID from SRC to DST".
std::string drop_summary(const nlohmann::json& dropped);

}  // namespace ttemu::launcher
