#include "launcher/events_command.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/complete_lines.hpp"
#include "emulator/common/error.hpp"
#include "launcher/control_client.hpp"
#include "launcher/event_log.hpp"

namespace ttemu::launcher {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct EventsOptions {
  std::string what;  // a file, a job id, or empty
  std::string dir;
  bool json = false, follow = false, rates = false;
};

}  // namespace

std::string find_event_log(const std::string& what, const std::string& dir_option) {
  const std::string dir = dir_option.empty() ? default_events_dir() : dir_option;
  if (!what.empty()) {
    if (fs::is_regular_file(what)) return what;
    const std::string job_log = dir + "/" + what + ".jsonl";
    if (fs::is_regular_file(job_log)) return job_log;
    throw Error(fmt::format("'{}' is neither an event log file nor a job with a log in {}", what, dir));
  }
  try {
    const json s = request(find_control_socket(std::nullopt), {{"cmd", "status"}});
    if (s.contains("event_log") && !s["event_log"].get<std::string>().empty()) return s["event_log"];
  } catch (const Error&) {
    // no running system, or more than one: the newest log instead
  }
  std::error_code ec;
  fs::path newest;
  fs::file_time_type when{};
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".jsonl" && (newest.empty() || entry.last_write_time() > when)) {
      newest = entry.path();
      when = entry.last_write_time();
    }
  }
  if (newest.empty()) throw Error(fmt::format("no event logs in {} (ttemu launch --events-dir DIR chooses one)", dir));
  return newest.string();
}

std::vector<json> read_event_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot read {}", path));
  std::vector<json> out;
  size_t n = 0;
  read_complete_lines(in, [&](const std::string& line) {  // a live log's half-written line waits
    ++n;
    if (line.empty()) return;
    json e = json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object()) {
      fmt::print(stderr, "ttemu: {}:{}: not a JSON object, skipped\n", path, n);
      return;
    }
    out.push_back(std::move(e));
  });
  return out;
}

std::string event_text(const json& e) {
  const std::string kind = e.value("kind", "?");
  std::string what;
  if (kind == "dropped") {
    what = fmt::format("{} packet {} from {} to {} dropped: {} (FVC {}, ttl {})", e.value("command", "?"),
                       e.value("packet_id", 0), e.value("src", "?"), e.value("dst", "?"), e.value("reason", "?"),
                       e.value("fvc", 0), e.value("ttl", 0));
  } else if (kind == "link_up" || kind == "link_down") {
    what = fmt::format("link {} {}", e.value("port", "?"), kind == "link_up" ? "up" : "down");
  } else if (kind == "chip_died") {
    what = e.contains("pid") ? fmt::format("chip died (pid {}): {}", e.value("pid", 0), e.value("how", "?"))
                             : fmt::format("chip died: {}", e.value("how", "?"));
  } else if (kind == "fallback") {
    what = fmt::format("link {} travels {}'s wire (the fallback channel): {}", e.value("port", "?"), e.value("via", "?"),
                       e.value("reason", "?"));
  } else if (kind == "returned") {
    what = fmt::format("link {} is back on its own wire: {}", e.value("port", "?"), e.value("reason", "?"));
  } else if (kind == "peer_restarted") {
    what = fmt::format("link {}: the far end restarted; {} payload(s) of the old session reported", e.value("port", "?"),
                       e.value("abandoned", 0));
  } else if (kind == "tables_reloaded") {
    what = reload_summary(e);
  } else if (kind == "chip_killed" || kind == "chip_restarted") {
    what = kind == "chip_killed"  ? "killed by the operator"
           : e.contains("pid")    ? fmt::format("restarted (pid {})", e.value("pid", 0))
                                  : "restarted";
  } else if (kind == "link_admin") {
    what = fmt::format("link {}-{} {}", e.value("port", "?"), e.value("peer", "?"),
                       e.value("down", false) ? "out of service" : "back in service");
  } else if (kind == "injection") {
    what = e.value("paused", false) ? "workers' injection paused" : "workers' injection resumed";
  } else if (kind == "rates" || kind == "router_rates") {
    const double s = std::max(e.value("interval_s", 0.0), 1e-9);
    auto gb = [&](const char* bytes) { return static_cast<double>(e.value(bytes, uint64_t{0})) / s / 1e9; };
    const std::string links = fmt::format("tx {:.3f} GB/s ({} frames), rx {:.3f} GB/s ({} frames); {} CRC error(s), {} retransmission(s)",
                                          gb("bytes_tx"), e.value("frames_tx", 0), gb("bytes_rx"), e.value("frames_rx", 0),
                                          e.value("crc_errors", 0), e.value("retransmits", 0));
    what = kind == "rates" ? fmt::format("link {}: {} over {:.3f} s", e.value("port", "?"), links, s)
                           : fmt::format("router: {} packet(s) from workers, {} delivered here, {} dropped; its links {} over {:.3f} s",
                                         e.value("injected", 0), e.value("delivered", 0), e.value("dropped", 0), links, s);
  } else if (kind == "error_rate") {
    const bool crc = e.value("rate", "") == "crc_errors";
    const double frames = std::max(1.0, static_cast<double>(e.value("frames", uint64_t{0})));
    what = fmt::format("link {}: {} {:.2f}% of {} frame(s) {} over {:.3f} s: {} the alarm at {:.2f}%", e.value("port", "?"),
                       crc ? "CRC errors" : "retransmissions", 100.0 * e.value("count", 0.0) / frames, e.value("frames", 0),
                       crc ? "received" : "sent", e.value("interval_s", 0.0),
                       e.value("above", false) ? "above" : "back to half of", 100.0 * e.value("threshold", 0.0));
  } else if (kind == "job_started") {
    what = fmt::format("{} started: {} ({} chips, {} links)", e.contains("job") ? "job " + e.value("job", "?") : "the simulation",
                       e.value("system", "?"), e.value("chips", 0), e.value("links", 0));
  } else if (kind == "status_lost") {
    what = fmt::format("{} status message(s) lost: the queue was full", e.value("lost", 0));
  } else {
    what = e.dump();
  }
  // A simulated run's lines have no wall time (ttemu sim --events): their times are simulated.
  return fmt::format("{:<24}  {:>9.3f} s  {:<6} {:<12} {}", e.value("time", "simulated"), e.value("uptime_s", 0.0),
                     e.value("chip", ""), kind, what);
}

namespace {

// Prints the complete lines from `in`.
void print_lines(std::istream& in, const EventsOptions& o, const std::string& path, size_t& line_no) {
  read_complete_lines(in, [&](const std::string& line) {
    ++line_no;
    if (line.empty()) return;
    if (o.json && o.rates) {
      fmt::print("{}\n", line);
      return;
    }
    const json e = json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object()) {
      fmt::print(stderr, "ttemu events: {}:{}: not a JSON object, skipped\n", path, line_no);
      return;
    }
    if (!o.rates && is_rates(e)) return;
    if (o.json) fmt::print("{}\n", line);
    else fmt::print("{}\n", event_text(e));
  });
  std::fflush(stdout);
}

void show(const EventsOptions& o) {
  const std::string path = find_event_log(o.what, o.dir);
  std::ifstream in(path);
  if (!in && o.what.empty()) {
    // A multi-host launch writes its log on the control plane's host: from another host, ask it.
    const json r = request(find_control_socket(std::nullopt), {{"cmd", "events_log"}});
    if (o.follow) throw Error(fmt::format("the event log is on the control plane's host ({}): follow it there", r.value("host", "?")));
    std::istringstream text(r.at("text").get<std::string>());
    size_t line_no = 0;
    print_lines(text, o, path, line_no);
    return;
  }
  if (!in) throw Error(fmt::format("cannot read {}", path));
  size_t line_no = 0;
  print_lines(in, o, path, line_no);
  if (!o.follow) return;
  const int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, path.c_str(), IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF) < 0) {
    if (fd >= 0) ::close(fd);
    throw Error(fmt::format("cannot follow {}", path));
  }
  alignas(inotify_event) char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);  // sleeps until the log grows (Ctrl-C ends it)
    if (n <= 0) break;
    bool gone = false;
    for (ssize_t at = 0; at < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + at);
      gone |= (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0;
      at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
    print_lines(in, o, path, line_no);
    if (gone) break;
  }
  ::close(fd);
}

}  // namespace

void add_events_command(CLI::App& app) {
  auto o = std::make_shared<EventsOptions>();
  auto* events = app.add_subcommand("events", "Show an event log: what the chips' status queues reported");
  events->add_option("JOB|FILE", o->what,
                     "A job id or an event log file (default: the running system's, else the newest log)");
  events->add_option("--dir", o->dir, "Where the logs are (default: $TTEMU_EVENTS_DIR, else $XDG_STATE_HOME/ttemu/events, else ~/.local/state/ttemu/events)");
  events->add_flag("--json", o->json, "Print the log's JSON lines as they are (the rate lines only with --rates)");
  events->add_flag("--follow,-f", o->follow, "Keep printing as the log grows (Ctrl-C ends)");
  events->add_flag("--rates", o->rates, "Show the chips' periodic rate lines too (rates per port and router)");
  events->callback([o] { show(*o); });
}

}  // namespace ttemu::launcher
