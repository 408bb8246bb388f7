// The control socket's requests (docs/architecture.md): one JSON object per line in, one per
// line out. This part reads a request, checks every field (type and range, naming the field),
// and writes the reply; what a request does is the launcher's, behind ControlTarget. It has no
// sockets, so tests/fuzz/control_fuzz.cpp feeds it arbitrary bytes against a stub.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulator/link/frame.hpp"

namespace ttemu::launcher {

// The longest request line the launcher reads; a longer one is answered with an error and its
// connection closed.
inline constexpr size_t kMaxRequestBytes = size_t{1} << 20;

// Limits of link tests, shared with the command line.
inline constexpr int64_t kMinTestPayload = 16;
inline constexpr int64_t kMaxTestPayload = static_cast<int64_t>(link::kMaxPayload);
inline constexpr int64_t kMaxStreamFrames = 100'000'000;
inline constexpr int64_t kMaxPingCount = 1'000'000;
inline constexpr int64_t kMaxTestSeconds = 3600;
inline constexpr int64_t kDefaultTestSeconds = 120;

// An integer field of a request. Missing: `fallback`, or an error without one. Anything but a
// JSON integer in [lo, hi] (a float, a string, 2^32 where an int is meant) is an Error naming
// the field and the range.
int64_t int_field(const nlohmann::json& req, const char* name, int64_t lo, int64_t hi,
                  std::optional<int64_t> fallback = std::nullopt);

// A client's string quoted in a message: control characters escaped, at most 40 characters.
std::string printable(std::string_view text);

// A stream (`ttemu link test`) or a ping (`ttemu link ping`), every field checked.
struct LinkTestRequest {
  bool ping = false;
  std::string link;     // the sending port as the client wrote it (the target resolves it)
  uint64_t count = 0;   // payloads, or round trips
  uint32_t size = 0;    // bytes per payload
  int timeout_s = 120;  // the test fails if it has not finished by then
};

// A live capture (`ttemu capture`): start recording the datagrams of `links` (ports as the
// client wrote them, each meaning its link's two ends; none: every link) to the capture sink
// named `sink` (wire/capture_stream.hpp), or stop the capture of that sink.
struct CaptureRequest {
  std::string sink;
  bool stop = false;
  std::vector<std::string> links;
};

// What requests act on: the launcher, or a stub.
class ControlTarget {
 public:
  using Reply = std::function<void(const nlohmann::json&)>;
  virtual ~ControlTarget() = default;
  virtual bool ready() const = 0;     // every link came up; until then only status is served
  virtual int data_fvcs() const = 0;  // FVCs 0..data_fvcs(), the last being the control FVC
  // Replies through `reply` (at once, or once the other hosts of a multi-host launch answered).
  virtual void status(Reply reply) = 0;
  // from_now: the plan's down intervals count from now, not from when each link started.
  virtual nlohmann::json apply_faults(const std::string& plan, const std::string& source, bool from_now) = 0;
  virtual void stall(const std::string& chip, int fvc, bool stalled) = 0;
  // The live control plane's operator actions (spec 1.1.2). Each refuses by throwing.
  // Tables recomputed around `fail` (chips "M0D1", links "M0D1P2") and what the fabric reported.
  virtual nlohmann::json reload_tables(const std::vector<std::string>& fail) = 0;
  virtual nlohmann::json admin_link(const std::string& port, bool down) = 0;  // ttemu links down|up
  virtual nlohmann::json chip_action(const std::string& chip, bool restart) = 0;  // kill or restart
  virtual nlohmann::json pause_injection(bool paused) = 0;
  // Replies through `reply`, at once or when the test ends. Refuses by throwing, before it
  // holds anything (the port, a timer).
  virtual void link_test(const LinkTestRequest& test, Reply reply) = 0;
  // Every chip's routing buffers, credits and links (ttemu snapshot), through `reply` once the
  // chips have answered.
  virtual void snapshot(Reply reply) = 0;
  // Starts or stops a capture, replying once the chips have (see CaptureRequest).
  virtual void capture(const CaptureRequest& capture, Reply reply) = 0;
  // Every chip records what its router delivers, afresh (record) or no more; replies with the
  // record until now ({"deliveries": session::Deliveries::to_json, "silent": chips}).
  virtual void deliveries(bool record, Reply reply) = 0;
  // The event log as written so far: {"path", "host", "text"} (`ttemu events` on another host
  // of a multi-host launch).
  virtual nlohmann::json event_log() = 0;
  virtual void stop() = 0;  // called once the reply is out
};

// A reply as one line ending in '\n'. Never throws: bytes that are not UTF-8 (a client's
// garbage quoted back in an error) become U+FFFD.
std::string reply_line(const nlohmann::json& reply);

// Handles one request line (its '\n' optional). `answer` gets exactly one reply line, now or
// (link tests) later. Whatever the line holds, the outcome is a reply: every error, including
// ones the target throws, becomes {"error": "..."}.
void handle_request(std::string_view line, ControlTarget& target, const std::function<void(const std::string&)>& answer);

}  // namespace ttemu::launcher
