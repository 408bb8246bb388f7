#include "tools/campaign/swarm.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/routing/address.hpp"

namespace ttemu::tools {

namespace {

constexpr Fault::Kind kAll[] = {Fault::Kind::kCorrupt, Fault::Kind::kBurst, Fault::Kind::kDrop,
                                Fault::Kind::kDelay,   Fault::Kind::kCut,   Fault::Kind::kKill};

double tenth(double ms) { return std::round(ms * 10) / 10; }

// Draws from one mt19937_64 (its output is fixed by the standard) with our own arithmetic, so a
// seed gives the same schedule with any standard library.
struct Draw {
  std::mt19937_64 rng;
  double unit() { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
  size_t index(size_t n) { return static_cast<size_t>(rng() % n); }
  // Log-uniform in [lo, hi], to two significant digits (readable in a reproduction line).
  double rate(double lo, double hi) { return round2(lo * std::pow(hi / lo, unit())); }
  // Uniform in [lo, hi] milliseconds, to a tenth.
  double ms(double lo, double hi) { return tenth(lo + (hi - lo) * unit()); }
  static double round2(double x) {
    const double scale = std::pow(10.0, 1 - std::floor(std::log10(x)));
    return std::round(x * scale) / scale;
  }
};

}  // namespace

const char* to_string(Fault::Kind k) {
  switch (k) {
    case Fault::Kind::kCorrupt: return "corrupt";
    case Fault::Kind::kBurst: return "burst";
    case Fault::Kind::kDrop: return "drop";
    case Fault::Kind::kDelay: return "delay";
    case Fault::Kind::kCut: return "cut";
    case Fault::Kind::kKill: return "kill";
  }
  return "?";
}

Fault::Kind fault_kind(const std::string& name) {
  for (Fault::Kind k : kAll) {
    if (name == to_string(k)) return k;
  }
  throw Error(fmt::format("unknown fault kind '{}' (corrupt, burst, drop, delay, cut or kill)", name));
}

std::vector<Fault> draw_schedule(const SwarmSpec& spec, const control::System& sys, uint64_t seed) {
  Draw d{std::mt19937_64(seed ^ 0x5741524d5357ULL)};  // not the sim's own streams, which take the seed as it is
  std::vector<routing::PortId> ports;
  for (const auto& l : sys.links) {
    if (l.plane == 0) ports.insert(ports.end(), {l.a, l.b});
  }
  const std::vector<Fault::Kind> kinds = spec.kinds.empty() ? std::vector<Fault::Kind>(std::begin(kAll), std::end(kAll)) : spec.kinds;
  const size_t n = 1 + d.index(static_cast<size_t>(std::max(1, spec.faults)));
  std::vector<Fault> out;
  std::set<std::pair<Fault::Kind, std::string>> taken;  // (kind, port or chip); a cut takes its link's both ends
  for (size_t i = 0; i < n; ++i) {
    Fault f;
    f.kind = kinds[d.index(kinds.size())];
    if (f.kind == Fault::Kind::kKill) {
      f.where = routing::to_string(sys.chips[d.index(sys.chips.size())].id);
      f.at_ms = d.ms(0, spec.span_ms);
      f.for_ms = d.unit() < 0.5 ? tenth(d.rate(1, 200)) : 0;  // half the killed chips come back, soon or late
    } else {
      if (ports.empty()) continue;
      const routing::PortId p = ports[d.index(ports.size())];
      f.where = routing::to_string(p);
      switch (f.kind) {
        case Fault::Kind::kCorrupt: f.rate = d.rate(1e-4, 2e-2); break;
        case Fault::Kind::kBurst: f.rate = d.rate(1e-4, 1e-2); break;
        case Fault::Kind::kDrop: f.rate = d.rate(1e-4, 1e-2); break;
        case Fault::Kind::kDelay: f.rate = std::round(d.ms(1, 100)); break;  // microseconds
        case Fault::Kind::kCut: {
          // From blips go-back-N repairs to outages the fallback channel carries.
          f.at_ms = d.ms(0, spec.span_ms);
          f.for_ms = tenth(d.rate(0.5, 300));
          if (const auto peer = sys.peer(p)) taken.insert({f.kind, routing::to_string(*peer)});
          break;
        }
        case Fault::Kind::kKill: break;
      }
    }
    if (!taken.insert({f.kind, f.where}).second) continue;  // drawn already: one fewer fault
    out.push_back(f);
  }
  return out;
}

SimFaults sim_faults(const std::vector<Fault>& schedule) {
  SimFaults s;
  std::string links;
  for (const Fault& f : schedule) {
    switch (f.kind) {
      case Fault::Kind::kCorrupt: links += fmt::format("  - {{link: {}, direction: out, corrupt: {}}}\n", f.where, f.rate); break;
      case Fault::Kind::kBurst:
        links += fmt::format("  - {{link: {}, direction: out, burst: {{enter_bad: {}, leave_bad: 0.2, corrupt_in_bad: 0.5}}}}\n",
                             f.where, f.rate);
        break;
      case Fault::Kind::kDrop: links += fmt::format("  - {{link: {}, direction: out, drop: {}}}\n", f.where, f.rate); break;
      case Fault::Kind::kDelay: links += fmt::format("  - {{link: {}, direction: out, delay_us: {}}}\n", f.where, f.rate); break;
      case Fault::Kind::kCut: s.cuts.push_back(fmt::format("{}@{}-{}", f.where, f.at_ms, tenth(f.at_ms + f.for_ms))); break;
      case Fault::Kind::kKill:
        s.kills.push_back(fmt::format("{}@{}", f.where, f.at_ms));
        if (f.for_ms > 0) s.restarts.push_back(fmt::format("{}@{}", f.where, tenth(f.at_ms + f.for_ms)));
        break;
    }
  }
  if (!links.empty()) s.plan_yaml = "links:\n" + links;
  return s;
}

std::string describe(const Fault& f) {
  switch (f.kind) {
    case Fault::Kind::kCorrupt: return fmt::format("corrupt {} of what {} sends", f.rate, f.where);
    case Fault::Kind::kBurst: return fmt::format("error bursts (enter_bad {}) on what {} sends", f.rate, f.where);
    case Fault::Kind::kDrop: return fmt::format("drop {} of what {} sends", f.rate, f.where);
    case Fault::Kind::kDelay: return fmt::format("delay what {} sends by {} us", f.where, f.rate);
    case Fault::Kind::kCut: return fmt::format("cut {} at {} ms for {} ms", f.where, f.at_ms, f.for_ms);
    case Fault::Kind::kKill:
      return f.for_ms > 0 ? fmt::format("kill {} at {} ms, restart it {} ms later", f.where, f.at_ms, f.for_ms)
                          : fmt::format("kill {} at {} ms", f.where, f.at_ms);
  }
  return "?";
}

}  // namespace ttemu::tools
