#include "tools/campaign/verdict.hpp"

#include <fmt/format.h>

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
      return fail("no_acknowledged_write_lost", fmt::format("{}: {} B acknowledged but missing or corrupted", where, u("errors")));
    }
    if (u("unanswered") > 0) {
      return fail("never_silent", fmt::format("{}: {} write(s) neither acknowledged nor NACKed", where, u("unanswered")));
    }
    if (u("verified") + u("unverified") + u("dead_pair_bytes") != u("bytes")) {
      return fail("accounted", fmt::format("{}: {} B written, {} verified, {} NACKed, {} to or from dead chips", where, u("bytes"),
                                           u("verified"), u("unverified"), u("dead_pair_bytes")));
    }
    if (!s.nacks_allowed && u("nacks") > 0) {
      return fail("no_nacks", fmt::format("{}: {} write(s) NACKed where the fabric should carry everything", where, u("nacks")));
    }
    // Pairs the control plane found no route for (dead chips can cut a chip off) are rightly
    // NACKed however often they are written again.
    if (retry > 0 && u("unverified") > 0 && unreachable_pairs(events) == 0) {
      return fail("retried_writes_land", fmt::format("{}: {} B still NACKed after {} retry round(s)", where, u("unverified"), retry));
    }
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
