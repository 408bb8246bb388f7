#include "tools/traffic/sim_command.hpp"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/common/error.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_check.hpp"
#include "emulator/control/traffic_patterns.hpp"
#include "emulator/link/fault_plan.hpp"
#include "emulator/sim/fabric_sim.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/event_log.hpp"
#include "launcher/launch.hpp"
#include "emulator/session/deliveries.hpp"
#include "tools/traffic/pattern_report.hpp"
#include "tools/traffic/replay.hpp"
#include "tools/traffic/sim_capture.hpp"
#include "tools/traffic/sim_replay.hpp"
#include "tools/traffic/sim_sockets.hpp"
#include "tools/traffic/tt_metal_report.hpp"

namespace ttemu::tools {

using namespace launcher;  // the launcher's CLI checks, run_launch, default_system_file

using nlohmann::json;
using routing::ChipId;
using std::chrono::duration_cast;
using Ms = std::chrono::duration<double, std::milli>;

namespace {

struct SimOptions {
  std::string file;
  std::vector<std::string> patterns{"all_to_all"};
  uint32_t size = 4096;
  uint32_t count = 4;
  int fvc = -1;
  std::string src, dst;
  uint64_t seed = 1;
  bool seed_given = false;
  std::string faults;
  std::vector<std::string> kills, restarts, cuts, stalls, loops;
  std::string trace;
  std::string events;
  std::string snapshot;
  std::string capture;                     // pcapng of the wire's datagrams (sim_capture.hpp)
  std::vector<std::string> capture_links;  // ... of these links only
  std::string replay;  // a capture's injections instead of patterns (replay.hpp)
  std::string op = "write";  // write | read (the writes, then read back) | atomic (increments) | socket
  SocketRunOptions sockets;   // --op socket
  int dscb_kib = -1;          // -1: 256 KiB with end-to-end handshake, none with local
  int l1cb_kib = 64;
  int retry = 0;
  std::string memory = "open";  // protected: each chip registers a window of its L1, and writes name it
  int status_interval_ms = 1000;
  int look_us = 0;
  std::vector<int> planes{0};
  int samples = 16;
  double limit_s = 60;
  bool json = false;
  std::string tt_metal;  // a tt-metal fabric test description to run instead of patterns
  std::string csv;       // tt-metal's bandwidth summary CSV of the --tt-metal run
};

// "WHAT@MS" or "WHAT@MS-MS": a name and one or two simulated times in milliseconds.
struct Scheduled {
  std::string what;
  link::Time at{}, until{};
  bool has_until = false;
};

Scheduled parse_at(const std::string& text, const std::string& option) {
  const auto at = text.find('@');
  auto fail = [&] {
    return Error(fmt::format("{} '{}': expected NAME@MS or NAME@MS-MS (simulated milliseconds)", option, text));
  };
  if (at == std::string::npos || at == 0) throw fail();
  Scheduled s;
  s.what = text.substr(0, at);
  std::string times = text.substr(at + 1);
  auto ms = [&](const std::string& t) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(t, &used);
    } catch (const std::exception&) {
      throw fail();
    }
    if (used != t.size() || !(v >= 0 && v <= 1e9)) throw fail();
    return duration_cast<link::Time>(Ms(v));
  };
  const auto dash = times.find('-');
  s.at = ms(times.substr(0, dash));
  if (dash != std::string::npos) {
    s.until = ms(times.substr(dash + 1));
    s.has_until = true;
    if (s.until <= s.at) throw Error(fmt::format("{} '{}': the restore time must come after the cut", option, text));
  }
  return s;
}

ChipId chip_named(const control::System& sys, const std::string& name, const std::string& option) {
  auto id = routing::parse_chip(name);
  if (!id || !sys.node(*id)) throw Error(fmt::format("{}: '{}' is not a chip of {}", option, name, sys.source));
  return *id;
}

routing::PortId port_named(const control::System& sys, const std::string& name, const std::string& option) {
  auto id = routing::parse_port(name);
  if (!id || !sys.node(id->chip) || !sys.peer(*id)) {
    throw Error(fmt::format("{}: '{}' is not a wired port of {}", option, name, sys.source));
  }
  return *id;
}


// One pattern on the simulated system. Each (source, destination) pair writes from its own
// core of the source chip (core = destination index), so its completions tell how each of its
// writes ended: acknowledged, NACKed, or never answered.
class PatternRun {
 public:
  PatternRun(sim::FabricSim& sim, const control::System& sys, const control::TableSet& tables, const SimOptions& o,
             size_t l1_bytes)
      : sim_(sim), sys_(sys), tables_(tables), o_(o), l1_(l1_bytes) {
    for (const auto& c : sys_.chips) chips_.push_back({c.id.mesh, c.id.device, c.coord.row, c.coord.col});
  }

  // The pattern's (source, destination) pairs, by chip index.
  std::vector<std::pair<int, int>> pairs_of(const std::string& pattern) const {
    const int n = static_cast<int>(chips_.size());
    const int src = o_.src.empty() ? 0 : *sys_.node(chip_named(sys_, o_.src, "--src"));
    const int dst = o_.dst.empty() ? n - 1 : *sys_.node(chip_named(sys_, o_.dst, "--dst"));
    auto pairs = control::pattern_pairs(pattern, chips_, src, dst, o_.seed);
    if (pairs.empty()) throw Error(fmt::format("pattern {} has no pairs on this system", pattern));
    return pairs;
  }

  // Writes of `size` bytes, `count` per pair, from now on (a tt-metal test's shape).
  void shape(uint32_t size, uint32_t count) { o_.size = size, o_.count = count; }
  // How finely the simulated clock advances while writes are awaited: the resolution of the
  // pattern's `seconds` (1 ms by default; tt-metal's tests, whose figures are per run, 1 us: the wire's latency).
  void resolution(link::Duration step) { wait_step_ = step; }

  // A pattern by name, or (`given`) the pairs of a tt-metal test, named `pattern` in the report.
  json run(const std::string& pattern, int plane, const std::vector<std::pair<int, int>>* given = nullptr) {
    const int n = static_cast<int>(chips_.size());
    const auto pairs = given ? *given : pairs_of(pattern);
    const uint64_t block = uint64_t{o_.size} * o_.count;
    // A chip that dies during the pattern (restarted or not) loses its memory and its
    // workers: pairs to or from it are counted, not verified.
    incarnation_.clear();
    for (int i = 0; i < n; ++i) incarnation_.push_back(sim_.incarnation(id(i)));
    // Fresh completion queues, and the data at the sources.
    for (auto [s, d] : pairs) {
      if (died(s)) continue;
      drain(sim_.worker(id(s), core(d)));
      auto mem = sim_.memory(id(s), src_addr(d), block);
      if (!atomic()) {
        for (uint32_t k = 0; k < o_.count; ++k) control::fill_pattern(mem.subspan(uint64_t{k} * o_.size, o_.size), s, d, k);
      }
      auto at = sim_.memory(id(d), dst_addr(s), block);
      std::fill(at.begin(), at.end(), uint8_t{0});
    }
    const auto before = link_counts(&link::LinkCounters::bytes_tx);
    // The simulator's own speed (ttemu_bench_sim): packet-hops (a packet delivered across one
    // TT-link; acks and NACKs are packets too) per second of this thread's CPU while the
    // writes go (filling and checking the data is the workers' work, not the fabric's).
    const auto hops_before = link_counts(&link::LinkCounters::frames_rx);
    const double cpu_before = thread_cpu_s();
    const link::Time start = sim_.now(), limit = start + duration_cast<link::Time>(std::chrono::duration<double>(o_.limit_s));
    // Rounds: every pair's writes, then (retry mode) again the pairs whose writes were NACKed
    // or never answered, once the control plane has had its say, as the client library's
    // retry mode does. Each round is a transaction id of its own (in turn: a late answer to an
    // earlier round's write cannot pass for this one's).
    std::vector<Outcome> outcome(pairs.size());
    // Atomics: each increment is sent once, and again only if it was NACKed or never answered
    // (writes are idempotent and go again whole). By pair: increments acknowledged, and
    // increments never answered (each may or may not have been counted).
    std::vector<uint32_t> sends(pairs.size(), o_.count), acked(pairs.size(), 0), unanswered_sum(pairs.size(), 0);
    std::vector<size_t> todo;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (!died(pairs[i].first)) todo.push_back(i);
    }
    uint64_t nacks = 0, retried = 0;
    for (int round = 0;; ++round) {
      const uint8_t txn = next_txn_;
      next_txn_ = static_cast<uint8_t>((next_txn_ + 1) % (chip::kTxnIds - 1));
      const int version = sim_.tables_version();  // before the writes: a reload may come while they go
      std::vector<Outcome> base(pairs.size());
      for (size_t i : todo) {
        auto& w = sim_.worker(id(pairs[i].first), core(pairs[i].second));
        base[i] = {w.nacked(txn), w.in_flight(txn)};
      }
      submit(pattern, plane, pairs, todo, sends, txn, limit);
      // Until every write is answered, or nothing moves any more, or the limit. As the client
      // library's retry mode judges: writes still unanswered a second after the last answer,
      // once new tables are in force, are lost (in a dead chip, or in the window of a link
      // that stays down).
      uint64_t last_left = ~uint64_t{0};
      link::Time last_progress = sim_.now();
      while (sim_.now() < limit) {
        const uint64_t left = unanswered(pairs, todo, txn, base);
        if (left == 0) break;
        if (left != last_left) last_left = left, last_progress = sim_.now();
        if (sim_.tables_version() != version && sim_.now() - last_progress >= kLostAfter) break;
        if (sim_.now() - last_progress >= kGiveUp) break;  // no news at all: reported unanswered
        if (sim_.run(wait_step_) && unanswered(pairs, todo, txn, base) > 0) break;  // idle: lost
      }
      std::vector<size_t> again;
      for (size_t i : todo) {
        auto [s, d] = pairs[i];
        if (died(s)) continue;  // its workers are gone
        auto& w = sim_.worker(id(s), core(d));
        outcome[i] = {since(w.nacked(txn), base[i].nacked), since(w.in_flight(txn), base[i].pending)};
        nacks += outcome[i].nacked;
        acked[i] += sends[i] - std::min(sends[i], outcome[i].nacked + outcome[i].pending);
        unanswered_sum[i] += outcome[i].pending;
        if (atomic()) sends[i] = outcome[i].nacked + outcome[i].pending;
        if ((outcome[i].nacked > 0 || outcome[i].pending > 0) && !died(d)) again.push_back(i);
      }
      if (again.empty() || round >= o_.retry || sim_.now() >= limit) break;
      // New routes first, as the library's retry mode waits for them: the control plane
      // reloads a settling time after the news (a NACK from a congested router brings none:
      // after a second, the writes go again over the same routes).
      // (An idle system with nothing scheduled has no reload coming: its clock stands still.)
      for (const link::Time until = sim_.now() + kLostAfter; sim_.tables_version() == version && sim_.now() < until;) {
        if (sim_.run(std::chrono::milliseconds(1))) break;
      }
      for (size_t i : again) retried += sends[i];
      todo = std::move(again);
    }
    const double seconds = std::chrono::duration<double>(sim_.now() - start).count();
    const double cpu_s = thread_cpu_s() - cpu_before;
    uint64_t packet_hops = 0;
    for (const auto& [end, delivered] : counted_since(hops_before, &link::LinkCounters::frames_rx)) packet_hops += delivered;
    // How each pair's writes ended, and what landed.
    const PairSplit split = split_dead(
        n, pairs, [&](int i) { return died(i); }, [&](int i) { return routing::to_string(id(i)); });
    uint64_t verified = 0, errors = 0, unverified = 0, unanswered = 0, atomic_errors = 0;
    std::vector<bool> landed(pairs.size(), false);  // every write of the pair verified (--op read reads them back)
    json error_writes = json::array();
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto [s, d] = pairs[i];
      if (died(s) || died(d)) continue;  // (counted in split)
      unanswered += outcome[i].pending;
      if (atomic()) {
        // The counter holds every acknowledged increment, and at most the unanswered ones
        // besides (an answer lost after the count). What was not acknowledged is unverified.
        uint32_t counter = 0;
        std::memcpy(&counter, sim_.memory(id(d), dst_addr(s), 4).data(), 4);
        const uint32_t ok = std::min(acked[i], o_.count);
        if (counter >= acked[i] && counter <= acked[i] + unanswered_sum[i]) {
          verified += uint64_t{unit()} * ok, unverified += uint64_t{unit()} * (o_.count - ok);
        } else {
          errors += uint64_t{unit()} * o_.count, ++atomic_errors;
        }
        continue;
      }
      auto mem = sim_.memory(id(d), dst_addr(s), block);
      landed[i] = true;
      for (uint32_t k = 0; k < o_.count; ++k) {
        const bool ok = control::check_pattern(mem.subspan(uint64_t{k} * o_.size, o_.size), s, d, k);
        landed[i] = landed[i] && ok;
        // A write that was NACKed or never answered may be missing; one that was acknowledged
        // must be there, bit-exact.
        if (ok) verified += o_.size;
        else if (outcome[i].nacked > 0 || outcome[i].pending > 0) unverified += o_.size;
        else {
          errors += o_.size;
          name_error_write(error_writes, routing::to_string(id(s)), routing::to_string(id(d)), k);
        }
      }
    }
    const json reads = o_.op == "read" ? read_back(pairs, landed, plane, limit) : json();
    // Latency: single small writes between chips that live, each waited for, in simulated time.
    std::vector<double> rtt;
    constexpr uint8_t kProbe = chip::kTxnIds - 1;
    for (auto [s, d] : latency_pairs(split.live, o_.samples)) {
      const link::Time t0 = sim_.now();
      if (!sim_.worker(id(s), core(d)).try_submit({.command = routing::Command::kWrite, .fvc = static_cast<int8_t>(o_.fvc), .plane = static_cast<uint8_t>(plane), .txn_id = kProbe,
                         .dst_mesh = id(d).mesh, .dst_device = id(d).device, .size = 64,
                         .src_addr = src_addr(d), .dst_addr = dst_addr(s), .key = key_of(d)})) {
        continue;
      }
      // (Looked up after each step: a chip restarted meanwhile has new workers.) A probe lost
      // (into a chip that died after the pattern, before the tables changed) is given up.
      auto pending = [&] { return died(s) || died(d) ? 0u : sim_.worker(id(s), core(d)).in_flight(kProbe); };
      const link::Time give_up = std::min(limit, t0 + kLostAfter);
      while (pending() > 0 && sim_.now() < give_up) {
        if (sim_.run(std::chrono::microseconds(5)) && pending() > 0) break;
      }
      if (died(s) || died(d)) continue;
      if (pending() == 0) rtt.push_back(std::chrono::duration<double, std::micro>(sim_.now() - t0).count());
      drain(sim_.worker(id(s), core(d)));
    }
    double max_link = 0;
    int links_used = 0;
    for (const auto& [end, sent] : counted_since(before, &link::LinkCounters::bytes_tx)) {
      const double moved = static_cast<double>(sent);
      if (moved > 0) ++links_used;
      if (seconds > 0) max_link = std::max(max_link, moved / seconds / 1e9);
    }
    const double hops = mean_hops(sys_, tables_, plane, pairs);
    const Percentiles lat = percentiles(rtt);
    const double bytes = static_cast<double>(pairs.size()) * static_cast<double>(uint64_t{unit()} * o_.count);
    json out = {{"pattern", pattern}, {"op", o_.op}, {"error_writes", error_writes}, {"plane", plane}, {"pairs", pairs.size()}, {"bytes", bytes}, {"seconds", seconds},
            {"gb_per_s", seconds > 0 ? bytes / seconds / 1e9 : 0.0}, {"verified", verified}, {"errors", errors},
            {"nacks", nacks}, {"unanswered", unanswered}, {"unverified", unverified}, {"retried", retried},
            {"dead_chips", split.dead_chips}, {"pairs_to_dead", split.to_dead}, {"pairs_from_dead", split.from_dead},
            {"dead_pair_bytes", (split.to_dead + split.from_dead) * uint64_t{unit()} * o_.count},
            {"tables_version", sim_.tables_version()}, {"latency_us", lat.to_json()},
            {"link_directions_used", links_used}, {"max_link_gb_per_s", max_link}, {"mean_hops", hops},
            {"per_hop_us", hops > 0 ? lat.p50 / (2 * hops) : 0.0},
            {"sim_time_s", std::chrono::duration<double>(sim_.now()).count()},
            {"packet_hops", packet_hops}, {"cpu_s", cpu_s},
            {"packet_hops_per_cpu_s", cpu_s > 0 ? static_cast<double>(packet_hops) / cpu_s : 0.0}};
    if (atomic()) out["atomic_errors"] = atomic_errors;
    if (reads.is_object()) out.update(reads);
    return out;
  }

 private:
  struct Outcome {
    uint32_t nacked = 0, pending = 0;
  };
  static constexpr link::Duration kLostAfter = std::chrono::seconds(1);
  // Writes with no answer this long after the last one, and no new tables, are unanswered
  // (never silently: the count says so); waiting on to the pattern's limit only costs time.
  static constexpr link::Duration kGiveUp = std::chrono::seconds(5);

  // Writes of the round not answered yet, over the pairs whose source lives.
  uint64_t unanswered(const std::vector<std::pair<int, int>>& pairs, const std::vector<size_t>& todo, uint8_t txn,
                      const std::vector<Outcome>& base) {
    uint64_t left = 0;
    for (size_t i : todo) {
      auto [s, d] = pairs[i];
      if (!died(s)) left += since(sim_.worker(id(s), core(d)).in_flight(txn), base[i].pending);
    }
    return left;
  }

  routing::ChipId id(int i) const { return sys_.chips[static_cast<size_t>(i)].id; }
  // The chip died since the pattern began (restarted or not): its memory and workers are new.
  bool died(int i) const {
    return !sim_.alive(id(i)) || sim_.incarnation(id(i)) != incarnation_[static_cast<size_t>(i)];
  }
  static uint32_t since(uint32_t now, uint32_t base) { return now > base ? now - base : 0; }
  bool atomic() const { return o_.op == "atomic"; }
  // The bytes a command stands for in the figures: an increment's counter is 4.
  uint32_t unit() const { return atomic() ? 4 : o_.size; }
  // Where a source reads a destination's block back to (--op read): above its own data.
  uint64_t readback_addr(int d) const { return src_addr(d) + uint64_t{o_.size} * o_.count * chips_.size(); }
  static uint16_t core(int d) { return static_cast<uint16_t>(d % chip::kMaxWorkers); }
  uint64_t src_addr(int d) const { return l1_ / 2 + static_cast<uint64_t>(d) * uint64_t{o_.size} * o_.count; }
  uint64_t dst_addr(int s) const { return static_cast<uint64_t>(s) * uint64_t{o_.size} * o_.count; }

  // --memory protected: the key of a window over chip d's whole L1 (offsets are then L1
  // addresses), registered by its worker on core 0 once per incarnation (a restart loses it).
  uint64_t key_of(int d) {
    if (o_.memory != "protected") return 0;
    keys_.resize(chips_.size());
    auto& [incarnation, key] = keys_[static_cast<size_t>(d)];
    if (key == 0 || incarnation != sim_.incarnation(id(d))) {
      const auto w = sim_.register_window(id(d), 0, 0, l1_, session::kRemoteRead | session::kRemoteWrite);
      if (w.status != chip::kStatusOk) throw Error(fmt::format("{}: no memory window ({})", routing::to_string(id(d)), w.status));
      incarnation = sim_.incarnation(id(d));
      key = w.key;
    }
    return key;
  }

  // Every write of the pairs in `todo`, one from each in turn, as transaction `txn`; a full
  // command buffer lets the chip run until it takes some.
  void submit(const std::string& pattern, int plane, const std::vector<std::pair<int, int>>& pairs, const std::vector<size_t>& todo,
              const std::vector<uint32_t>& sends, uint8_t txn, link::Time limit, routing::Command command = routing::Command::kWrite) {
    if (atomic()) command = routing::Command::kAtomicInc;
    for (uint32_t k = 0; k < o_.count; ++k) {
      for (size_t i : todo) {
        if (k >= sends[i]) continue;
        auto [s, d] = pairs[i];
        chip::CommandRequest r{.command = command, .fvc = static_cast<int8_t>(o_.fvc), .plane = static_cast<uint8_t>(plane), .txn_id = txn,
                               .dst_mesh = id(d).mesh, .dst_device = id(d).device, .size = o_.size,
                               .src_addr = src_addr(d) + uint64_t{k} * o_.size,
                               .dst_addr = dst_addr(s) + uint64_t{k} * o_.size, .key = key_of(d)};
        if (command == routing::Command::kAtomicInc) r.size = 4, r.arg = 1, r.dst_addr = dst_addr(s);  // one counter per pair
        if (command == routing::Command::kReadRequest) r.return_addr = readback_addr(d) + uint64_t{k} * o_.size;
        while (!died(s) && !sim_.worker(id(s), core(d)).try_submit(r)) {  // died: its workers are gone
          if (sim_.now() >= limit) throw Error(fmt::format("pattern {}: no room in {}'s command buffer within {} s",
                                                           pattern, routing::to_string(id(s)), o_.limit_s));
          sim_.run(std::chrono::microseconds(20));
        }
      }
    }
  }

  // --op read: every pair whose writes all landed reads its block back into the source's
  // memory, and what comes back must be what was written. One round, no retry: a read NACKed
  // or never answered is counted, not checked.
  json read_back(const std::vector<std::pair<int, int>>& pairs, const std::vector<bool>& landed, int plane, link::Time limit) {
    const uint8_t txn = next_txn_;
    next_txn_ = static_cast<uint8_t>((next_txn_ + 1) % (chip::kTxnIds - 1));
    std::vector<size_t> todo;
    std::vector<Outcome> base(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto [s, d] = pairs[i];
      if (!landed[i] || died(s) || died(d)) continue;
      todo.push_back(i);
      auto back = sim_.memory(id(s), readback_addr(d), uint64_t{o_.size} * o_.count);
      std::fill(back.begin(), back.end(), uint8_t{0});
      auto& w = sim_.worker(id(s), core(d));
      base[i] = {w.nacked(txn), w.in_flight(txn)};
    }
    submit("read", plane, pairs, todo, std::vector<uint32_t>(pairs.size(), o_.count), txn, limit, routing::Command::kReadRequest);
    const link::Time give_up = std::min(limit, sim_.now() + kGiveUp);
    while (unanswered(pairs, todo, txn, base) > 0 && sim_.now() < give_up) {
      if (sim_.run(std::chrono::milliseconds(1)) && unanswered(pairs, todo, txn, base) > 0) break;
    }
    uint64_t read_bytes = 0, read_verified = 0, read_errors = 0, nacked = 0, pending = 0;
    for (size_t i : todo) {
      auto [s, d] = pairs[i];
      if (died(s) || died(d)) continue;
      auto& w = sim_.worker(id(s), core(d));
      const uint32_t n = since(w.nacked(txn), base[i].nacked), p = since(w.in_flight(txn), base[i].pending);
      nacked += n, pending += p;
      auto back = sim_.memory(id(s), readback_addr(d), uint64_t{o_.size} * o_.count);
      for (uint32_t k = 0; k < o_.count; ++k) {
        read_bytes += o_.size;
        if (control::check_pattern(back.subspan(uint64_t{k} * o_.size, o_.size), s, d, k)) read_verified += o_.size;
        else if (n == 0 && p == 0) read_errors += o_.size;  // answered, and wrong
      }
    }
    return {{"read_bytes", read_bytes}, {"read_verified", read_verified}, {"read_errors", read_errors},
            {"reads_nacked", nacked}, {"reads_unanswered", pending}};
  }

  static void drain(chip::CommandBufferClient& w) {
    chip::Completion got[64];
    while (w.poll(got) > 0) {
    }
  }

  std::map<routing::PortId, uint64_t> link_counts(std::atomic<uint64_t> link::LinkCounters::*counter) const {
    std::map<routing::PortId, uint64_t> out;
    for (const auto& l : sys_.links) {
      for (const auto& end : {l.a, l.b}) out[end] = (sim_.counters(end).*counter).load(std::memory_order_relaxed);
    }
    return out;
  }

  // What each link end's counter counted since `before` (a chip restarted meanwhile counts
  // again from zero: its ends give what they counted since).
  std::map<routing::PortId, uint64_t> counted_since(const std::map<routing::PortId, uint64_t>& before,
                                                    std::atomic<uint64_t> link::LinkCounters::*counter) const {
    auto out = link_counts(counter);
    for (auto& [end, now] : out) {
      const uint64_t then = before.at(end);
      if (now >= then) now -= then;
    }
    return out;
  }

  static double thread_cpu_s() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  }

  sim::FabricSim& sim_;
  const control::System& sys_;
  const control::TableSet& tables_;
  SimOptions o_;
  link::Duration wait_step_ = std::chrono::milliseconds(1);
  size_t l1_;
  std::vector<control::PatternChip> chips_;  // the chips as the patterns see them
  std::vector<uint32_t> incarnation_;        // each chip's, when the pattern began
  uint8_t next_txn_ = 0;                     // the transaction of the next round (kTxnIds - 1 is the probes')
  std::vector<std::pair<uint32_t, uint64_t>> keys_;  // --memory protected: each chip's incarnation and window key
};

// A file to write after the run ('-' is standard output, empty is none).
std::ofstream open_output(const std::string& path, const char* option) {
  std::ofstream f;
  if (path.empty() || path == "-") return f;
  f.open(path);
  if (!f) throw Error(fmt::format("{}: cannot write '{}'", option, path));
  return f;
}

void write_output(const std::string& path, const char* option, std::ofstream& file, const std::vector<std::string>& lines) {
  if (path.empty()) return;
  std::ostream* to = path == "-" ? &std::cout : &file;
  for (const auto& line : lines) *to << line << '\n';
  to->flush();
  if (!*to) throw Error(fmt::format("{}: writing '{}' failed", option, path));
}

// The simulated control plane's record as the launcher's event log: the same lines, with
// simulated times (launcher/event_log.hpp), so ttemu events and ttemu diagnose read both.
std::vector<std::string> event_lines(const control::System& sys, const std::string& file, uint64_t seed,
                                     const std::vector<sim::ControlRecord>& log) {
  using Kind = sim::ControlRecord::Kind;
  std::vector<std::string> lines;
  json begun = job_started_event(sys, std::filesystem::absolute(file).string());
  begun["seed"] = seed;
  lines.push_back(event_line(stamp_simulated(begun, link::Time{0})));
  for (const auto& r : log) {
    json e;
    switch (r.kind) {
      case Kind::kStatus: e = status_event(r.entry, r.chip, sys); break;
      case Kind::kStatusLost:
        e = chip_event(r.chip, "status_lost");
        e["lost"] = r.lost;
        break;
      case Kind::kChipDied:
        e = chip_event(r.chip, "chip_died");
        e["how"] = "killed (simulated)";
        break;
      case Kind::kChipRestarted: e = chip_event(r.chip, "chip_restarted"); break;
      case Kind::kTablesReloaded: e = tables_reloaded_event(sys, *r.reload, "the fabric"); break;
    }
    // A status entry carries the chip's own time of the event; the rest, the control plane's.
    stamp_simulated(e, r.kind == Kind::kStatus ? std::chrono::nanoseconds(r.entry.time_ns) : r.at);
    lines.push_back(event_line(e));
  }
  return lines;
}

// SIGTERM or SIGINT (a campaign's bound, Ctrl-C): the simulation stops where it is and says
// what it held. A second signal ends the process at once (a hang outside the simulation).
volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) {
  if (g_stop_signal != 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  g_stop_signal = sig;
}

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT}) ::sigaction(sig, &sa, nullptr);
}

void run_sim(const SimOptions& o, int& exit_status) {
  // From the start: a signal while the system is set up (32 chips' memory, on a loaded
  // machine longer than a campaign's bound) stops the run as soon as it begins, with its
  // files written, instead of killing the process with them empty.
  catch_stop_signals();
  const std::string file = o.file.empty() ? default_system_file() : o.file;
  const control::System sys = control::load_system(file);
  const control::TableSet tables = control::compute_tables(sys);
  // --replay: the capture read, or refused, before anything runs; it replaces the patterns.
  const std::optional<Replay> replay = o.replay.empty() ? std::nullopt : std::optional(read_replay(o.replay, sys));
  const auto patterns = replay || !o.tt_metal.empty() ? std::vector<std::string>{} : control::expand_patterns(o.patterns);
  // --tt-metal: the file's tests as runs of pairs on this system, refused before anything runs.
  std::vector<control::ttmetal::Run> tt_metal_runs;
  if (!o.tt_metal.empty()) {
    if (o.planes.size() > 1) throw Error("--tt-metal runs on one routing plane: give one --plane");
    tt_metal_runs = control::ttmetal::expand(control::ttmetal::parse_file(o.tt_metal), sys, o.seed_given ? o.seed : 1);
  }
  sim::SimConfig cfg;
  link::FaultPlan plan;
  if (!o.faults.empty()) plan = link::load_fault_plan(o.faults, sys.wiring());
  cfg.seed = o.seed_given ? o.seed : plan.seed ? *plan.seed : 1;
  cfg.link_faults = plan.tx;
  cfg.trace = !o.trace.empty();  // nobody reads it otherwise
  cfg.control_plane = true;
  cfg.memory = *session::parse_memory_mode(o.memory);  // (the option admits only the two)
  cfg.rates.interval = std::chrono::milliseconds(o.status_interval_ms);
  cfg.look = std::chrono::microseconds(o.look_us);
  cfg.link.ack_delay = std::chrono::microseconds(0);
  // Sources keep their data in the upper half of L1, destinations take each source's writes
  // in the lower half: room for every chip's block in each.
  uint64_t block = uint64_t{o.size} * o.count;
  for (const auto& r : tt_metal_runs) block = std::max(block, uint64_t{r.size} * r.num_packets);
  // (--op read: the blocks read back too, above the sources' data.)
  const uint64_t need = (o.op == "read" ? 4 : 2) * block * static_cast<uint64_t>(sys.node_count());
  if (need > (uint64_t{1} << 32)) throw Error(fmt::format("--size x --count x chips is too large ({} bytes of L1 per chip)", need));
  cfg.l1_bytes = std::max<size_t>(cfg.l1_bytes, need);
  if (replay) {
    if (std::max(replay->l1_bytes, replay->dram_bytes) > (uint64_t{1} << 32)) {
      throw Error(fmt::format("--replay {}: its addresses need {} bytes of L1 and {} of DRAM per chip, more than the simulator has",
                              o.replay, replay->l1_bytes, replay->dram_bytes));
    }
    cfg.l1_bytes = std::max<size_t>(cfg.l1_bytes, replay->l1_bytes);
    cfg.dram_bytes = std::max<size_t>(cfg.dram_bytes, replay->dram_bytes);
  }
  // What the fabric delivers, per pair of chips: each pattern's and the replay's reports say.
  session::Deliveries deliveries;
  cfg.delivered = [&deliveries](ChipId at, const routing::Packet& p) { deliveries.add(at, p); };
  SocketRunOptions so = o.sockets;
  so.size = o.size, so.count = o.count, so.fvc = o.fvc, so.seed = cfg.seed, so.limit_s = o.limit_s;
  so.l1cb = static_cast<uint32_t>(o.l1cb_kib) << 10;
  so.dscb = o.dscb_kib >= 0 ? static_cast<uint32_t>(o.dscb_kib) << 10 : so.handshake == "local" ? 0 : 256u << 10;
  if (o.op == "socket") {
    cfg.l1_bytes = std::max(cfg.l1_bytes, socket_l1_need(so, sys.node_count()));
    cfg.dram_bytes = std::max(cfg.dram_bytes, socket_dram_need(so, sys.node_count()));
  }
  // Opened first: a bad path fails before the run, not after it.
  std::ofstream trace_file = open_output(o.trace, "--trace"), events_file = open_output(o.events, "--events"),
                snapshot_file = open_output(o.snapshot, "--snapshot");
  if (o.capture.empty() && !o.capture_links.empty()) throw Error("--capture-link needs --capture FILE");
  const auto capture = o.capture.empty() ? nullptr : start_capture(sys, o.capture, o.capture_links, cfg);
  sim::FabricSim sim(sys, tables, cfg);
  sim.interrupt_on(&g_stop_signal);
  // The files of the run, written at its end or where a signal stopped it.
  auto write_files = [&] {
    write_output(o.trace, "--trace", trace_file, sim.trace());
    if (!o.events.empty()) write_output(o.events, "--events", events_file, event_lines(sys, file, cfg.seed, sim.control_log()));
    if (!o.snapshot.empty()) write_output(o.snapshot, "--snapshot", snapshot_file, {nlohmann::json(sim.snapshot()).dump(1)});
    if (capture) capture->flush();
  };
  bool bad = false;
  try {
    link::Time last = link::Time{0};  // the last scheduled event: the run goes on a second past it
    for (const auto& k : o.kills) {
      auto s = parse_at(k, "--kill");
      last = std::max(last, s.at);
      const ChipId c = chip_named(sys, s.what, "--kill");
      sim.at(s.at, [&sim, c] { sim.kill(c); });
    }
    for (const auto& r : o.restarts) {
      auto s = parse_at(r, "--restart");
      last = std::max(last, s.at);
      const ChipId c = chip_named(sys, s.what, "--restart");
      sim.at(s.at, [&sim, c] { sim.restart(c); });
    }
    for (const auto& c : o.cuts) {
      auto s = parse_at(c, "--cut");
      last = std::max(last, s.has_until ? s.until : s.at);
      const routing::PortId p = port_named(sys, s.what, "--cut");
      sim.at(s.at, [&sim, p] { sim.cut(p, true); });
      if (s.has_until) sim.at(s.until, [&sim, p] { sim.cut(p, false); });
    }
    // "A:B": the two names of a stall (chip, FVC) or a loop (chip, destination).
    auto halves = [](const Scheduled& s, const std::string& option, const char* form) {
      const auto colon = s.what.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == s.what.size() || !s.has_until) {
        throw Error(fmt::format("{} '{}': expected {}@MS-MS (simulated milliseconds)", option, s.what, form));
      }
      return std::pair{s.what.substr(0, colon), s.what.substr(colon + 1)};
    };
    for (const auto& x : o.stalls) {
      auto s = parse_at(x, "--stall");
      const auto [chip, fvc_text] = halves(s, "--stall", "CHIP:FVC");
      const ChipId c = chip_named(sys, chip, "--stall");
      int fvc = -1;
      if (fvc_text.size() == 1 && fvc_text[0] >= '0' && fvc_text[0] <= '9') fvc = fvc_text[0] - '0';
      if (fvc < 0 || fvc > cfg.router.data_fvcs) {
        throw Error(fmt::format("--stall '{}': FVC '{}' is not one of 0-{} (the data FVCs, then the control FVC)", x, fvc_text, cfg.router.data_fvcs));
      }
      last = std::max(last, s.until);
      const auto v = static_cast<uint8_t>(fvc);
      sim.at(s.at, [&sim, c, v] { sim.stall_center(c, v, true); });
      sim.at(s.until, [&sim, c, v] { sim.stall_center(c, v, false); });
    }
    for (const auto& x : o.loops) {
      auto s = parse_at(x, "--loop");
      const auto [from, to] = halves(s, "--loop", "CHIP:DESTINATION");
      const ChipId a = chip_named(sys, from, "--loop"), d = chip_named(sys, to, "--loop");
      try {
        sim.loop_ends(a, d);
      } catch (const std::invalid_argument& e) {
        throw Error(fmt::format("--loop '{}': {}", x, e.what()));
      }
      last = std::max(last, s.until);
      sim.at(s.at, [&sim, a, d] { sim.loop(a, d, true); });
      sim.at(s.until, [&sim, a, d] { sim.loop(a, d, false); });
    }
    sim.run(std::chrono::milliseconds(1));  // every link comes up
    if (!o.json) {
      fmt::print("ttemu sim: {}: {} chip(s), {} link(s), seed {}, {} memory, simulated\n", file, sys.node_count(), sys.links.size(),
                 cfg.seed, o.memory);
    }
    if (replay) {
      if (!replay->complete()) {
        std::fflush(stdout);  // (after the heading)
        fmt::print(stderr, "ttemu sim: warning: --replay {} has {} of the {} link ends of {}: only the requests that crossed them are replayed\n",
                   o.replay, replay->link_ends_captured, replay->link_ends, file);
      }
      json r = run_replay(sim, sys, *replay, o.replay, o.limit_s, deliveries);
      if (o.json) {
        fmt::print("{}\n", r.dump());
      } else {
        fmt::print("{:<18} {:>5} injection(s) from {} link end(s) of {}, {} bad frame(s) skipped, in {:.6f} s (simulated){}: "
                   "nacks {}, router events {}\n",
                   "replay", r["injections"].get<size_t>(), r["link_ends_captured"].get<size_t>(), r["link_ends"].get<size_t>(),
                   r["bad_frames"].get<uint64_t>(), r["seconds"].get<double>(), r["idle"].get<bool>() ? "" : ", not idle at the limit",
                   r["nacks"].get<uint64_t>(), r["router_events"].get<size_t>());
        fmt::print("{:<18} {}\n", "", session::delivery_line(r["deliveries"]));
      }
      std::fflush(stdout);
      bad = !r["idle"].get<bool>();
    }
    PatternRun runner(sim, sys, tables, o, cfg.l1_bytes);
    if (!o.tt_metal.empty()) {
      runner.resolution(std::chrono::microseconds(1));
      const int plane = o.planes.front();
      if (plane >= tables.planes()) throw Error(fmt::format("--plane {}: {} has {} routing plane(s)", plane, file, tables.planes()));
      TtMetalSummary summary;
      for (const auto& run : tt_metal_runs) {
        const session::Deliveries before = deliveries;
        runner.shape(run.size, run.num_packets);
        json r = runner.run(run.test, plane, &run.pairs);
        r["deliveries"] = deliveries.since(before).to_json();
        const json j = tt_metal_run(sys, tables, plane, run, r, "simulated");
        bad = bad || j["errors"].get<uint64_t>() > 0;
        summary.add(j);
        fmt::print("{}\n", o.json ? j.dump() : tt_metal_line(j));
        std::fflush(stdout);
      }
      if (o.json) fmt::print("{}\n", json{{"tt_metal_summary", summary.to_json()}}.dump());
      else fmt::print("\ntt-metal bandwidth summary ({}; simulated time, on a wire with no bandwidth limit: not line rates):\n{}", o.tt_metal, summary.text());
      if (!o.csv.empty()) summary.write_csv(o.csv);
      std::fflush(stdout);
    }
    std::vector<std::pair<std::string, int>> runs;  // each pattern on each plane
    for (const auto& p : patterns) {
      for (int plane : o.planes) {
        if (plane >= tables.planes()) throw Error(fmt::format("--plane {}: {} has {} routing plane(s)", plane, file, tables.planes()));
        runs.emplace_back(p, plane);
      }
    }
    for (const auto& [p, plane] : runs) {
      const session::Deliveries before = deliveries;
      if (o.op == "socket") {
        json r = run_socket_pattern(sim, sys, so, p, plane, runner.pairs_of(p), cfg.l1_bytes);
        r["deliveries"] = deliveries.since(before).to_json();
        bad = bad || r["errors"].get<uint64_t>() > 0 || r["unverified"].get<uint64_t>() > 0;
        if (o.json) {
          fmt::print("{}\n", r.dump());
        } else {
          fmt::print("{:<18} {:>5} {} stream(s), {} handshake, {:>10.0f} B in {:.6f} s (simulated): {:7.3f} GB/s  verified {} B, "
                     "errors {}, unverified {}, open errors {}; {} B through DSCBs\n",
                     o.planes.size() > 1 ? fmt::format("{} plane {}", p, plane) : p, r["pairs"].get<size_t>(), so.socket,
                     so.handshake, r["bytes"].get<double>(), r["seconds"].get<double>(), r["gb_per_s"].get<double>(),
                     r["verified"].get<uint64_t>(), r["errors"].get<uint64_t>(), r["unverified"].get<uint64_t>(),
                     r["open_errors"].get<uint64_t>(), r["spilled"].get<uint64_t>());
          fmt::print("{:<18} {}\n", "", session::delivery_line(r["deliveries"]));
        }
        std::fflush(stdout);
        continue;
      }
      json r = runner.run(p, plane);
      r["deliveries"] = deliveries.since(before).to_json();
      bad = bad || r["errors"].get<uint64_t>() > 0;
      if (o.json) {
        fmt::print("{}\n", r.dump());
        std::fflush(stdout);
        continue;
      }
      fmt::print("{:<18} {:>5} pairs {:>10.0f} B in {:.6f} s (simulated): {:7.3f} GB/s  verified {} B, errors {}, "
                 "nacks {}, unanswered {}  latency min/avg/p99 {:.1f}/{:.1f}/{:.1f} us (per hop {:.1f} us)  "
                 "link directions {} (busiest {:.3f} GB/s)\n",
                 o.planes.size() > 1 ? fmt::format("{} plane {}", p, plane) : p, r["pairs"].get<size_t>(), r["bytes"].get<double>(), r["seconds"].get<double>(),
                 r["gb_per_s"].get<double>(), r["verified"].get<uint64_t>(), r["errors"].get<uint64_t>(),
                 r["nacks"].get<uint64_t>(), r["unanswered"].get<uint64_t>(), r["latency_us"]["min"].get<double>(),
                 r["latency_us"]["avg"].get<double>(), r["latency_us"]["p99"].get<double>(),
                 r["per_hop_us"].get<double>(), r["link_directions_used"].get<int>(),
                 r["max_link_gb_per_s"].get<double>());
      if (!r["dead_chips"].empty() || r["retried"].get<uint64_t>() > 0 || r["tables_version"].get<int>() > 1) {
        fmt::print("{:<18} chips that died: {}; {} pair(s) to them, {} from them; {} write(s) retried; routing tables v{}\n",
                   "", r["dead_chips"].dump(), r["pairs_to_dead"].get<size_t>(), r["pairs_from_dead"].get<size_t>(),
                   r["retried"].get<uint64_t>(), r["tables_version"].get<int>());
      }
      fmt::print("{:<18} {}\n", "", session::delivery_line(r["deliveries"]));
      std::fflush(stdout);
    }
    // What follows the traffic: the sim runs on until the last cut, restart and fault window
    // are a second behind (links come back, ports return from the fallback channel).
    for (const auto& [port, f] : plan.tx) {
      for (const auto& w : f.down) last = std::max(last, link::Time(w.to));
    }
    if (last + std::chrono::seconds(1) > sim.now()) sim.run(last + std::chrono::seconds(1) - sim.now());
    sim.final_rates();
  } catch (const sim::FabricSim::Interrupted& e) {
    write_files();
    std::fflush(stdout);
    fmt::print(stderr, "ttemu sim: stopped by signal {}, {}{}\n", static_cast<int>(g_stop_signal), e.what(),
               o.snapshot.empty() ? std::string() : fmt::format("; every chip's state is in {}", o.snapshot));
    exit_status = 128 + g_stop_signal;
    return;
  }
  write_files();
  if (bad) exit_status = 1;
}

}  // namespace

void add_sim_command(CLI::App& app, int& exit_status) {
  auto o = std::make_shared<SimOptions>();
  auto* c = app.add_subcommand("sim", "Run a system in one process on a simulated clock, from a seed, and verify every byte");
  c->add_option("file", o->file, "System specification (default: the Galaxy)");
  c->add_option("--pattern", o->patterns,
                "unicast, all_to_all, one_to_all, all_to_one, neighbor_exchange, random_pairing, or all "
                "(tt-metal's all_to_all_unicast and one_to_all_unicast are all_to_all and one_to_all)")
      ->delimiter(',');
  c->add_option("--size", o->size, "Bytes per write")->check(whole_number<uint32_t>(1, 1 << 20));
  c->add_option("--count", o->count, "Writes per pair")->check(whole_number<uint32_t>(1, 100000));
  c->add_option("--fvc", o->fvc, "Data FVC, or -1 for automatic")->check(whole_number<int>(-1, 7));
  c->add_option("--src", o->src, "Source for unicast / one_to_all (default: the first chip)");
  c->add_option("--dst", o->dst, "Destination for unicast / all_to_one (default: the last chip)");
  c->add_option("--seed", o->seed, "Seed of everything random: faults, random_pairing (0-9e15; default the plan's, else 1)")
      ->check(whole_number<uint64_t>(0, link::kMaxSeed))
      ->each([o](const std::string&) { o->seed_given = true; });
  c->add_option("--faults", o->faults, "Fault plan (docs/fault-plan.md); down windows count from the start");
  c->add_option("--kill", o->kills, "Kill a chip at a simulated time: CHIP@MS (repeatable)");
  c->add_option("--restart", o->restarts, "Restart a killed chip: CHIP@MS (repeatable)");
  c->add_option("--cut", o->cuts, "Cut a link at a simulated time, and restore it: PORT@MS or PORT@MS-MS (repeatable)");
  c->add_option("--stall", o->stalls, "Stop a chip's center consuming an FVC, then resume: CHIP:FVC@MS-MS (repeatable)");
  c->add_option("--loop", o->loops,
                "A forwarding loop (a corrupted table): CHIP's next hop toward DEST sends it back, then is repaired: CHIP:DEST@MS-MS (repeatable)");
  c->add_option("--trace", o->trace, "Write the event trace to FILE ('-': standard output)");
  c->add_option("--capture", o->capture, "Write the TT-link datagrams on the wire to FILE, pcapng (docs/capture.md)");
  c->add_option("--capture-link", o->capture_links, "With --capture: only this port's link, both directions (repeatable; default every link)");
  c->add_option("--snapshot", o->snapshot,
                "Write every chip's state (routing buffers and their heads, credits, links) as JSON to FILE at the end, or where SIGTERM/SIGINT stops the run");
  c->add_option("--events", o->events, "Write the control plane's event log (JSON lines, as a launch's) to FILE ('-': standard output)");
  c->add_option("--plane", o->planes, "Routing plane(s): each pattern runs on each in turn (default 0)")
      ->delimiter(',')
      ->check(whole_number<int>(0, 15));
  c->add_option("--op", o->op,
                "write; read (the writes, then every pair reads its block back); atomic (each write an increment of one counter per pair); "
                "socket (each pair streams its block through a socket of its own)")
      ->check(CLI::IsMember({"write", "read", "atomic", "socket"}));
  c->add_option("--socket", o->sockets.socket, "--op socket: dsocket (shares its FVC) or ssocket (reserves one; one per source chip per FVC)")
      ->check(CLI::IsMember({"dsocket", "ssocket"}));
  c->add_option("--handshake", o->sockets.handshake, "--op socket: end_to_end (credits, DSCB) or local")
      ->check(CLI::IsMember({"end_to_end", "local"}));
  c->add_option("--l1cb-kib", o->l1cb_kib, "--op socket: each receiver's L1CB, KiB")->check(whole_number<int>(4, 1024));
  c->add_option("--dscb-kib", o->dscb_kib, "--op socket: each receiver's DSCB, KiB (default 256 end-to-end, 0 local)")
      ->check(whole_number<int>(0, 65536));
  c->add_flag("--reader-stalls", o->sockets.reader_stalls, "--op socket: readers stall and resume at random (seeded)");
  c->add_option("--memory", o->memory,
                 "open, or protected: each chip registers a memory window of its L1 and every write, read and atomic "
                 "names its key (docs/api.md#memory-protection)")
      ->check(CLI::IsMember({"open", "protected"}));
  c->add_option("--retry", o->retry, "Write again what was NACKed or lost, after the control plane's reroute, up to this many rounds (0: off)")
      ->check(whole_number<int>(0, chip::kTxnIds - 2));
  c->add_option("--status-interval-ms", o->status_interval_ms,
                "Chips report data rates per router and port (and error-rate alarms) this often, in simulated time, while traffic flows; 0: never")
      ->check(whole_number(0, 3600000));
  c->add_option("--look-us", o->look_us,
                "Chips look this long for more input before they sleep, as chip processes over UDP do, keeping part-filled "
                "datagrams open meanwhile (docs/fabric.md#fuller-datagrams-over-udp); 0: they do not")
      ->check(whole_number(0, 100000));
  c->add_option("--latency-samples", o->samples, "Single writes timed per pattern")->check(whole_number<int>(1, 100000));
  c->add_option("--limit", o->limit_s, "Simulated seconds a pattern may take (a replay: after its last injection)")
      ->check(number_in(0.001, 3600));
  c->add_flag("--json", o->json, "One JSON object per pattern (or for the replay)");
  auto* tt_metal = c->add_option("--tt-metal", o->tt_metal,
                                 "Run the tests of a tt-metal fabric test description (test_tt_fabric's YAML) instead of patterns, "
                                 "and report bandwidth as it does (docs/user-guide.md#tt-metals-fabric-tests)");
  for (const char* shaping : {"--pattern", "--size", "--count", "--src", "--dst", "--op"}) tt_metal->excludes(c->get_option(shaping));
  c->add_option("--csv", o->csv, "With --tt-metal: write tt-metal's bandwidth summary CSV to FILE")->needs(tt_metal);
  auto* replay = c->add_option("--replay", o->replay,
                               "Instead of patterns, inject again the requests of a capture written by --capture, each from its "
                               "source at its time, into the system given, and report what was delivered (docs/capture.md#replay)");
  // A replay's traffic is the capture's: the options that shape a pattern have no say in it.
  for (const char* shaping : {"--pattern", "--size", "--count", "--fvc", "--src", "--dst", "--plane", "--op", "--socket",
                              "--handshake", "--l1cb-kib", "--dscb-kib", "--reader-stalls", "--memory", "--retry",
                              "--latency-samples"}) {
    replay->excludes(c->get_option(shaping));
  }
  replay->excludes(tt_metal);
  c->callback([o, &exit_status] { run_sim(*o, exit_status); });
}

}  // namespace ttemu::tools
