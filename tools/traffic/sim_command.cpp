#include "tools/traffic/sim_command.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

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
#include "launcher/launch.hpp"
#include "tools/traffic/pattern_report.hpp"

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
  std::vector<std::string> kills, restarts, cuts;
  std::string trace;
  int samples = 16;
  double limit_s = 60;
  bool json = false;
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

  json run(const std::string& pattern) {
    const int n = static_cast<int>(chips_.size());
    const int src = o_.src.empty() ? 0 : *sys_.node(chip_named(sys_, o_.src, "--src"));
    const int dst = o_.dst.empty() ? n - 1 : *sys_.node(chip_named(sys_, o_.dst, "--dst"));
    const auto pairs = control::pattern_pairs(pattern, chips_, src, dst, o_.seed);
    if (pairs.empty()) throw Error(fmt::format("pattern {} has no pairs on this system", pattern));
    const uint64_t block = uint64_t{o_.size} * o_.count;
    auto id = [&](int i) { return sys_.chips[static_cast<size_t>(i)].id; };
    auto core = [](int d) { return static_cast<uint16_t>(d % chip::kMaxWorkers); };
    auto src_addr = [&](int d) { return l1_ / 2 + static_cast<uint64_t>(d) * block; };
    auto dst_addr = [&](int s) { return static_cast<uint64_t>(s) * block; };
    // Fresh completion queues, and the data at the sources.
    for (auto [s, d] : pairs) {
      if (!sim_.alive(id(s))) continue;
      drain(sim_.worker(id(s), core(d)));
      auto mem = sim_.memory(id(s), src_addr(d), block);
      for (uint32_t k = 0; k < o_.count; ++k) control::fill_pattern(mem.subspan(uint64_t{k} * o_.size, o_.size), s, d, k);
      auto at = sim_.memory(id(d), dst_addr(s), block);
      std::fill(at.begin(), at.end(), uint8_t{0});
    }
    const auto before = link_bytes();
    const link::Time start = sim_.now(), limit = start + duration_cast<link::Time>(std::chrono::duration<double>(o_.limit_s));
    for (uint32_t k = 0; k < o_.count; ++k) {
      for (auto [s, d] : pairs) {
        if (!sim_.alive(id(s))) continue;  // a dead chip's workers are gone with it
        chip::CommandRequest r{.command = routing::Command::kWrite, .fvc = static_cast<int8_t>(o_.fvc),
                               .dst_mesh = id(d).mesh, .dst_device = id(d).device, .size = o_.size,
                               .src_addr = src_addr(d) + uint64_t{k} * o_.size,
                               .dst_addr = dst_addr(s) + uint64_t{k} * o_.size};
        auto& w = sim_.worker(id(s), core(d));
        while (!w.try_submit(r)) {  // the command buffer is full: let the chip take some
          if (sim_.now() >= limit) throw Error(fmt::format("pattern {}: no room in {}'s command buffer within {} s",
                                                           pattern, routing::to_string(id(s)), o_.limit_s));
          sim_.run(std::chrono::microseconds(20));
        }
      }
    }
    // Until every write is answered, or nothing moves any more, or the limit.
    auto answered = [&] {
      for (auto [s, d] : pairs) {
        if (sim_.alive(id(s)) && sim_.worker(id(s), core(d)).in_flight(0) > 0) return false;
      }
      return true;
    };
    while (!answered() && sim_.now() < limit) {
      if (sim_.run(std::chrono::milliseconds(1)) && !answered()) break;  // idle: the rest is lost
    }
    const double seconds = std::chrono::duration<double>(sim_.now() - start).count();
    // How each pair's writes ended, and what landed.
    uint64_t verified = 0, errors = 0, unverified = 0, not_sent = 0, nacks = 0, unanswered = 0;
    for (auto [s, d] : pairs) {
      if (!sim_.alive(id(s))) {  // its workers died with it (or never started)
        not_sent += block;
        continue;
      }
      auto& w = sim_.worker(id(s), core(d));
      uint32_t nacked = 0;
      chip::Completion got[64];
      for (size_t k; (k = w.poll(got)) > 0;) {
        for (size_t i = 0; i < k; ++i) nacked += got[i].command == routing::Command::kNack ? got[i].packets : 0;
      }
      const uint32_t pending = w.in_flight(0);
      nacks += nacked;
      unanswered += pending;
      auto mem = sim_.memory(id(d), dst_addr(s), block);
      for (uint32_t k = 0; k < o_.count; ++k) {
        const bool ok = control::check_pattern(mem.subspan(uint64_t{k} * o_.size, o_.size), s, d, k);
        // A write that was NACKed or never answered may be missing; one that was acknowledged
        // must be there, bit-exact.
        if (ok) verified += o_.size;
        else if (nacked > 0 || pending > 0 || !sim_.alive(id(d))) unverified += o_.size;
        else errors += o_.size;
      }
    }
    // Latency: single small writes, each waited for, in simulated time.
    std::vector<double> rtt;
    for (int i = 0; i < std::max(1, o_.samples); ++i) {
      auto [s, d] = pairs[static_cast<size_t>(i) * pairs.size() / static_cast<size_t>(std::max(1, o_.samples)) % pairs.size()];
      if (!sim_.alive(id(s))) continue;
      auto& w = sim_.worker(id(s), core(d));
      const link::Time t0 = sim_.now();
      if (!w.try_submit({.command = routing::Command::kWrite, .fvc = static_cast<int8_t>(o_.fvc), .txn_id = 1,
                         .dst_mesh = id(d).mesh, .dst_device = id(d).device, .size = 64,
                         .src_addr = src_addr(d), .dst_addr = dst_addr(s)})) {
        continue;
      }
      while (w.in_flight(1) > 0 && sim_.now() < limit) {
        if (sim_.run(std::chrono::microseconds(5)) && w.in_flight(1) > 0) break;
      }
      if (w.in_flight(1) == 0) rtt.push_back(std::chrono::duration<double, std::micro>(sim_.now() - t0).count());
      drain(w);
    }
    const auto after = link_bytes();
    double max_link = 0;
    int links_used = 0;
    for (const auto& [end, bytes] : after) {
      const double moved = static_cast<double>(bytes - before.at(end));
      if (moved > 0) ++links_used;
      if (seconds > 0) max_link = std::max(max_link, moved / seconds / 1e9);
    }
    const double hops = mean_hops(sys_, tables_, 0, pairs);
    const Percentiles lat = percentiles(rtt);
    const double bytes = static_cast<double>(pairs.size()) * static_cast<double>(block);
    return {{"pattern", pattern}, {"pairs", pairs.size()}, {"bytes", bytes}, {"seconds", seconds},
            {"gb_per_s", seconds > 0 ? bytes / seconds / 1e9 : 0.0}, {"verified", verified}, {"errors", errors},
            {"nacks", nacks}, {"unanswered", unanswered}, {"unverified", unverified}, {"not_sent", not_sent},
            {"latency_us", lat.to_json()},
            {"link_directions_used", links_used}, {"max_link_gb_per_s", max_link}, {"mean_hops", hops},
            {"per_hop_us", hops > 0 ? lat.p50 / (2 * hops) : 0.0},
            {"sim_time_s", std::chrono::duration<double>(sim_.now()).count()}};
  }

 private:
  static void drain(chip::CommandBufferClient& w) {
    chip::Completion got[64];
    while (w.poll(got) > 0) {
    }
  }

  std::map<routing::PortId, uint64_t> link_bytes() const {
    std::map<routing::PortId, uint64_t> out;
    for (const auto& l : sys_.links) {
      for (const auto& end : {l.a, l.b}) out[end] = sim_.counters(end).bytes_tx.load();
    }
    return out;
  }

  sim::FabricSim& sim_;
  const control::System& sys_;
  const control::TableSet& tables_;
  const SimOptions& o_;
  size_t l1_;
  std::vector<control::PatternChip> chips_;  // the chips as the patterns see them
};

void run_sim(const SimOptions& o, int& exit_status) {
  const std::string file = o.file.empty() ? default_system_file() : o.file;
  const control::System sys = control::load_system(file);
  const control::TableSet tables = control::compute_tables(sys);
  const auto patterns = control::expand_patterns(o.patterns);
  sim::SimConfig cfg;
  link::FaultPlan plan;
  if (!o.faults.empty()) plan = link::load_fault_plan(o.faults, sys.wiring());
  cfg.seed = o.seed_given ? o.seed : plan.seed ? *plan.seed : 1;
  cfg.link_faults = plan.tx;
  cfg.trace = !o.trace.empty();  // nobody reads it otherwise
  cfg.link.ack_delay = std::chrono::microseconds(0);
  // Sources keep their data in the upper half of L1, destinations take each source's writes
  // in the lower half: room for every chip's block in each.
  const uint64_t block = uint64_t{o.size} * o.count;
  const uint64_t need = 2 * block * static_cast<uint64_t>(sys.node_count());
  if (need > (uint64_t{1} << 32)) throw Error(fmt::format("--size x --count x chips is too large ({} bytes of L1 per chip)", need));
  cfg.l1_bytes = std::max<size_t>(cfg.l1_bytes, need);
  std::ofstream trace_file;  // opened first: a bad path fails before the run, not after it
  if (!o.trace.empty() && o.trace != "-") {
    trace_file.open(o.trace);
    if (!trace_file) throw Error(fmt::format("--trace: cannot write '{}'", o.trace));
  }
  sim::FabricSim sim(sys, tables, cfg);
  for (const auto& k : o.kills) {
    auto s = parse_at(k, "--kill");
    const ChipId c = chip_named(sys, s.what, "--kill");
    sim.at(s.at, [&sim, c] { sim.kill(c); });
  }
  for (const auto& r : o.restarts) {
    auto s = parse_at(r, "--restart");
    const ChipId c = chip_named(sys, s.what, "--restart");
    sim.at(s.at, [&sim, c] { sim.restart(c); });
  }
  for (const auto& c : o.cuts) {
    auto s = parse_at(c, "--cut");
    const routing::PortId p = port_named(sys, s.what, "--cut");
    sim.at(s.at, [&sim, p] { sim.cut(p, true); });
    if (s.has_until) sim.at(s.until, [&sim, p] { sim.cut(p, false); });
  }
  sim.run(std::chrono::milliseconds(1));  // every link comes up
  if (!o.json) {
    fmt::print("ttemu sim: {}: {} chip(s), {} link(s), seed {}, simulated\n", file, sys.node_count(), sys.links.size(), cfg.seed);
  }
  PatternRun runner(sim, sys, tables, o, cfg.l1_bytes);
  bool bad = false;
  for (const auto& p : patterns) {
    json r = runner.run(p);
    bad = bad || r["errors"].get<uint64_t>() > 0;
    if (o.json) {
      fmt::print("{}\n", r.dump());
    } else {
      fmt::print("{:<18} {:>5} pairs {:>10.0f} B in {:.6f} s (simulated): {:7.3f} GB/s  verified {} B, errors {}, "
                 "nacks {}, unanswered {}  latency min/avg/p99 {:.1f}/{:.1f}/{:.1f} us (per hop {:.1f} us)  "
                 "link directions {} (busiest {:.3f} GB/s)\n",
                 p, r["pairs"].get<size_t>(), r["bytes"].get<double>(), r["seconds"].get<double>(),
                 r["gb_per_s"].get<double>(), r["verified"].get<uint64_t>(), r["errors"].get<uint64_t>(),
                 r["nacks"].get<uint64_t>(), r["unanswered"].get<uint64_t>(), r["latency_us"]["min"].get<double>(),
                 r["latency_us"]["avg"].get<double>(), r["latency_us"]["p99"].get<double>(),
                 r["per_hop_us"].get<double>(), r["link_directions_used"].get<int>(),
                 r["max_link_gb_per_s"].get<double>());
    }
    std::fflush(stdout);
  }
  if (!o.trace.empty()) {
    std::ostream* to = o.trace == "-" ? &std::cout : &trace_file;
    for (const auto& line : sim.trace()) *to << line << '\n';
    to->flush();
    if (!*to) throw Error(fmt::format("--trace: writing '{}' failed", o.trace));
  }
  if (bad) exit_status = 1;
}

}  // namespace

void add_sim_command(CLI::App& app, int& exit_status) {
  auto o = std::make_shared<SimOptions>();
  auto* c = app.add_subcommand("sim", "Run a system in one process on a simulated clock, from a seed, and verify every byte");
  c->add_option("file", o->file, "System specification (default: the Galaxy)");
  c->add_option("--pattern", o->patterns, "unicast, all_to_all, one_to_all, all_to_one, neighbor_exchange, random_pairing, or all")
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
  c->add_option("--trace", o->trace, "Write the event trace to FILE ('-': standard output)");
  c->add_option("--latency-samples", o->samples, "Single writes timed per pattern")->check(whole_number<int>(1, 100000));
  c->add_option("--limit", o->limit_s, "Simulated seconds a pattern may take")->check(number_in(0.001, 3600));
  c->add_flag("--json", o->json, "One JSON object per pattern");
  c->callback([o, &exit_status] { run_sim(*o, exit_status); });
}

}  // namespace ttemu::tools
