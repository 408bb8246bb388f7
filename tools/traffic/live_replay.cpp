#include "tools/traffic/live_replay.hpp"

#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "emulator/common/error.hpp"
#include "emulator/control/system_yaml.hpp"
#include "emulator/session/deliveries.hpp"
#include "launcher/control_client.hpp"
#include "libfabric_tt/tt_fabric.h"
#include "tools/traffic/replay.hpp"
#include "tools/traffic/sim_replay.hpp"

namespace ttemu::tools {

using nlohmann::json;
using routing::ChipId;
using routing::Command;

namespace {

constexpr double kSimLimitS = 10;      // simulated seconds the yardstick may run past its last injection
constexpr size_t kDifferencesShown = 8;

// Refuses what this replay does not issue, counting it by command.
void check_commands(const Replay& replay, const std::string& file) {
  std::map<std::string, size_t> refused;
  for (const auto& in : replay.injections) {
    const Command c = in.packet.header.command;
    if (c != Command::kWrite && c != Command::kAtomicInc) ++refused[routing::to_string(c)];
  }
  if (refused.empty()) return;
  std::string list;
  for (const auto& [name, n] : refused) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", n, name);
  throw Error(fmt::format("--replay {}: has {}: a running system replays writes and atomic increments only "
                          "(ttemu sim --replay replays every request)", file, list));
}

json summary(const session::Deliveries& d) {
  json j = d.to_json();
  j.erase("by_pair");
  return j;
}

json differences(const session::Deliveries& expected, const session::Deliveries& delivered) {
  json out = json::array();
  auto entry = [](const session::PairDeliveries* p) {
    return p ? json{{"packets", p->packets}, {"bytes", p->bytes}, {"digest", fmt::format("{:016x}", p->digest)}}
             : json{{"packets", 0}};
  };
  std::map<session::Deliveries::Pair, std::pair<const session::PairDeliveries*, const session::PairDeliveries*>> both;
  for (const auto& [pair, d] : expected.pairs()) both[pair].first = &d;
  for (const auto& [pair, d] : delivered.pairs()) both[pair].second = &d;
  for (const auto& [pair, d] : both) {
    if (d.first && d.second && *d.first == *d.second) continue;
    if (out.size() == kDifferencesShown) break;
    out.push_back({{"src", routing::to_string(pair.first)}, {"dst", routing::to_string(pair.second)},
                   {"expected", entry(d.first)}, {"delivered", entry(d.second)}});
  }
  return out;
}

// The workers of the replay's sources, closed at the end whatever happens.
struct Workers {
  std::map<ChipId, tt_fabric*> by_chip;
  ~Workers() {
    for (auto& [c, w] : by_chip) tt_fabric_close(w);
  }
};

}  // namespace

json run_live_replay(const job::SystemDescription& desc, const std::string& socket, const std::string& file) {
  if (!desc.this_host.empty()) throw Error("--replay runs on single-host launches only");
  const control::System sys = control::load_system(desc.system_path);
  const Replay replay = read_replay(file, sys);
  check_commands(replay, file);
  // Where each source stages its writes' payloads: in its DRAM, above what any injection touches.
  constexpr uint64_t kAlign = 4096;
  const uint64_t stage_at = (replay.dram_bytes + kAlign - 1) / kAlign * kAlign;
  std::map<ChipId, uint64_t> staged;  // bytes per source
  std::vector<uint64_t> src_addr(replay.injections.size(), 0);  // each write's payload
  for (size_t i = 0; i < replay.injections.size(); ++i) {
    const auto& h = replay.injections[i].packet.header;
    if (h.command != Command::kWrite) continue;
    src_addr[i] = TT_FABRIC_DRAM | (stage_at + staged[h.src()]);
    staged[h.src()] += (h.size + 63) / 64 * 64;
  }
  for (const auto& c : desc.chips) {
    const uint64_t need = stage_at + staged[{c.mesh, c.device}];
    if (replay.l1_bytes > c.l1_bytes || need > c.dram_bytes) {
      throw Error(fmt::format("--replay {}: its requests need {} bytes of L1 and {} of DRAM on chip {}, which has {} and {}", file,
                              replay.l1_bytes, need, c.name, c.l1_bytes, c.dram_bytes));
    }
  }
  if (!replay.complete()) {
    fmt::print(stderr, "ttemu traffic: warning: --replay {} has {} of the {} link ends of {}: only the requests that crossed them are replayed\n",
               file, replay.link_ends_captured, replay.link_ends, desc.system_path);
  }
  // The yardstick: the same replay in the simulator.
  const session::Deliveries expected = simulate_replay(sys, replay, desc.data_fvcs, kSimLimitS);

  Workers workers;
  for (const auto& in : replay.injections) {
    const ChipId src = in.packet.header.src();
    if (workers.by_chip.count(src)) continue;
    char err[256];
    tt_fabric* w = tt_fabric_open(desc.job.text().c_str(), src.mesh, src.device, 0, err, sizeof err);
    if (!w) throw Error(fmt::format("--replay: a worker on {}: {}", routing::to_string(src), err));
    workers.by_chip[src] = w;
  }
  // Stage every payload before the first request goes.
  for (size_t i = 0; i < replay.injections.size(); ++i) {
    const auto& p = replay.injections[i].packet;
    if (p.header.command != Command::kWrite) continue;
    const ChipId src = p.header.src();
    auto* mem = static_cast<uint8_t*>(tt_fabric_memory(workers.by_chip[src], src_addr[i], p.header.size));
    if (!mem) throw Error(fmt::format("--replay: {}'s DRAM at {:#x} cannot be staged", routing::to_string(src), src_addr[i]));
    const auto payload = p.payload();
    std::copy(payload.begin(), payload.end(), mem);
  }
  launcher::request(socket, {{"cmd", "deliveries"}, {"record", true}});
  // From here on, the chips record until told to stop, whatever fails.
  struct StopRecording {
    const std::string& socket;
    bool done = false;
    json stop() {
      done = true;
      return launcher::request(socket, {{"cmd", "deliveries"}, {"record", false}});
    }
    ~StopRecording() {
      if (!done) {
        try {
          stop();
        } catch (...) {  // (the system is gone: nothing records)
        }
      }
    }
  } recording{socket};
  const auto start = std::chrono::steady_clock::now();
  std::map<ChipId, int> rc;
  for (size_t i = 0; i < replay.injections.size(); ++i) {
    const auto& h = replay.injections[i].packet.header;
    tt_fabric* w = workers.by_chip[h.src()];
    const tt_fabric_device dst{h.dst_mesh, h.dst_device};
    tt_fabric_status st;
    const int code = h.command == Command::kWrite
                         ? fabric_async_write(w, h.plane, src_addr[i], dst, h.dst_addr, h.size, h.fvc, 0, &st)
                         : fabric_async_atomic_inc(w, h.plane, dst, h.dst_addr, h.arg, h.wrap, h.fvc, 0, &st);
    if (code != TT_FABRIC_OK) {
      throw Error(fmt::format("--replay: request {} of the capture ({} from {} to {}): {}", i + 1, routing::to_string(h.command),
                              routing::to_string(h.src()), routing::to_string(h.dst()), tt_fabric_strerror(code)));
    }
  }
  {
    std::vector<std::jthread> waiting;  // every source's barrier at once
    for (auto& [src, w] : workers.by_chip) {
      rc[src] = TT_FABRIC_OK;
      waiting.emplace_back([w = w, &code = rc[src]] { code = fabric_async_write_barrier(w, 0); });
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [src, code] : rc) {
    if (code != TT_FABRIC_OK && code != TT_FABRIC_ENACKED) {
      throw Error(fmt::format("--replay: {}: {}", routing::to_string(src), tt_fabric_strerror(code)));
    }
  }
  const json taken = recording.stop();
  if (!taken.at("silent").empty()) throw Error(fmt::format("--replay: chips {} did not say what they delivered", taken.at("silent").dump()));
  const session::Deliveries delivered = session::Deliveries::from_json(taken.at("deliveries"));
  uint64_t nacks = 0;
  for (const auto& [src, w] : workers.by_chip) nacks += tt_fabric_nacks(w);
  return {{"replay", file},
          {"injections", replay.injections.size()},
          {"complete", replay.complete()},
          {"seconds", seconds},
          {"nacks", nacks},
          {"equal", expected == delivered},
          {"expected", summary(expected)},
          {"delivered", summary(delivered)},
          {"differing_pairs", differences(expected, delivered)}};
}

}  // namespace ttemu::tools
