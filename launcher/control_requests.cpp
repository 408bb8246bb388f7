#include "launcher/control_requests.hpp"

#include <initializer_list>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::launcher {

using nlohmann::json;

namespace {

// A value as an error message shows it: its JSON text, shortened. Lists and objects only by
// kind: dump() recurses, and a request may nest a million levels deep.
std::string shown(const json& v) {
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

const json* field(const json& req, const char* name) {
  auto it = req.find(name);
  return it == req.end() ? nullptr : &*it;
}

std::string string_field(const json& req, const char* name, std::optional<std::string> fallback = std::nullopt) {
  const json* v = field(req, name);
  if (!v) {
    if (fallback) return *fallback;
    throw Error(fmt::format("{} is missing", name));
  }
  if (!v->is_string()) throw Error(fmt::format("{} must be a string, not {}", name, shown(*v)));
  return v->get<std::string>();
}

bool bool_field(const json& req, const char* name, bool fallback) {
  const json* v = field(req, name);
  if (!v) return fallback;
  if (!v->is_boolean()) throw Error(fmt::format("{} must be true or false, not {}", name, shown(*v)));
  return v->get<bool>();
}

// A list of names (at most 4096; absent: none); `what` says what it holds, for the error.
std::vector<std::string> string_list_field(const json& req, const char* name, const char* what) {
  std::vector<std::string> out;
  const json* f = field(req, name);
  if (!f) return out;
  if (!f->is_array() || f->size() > 4096) throw Error(fmt::format("{} must be {}, not {}", name, what, shown(*f)));
  for (const auto& item : *f) {
    if (!item.is_string()) throw Error(fmt::format("{}: {} is not a name", name, shown(item)));
    out.push_back(item.get<std::string>());
  }
  return out;
}

// A misspelt field would otherwise be ignored, and its default used without a word.
void only_fields(const json& req, const std::string& cmd, std::initializer_list<const char*> known) {
  for (const auto& item : req.items()) {
    if (item.key() == "cmd") continue;
    bool ok = false;
    std::string list = "cmd";
    for (const char* k : known) {
      ok = ok || item.key() == k;
      list += fmt::format(", {}", k);
    }
    if (!ok) throw Error(fmt::format("unknown field '{}' in a {} request ({})", printable(item.key()), cmd, list));
  }
}

// Requests that act on the fabric wait for every link to come up; until then only status.
void require_ready(const ControlTarget& target) {
  if (!target.ready()) throw Error("the system is still coming up");
}

LinkTestRequest link_test_request(const json& req, bool ping) {
  if (ping) only_fields(req, "ping", {"link", "count", "size", "timeout_s"});
  else only_fields(req, "stream", {"link", "frames", "size", "timeout_s"});
  LinkTestRequest t;
  t.ping = ping;
  t.link = string_field(req, "link");
  t.count = static_cast<uint64_t>(ping ? int_field(req, "count", 1, kMaxPingCount, 1000)
                                       : int_field(req, "frames", 1, kMaxStreamFrames, 10000));
  t.size = static_cast<uint32_t>(int_field(req, "size", kMinTestPayload, kMaxTestPayload, ping ? 64 : 4096));
  t.timeout_s = static_cast<int>(int_field(req, "timeout_s", 1, kMaxTestSeconds, kDefaultTestSeconds));
  return t;
}

// The reply to send now, or nothing when the target answers later through `later`; sets
// `stop` for a stop request (acted on once the reply is out).
std::optional<json> respond(std::string_view line, ControlTarget& target, const ControlTarget::Reply& later, bool& stop) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  json req;
  try {
    req = json::parse(line);
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at ...": the part after the tag, bounded
    // (it quotes the last token, which may be long).
    std::string what = e.what();
    if (auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    if (what.size() > 200) what = what.substr(0, 197) + "...";
    throw Error("the request is not valid JSON: " + what);
  }
  if (!req.is_object()) throw Error(fmt::format("a request is a JSON object like {{\"cmd\": \"status\"}}, not {}", shown(req)));
  const std::string cmd = string_field(req, "cmd");
  if (cmd == "status") {
    only_fields(req, cmd, {});
    target.status(later);
    return std::nullopt;
  }
  if (cmd == "events_log") {
    only_fields(req, cmd, {});
    return target.event_log();
  }
  if (cmd == "faults") {
    only_fields(req, cmd, {"plan", "source", "from_now"});
    const std::string plan = string_field(req, "plan");
    const std::string source = string_field(req, "source", "plan");
    const bool from_now = bool_field(req, "from_now", false);
    require_ready(target);
    return target.apply_faults(plan, source, from_now);
  }
  if (cmd == "stream" || cmd == "ping") {
    LinkTestRequest t = link_test_request(req, cmd == "ping");
    require_ready(target);
    target.link_test(t, later);
    return std::nullopt;
  }
  if (cmd == "snapshot") {
    only_fields(req, cmd, {});
    require_ready(target);
    target.snapshot(later);
    return std::nullopt;
  }
  if (cmd == "capture") {
    only_fields(req, cmd, {"sink", "stop", "links"});
    CaptureRequest c;
    c.sink = string_field(req, "sink");
    if (c.sink.empty() || c.sink.size() > 100) throw Error(fmt::format("sink '{}' is not a capture sink's name", printable(c.sink)));
    c.stop = bool_field(req, "stop", false);
    c.links = string_list_field(req, "links", "a list of ports");
    require_ready(target);
    target.capture(c, later);
    return std::nullopt;
  }
  if (cmd == "deliveries") {
    only_fields(req, cmd, {"record"});
    const bool record = bool_field(req, "record", true);
    require_ready(target);
    target.deliveries(record, later);
    return std::nullopt;
  }
  if (cmd == "stall") {
    only_fields(req, cmd, {"chip", "fvc", "stalled"});
    const std::string chip = string_field(req, "chip");
    const int fvc = static_cast<int>(int_field(req, "fvc", 0, target.data_fvcs()));
    const bool stalled = bool_field(req, "stalled", true);
    require_ready(target);
    target.stall(chip, fvc, stalled);
    return json{{"ok", true}};
  }
  if (cmd == "tables") {
    only_fields(req, cmd, {"fail"});
    const std::vector<std::string> fail = string_list_field(req, "fail", "a list of chips and ports");
    require_ready(target);
    return target.reload_tables(fail);
  }
  if (cmd == "link_admin") {
    only_fields(req, cmd, {"port", "down"});
    const std::string port = string_field(req, "port");
    const bool down = bool_field(req, "down", true);
    require_ready(target);
    return target.admin_link(port, down);
  }
  if (cmd == "chip") {
    only_fields(req, cmd, {"chip", "action"});
    const std::string chip = string_field(req, "chip");
    const std::string action = string_field(req, "action");
    if (action != "kill" && action != "restart") throw Error(fmt::format("action '{}' is neither kill nor restart", printable(action)));
    require_ready(target);
    return target.chip_action(chip, action == "restart");
  }
  if (cmd == "injection") {
    only_fields(req, cmd, {"paused"});
    const bool paused = bool_field(req, "paused", true);
    require_ready(target);
    return target.pause_injection(paused);
  }
  if (cmd == "stop") {
    only_fields(req, cmd, {});
    require_ready(target);
    stop = true;
    return json{{"ok", true}};
  }
  throw Error(fmt::format("unknown cmd '{}' (status, events_log, faults, stream, ping, snapshot, capture, deliveries, stall, tables, link_admin, chip, injection, stop)", printable(cmd)));
}

}  // namespace

std::string printable(std::string_view text) {
  std::string s = json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  s = s.substr(1, s.size() - 2);  // without the quotes
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

int64_t int_field(const json& req, const char* name, int64_t lo, int64_t hi, std::optional<int64_t> fallback) {
  const json* v = field(req, name);
  if (!v) {
    if (fallback) return *fallback;
    throw Error(fmt::format("{} is missing (a whole number {}-{})", name, lo, hi));
  }
  bool in_range = false;
  int64_t value = 0;
  if (v->is_number_unsigned()) {  // 0 and up, possibly beyond int64
    const uint64_t u = v->get<uint64_t>();
    in_range = hi >= 0 && u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
    value = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    value = v->get<int64_t>();
    in_range = value >= lo && value <= hi;
  } else {
    throw Error(fmt::format("{} must be a whole number {}-{}, not {}", name, lo, hi, shown(*v)));
  }
  if (!in_range) throw Error(fmt::format("{} {} is out of range ({}-{})", name, v->dump(), lo, hi));
  return value;
}

std::string reply_line(const json& reply) {
  try {
    return reply.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  } catch (...) {  // not expected (replace covers bad UTF-8); a reply must still go out
    return "{\"error\":\"the reply could not be written\"}\n";
  }
}

void handle_request(std::string_view line, ControlTarget& target, const std::function<void(const std::string&)>& answer) {
  ControlTarget::Reply later = [answer](const json& r) { answer(reply_line(r)); };
  std::optional<json> now;
  bool stop = false;
  try {
    now = respond(line, target, later, stop);
  } catch (const std::exception& e) {
    now = json{{"error", e.what()}};
  } catch (...) {
    now = json{{"error", "the request failed"}};
  }
  if (now) answer(reply_line(*now));
  if (stop) target.stop();
}

}  // namespace ttemu::launcher
