// What a system holds at one moment (spec 6.1's serialisation of the fabric model), typed: every
// chip's routing buffers, ports, stalled FVCs, sockets and reservations, as ChipNode::snapshot
// takes them, in processes (`ttemu snapshot --json`, a campaign's hung run) and in the simulator
// (`ttemu sim --snapshot FILE`). One format for both; its JSON form is the one those commands
// write, and reading it back gives the same value (to_json and from_json round-trip exactly, so
// a file written by one version is read field by field, not guessed at).
//
// read_system_snapshot() is the reader for files and replies: a missing or mistyped field is
// an Error naming the chip and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ttemu::node {

// A routing-buffer lane as people read it: its FVC, its class, and whether it carries requests
// or answers ("request" | "answer").
struct LaneRef {
  int fvc = 0, cls = 0;
  std::string kind;
  bool operator==(const LaneRef&) const = default;
};

// The packet at the head of a routing buffer, and how long it has waited there.
struct HeadPacket {
  std::string command, src, dst;
  uint64_t packet_id = 0;
  int ttl = 0;
  double waited_ms = 0;
  bool operator==(const HeadPacket&) const = default;
};

// A routing buffer that holds packets: which input (a port "MxDyPz" or "center") and lane.
struct BufferState {
  LaneRef lane;
  std::string input;
  uint64_t packets = 0;
  HeadPacket head;
  bool operator==(const BufferState&) const = default;
};

// A port: its link's state, the datagrams waiting for the link, the room in its go-back-N
// window, the lanes with no credit left toward the far end, the fallback wire it travels (EFC).
struct PortState {
  std::string port, state;
  uint64_t backlog = 0, window_room = 0;
  std::vector<LaneRef> starved_lanes;
  std::optional<std::string> fallback_via;
  bool admin_down = false;
  bool operator==(const PortState&) const = default;
};

// A socket endpoint in use (docs/sockets.md). The counters are those of its direction: a
// receiver's received/read/spilled/backed_up, a sender's queued/sent.
struct SocketState {
  uint64_t socket = 0;
  int endpoint = 0, core = 0, fvc = 0;
  uint32_t owner = 0;  // the owner's process id (a simulated worker's number; 0: not known)
  std::string type, direction, state, remote, handshake;
  int64_t status = 0;
  uint64_t epoch = 0;
  uint64_t received = 0, read = 0, spilled = 0, queued = 0, sent = 0;
  bool backed_up = false;
  bool operator==(const SocketState&) const = default;
};

// An SSocket reservation held at this chip's router: output ("MxDyPz" | "center"), FVC, owner.
struct Reservation {
  std::string output, owner;
  int fvc = 0, endpoint = 0;
  bool operator==(const Reservation&) const = default;
};

// One chip. A dead chip, or one that did not answer in time (its event loop stuck), has only
// its name and that fact.
struct ChipSnapshot {
  std::string chip;
  bool dead = false, answered = true;
  uint64_t tables_version = 0;
  bool idle = true;
  std::vector<BufferState> buffers;
  std::vector<PortState> ports;
  std::vector<int> stalled_fvcs;
  std::vector<SocketState> sockets;
  std::vector<Reservation> reservations;
  bool took() const { return !dead && answered; }
  bool operator==(const ChipSnapshot&) const = default;
};

// The whole system: from a running system, its job and uptime and the control plane's tables
// version; from the simulator, the simulated time and the datagrams still on each wire.
struct SystemSnapshot {
  std::optional<std::string> job;
  std::optional<double> uptime_s;
  std::optional<int> tables_version;
  std::optional<int64_t> sim_ns;
  std::vector<ChipSnapshot> chips;
  std::map<std::string, uint64_t> on_the_wire;
  bool operator==(const SystemSnapshot&) const = default;
};

void to_json(nlohmann::json& j, const LaneRef& v);
void to_json(nlohmann::json& j, const BufferState& v);
void to_json(nlohmann::json& j, const PortState& v);
void to_json(nlohmann::json& j, const SocketState& v);
void to_json(nlohmann::json& j, const Reservation& v);
void to_json(nlohmann::json& j, const ChipSnapshot& v);
void to_json(nlohmann::json& j, const SystemSnapshot& v);

// Reads `j` (a whole snapshot, as `ttemu snapshot --json` prints it); throws Error naming the
// chip and the field that is missing or of the wrong type.
SystemSnapshot read_system_snapshot(const nlohmann::json& j);
ChipSnapshot read_chip_snapshot(const nlohmann::json& j);

}  // namespace ttemu::node
