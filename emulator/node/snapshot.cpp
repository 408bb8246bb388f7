#include "emulator/node/snapshot.hpp"

#include <type_traits>

#include <fmt/format.h>

#include "emulator/common/error.hpp"

namespace ttemu::node {

using nlohmann::json;

namespace {

// Field readers that say which field failed; the caller adds which chip.
template <typename T>
T field(const json& j, const char* key) {
  if (!j.is_object()) throw Error(fmt::format("expected an object holding '{}', found {}", key, j.type_name()));
  const auto it = j.find(key);
  if (it == j.end()) throw Error(fmt::format("'{}' is missing", key));
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("'{}' is not a {} ({})", key, std::is_same_v<T, std::string> ? "string" : "number or flag", it->dump()));
  }
}

template <typename T>
T field_or(const json& j, const char* key, T otherwise) {
  return j.contains(key) ? field<T>(j, key) : otherwise;
}

const json& array_field(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) throw Error(fmt::format("'{}' is missing", key));
  if (!it->is_array()) throw Error(fmt::format("'{}' is not an array", key));
  return *it;
}

LaneRef read_lane(const json& j) { return {field<int>(j, "fvc"), field<int>(j, "class"), field<std::string>(j, "kind")}; }

BufferState read_buffer(const json& j) {
  const json& h = j.contains("head") ? j["head"] : throw Error("'head' is missing");
  return {read_lane(j), field<std::string>(j, "input"), field<uint64_t>(j, "packets"),
          HeadPacket{field<std::string>(h, "command"), field<std::string>(h, "src"), field<std::string>(h, "dst"),
                     field<uint64_t>(h, "packet_id"), field<int>(h, "ttl"), field<double>(h, "waited_ms")}};
}

PortState read_port(const json& j) {
  PortState p{field<std::string>(j, "port"), field<std::string>(j, "state"), field<uint64_t>(j, "backlog"), field<uint64_t>(j, "window_room"),
              {}, std::nullopt, field_or(j, "admin_down", false)};
  for (const auto& l : array_field(j, "starved_lanes")) p.starved_lanes.push_back(read_lane(l));
  if (j.contains("fallback_via")) p.fallback_via = field<std::string>(j, "fallback_via");
  return p;
}

SocketState read_socket(const json& j) {
  SocketState s;
  s.socket = field<uint64_t>(j, "socket");
  s.endpoint = field<int>(j, "endpoint");
  s.core = field<int>(j, "core");
  s.owner = field_or<uint32_t>(j, "owner", 0);  // (snapshots from before owners were shown have none)
  s.fvc = field<int>(j, "fvc");
  s.type = field<std::string>(j, "type");
  s.direction = field<std::string>(j, "direction");
  s.state = field<std::string>(j, "state");
  s.remote = field<std::string>(j, "remote");
  s.handshake = field<std::string>(j, "handshake");
  s.status = field<int64_t>(j, "status");
  s.epoch = field<uint64_t>(j, "epoch");
  if (s.direction == "receive") {
    s.received = field<uint64_t>(j, "received");
    s.read = field<uint64_t>(j, "read");
    s.spilled = field<uint64_t>(j, "spilled");
    s.backed_up = field<bool>(j, "backed_up");
  } else {
    s.queued = field<uint64_t>(j, "queued");
    s.sent = field<uint64_t>(j, "sent");
  }
  return s;
}

Reservation read_reservation(const json& j) {
  return {field<std::string>(j, "output"), field<std::string>(j, "owner"), field<int>(j, "fvc"), field<int>(j, "endpoint")};
}

}  // namespace

void to_json(json& j, const LaneRef& v) { j = {{"fvc", v.fvc}, {"class", v.cls}, {"kind", v.kind}}; }

void to_json(json& j, const BufferState& v) {
  to_json(j, v.lane);  // the lane's fields beside the buffer's own, as people read them
  j["input"] = v.input;
  j["packets"] = v.packets;
  j["head"] = {{"command", v.head.command}, {"src", v.head.src}, {"dst", v.head.dst},
               {"packet_id", v.head.packet_id}, {"ttl", v.head.ttl}, {"waited_ms", v.head.waited_ms}};
}

void to_json(json& j, const PortState& v) {
  j = {{"port", v.port}, {"state", v.state}, {"backlog", v.backlog}, {"window_room", v.window_room}, {"starved_lanes", v.starved_lanes}};
  if (v.fallback_via) j["fallback_via"] = *v.fallback_via;
  if (v.admin_down) j["admin_down"] = true;
}

void to_json(json& j, const SocketState& v) {
  j = {{"socket", v.socket}, {"endpoint", v.endpoint}, {"core", v.core}, {"owner", v.owner}, {"type", v.type}, {"direction", v.direction},
       {"state", v.state}, {"status", v.status}, {"epoch", v.epoch}, {"remote", v.remote}, {"fvc", v.fvc}, {"handshake", v.handshake}};
  if (v.direction == "receive") {
    j["received"] = v.received;
    j["read"] = v.read;
    j["spilled"] = v.spilled;
    j["backed_up"] = v.backed_up;
  } else {
    j["queued"] = v.queued;
    j["sent"] = v.sent;
  }
}

void to_json(json& j, const Reservation& v) { j = {{"output", v.output}, {"fvc", v.fvc}, {"owner", v.owner}, {"endpoint", v.endpoint}}; }

void to_json(json& j, const ChipSnapshot& v) {
  if (v.dead) {
    j = {{"chip", v.chip}, {"dead", true}};
    return;
  }
  if (!v.answered) {
    j = {{"chip", v.chip}, {"answered", false}};
    return;
  }
  j = {{"chip", v.chip}, {"tables_version", v.tables_version}, {"idle", v.idle}, {"buffers", v.buffers}, {"ports", v.ports},
       {"stalled_fvcs", v.stalled_fvcs}, {"sockets", v.sockets}, {"reservations", v.reservations}};
}

void to_json(json& j, const SystemSnapshot& v) {
  j = json::object();
  if (v.job) j["job"] = *v.job;
  if (v.uptime_s) j["uptime_s"] = *v.uptime_s;
  if (v.tables_version) j["tables_version"] = *v.tables_version;
  if (v.sim_ns) j["sim_ns"] = *v.sim_ns;
  j["chips"] = v.chips;
  if (v.sim_ns || !v.on_the_wire.empty()) j["on_the_wire"] = v.on_the_wire;
}

ChipSnapshot read_chip_snapshot(const json& j) {
  ChipSnapshot c;
  c.chip = field<std::string>(j, "chip");
  try {
    c.dead = field_or(j, "dead", false);
    c.answered = field_or(j, "answered", true);
    if (!c.took()) return c;
    c.tables_version = field<uint64_t>(j, "tables_version");
    c.idle = field<bool>(j, "idle");
    for (const auto& b : array_field(j, "buffers")) c.buffers.push_back(read_buffer(b));
    for (const auto& p : array_field(j, "ports")) c.ports.push_back(read_port(p));
    for (const auto& f : array_field(j, "stalled_fvcs")) c.stalled_fvcs.push_back(f.is_number_integer() ? f.get<int>() : throw Error("'stalled_fvcs' holds " + f.dump()));
    for (const auto& s : array_field(j, "sockets")) c.sockets.push_back(read_socket(s));
    for (const auto& r : array_field(j, "reservations")) c.reservations.push_back(read_reservation(r));
  } catch (const Error& e) {
    throw Error(fmt::format("chip {}: {}", c.chip, e.what()));
  }
  return c;
}

SystemSnapshot read_system_snapshot(const json& j) {
  SystemSnapshot s;
  if (!j.is_object()) throw Error(fmt::format("a snapshot is a JSON object, not {}", j.type_name()));
  if (j.contains("job")) s.job = field<std::string>(j, "job");
  if (j.contains("uptime_s")) s.uptime_s = field<double>(j, "uptime_s");
  if (j.contains("tables_version")) s.tables_version = field<int>(j, "tables_version");
  if (j.contains("sim_ns")) s.sim_ns = field<int64_t>(j, "sim_ns");
  for (const auto& c : array_field(j, "chips")) s.chips.push_back(read_chip_snapshot(c));
  if (j.contains("on_the_wire")) {
    if (!j["on_the_wire"].is_object()) throw Error("'on_the_wire' is not an object");
    for (const auto& item : j["on_the_wire"].items()) s.on_the_wire[item.key()] = field<uint64_t>(j["on_the_wire"], item.key().c_str());
  }
  return s;
}

}  // namespace ttemu::node
