#include "tools/campaign/verdict.hpp"

#include <map>
#include <set>

#include <fmt/format.h>

#include "emulator/routing/address.hpp"
#include "emulator/routing/fabric_router.hpp"

namespace ttemu::tools {

using nlohmann::json;

namespace {

Verdict fail(const char* invariant, std::string reason) { return {false, invariant, std::move(reason)}; }

bool logged(const std::vector<json>& events, const char* kind) {
  for (const auto& e : events) {
    if (e.value("kind", "") == kind) return true;
  }
  return false;
}

// The unreachable pairs of the last tables the control plane loaded.
double unreachable_pairs(const std::vector<json>& events) {
  double pairs = 0;
  for (const auto& e : events) {
    if (e.value("kind", "") == "tables_reloaded") pairs = e.value("unreachable_pairs", 0.0);
  }
  return pairs;
}

// The chip a stall or loop names after its colon (CHIP:FVC@..., CHIP:DEST@...), or before it.
std::string named(const std::string& text, bool after) {
  const auto colon = text.find(':');
  std::string name = after ? text.substr(colon + 1, text.find('@') - colon - 1) : text.substr(0, colon);
  const auto id = routing::parse_chip(name);  // as the event log spells it
  return id ? routing::to_string(*id) : name;
}

// A stall's or a loop's window, in milliseconds (the campaign file's reader checked the form).
double window_ms(const std::string& text) {
  const auto at = text.find('@'), dash = text.find('-', at);
  return std::stod(text.substr(dash + 1)) - std::stod(text.substr(at + 1, dash - at - 1));
}

double router_timeout_ms() { return std::chrono::duration<double, std::milli>(routing::RouterConfig{}.timeout).count(); }

// Spec 5.4: TTL runs out only in a forwarding loop, for the loop's destinations. A loop may
// also fill its routers' buffers in a cycle (credits never return): then the timeout of spec
// 5.5 drops what waits. A loop that lasts longer than that timeout must have been caught by
// one or the other.
Verdict ttl_verdict(const Scenario& s, const std::vector<json>& events) {
  std::set<std::string> loop_dests;
  for (const auto& l : s.loops) loop_dests.insert(named(l, true));
  std::map<std::string, int> caught;  // drops of packets for a loop's destination, by it
  for (const auto& e : events) {
    if (e.value("kind", "") != "dropped") continue;
    const std::string reason = e.value("reason", ""), dst = e.value("dst", "");
    if (reason == "ttl_expired" && !loop_dests.count(dst)) {
      return fail("ttl_loops_dropped", fmt::format("TTL ran out at {} for a packet from {} to {}, where no loop was made",
                                                   e.value("chip", "?"), e.value("src", "?"), dst));
    }
    if (reason == "ttl_expired" || reason == "timeout") ++caught[dst];
  }
  for (const auto& l : s.loops) {
    if (window_ms(l) > router_timeout_ms() && caught[named(l, true)] == 0) {
      return fail("ttl_loops_dropped", fmt::format("a forwarding loop for {} lasted {:.0f} ms, and neither TTL nor the timeout dropped a packet",
                                                   named(l, true), window_ms(l)));
    }
  }
  return {};
}

// Spec 5.5: a consumer stalled for longer than the routers' timeout has packets dropped by it.
Verdict timeout_verdict(const Scenario& s, const std::vector<json>& events) {
  int timed_out = 0;
  for (const auto& e : events) timed_out += e.value("kind", "") == "dropped" && e.value("reason", "") == "timeout";
  for (const auto& st : s.stalls) {
    if (window_ms(st) > router_timeout_ms() && timed_out == 0) {
      return fail("timeouts_detected",
                  fmt::format("{} stopped consuming for {:.0f} ms, longer than the routers' timeout ({:.0f} ms), and no packet timed out",
                              named(st, false), window_ms(st), router_timeout_ms()));
    }
  }
  return {};
}

}  // namespace

Verdict judge(const Scenario& s, int retry, int exit_status, bool timed_out, const std::vector<json>& results,
              const std::vector<json>& events, const std::string& stderr_text, const std::vector<std::string>& left_behind) {
  if (timed_out) return fail("bounded", "the run did not finish within its bound (a hang)");
  if (!left_behind.empty()) {
    return fail("nothing_left_behind", fmt::format("{} thing(s) of the job outlived it: {}", left_behind.size(), left_behind.front()));
  }
  if (results.empty()) {
    return fail("ran", fmt::format("the run printed no result (exit status {}): {}", exit_status,
                                   stderr_text.empty() ? "no message" : stderr_text.substr(0, stderr_text.find('\n'))));
  }
  for (const auto& r : results) {
    const auto u = [&](const char* k) { return r.value(k, 0.0); };
    const std::string where = fmt::format("{} on plane {}", r.value("pattern", "?"), r.value("plane", 0));
    if (u("errors") > 0) {
      const json none = json::array();
      const json& which = r.contains("error_writes") ? r["error_writes"] : none;
      return fail("no_acknowledged_write_lost", fmt::format("{}: {} B acknowledged but missing or corrupted{}", where, u("errors"),
                                                            which.empty() ? "" : " (" + which.dump() + ")"));
    }
    if (u("atomic_errors") > 0) {
      return fail("atomic_counters", fmt::format("{}: {} counter(s) differ from their acknowledged increments", where, u("atomic_errors")));
    }
    if (u("read_errors") > 0) {
      return fail("reads_return_what_was_written", fmt::format("{}: {} B read back differ from what was written", where, u("read_errors")));
    }
    if (u("unanswered") > 0 || u("reads_unanswered") > 0) {
      return fail("never_silent", fmt::format("{}: {} write(s) and {} read(s) neither answered nor NACKed", where, u("unanswered"),
                                              u("reads_unanswered")));
    }
    if (u("verified") + u("unverified") + u("dead_pair_bytes") != u("bytes")) {
      return fail("accounted", fmt::format("{}: {} B written, {} verified, {} NACKed, {} to or from dead chips", where, u("bytes"),
                                           u("verified"), u("unverified"), u("dead_pair_bytes")));
    }
    if (!s.nacks_allowed && s.stalls.empty() && s.loops.empty() && u("nacks") > 0) {
      return fail("no_nacks", fmt::format("{}: {} write(s) NACKed where the fabric should carry everything", where, u("nacks")));
    }
    // Pairs the control plane found no route for (dead chips can cut a chip off) are rightly
    // NACKed however often they are written again.
    if (retry > 0 && u("unverified") > 0 && unreachable_pairs(events) == 0) {
      return fail("retried_writes_land", fmt::format("{}: {} B still NACKed after {} retry round(s)", where, u("unverified"), retry));
    }
  }
  for (const Verdict& v : {ttl_verdict(s, events), timeout_verdict(s, events)}) {
    if (!v.pass) return v;
  }
  if (s.expect_fallback && !logged(events, "fallback")) {
    return fail("fallback_channel", "a link broke while a parallel one lived, and no traffic moved onto the fallback channel");
  }
  if (s.expect_reload && !logged(events, "tables_reloaded")) {
    return fail("tables_reloaded", "a direction lost every link, and the control plane reloaded no tables");
  }
  if (exit_status != 0) return fail("ran", fmt::format("the run exited with status {}", exit_status));
  return {};
}

}  // namespace ttemu::tools
