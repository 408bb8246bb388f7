#include "tools/traffic/sim_replay.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/control/routing_tables.hpp"

namespace ttemu::tools {

using routing::ChipId;

namespace {

// NACKs the workers of every live chip have heard so far.
uint64_t nacks_heard(const sim::FabricSim& sim, const control::System& sys) {
  uint64_t n = 0;
  for (const auto& c : sys.chips) {
    if (!sim.alive(c.id)) continue;
    for (const auto& p : sim.worker_inbox(c.id)) n += p.header.command == routing::Command::kNack;
  }
  return n;
}

// What the scheduled injections share; it outlives run_replay when the run stops at its limit
// with some still waiting (the simulation runs on afterwards, and they with it).
struct Injector {
  sim::FabricSim& sim;
  std::map<ChipId, std::deque<const Injection*>> waiting;  // by source, in capture order
  std::set<ChipId> retry_due;
  uint64_t lost = 0;  // from a source that was dead by their time

  static constexpr link::Duration kRetry = std::chrono::microseconds(1);  // a full FVC buffer: again this much later

  static void pump(const std::shared_ptr<Injector>& self, ChipId src) {
    auto& q = self->waiting[src];
    if (!self->sim.alive(src)) {  // its workers died with it
      self->lost += q.size();
      q.clear();
    }
    while (!q.empty() && self->sim.inject(src, q.front()->packet)) q.pop_front();
    if (!q.empty() && self->retry_due.insert(src).second) {
      self->sim.at(self->sim.now() + kRetry, [self, src] {
        self->retry_due.erase(src);
        pump(self, src);
      });
    }
  }
};

}  // namespace

nlohmann::json run_replay(sim::FabricSim& sim, const control::System& sys, const Replay& replay, const std::string& file,
                          double limit_s, const session::Deliveries& deliveries) {
  const link::Time start = sim.now();
  const session::Deliveries before = deliveries;
  const uint64_t nacks_before = nacks_heard(sim, sys);
  const size_t events_before = sim.events().size();
  auto injector = std::make_shared<Injector>(Injector{.sim = sim, .waiting = {}, .retry_due = {}, .lost = 0});
  link::Time last = start;
  for (const auto& in : replay.injections) {
    const link::Time at = std::max(start, link::Time(static_cast<int64_t>(in.ns)));
    last = std::max(last, at);
    sim.at(at, [injector, p = &in] {
      injector->waiting[p->packet.header.src()].push_back(p);
      Injector::pump(injector, p->packet.header.src());
    });
  }
  // In steps of a simulated millisecond, as a pattern's run is timed: its seconds end with the
  // step of its last delivery (the run goes on while the chips' rate intervals run out).
  const link::Time end = last + std::chrono::duration_cast<link::Duration>(std::chrono::duration<double>(limit_s));
  link::Time last_delivery = start;
  bool idle = false;
  for (uint64_t seen = deliveries.packets(); !idle && sim.now() < end;) {
    idle = sim.run(std::min<link::Duration>(std::chrono::milliseconds(1), end - sim.now()));
    if (deliveries.packets() != seen) seen = deliveries.packets(), last_delivery = sim.now();
  }
  const double seconds = std::chrono::duration<double>(last_delivery - start).count();
  const uint64_t nacks_after = nacks_heard(sim, sys);  // (a chip restarted meanwhile heard its anew)
  return {{"replay", file},
          {"injections", replay.injections.size()},
          {"lost_with_source", injector->lost},
          {"complete", replay.complete()},
          {"link_ends_captured", replay.link_ends_captured},
          {"link_ends", replay.link_ends},
          {"bad_frames", replay.bad_frames},
          {"seconds", seconds},
          {"idle", idle},
          {"nacks", nacks_after > nacks_before ? nacks_after - nacks_before : 0},
          {"router_events", sim.events().size() - events_before},
          {"deliveries", deliveries.since(before).to_json()}};
}

session::Deliveries simulate_replay(const control::System& sys, const Replay& replay, int data_fvcs, double limit_s) {
  sim::SimConfig cfg;
  cfg.control_plane = true;
  cfg.router.data_fvcs = data_fvcs;
  cfg.link.ack_delay = std::chrono::microseconds(0);
  cfg.l1_bytes = std::max<size_t>(cfg.l1_bytes, replay.l1_bytes);
  cfg.dram_bytes = std::max<size_t>(cfg.dram_bytes, replay.dram_bytes);
  session::Deliveries deliveries;
  cfg.delivered = [&deliveries](ChipId at, const routing::Packet& p) { deliveries.add(at, p); };
  sim::FabricSim sim(sys, control::compute_tables(sys), cfg);
  sim.run(std::chrono::milliseconds(1));  // every link comes up
  const nlohmann::json r = run_replay(sim, sys, replay, "", limit_s, deliveries);
  if (!r.at("idle").get<bool>()) {
    throw Error(fmt::format("the simulated replay was still busy {} s after its last injection", limit_s));
  }
  return deliveries;
}

}  // namespace ttemu::tools
