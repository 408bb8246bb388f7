#include "launcher/system_report.hpp"

#include <filesystem>

#include "emulator/chip/arch.hpp"
#include "emulator/link/efc.hpp"
#include "emulator/link/tt_link.hpp"
#include "emulator/node/socket_states.hpp"

namespace ttemu::launcher {

using nlohmann::json;
using routing::to_string;

DescribeOptions describe_options(const LaunchOptions& o, const control::System& sys, const MultiHost* multi) {
  DescribeOptions d{std::filesystem::absolute(o.file).string(), o.data_fvcs, o.memory, o.dram_mib, {}, ""};
  if (multi) {
    for (int h : multi->host_of_node) d.host_of_node.push_back(sys.hosts[static_cast<size_t>(h)]);
    d.this_host = sys.hosts[static_cast<size_t>(multi->self)];
  }
  return d;
}

job::SystemDescription describe_system(const control::System& sys, const job::JobId& job, const DescribeOptions& o) {
  job::SystemDescription d;
  d.job = job;
  d.system_path = o.system_path;
  d.planes = sys.planes;
  d.data_fvcs = o.data_fvcs;
  d.memory = o.memory;
  d.this_host = o.this_host;
  for (int v = 0; v < sys.node_count(); ++v) {
    const auto& chip = sys.chips[static_cast<size_t>(v)];
    const chip::ArchSpec arch = chip::arch_spec(sys.spec_of(v).arch);
    const auto& mesh = sys.mesh_of(v);
    d.chips.push_back({to_string(chip.id), chip.id.mesh, chip.id.device, arch.name, chip.coord.row, chip.coord.col,
                       mesh.chips.rows, mesh.chips.cols, arch.l1_total(), o.dram_mib ? *o.dram_mib << 20 : arch.dram,
                       arch.tensix_cores, arch.tensix_l1,
                       o.host_of_node.empty() ? chip.host : o.host_of_node[static_cast<size_t>(v)]});
  }
  for (const auto& l : sys.links) d.links.push_back({to_string(l.a), to_string(l.b), l.plane});
  return d;
}

json chip_report(const control::System& sys, int v, const chip::ChipControl& block) {
  const auto& chip = sys.chips[static_cast<size_t>(v)];
  const auto& mesh = sys.mesh_of(v);
  json r = {{"name", to_string(chip.id)}, {"mesh", chip.id.mesh}, {"device", chip.id.device}, {"row", chip.coord.row},
           {"col", chip.coord.col}, {"mesh_rows", mesh.chips.rows}, {"mesh_cols", mesh.chips.cols},
           {"l1_bytes", block.l1_bytes}, {"dram_bytes", block.dram_bytes},
           {"packets_injected", block.packets_injected.load()},
           {"packets_delivered", block.packets_delivered.load()},
           {"router_events", block.router_events.load()},
           {"transport_mode", chip::to_string(static_cast<chip::TransportMode>(block.transport_mode.load()))},
           {"memory_refused", block.windows.refused.load(std::memory_order_relaxed)},
           {"command_slots_voided", block.commands.voided.load(std::memory_order_relaxed)},
           {"sockets", node::socket_states(block)}, {"reservations", node::reservations(block, chip.id)}};
  if (const uint32_t udp = block.inbox_udp.load(std::memory_order_relaxed)) {
    r["lazy_inbox"] = {{"udp", udp}, {"foreign", block.inbox_foreign.load(std::memory_order_relaxed)}};
  }
  return r;
}

json link_end_report(const chip::ChipControl& block, routing::PortId end, bool alive) {
  const auto& ps = block.ports[end.port];
  json counters = json::object();
#define TTEMU_JSON(name, help) counters[#name] = ps.counters.name.load(std::memory_order_relaxed);
  TTEMU_LINK_COUNTERS(TTEMU_JSON)
#undef TTEMU_JSON
  counters["stream_verified"] = ps.stream_verified.load();
  counters["stream_errors"] = ps.stream_errors.load();
  json e{{"port", to_string(end)}, {"udp", ps.udp_port.load()},
         {"state", alive ? link::to_string(static_cast<link::LinkState>(ps.counters.state.load())) : "dead"},
         {"counters", counters}};
  // The EFC: the port whose wire carries this end's traffic, when it is not its own.
  const auto wire = static_cast<uint8_t>(ps.wire.load(std::memory_order_relaxed));
  if (wire != end.port && alive) {
    e["fallback"] = {{"via", to_string(routing::PortId{end.chip, wire})},
                     {"reason", link::to_string(static_cast<link::EfcReason>(ps.fallback_reason.load()))}};
  }
  return e;
}

}  // namespace ttemu::launcher
