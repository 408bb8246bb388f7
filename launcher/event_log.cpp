#include "launcher/event_log.hpp"

#include <time.h>

#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "emulator/link/efc.hpp"

#include "emulator/common/error.hpp"
#include "emulator/routing/fabric_router.hpp"
#include "emulator/routing/packet.hpp"

namespace ttemu::launcher {

using nlohmann::json;

std::string default_events_dir() {
  if (const char* d = std::getenv("TTEMU_EVENTS_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/ttemu/events";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/state/ttemu/events";
}

EventLog::EventLog(const std::string& dir, const std::string& job) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("event log directory {}: {}", dir, ec.message()));
  path_ = dir + "/" + job + ".jsonl";
  file_ = std::fopen(path_.c_str(), "a");
  if (!file_) throw Error(fmt::format("event log {}: {}", path_, std::strerror(errno)));
}

EventLog::~EventLog() {
  if (file_) std::fclose(file_);
}

void EventLog::append(const json& event) {
  const std::string line = event_line(event) + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

namespace {

// The UTC time `ago_ns` before now, as 2026-11-23T10:11:12.345Z.
std::string utc_time(int64_t ago_ns = 0) {
  const auto t = std::chrono::system_clock::now() - std::chrono::nanoseconds(ago_ns);
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const time_t secs = static_cast<time_t>(ms / 1000);
  tm parts{};
  gmtime_r(&secs, &parts);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", parts.tm_year + 1900, parts.tm_mon + 1,
                     parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, ms % 1000);
}

}  // namespace

json& stamp(json& event, double uptime_s, std::chrono::nanoseconds ago) {
  event["time"] = utc_time(std::max<int64_t>(0, ago.count()));
  event["uptime_s"] = uptime_s;
  return event;
}

json& stamp_simulated(json& event, std::chrono::nanoseconds at) {
  event["sim_ns"] = at.count();
  event["uptime_s"] = std::chrono::duration<double>(at).count();
  return event;
}

json chip_event(routing::ChipId chip, const char* kind) { return {{"chip", routing::to_string(chip)}, {"kind", kind}}; }

json launcher_event(routing::ChipId chip, const char* kind, double uptime_s) {
  json e = chip_event(chip, kind);
  return stamp(e, uptime_s);
}

std::string reload_summary(const json& e) {
  const bool nothing = e.value("failed_links", json::array()).empty() && e.value("failed_chips", json::array()).empty();
  return fmt::format("routing tables v{} loaded ({}): {}; switch {}", e.value("version", 0), e.value("cause", "?"),
                     nothing ? "nothing to route around" : "around " + e.value("failed", std::string("?")),
                     e.value("switch", "?"));
}

std::string event_line(const json& event) { return event.dump(-1, ' ', false, json::error_handler_t::replace); }

json system_event(const char* kind, double uptime_s) {
  json e{{"kind", kind}};
  return stamp(e, uptime_s);
}

json job_started_event(const control::System& sys, const std::string& system_path) {
  return {{"kind", "job_started"}, {"system", system_path}, {"chips", sys.node_count()}, {"links", sys.links.size()}};
}

bool is_rates(const json& event) {
  const std::string kind = event.value("kind", "");
  return kind == "rates" || kind == "router_rates";
}

json tables_reloaded_event(const control::System& sys, const control::Reload& r, const char* cause) {
  json links = json::array(), chips = json::array();
  for (int i : r.failures.links) {
    const auto& l = sys.links[static_cast<size_t>(i)];
    links.push_back(routing::to_string(l.a) + "-" + routing::to_string(l.b));
  }
  for (int v : r.failures.nodes) chips.push_back(routing::to_string(sys.chips[static_cast<size_t>(v)].id));
  return {{"kind", "tables_reloaded"}, {"version", r.version}, {"cause", cause}, {"failed", r.summary(sys)},
          {"failed_links", links}, {"failed_chips", chips}, {"unreachable_pairs", r.unreachable_pairs()},
          {"switch", r.switch_risk.empty() ? "safe" : r.switch_risk}};
}

std::string drop_summary(const json& e) {
  return fmt::format("{} at {}: {} packet {} from {} to {}", e.value("reason", "?"), e.value("chip", "?"),
                     e.value("command", "?"), e.value("packet_id", 0), e.value("src", "?"), e.value("dst", "?"));
}

namespace {

void add_rates(json& j, const chip::RateFigures& f, bool router) {
  j["interval_s"] = static_cast<double>(f.interval_ns) / 1e9;
  if (router) {
    j["injected"] = f.injected;
    j["delivered"] = f.delivered;
    j["dropped"] = f.dropped;
  }
  j["frames_tx"] = f.frames_tx;
  j["bytes_tx"] = f.bytes_tx;
  j["frames_rx"] = f.frames_rx;
  j["bytes_rx"] = f.bytes_rx;
  j["frames_in"] = f.frames_in;
  j["crc_errors"] = f.crc_errors;
  j["retransmits"] = f.retransmits;
}

void add_alarm(json& j, const chip::StatusEntry& e) {
  const auto a = static_cast<chip::RateAlarm>(e.reason);
  const bool crc = a == chip::RateAlarm::kCrcHigh || a == chip::RateAlarm::kCrcNormal;
  j["rate"] = crc ? "crc_errors" : "retransmits";
  j["above"] = a == chip::RateAlarm::kCrcHigh || a == chip::RateAlarm::kRetransmitHigh;
  j["threshold"] = static_cast<double>(e.figure) / 1e6;
  // Per frame that arrived (any type, good or bad), or per data frame sent (first or again).
  const uint64_t count = crc ? e.rates.crc_errors : e.rates.retransmits;
  const uint64_t frames = crc ? e.rates.frames_in : e.rates.frames_tx + e.rates.retransmits;
  j["count"] = count;
  j["frames"] = frames;
  j["interval_s"] = static_cast<double>(e.rates.interval_ns) / 1e9;
}

}  // namespace

json status_event(const chip::StatusEntry& e, routing::ChipId chip, const control::System& sys) {
  json j{{"chip", routing::to_string(chip)}, {"kind", chip::to_string(e.kind)}};
  if (e.port != 0xFF) {
    j["port"] = routing::to_string(routing::PortId{chip, e.port});
    // The far end, so that a reader of the log (ttemu diagnose) knows the link without the system.
    if (const auto peer = sys.peer({chip, e.port})) j["peer"] = routing::to_string(*peer);
  }
  switch (e.kind) {
    case chip::StatusKind::kDropped: {
      j["reason"] = routing::to_string(static_cast<routing::RouterEvent::Kind>(e.reason));
      j["command"] = routing::to_string(static_cast<routing::Command>(e.command));
      j["packet_id"] = e.packet_id;
      j["src"] = routing::to_string(routing::ChipId{e.src_mesh, e.src_device});
      j["dst"] = routing::to_string(routing::ChipId{e.dst_mesh, e.dst_device});
      j["fvc"] = e.fvc;
      j["ttl"] = e.ttl;
      break;
    }
    case chip::StatusKind::kFallback:
      j["via"] = routing::to_string(routing::PortId{chip, e.via});
      [[fallthrough]];
    case chip::StatusKind::kReturned:
      j["reason"] = link::to_string(static_cast<link::EfcReason>(e.reason));
      break;
    case chip::StatusKind::kPeerRestarted: j["abandoned"] = e.figure; break;
    case chip::StatusKind::kPortRates: add_rates(j, e.rates, false); break;
    case chip::StatusKind::kRouterRates: add_rates(j, e.rates, true); break;
    case chip::StatusKind::kErrorRate: add_alarm(j, e); break;
    case chip::StatusKind::kLinkUp:
    case chip::StatusKind::kLinkDown: break;
  }
  return j;
}

}  // namespace ttemu::launcher
