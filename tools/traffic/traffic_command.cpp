#include "tools/traffic/traffic_command.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulator/chip/chip_control.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/job/description.hpp"
#include "emulator/common/error.hpp"
#include "emulator/control/routing_tables.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/control/table_check.hpp"
#include "emulator/control/traffic_patterns.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/control_client.hpp"
#include "launcher/launch.hpp"
#include "launcher/mpi_bootstrap.hpp"
#include "tools/traffic/live_replay.hpp"
#include "tools/traffic/pattern_report.hpp"
#include "tools/traffic/tt_metal_report.hpp"
#include "libfabric_tt/tt_fabric.h"

namespace ttemu::tools {

using namespace launcher;  // the launcher's CLI checks, run_launch, default_system_file

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct TrafficOptions {
  std::vector<std::string> patterns{"all_to_all"};
  std::string op = "write";  // write | read (the writes, then read back) | atomic (increments)
  uint32_t size = 4096;
  uint32_t count = 4;
  int plane = 0;
  int fvc = -1;
  std::string src, dst;
  uint64_t seed = 1;
  int samples = 64;
  int retry = 0;  // rounds of the client library's retry mode (0: off)
  bool json = false;
  std::string job;
  std::string system;  // to start when none is running
  std::string replay;    // a capture's requests instead of patterns (live_replay.hpp)
  std::string tt_metal;  // a tt-metal fabric test description to run instead of patterns
  std::string csv;       // tt-metal's bandwidth summary CSV of the --tt-metal run
};


// A chip's segment. A chip being restarted (`ttemu chip restart`) has its segments made anew:
// between the old ones' removal and the new ones' creation the name is missing for a moment, so
// a missing one is looked for again for up to two seconds (as a worker's open waits).
chip::Segment open_chip_segment(const std::string& name) {
  for (const auto give_up = Clock::now() + std::chrono::seconds(2);;) {
    try {
      return chip::Segment::open(name);
    } catch (const Error&) {
      if (Clock::now() > give_up) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

// Which chips this process drives and verifies: every chip; or, when the system is spread over
// hosts (multi-host launch), the chips of this host, with one rank per host under mpirun (or
// srun), the ranks agreeing through MPI on when to start and on the totals.
class Spread {
 public:
  explicit Spread(const job::SystemDescription& d) : mine_(d.chips.size(), true) {
    if (d.this_host.empty()) return;
    std::set<std::string> hosts;
    for (const auto& c : d.chips) hosts.insert(c.host);
    if (!launcher::started_by_mpi()) {
      throw Error(fmt::format("the system runs on {} hosts; run ttemu traffic under mpirun with a rank on each "
                              "(mpirun -np {} --host <its hosts> ttemu traffic ...)", hosts.size(), hosts.size()));
    }
    mpi_ = std::make_unique<launcher::MpiGroup>();
    const std::vector<std::string> ranks = mpi_->all(d.this_host);
    for (const auto& h : hosts) {
      if (std::find(ranks.begin(), ranks.end(), h) == ranks.end()) {
        throw Error(fmt::format("no rank runs on host {}, which has chips of the system", h));
      }
    }
    // The lowest rank of each host drives it; the others only take part.
    const bool first = std::find(ranks.begin(), ranks.end(), d.this_host) - ranks.begin() == mpi_->rank();
    for (size_t i = 0; i < mine_.size(); ++i) mine_[i] = first && d.chips[i].host == d.this_host;
  }
  bool mine(int i) const { return mine_[static_cast<size_t>(i)]; }
  bool mine(const std::string& chip, const job::SystemDescription& d) const {
    for (size_t i = 0; i < d.chips.size(); ++i) {
      if (d.chips[i].name == chip) return mine_[i];
    }
    return false;
  }
  bool leader() const { return !mpi_ || mpi_->rank() == 0; }
  void barrier() {
    if (mpi_) mpi_->barrier();
  }
  uint64_t sum(uint64_t v) { return mpi_ ? mpi_->sum(v) : v; }
  double max(double v) { return mpi_ ? mpi_->max(v) : v; }
  std::vector<int> max(std::vector<int> v) { return mpi_ ? mpi_->max(std::move(v)) : v; }
  std::vector<double> gather(const std::vector<double>& v) { return mpi_ ? mpi_->gather(v) : v; }

 private:
  std::vector<bool> mine_;
  std::unique_ptr<launcher::MpiGroup> mpi_;
};

// Bytes each link end of this process's chips has sent, read from the chips' control blocks
// (as `ttemu status` does).
class LinkBytes {
 public:
  LinkBytes(const job::SystemDescription& d, const Spread& spread) {
    for (const auto& l : d.links) {
      for (const auto& name : {l.a, l.b}) {
        const auto end = routing::parse_port(name);
        if (!end) throw Error(fmt::format("the system description names a port '{}'", name));
        if (!spread.mine(routing::to_string(end->chip), d)) continue;
        if (!blocks_.count(end->chip)) {
          blocks_.emplace(end->chip, open_chip_segment(chip::segment_name(d.job, end->chip, chip::SegmentKind::kControl)));
        }
        ends_.push_back(*end);
      }
    }
  }
  std::vector<uint64_t> sample() const {
    std::vector<uint64_t> out;
    for (const auto& e : ends_) {
      out.push_back(blocks_.at(e.chip).as<chip::ChipControl>()->ports[e.port].counters.bytes_tx.load());
    }
    return out;
  }

 private:
  std::map<routing::ChipId, chip::Segment> blocks_;
  std::vector<routing::PortId> ends_;
};

// What every pattern of one run shares: the system as published, its link counters, and its
// routing tables (for route lengths; absent when the system file cannot be read any more).
struct RunContext {
  explicit RunContext(job::SystemDescription d) : desc(std::move(d)), spread(desc), links(desc, spread) {
    for (const auto& c : desc.chips) where.push_back({c.mesh, c.device, c.row, c.col});
    try {
      sys = control::load_system(desc.system_path);
      tables = control::compute_tables(*sys);
    } catch (const std::exception&) {
      sys.reset();
    }
  }
  ~RunContext() {
    for (auto& [i, w] : workers_) tt_fabric_close(w);
  }
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  // The worker on chip i (core 0), opened on first use and kept for the run; null when the
  // chip died meanwhile. A chip being restarted may not listen yet: it gets two seconds.
  tt_fabric* worker(int i) {
    if (auto it = workers_.find(i); it != workers_.end()) return it->second;
    const auto& c = desc.chips.at(static_cast<size_t>(i));
    char err[256];
    tt_fabric* w = nullptr;
    for (const auto give_up = Clock::now() + std::chrono::seconds(2);;) {
      if ((w = tt_fabric_open(desc.job.text().c_str(), c.mesh, c.device, 0, err, sizeof err))) break;
      if (!running_here()[static_cast<size_t>(i)]) return nullptr;
      if (Clock::now() > give_up) throw Error(err);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (retry > 0) tt_fabric_set_retry(w, retry, kRetryWaitMs);
    return workers_[i] = w;
  }
  // Which chips' processes run now, by index; spread over hosts, each host tells of its own.
  std::vector<bool> running() {
    std::vector<int> down;
    for (bool up : running_here()) down.push_back(!up);
    down = spread.max(down);
    std::vector<bool> out;
    for (int d : down) out.push_back(d == 0);
    return out;
  }
  // The same, as this host sees it (a chip of another host is taken to run).
  std::vector<bool> running_here() {
    std::vector<bool> out;
    for (size_t i = 0; i < desc.chips.size(); ++i) {
      if (!spread.mine(static_cast<int>(i))) {
        out.push_back(true);
        continue;
      }
      auto it = controls_.find(i);
      if (it == controls_.end()) {
        const auto& c = desc.chips[i];
        it = controls_.emplace(i, open_chip_segment(chip::segment_name(desc.job, {c.mesh, c.device}, chip::SegmentKind::kControl))).first;
      }
      out.push_back(chip::chip_running(*it->second.as<chip::ChipControl>()));
    }
    return out;
  }
  // Chip i's L1, mapped on first use and kept for the run.
  uint8_t* l1(int i) {
    auto it = l1_.find(i);
    if (it == l1_.end()) {
      const auto& c = desc.chips.at(static_cast<size_t>(i));
      it = l1_.emplace(i, open_chip_segment(chip::segment_name(desc.job, {c.mesh, c.device}, chip::SegmentKind::kL1))).first;
    }
    return it->second.as<uint8_t>();
  }
  // The routing tables' version chip i has loaded, and the pid of its process (chips of this host).
  uint32_t tables_version(int i) { return control(i).tables_version.load(std::memory_order_acquire); }
  uint32_t pid(int i) { return control(i).pid.load(std::memory_order_acquire); }

  job::SystemDescription desc;
  Spread spread;
  int retry = 0;  // --retry: rounds of the client library's retry mode
  static constexpr uint32_t kRetryWaitMs = 1000;
  std::vector<control::PatternChip> where;  // the chips as the patterns see them
  LinkBytes links;
  std::optional<control::System> sys;
  control::TableSet tables;

 private:
  const chip::ChipControl& control(int i) {
    running_here();  // (opens the control blocks)
    return *controls_.at(static_cast<size_t>(i)).as<chip::ChipControl>();
  }
  std::map<int, tt_fabric*> workers_;
  std::map<int, chip::Segment> l1_;
  std::map<size_t, chip::Segment> controls_;
};

// How long a latency probe's retry mode waits before it takes the probe as lost.
constexpr uint32_t kProbeRetryWaitMs = 100;
// Transaction ids: a pattern's writes (retry mode keeps them by transaction), then the latency
// probes (1 to kTxnIds - 2, moving on after a probe that failed), and reads and atomics, which
// are waited for apart (await_answers) so that one lost in a dead chip holds up no barrier.
constexpr uint8_t kPatternTxn = 0;
constexpr uint8_t kReadAtomicTxn = chip::kTxnIds - 1;

// Reads and atomics are not retried (an atomic is not idempotent: the client library retries
// writes only), and a barrier would wait out its limit (a minute) for one lost in a chip that
// died. This waits as the library's retry mode judges a loss: until every packet of transaction
// `txn` of the running sources is answered, or none has been for a second since new tables were
// loaded (lost with a chip that died: no router is left to NACK them), or for five seconds in any
// case (silent: neither answered nor NACKed, and no chip's death to explain it). `before`: each
// worker's packets of `txn` unanswered before (lost in an earlier pattern).
struct Unanswered {
  std::map<int, uint64_t> by_source;  // a source whose chip died is left out: its pairs went with it
  bool lost = false;                  // after new tables (else silent)
  uint64_t total() const {
    uint64_t n = 0;
    for (const auto& [s, k] : by_source) n += k;
    return n;
  }
};
Unanswered await_answers(const std::map<int, tt_fabric*>& workers, uint8_t txn, RunContext& run,
                         const std::map<int, int64_t>& before) {
  constexpr auto kLostAfter = std::chrono::seconds(1), kGiveUp = std::chrono::seconds(5);
  std::map<int, uint32_t> version;
  for (const auto& [s, w] : workers) version[s] = run.tables_version(s);
  auto progress = Clock::now();
  uint64_t last = ~uint64_t{0};
  for (Unanswered left;; left.by_source.clear()) {
    uint64_t total = 0;
    bool reloaded = false;
    const std::vector<bool> up = run.running_here();
    for (const auto& [s, w] : workers) {
      if (!up[static_cast<size_t>(s)]) continue;
      const int64_t n = tt_fabric_pending(w, txn) - before.at(s);
      if (n > 0) left.by_source[s] = static_cast<uint64_t>(n), total += static_cast<uint64_t>(n);
      reloaded = reloaded || run.tables_version(s) != version[s];
    }
    const auto now = Clock::now();
    if (total != last) last = total, progress = now;
    left.lost = reloaded;
    if (total == 0 || (reloaded && now - progress >= kLostAfter) || now - progress >= kGiveUp) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Per source chip, values known where the source runs, made known everywhere (spread over
// hosts, each host fills its own sources).
std::vector<uint64_t> shared_by_source(Spread& spread, size_t chips, const std::map<int, uint64_t>& mine) {
  std::vector<uint64_t> out(chips, 0);
  for (const auto& [s, v] : mine) out[static_cast<size_t>(s)] = v;
  for (auto& v : out) v = spread.sum(v);
  return out;
}

// A pattern by name, or (`given`) the pairs of a tt-metal test, named `pattern` in the report.
json run_pattern(const std::string& pattern, const TrafficOptions& o, RunContext& run,
                 const std::vector<std::pair<int, int>>* given = nullptr) {
  const job::SystemDescription& desc = run.desc;
  const std::vector<job::ChipDescription>& chips = desc.chips;
  auto index_of = [&](const std::string& name, int fallback) {
    if (name.empty()) return fallback;
    const auto id = routing::parse_chip(name);  // the project's spelling rules (m0d3 is M0D3)
    for (size_t i = 0; id && i < chips.size(); ++i) {
      if (chips[i].mesh == id->mesh && chips[i].device == id->device) return static_cast<int>(i);
    }
    throw Error(fmt::format("device {} is not in the running system", name));
  };
  const int src = index_of(o.src, 0), dst = index_of(o.dst, static_cast<int>(chips.size()) - 1);
  auto pairs = given ? *given : control::pattern_pairs(pattern, run.where, src, dst, o.seed);
  if (pairs.empty()) throw Error(fmt::format("pattern {} has no pairs on this system", pattern));
  // A chip that is not running sends nothing; writes to it are sent, and must come back NACKed.
  const std::vector<bool> running = run.running();
  std::erase_if(pairs, [&](const auto& p) { return !running[static_cast<size_t>(p.first)]; });
  if (pairs.empty()) throw Error(fmt::format("pattern {}: no source chip is running", pattern));
  Spread& spread = run.spread;
  const bool atomic = o.op == "atomic", reads = o.op == "read";
  const uint64_t block = uint64_t{o.size} * o.count;
  // What a pair's commands carry: its block of writes, or `count` increments of one counter.
  const uint64_t per_pair = atomic ? uint64_t{4} * o.count : block;
  const uint64_t l1 = chips[0].l1_bytes;
  // (--op read: the blocks read back too, above the sources' data.)
  if ((reads ? 2 : 1) * block * chips.size() > l1 / 2) {
    throw Error(fmt::format("size x count x chips{} = {} bytes does not fit half of a chip's L1 ({} bytes)",
                            reads ? " x 2 (--op read)" : "", (reads ? 2 : 1) * block * chips.size(), l1 / 2));
  }
  // One worker per source chip (the run keeps them); sources keep their data in the upper half
  // of their L1.
  // (Spread over hosts, each host drives its own sources: `sending` are this process's pairs.)
  std::map<int, tt_fabric*> workers;
  for (auto [s, d] : pairs) {
    if (spread.mine(s)) workers.emplace(s, run.worker(s));
  }
  // (A chip that died since it was seen running sends nothing either.)
  std::vector<int> gone(chips.size(), 0);
  for (const auto& [s, w] : workers) gone[static_cast<size_t>(s)] = w == nullptr;
  gone = spread.max(gone);
  std::erase_if(pairs, [&](const auto& p) { return gone[static_cast<size_t>(p.first)] != 0; });
  std::erase_if(workers, [](const auto& w) { return w.second == nullptr; });
  if (pairs.empty()) throw Error(fmt::format("pattern {}: no source chip is running", pattern));
  std::vector<std::pair<int, int>> sending;
  for (auto p : pairs) {
    if (spread.mine(p.first)) sending.push_back(p);
  }
  auto src_addr = [&](int, int d) { return l1 / 2 + static_cast<uint64_t>(d) * block; };
  auto dst_addr = [&](int s) { return static_cast<uint64_t>(s) * block; };
  auto readback_addr = [&](int d) { return l1 / 2 + (chips.size() + static_cast<uint64_t>(d)) * block; };
  auto device = [&](int i) { return tt_fabric_device{chips[static_cast<size_t>(i)].mesh, chips[static_cast<size_t>(i)].device}; };
  for (auto [s, d] : sending) {
    if (atomic) break;  // (increments carry no data)
    auto* mem = static_cast<uint8_t*>(tt_fabric_memory(workers[s], src_addr(s, d), block));
    for (uint32_t k = 0; k < o.count; ++k) control::fill_pattern({mem + uint64_t{k} * o.size, o.size}, s, d, k);
  }
  // Every destination range starts cleared, as in ttemu sim: counters start at 0, and a write
  // of an earlier run cannot pass for this one's. (A chip whose memory is gone since it was seen
  // running, its process ended, needs none.)
  for (auto [s, d] : pairs) {
    if (!spread.mine(d) || !running[static_cast<size_t>(d)]) continue;
    try {
      std::memset(run.l1(d) + dst_addr(s), 0, atomic ? 4 : block);
    } catch (const Error&) {
    }
  }
  uint32_t nacks_before = 0;
  uint64_t retried_before = 0;
  for (auto& [s, w] : workers) nacks_before += tt_fabric_nacks(w), retried_before += tt_fabric_retried(w);
  // Each chip's process as the pattern starts: one restarted meanwhile lost its memory and its
  // workers' transactions (judged as dead for reads and atomics, as ttemu sim judges them).
  std::vector<uint32_t> born(chips.size(), 0);
  for (size_t i = 0; i < chips.size(); ++i) {
    if (spread.mine(static_cast<int>(i)) && running[i]) born[i] = run.pid(static_cast<int>(i));
  }
  // Chips that run now, and (reads and atomics) have run since the pattern started.
  auto running_since_start = [&] {
    std::vector<bool> up = run.running();
    if (!atomic && !reads) return up;
    std::vector<int> restarted(chips.size(), 0);
    for (size_t i = 0; i < chips.size(); ++i) restarted[i] = spread.mine(static_cast<int>(i)) && run.pid(static_cast<int>(i)) != born[i];
    restarted = spread.max(restarted);
    for (size_t i = 0; i < chips.size(); ++i) up[i] = up[i] && restarted[i] == 0;
    return up;
  };
  const auto before = run.links.sample();
  spread.barrier();  // every host starts together
  const auto start = Clock::now();
  // Each source goes on until it is done or its chip dies (ECHIPDOWN); writes still NACKed
  // after the retries (ENACKED) are judged below, pair by pair.
  std::map<int, int> rc;
  for (auto& [s, w] : workers) rc[s] = TT_FABRIC_OK;
  // --op atomic, in rounds as ttemu sim sends them: every pair's increments; then, while --retry
  // rounds are left, again what a pair's counter misses once the round's increments were all
  // answered, NACKed or lost with a chip (a NACKed increment never counted, and one lost with a
  // chip never will), over the new routes. The last round's NACKs, answers and increments are
  // what the counters are judged by (judge_counters).
  Unanswered increments_unanswered;
  std::map<int, uint64_t> last_nacked;                      // by source
  std::vector<uint32_t> last_sends(pairs.size(), o.count);  // by pair
  uint64_t increments_retried = 0;
  auto increment_rounds = [&] {
    std::vector<uint32_t> sends(pairs.size(), o.count);
    for (int round = 0;; ++round) {
      std::map<int, uint32_t> nacks_then, version_then;
      std::map<int, int64_t> pending_then;  // (lost in an earlier pattern or round)
      for (auto& [s, w] : workers) {
        nacks_then[s] = tt_fabric_nacks(w), version_then[s] = run.tables_version(s);
        pending_then[s] = std::max<int64_t>(0, tt_fabric_pending(w, kReadAtomicTxn));
      }
      for (uint32_t k = 0; k < o.count; ++k) {
        for (size_t i = 0; i < pairs.size(); ++i) {
          auto [s, d] = pairs[i];
          if (k >= sends[i] || !spread.mine(s) || rc[s] != TT_FABRIC_OK) continue;
          tt_fabric_status st;
          // (An increment by 1 of the pair's 32-bit counter, which wraps past 2^32 - 1.)
          rc[s] = fabric_async_atomic_inc(workers[s], static_cast<uint8_t>(o.plane), device(d), dst_addr(s), 1, 31, o.fvc,
                                          kReadAtomicTxn, &st);
        }
      }
      increments_unanswered = await_answers(workers, kReadAtomicTxn, run, pending_then);
      for (auto& [s, w] : workers) last_nacked[s] = tt_fabric_nacks(w) - nacks_then[s];
      last_sends = sends;
      // What each pair's counter misses now (read where the destination runs).
      const std::vector<bool> up = running_since_start();
      std::vector<int> missing(pairs.size(), 0);
      for (size_t i = 0; i < pairs.size(); ++i) {
        auto [s, d] = pairs[i];
        if (!spread.mine(d) || !up[static_cast<size_t>(s)] || !up[static_cast<size_t>(d)]) continue;
        uint32_t counter = 0;
        std::memcpy(&counter, run.l1(d) + dst_addr(s), 4);
        missing[i] = counter < o.count ? static_cast<int>(o.count - counter) : 0;
      }
      missing = spread.max(missing);
      if (round >= o.retry || std::all_of(missing.begin(), missing.end(), [](int m) { return m == 0; })) return;
      // New routes first, as the library's retry mode waits for them (up to a second).
      for (const auto until = Clock::now() + std::chrono::seconds(1); Clock::now() < until;) {
        if (std::any_of(workers.begin(), workers.end(), [&](const auto& w) { return run.tables_version(w.first) != version_then[w.first]; })) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      for (size_t i = 0; i < pairs.size(); ++i) {
        sends[i] = static_cast<uint32_t>(missing[i]);
        if (spread.mine(pairs[i].first)) increments_retried += sends[i];
      }
    }
  };
  if (atomic) {
    increment_rounds();
  } else {
    for (uint32_t k = 0; k < o.count; ++k) {
      for (auto [s, d] : sending) {
        if (rc[s] != TT_FABRIC_OK) continue;
        tt_fabric_status st;
        rc[s] = fabric_async_write(workers[s], static_cast<uint8_t>(o.plane), src_addr(s, d) + uint64_t{k} * o.size, device(d),
                                   dst_addr(s) + uint64_t{k} * o.size, o.size, o.fvc, kPatternTxn, &st);
      }
    }
    // Barriers in parallel, as workers on many chips wait: one that retries (and waits for new
    // routes) holds up no other.
    std::vector<std::jthread> waiting;
    for (auto& [s, w] : workers) {
      if (rc[s] == TT_FABRIC_OK) waiting.emplace_back([w = w, &code = rc[s]] { code = fabric_async_write_barrier(w, kPatternTxn); });
    }
  }
  for (auto [s, code] : rc) {
    if (code != TT_FABRIC_OK && code != TT_FABRIC_ECHIPDOWN && code != TT_FABRIC_ENACKED) {
      throw Error(fmt::format("pattern {}: {}: {}", pattern, chips[static_cast<size_t>(s)].name, tt_fabric_strerror(code)));
    }
  }
  spread.barrier();  // every host's writes are done (acknowledged) before anyone verifies
  const double seconds = spread.max(std::chrono::duration<double>(Clock::now() - start).count());
  // Which sources' writes stayed NACKed (each host knows its own).
  std::vector<int> nacked(chips.size(), 0);
  for (auto [s, code] : rc) nacked[static_cast<size_t>(s)] = code == TT_FABRIC_ENACKED;
  nacked = spread.max(nacked);
  const auto after = run.links.sample();
  // Verify every byte at every destination, straight from its memory: every pair between chips
  // that still run. Pairs from a chip that died went with it; pairs to one are NACKed.
  uint64_t verified = 0, errors = 0;
  const std::vector<bool> alive = running_since_start();  // once the writes are done
  const PairSplit split = split_dead(
      static_cast<int>(chips.size()), pairs, [&](int i) { return !alive[static_cast<size_t>(i)]; },
      [&](int i) { return chips[static_cast<size_t>(i)].name; });
  // A source whose writes stayed NACKed after its retries (ENACKED) was told so: what of them
  // is missing is unverified, not an error (as ttemu sim judges a NACKed pair).
  uint64_t unverified = 0, atomic_errors = 0;
  json error_writes = json::array();
  std::vector<int> landed(split.live.size(), 0);  // every write of the pair verified (--op read reads them back)
  // --op atomic: a pair's counter holds at most its `count` increments, and what a source's
  // counters miss must have been NACKed or never answered (an answer can be lost after the
  // count); what was NACKed cannot have counted, but toward chips that died (counted apart).
  // NACKs and answers are known by source (one worker sends to all its destinations), so the
  // sums are judged by source, as ttemu sim judges them by pair.
  auto judge_counters = [&] {
    std::map<int, uint64_t> nacked_incs, missing, good;  // by source (missing, good: of the destinations here)
    for (const auto& [s, n] : last_nacked) nacked_incs[s] = n;
    for (auto [s, d] : split.live) {
      if (!spread.mine(d)) continue;
      uint32_t counter = 0;
      std::memcpy(&counter, run.l1(d) + dst_addr(s), 4);
      if (counter > o.count) {  // an increment counted twice
        errors += per_pair, ++atomic_errors;
        continue;
      }
      missing[s] += o.count - counter, ++good[s];
    }
    const auto all_nacked = shared_by_source(spread, chips.size(), nacked_incs);
    const auto all_unanswered = shared_by_source(spread, chips.size(), increments_unanswered.by_source);
    const auto all_missing = shared_by_source(spread, chips.size(), missing);
    const auto all_good = shared_by_source(spread, chips.size(), good);
    if (!spread.leader()) return;  // (summed over the hosts below: counted once)
    std::vector<uint64_t> to_dead(chips.size(), 0);  // the last round's increments toward chips that died
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto [s, d] = pairs[i];
      if (alive[static_cast<size_t>(s)] && !alive[static_cast<size_t>(d)]) to_dead[static_cast<size_t>(s)] += last_sends[i];
    }
    for (size_t s = 0; s < chips.size(); ++s) {
      if (all_good[s] == 0) continue;
      const uint64_t n = all_nacked[s], to_dead_most = to_dead[s];
      if (all_missing[s] + to_dead_most < n || all_missing[s] > n + all_unanswered[s]) {
        errors += all_good[s] * per_pair, ++atomic_errors;
        continue;
      }
      verified += (all_good[s] * o.count - all_missing[s]) * 4, unverified += all_missing[s] * 4;
    }
  };
  // --op read: every pair whose writes all landed reads its block back into the source's
  // memory, above its data, and what comes back must be what was written. Not retried: what a
  // source read while some of its reads were NACKed or never answered is counted, not checked
  // (its NACKs are known by source, as for its writes). Every host calls this.
  auto read_back = [&](const std::vector<int>& to_read) {
    std::map<int, uint32_t> nacks_then;
    std::map<int, int64_t> pending_then;
    std::map<int, int> code;
    for (auto& [s, w] : workers) {
      nacks_then[s] = tt_fabric_nacks(w);
      pending_then[s] = std::max<int64_t>(0, tt_fabric_pending(w, kReadAtomicTxn));
      code[s] = TT_FABRIC_OK;
    }
    auto readback = [&](int s, int d) { return static_cast<uint8_t*>(tt_fabric_memory(workers[s], readback_addr(d), block)); };
    for (size_t i = 0; i < split.live.size(); ++i) {
      auto [s, d] = split.live[i];
      if (to_read[i] && spread.mine(s)) std::memset(readback(s, d), 0, block);
    }
    for (uint32_t k = 0; k < o.count; ++k) {
      for (size_t i = 0; i < split.live.size(); ++i) {
        auto [s, d] = split.live[i];
        if (!to_read[i] || !spread.mine(s) || code[s] != TT_FABRIC_OK) continue;
        tt_fabric_status st;
        code[s] = fabric_async_read(workers[s], static_cast<uint8_t>(o.plane), device(d), dst_addr(s) + uint64_t{k} * o.size,
                                    readback_addr(d) + uint64_t{k} * o.size, o.size, o.fvc, kReadAtomicTxn, &st);
      }
    }
    for (auto [s, c] : code) {
      if (c != TT_FABRIC_OK && c != TT_FABRIC_ECHIPDOWN) {
        throw Error(fmt::format("pattern {}: reading back: {}: {}", pattern, chips[static_cast<size_t>(s)].name, tt_fabric_strerror(c)));
      }
    }
    const Unanswered left = await_answers(workers, kReadAtomicTxn, run, pending_then);
    const std::vector<bool> up = running_since_start();
    uint64_t read_bytes = 0, read_verified = 0, read_errors = 0, reads_nacked = 0, reads_unanswered = 0;
    for (auto& [s, w] : workers) {
      if (!up[static_cast<size_t>(s)]) continue;
      reads_nacked += tt_fabric_nacks(w) - nacks_then[s];
      if (const auto it = left.by_source.find(s); it != left.by_source.end()) reads_unanswered += it->second;
    }
    for (size_t i = 0; i < split.live.size(); ++i) {
      auto [s, d] = split.live[i];
      if (!to_read[i] || !spread.mine(s) || !up[static_cast<size_t>(s)] || !up[static_cast<size_t>(d)]) continue;
      const bool answered = tt_fabric_nacks(workers[s]) == nacks_then[s] && !left.by_source.count(s);
      const uint8_t* back = readback(s, d);
      for (uint32_t k = 0; k < o.count; ++k) {
        read_bytes += o.size;
        if (control::check_pattern({back + uint64_t{k} * o.size, o.size}, s, d, k)) read_verified += o.size;
        else if (answered) read_errors += o.size;  // answered, and wrong
      }
    }
    // (Spread over hosts, a host's reads may be lost while another's are silent: lost wins.)
    const bool lost = spread.max(left.lost ? 1.0 : 0.0) > 0;
    reads_unanswered = spread.sum(reads_unanswered);
    return json{{"read_bytes", spread.sum(read_bytes)}, {"read_verified", spread.sum(read_verified)},
                {"read_errors", spread.sum(read_errors)}, {"reads_nacked", spread.sum(reads_nacked)},
                {"reads_unanswered", lost ? 0 : reads_unanswered}, {"reads_lost", lost ? reads_unanswered : 0}};
  };
  for (size_t i = 0; i < split.live.size(); ++i) {
    auto [s, d] = split.live[i];
    if (!spread.mine(d) || atomic) continue;  // its host verifies it; atomics below
    const bool nack = nacked[static_cast<size_t>(s)] != 0;
    const uint8_t* mem = run.l1(d) + dst_addr(s);
    landed[i] = 1;
    for (uint32_t k = 0; k < o.count; ++k) {
      const bool ok = control::check_pattern({mem + uint64_t{k} * o.size, o.size}, s, d, k);
      (ok ? verified : nack ? unverified : errors) += o.size;
      if (!ok) landed[i] = 0;
      if (!ok && !nack) name_error_write(error_writes, chips[static_cast<size_t>(s)].name, chips[static_cast<size_t>(d)].name, k);
    }
  }
  if (atomic) judge_counters();
  verified = spread.sum(verified);
  errors = spread.sum(errors);
  unverified = spread.sum(unverified);
  atomic_errors = spread.sum(atomic_errors);
  const json read_result = reads ? read_back(spread.max(landed)) : json();
  // Hops per pair, from the system's computed routing tables (the description lists chips in
  // node order).
  const double hops = run.sys ? mean_hops(*run.sys, run.tables, o.plane, pairs) : 0.0;
  // The pattern's writes written again by retry mode (not the probes'), or its increments sent
  // again by a later round.
  uint64_t retried = increments_retried;
  for (auto& [s, w] : workers) retried += tt_fabric_retried(w);
  retried -= retried_before;
  // Latency: single small writes, each waited for (write and its acknowledgement). A probe the
  // fabric NACKed for good, or lost in a chip that died, costs its sample (ttemu sim loses a
  // probe to a dead chip too) and its pair is not probed again. The probes' own retry mode
  // (one round, a short wait) is there to find a lost probe out; a probe it wrote again, or one
  // NACKed and written again, gives no sample (it would time its retry). After any of these,
  // the probes move to another transaction id, so that a late answer cannot end the next one.
  std::vector<double> rtt;
  for (auto& [s, w] : workers) tt_fabric_set_retry(w, 1, kProbeRetryWaitMs);
  std::set<std::pair<int, int>> unanswered;
  std::vector<bool> up = run.running_here();
  uint8_t probe_txn = 1;
  for (auto [s, d] : latency_pairs(split.live, o.samples)) {
    if (!spread.mine(s) || unanswered.count({s, d}) || !up[static_cast<size_t>(s)] || !up[static_cast<size_t>(d)]) continue;
    tt_fabric* w = workers[s];
    const uint32_t nacks_then = tt_fabric_nacks(w);
    const uint64_t retried_then = tt_fabric_retried(w);
    auto t0 = Clock::now();
    tt_fabric_status st;
    int wrc = fabric_async_write(w, static_cast<uint8_t>(o.plane), src_addr(s, d),
                                 {chips[static_cast<size_t>(d)].mesh, chips[static_cast<size_t>(d)].device}, dst_addr(s), 64,
                                 o.fvc, probe_txn, &st);
    if (wrc == TT_FABRIC_OK) wrc = fabric_async_write_barrier(w, probe_txn);
    const auto took = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (wrc == TT_FABRIC_OK && tt_fabric_nacks(w) == nacks_then && tt_fabric_retried(w) == retried_then) {
      rtt.push_back(took);
      continue;
    }
    if (wrc != TT_FABRIC_OK && wrc != TT_FABRIC_ECHIPDOWN && wrc != TT_FABRIC_ENACKED) {
      throw Error(fmt::format("pattern {}: latency probe: {}", pattern, tt_fabric_strerror(wrc)));
    }
    probe_txn = static_cast<uint8_t>(probe_txn % (chip::kTxnIds - 2) + 1);  // 1 to 14 (kPatternTxn, kReadAtomicTxn)
    if (wrc == TT_FABRIC_OK) continue;  // landed once written again: the pair goes on being probed
    unanswered.insert({s, d});
    up = run.running_here();
  }
  for (auto& [s, w] : workers) tt_fabric_set_retry(w, run.retry, RunContext::kRetryWaitMs);
  uint32_t nacks = 0;
  for (auto& [s, w] : workers) nacks += tt_fabric_nacks(w);
  nacks -= nacks_before;
  nacks = static_cast<uint32_t>(spread.sum(nacks));
  retried = spread.sum(retried);
  const Percentiles lat = percentiles(spread.gather(rtt));
  // Per-link load from the link counters.
  double max_link = 0;
  int links_used = 0;
  for (size_t e = 0; e < after.size(); ++e) {
    const auto moved = static_cast<double>(after[e] - before[e]);
    if (moved > 0) ++links_used;
    max_link = std::max(max_link, moved / seconds / 1e9);
  }
  links_used = static_cast<int>(spread.sum(static_cast<uint64_t>(links_used)));
  max_link = spread.max(max_link);
  const double bytes = static_cast<double>(pairs.size()) * static_cast<double>(per_pair);
  json out{{"pattern", pattern}, {"op", o.op}, {"pairs", pairs.size()}, {"bytes", bytes}, {"seconds", seconds},
          {"gb_per_s", bytes / seconds / 1e9}, {"verified", verified}, {"errors", errors}, {"error_writes", error_writes}, {"nacks", nacks},
          {"unverified", unverified}, {"retried", retried}, {"dead_chips", split.dead_chips}, {"pairs_to_dead", split.to_dead},
          {"pairs_from_dead", split.from_dead}, {"dead_pair_bytes", (split.to_dead + split.from_dead) * per_pair},
          {"latency_us", lat.to_json()}, {"link_directions_used", links_used}, {"max_link_gb_per_s", max_link},
          {"mean_hops", hops},
          // The write and its acknowledgement each cross every hop.
          {"per_hop_us", hops > 0 ? lat.p50 / (2 * hops) : 0.0}};
  if (atomic) {
    // Increments never answered: lost with a chip that died, or silent (ttemu sim's `unanswered`).
    const uint64_t never = spread.sum(increments_unanswered.total());
    const bool lost = spread.max(increments_unanswered.lost ? 1.0 : 0.0) > 0;
    out["atomic_errors"] = atomic_errors;
    out["unanswered"] = lost ? 0 : never;
    out["increments_lost"] = lost ? never : 0;
  }
  if (reads) out.update(read_result);
  return out;
}

// --tt-metal: every run of every test of the file, with tt-metal's figures beside ttemu's; a
// summary per test at the end, and tt-metal's bandwidth summary CSV with --csv. True when a byte
// failed verification.
bool run_tt_metal(const control::ttmetal::File& file, const TrafficOptions& o, RunContext& run) {
  if (!run.sys) throw Error(fmt::format("--tt-metal: the running system's file {} cannot be read any more", run.desc.system_path));
  const auto runs = control::ttmetal::expand(file, *run.sys, o.seed);
  TtMetalSummary summary;
  bool bad = false;
  for (const auto& r : runs) {
    TrafficOptions shaped = o;
    shaped.size = r.size, shaped.count = r.num_packets;
    const json result = run_pattern(r.test, shaped, run, &r.pairs);
    const json j = tt_metal_run(*run.sys, run.tables, o.plane, r, result, "emulated");
    bad = bad || j["errors"].get<uint64_t>() > 0;
    summary.add(j);
    if (!run.spread.leader()) continue;
    fmt::print("{}\n", o.json ? j.dump() : tt_metal_line(j));
    std::fflush(stdout);
  }
  if (!run.spread.leader()) return bad;
  if (o.json) fmt::print("{}\n", json{{"tt_metal_summary", summary.to_json()}}.dump());
  else fmt::print("\ntt-metal bandwidth summary ({}; emulated time):\n{}", file.source, summary.text());
  if (!o.csv.empty()) summary.write_csv(o.csv);
  std::fflush(stdout);
  return bad;
}

}  // namespace

void add_traffic_command(CLI::App& app, int& exit_status) {
  auto o = std::make_shared<TrafficOptions>();
  auto* t = app.add_subcommand("traffic", "Drive traffic patterns through a running system and verify every byte");
  auto* pattern = t->add_option("--pattern", o->patterns,
                                "unicast, all_to_all, one_to_all, all_to_one, neighbor_exchange, random_pairing, or all "
                                "(tt-metal's all_to_all_unicast and one_to_all_unicast are all_to_all and one_to_all)")
                      ->delimiter(',');
  auto* size = t->add_option("--size", o->size, "Bytes per write")->check(whole_number(1u, static_cast<unsigned>(TT_FABRIC_MAX_SIZE)));
  auto* count = t->add_option("--count", o->count, "Writes per pair")->check(whole_number(1u, 100000u));
  auto* op = t->add_option("--op", o->op,
                           "write; read (the writes, then every pair whose writes landed reads its block back); atomic (each "
                           "of the count commands an increment of one 32-bit counter per pair)")
                 ->check(CLI::IsMember({"write", "read", "atomic"}));
  // Plane and FVC are checked against the running system by the client library.
  t->add_option("--plane", o->plane, "Routing plane")->check(whole_number(0, 255));
  t->add_option("--fvc", o->fvc, "FVC (-1: automatic)")->check(whole_number(-1, 7));
  t->add_option("--src", o->src, "Source for unicast / one_to_all (default: the first chip)");
  t->add_option("--dst", o->dst, "Destination for unicast / all_to_one (default: the last chip)");
  t->add_option("--seed", o->seed, "Seed for random_pairing")->check(whole_number(uint64_t{0}, ~uint64_t{0}));
  t->add_option("--latency-samples", o->samples, "Single writes timed (write and acknowledgement) per pattern")
      ->check(whole_number(1, 100000));
  t->add_option("--job", o->job, kJobHelp);
  t->add_option("--system", o->system, "With no system running, launch this one (default: the Galaxy) for the run");
  t->add_flag("--json", o->json, "One JSON object per pattern");
  auto* tt_metal = t->add_option("--tt-metal", o->tt_metal,
                                 "Run the tests of a tt-metal fabric test description (test_tt_fabric's YAML) instead of patterns, "
                                 "and report bandwidth as it does (docs/user-guide.md#tt-metals-fabric-tests)");
  for (auto* shaping : {pattern, size, count, op, t->get_option("--src"), t->get_option("--dst")}) tt_metal->excludes(shaping);
  t->add_option("--csv", o->csv, "With --tt-metal: write tt-metal's bandwidth summary CSV to FILE")->needs(tt_metal);
  t->add_option("--retry", o->retry, "Write again what the fabric NACKed, after the next table change, up to this many rounds (0: off)")
      ->check(whole_number(0, 100));
  auto* replay = t->add_option("--replay", o->replay,
                               "Instead of patterns, issue a capture's writes and atomic increments again, each from its source, "
                               "and compare what was delivered with what the simulator delivers (docs/capture.md)");
  for (const char* shaping : {"--pattern", "--size", "--count", "--op", "--plane", "--fvc", "--src", "--dst", "--seed",
                              "--latency-samples", "--retry", "--tt-metal", "--csv"}) {
    replay->excludes(t->get_option(shaping));
  }
  t->callback([o, &exit_status] {
    if (!o->replay.empty()) {
      const job::JobId running = job::find_job(o->job.empty() ? std::nullopt : std::optional<std::string>(o->job));
      const json r = run_live_replay(job::read_description(running), control_socket(running.text()), o->replay);
      if (o->json) {
        fmt::print("{}\n", r.dump());
      } else {
        fmt::print("{:<18} {} request(s) in {:.4f} s, {} NACK(s); delivered {} packet(s) to {} pair(s), digest {}; "
                   "the simulator: {} packet(s) to {} pair(s), digest {}: {}\n",
                   "replay", r["injections"].get<size_t>(), r["seconds"].get<double>(), r["nacks"].get<uint64_t>(),
                   r["delivered"]["packets"].get<uint64_t>(), r["delivered"]["pairs"].get<size_t>(),
                   r["delivered"]["digest"].get<std::string>(), r["expected"]["packets"].get<uint64_t>(),
                   r["expected"]["pairs"].get<size_t>(), r["expected"]["digest"].get<std::string>(),
                   r["equal"].get<bool>() ? "the same" : "DIFFERENT");
        for (const auto& d : r["differing_pairs"]) fmt::print("{:<18} {}\n", "", d.dump());
      }
      if (!r["equal"].get<bool>()) exit_status = 1;
      return;
    }
    const std::vector<std::string> patterns = control::expand_patterns(o->patterns);
    // (Read before a system is launched for the run: a bad file fails at once.)
    const auto tt_metal_file = o->tt_metal.empty() ? std::nullopt : std::optional(control::ttmetal::parse_file(o->tt_metal));
    const bool named = !o->job.empty() || std::getenv("TTEMU_JOB");
    if (!named && job::live_jobs().empty()) {
      // Nothing running: start a system for this run, with this very command as its client.
      // (With several running, find_job below refuses to guess.)
      LaunchOptions lo;
      lo.file = o->system.empty() ? default_system_file() : o->system;
      lo.command = command_line();
      lo.command[0] = "/proc/self/exe";
      exit_status = run_launch(lo);
      return;
    }
    const job::JobId running = job::find_job(o->job.empty() ? std::nullopt : std::optional<std::string>(o->job));
    RunContext run(job::read_description(running));
    run.retry = o->retry;
    if (tt_metal_file) {
      if (run_tt_metal(*tt_metal_file, *o, run)) exit_status = 1;
      return;
    }
    bool bad = false;
    for (const auto& p : patterns) {
      json r = run_pattern(p, *o, run);
      bad = bad || r["errors"].get<uint64_t>() > 0 || r.value("read_errors", uint64_t{0}) > 0;
      if (!run.spread.leader()) continue;  // (spread over hosts: rank 0 reports the totals)
      if (o->json) {
        fmt::print("{}\n", r.dump());
      } else {
        fmt::print("{:<18} {:>5} pairs {:>10.0f} B in {:.4f} s: {:7.3f} GB/s  verified {} B, errors {}  "
                   "latency min/avg/p99 {:.1f}/{:.1f}/{:.1f} us (per hop {:.1f} us)  link directions {} (busiest {:.3f} GB/s)\n",
                   p, r["pairs"].get<size_t>(), r["bytes"].get<double>(), r["seconds"].get<double>(),
                   r["gb_per_s"].get<double>(), r["verified"].get<uint64_t>(), r["errors"].get<uint64_t>(),
                   r["latency_us"]["min"].get<double>(), r["latency_us"]["avg"].get<double>(),
                   r["latency_us"]["p99"].get<double>(), r["per_hop_us"].get<double>(), r["link_directions_used"].get<int>(),
                   r["max_link_gb_per_s"].get<double>());
        if (!r["dead_chips"].empty() || r["retried"].get<uint64_t>() > 0) {
          fmt::print("{:<18} chips not running: {}; {} pair(s) to them (NACKed), {} from them (lost with them); "
                     "{} NACK(s), {} write(s) retried\n", "", r["dead_chips"].dump(), r["pairs_to_dead"].get<size_t>(),
                     r["pairs_from_dead"].get<size_t>(), r["nacks"].get<uint32_t>(), r["retried"].get<uint64_t>());
        }
        if (r.contains("atomic_errors")) {
          fmt::print("{:<18} atomic increments: {} counted, {} NACKed or never answered ({} lost with a chip, "
                     "{} silent), {} counter(s) wrong\n", "", r["verified"].get<uint64_t>() / 4, r["unverified"].get<uint64_t>() / 4,
                     r["increments_lost"].get<uint64_t>(), r["unanswered"].get<uint64_t>(), r["atomic_errors"].get<uint64_t>());
        }
        if (r.contains("read_bytes")) {
          fmt::print("{:<18} read back {} B: verified {} B, errors {} B; {} read(s) NACKed, {} lost with a chip, {} silent\n", "",
                     r["read_bytes"].get<uint64_t>(), r["read_verified"].get<uint64_t>(), r["read_errors"].get<uint64_t>(),
                     r["reads_nacked"].get<uint64_t>(), r["reads_lost"].get<uint64_t>(), r["reads_unanswered"].get<uint64_t>());
        }
      }
      std::fflush(stdout);
    }
    if (bad) exit_status = 1;
  });
}

}  // namespace ttemu::tools
