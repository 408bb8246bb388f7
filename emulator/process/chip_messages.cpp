#include "emulator/process/chip_messages.hpp"

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::process::msg {

using nlohmann::json;

void to_json(json& j, const Stop&) { j = json::object(); }
void from_json(const json&, Stop&) {}

// A link's faults are optional: absent or null means none.
void to_json(json& j, const LinkSetup& l) {
  j = {{"port", l.port}, {"peer_mesh", l.peer_mesh}, {"peer_device", l.peer_device}, {"peer_port", l.peer_port}};
  if (!l.faults.is_null()) j["faults"] = l.faults;
  if (l.keepalive_ms) j["keepalive_ms"] = l.keepalive_ms;
}
void from_json(const json& j, LinkSetup& l) {
  j.at("port").get_to(l.port);
  j.at("peer_mesh").get_to(l.peer_mesh);
  j.at("peer_device").get_to(l.peer_device);
  j.at("peer_port").get_to(l.peer_port);
  l.faults = j.contains("faults") ? j.at("faults") : json();
  l.keepalive_ms = j.value("keepalive_ms", 0);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Config, arch, job_hash, seed, window, window_kib, bind, links, planes, data_fvcs, rb_packets, mesh_rows, mesh_cols,
                                   timeout_ms, ack_delay_us, credit_delay_us, spin_us, timer_slack_us, transport, udp_if_no_uring, efc, efc_timeouts,
                                   efc_interval_ms, efc_error_rate, status_interval_ms, crc_alarm,
                                   retransmit_alarm, memory, cpu_rank, cpu_ranks, sched_batch)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PeerAddress, addr, udp, lazy)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Peers, peers)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Faults, port, faults, seed, from_now)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Stream, port, id, frames, size)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Ping, port, id, count, size)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Stall, fvc, stalled)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PeerDown, port)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Tables, version)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Injection, paused)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AdminDown, port, down)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Snapshot, id)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Capture, id, sink, ports)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RecordDeliveries, id, record)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Bound, ports, lazy)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LinkState, port, state)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StreamDone, port, id, frames, bytes, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PingDone, port, id, rtt_us)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StatusPushed, pushed)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SnapshotTaken, id, state)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Captured, id, recorded, dropped, sink_lost, error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DeliveriesTaken, id, deliveries)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ChipError, message)

namespace {

template <class Variant>
json object_of(const Variant& m) {
  return std::visit(
      [](const auto& v) {
        json j = v;
        j["type"] = std::decay_t<decltype(v)>::kType;
        return j;
      },
      m);
}

// The alternative of Variant whose kType is the line's "type", filled from its fields.
template <class Variant, size_t I = 0>
Variant decode_as(const json& j, const std::string& type) {
  if constexpr (I == std::variant_size_v<Variant>) {
    throw Error(fmt::format("unknown control message '{}'", type));
  } else {
    using T = std::variant_alternative_t<I, Variant>;
    if (type != T::kType) return decode_as<Variant, I + 1>(j, type);
    try {
      return j.get<T>();
    } catch (const json::exception& e) {
      throw Error(fmt::format("control message '{}': {}", type, e.what()));
    }
  }
}

template <class Variant>
Variant decode(std::string_view line) {
  const json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j.at("type").is_string()) {
    throw Error("a control message is not a JSON object with a type");
  }
  return decode_as<Variant>(j, j.at("type").get<std::string>());
}

}  // namespace

std::string encode(const ToChip& m) { return object_of(m).dump() + "\n"; }
std::string encode(const FromChip& m) {
  // A chip's messages carry text from the fabric (names, an error's reason): never throw on it.
  return object_of(m).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}
json to_json_object(const FromChip& m) { return object_of(m); }
ToChip decode_to_chip(std::string_view line) { return decode<ToChip>(line); }
FromChip decode_from_chip(std::string_view line) { return decode<FromChip>(line); }

}  // namespace ttemu::process::msg
