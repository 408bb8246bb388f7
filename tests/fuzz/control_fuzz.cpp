// libFuzzer target: arbitrary bytes as one control-socket request line, handled against a stub
// system. Whatever the bytes, exactly one reply line of valid JSON must come back (an error or
// the stub's answer), nothing may throw, and what reaches the stub must have passed the checks.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "emulator/common/error.hpp"
#include "launcher/control_requests.hpp"

using namespace ttemu;
using namespace ttemu::launcher;
using nlohmann::json;

namespace {

// Acts like the launcher where it matters: it quotes the client's strings back in its errors
// and answers link tests through the callback.
class Stub : public ControlTarget {
 public:
  bool up = true;
  bool ready() const override { return up; }
  int data_fvcs() const override { return 2; }
  json event_log() override { return {{"path", "x"}, {"host", ""}, {"text", ""}}; }
  void status(Reply reply) override { reply({{"job", "1-00000001"}, {"ready", up}}); }
  json apply_faults(const std::string& plan, const std::string& source, bool) override {
    if (!plan.empty()) throw Error(source + ":1: not a plan: " + plan.substr(0, 100));
    return {{"ok", true}, {"directions_with_faults", 0}};
  }
  void stall(const std::string& chip, int fvc, bool) override {
    if (fvc < 0 || fvc > data_fvcs()) std::abort();
    if (chip != "M0D0") throw Error("'" + chip + "' is not a chip of stub.yaml");
  }
  void link_test(const LinkTestRequest& t, Reply reply) override {
    if (t.size < kMinTestPayload || t.size > kMaxTestPayload || t.count < 1 || t.timeout_s < 1 ||
        t.timeout_s > kMaxTestSeconds || t.count > static_cast<uint64_t>(t.ping ? kMaxPingCount : kMaxStreamFrames)) {
      std::abort();
    }
    if (t.link != "M0D0P2") throw Error("'" + t.link + "' is not a wired port of stub.yaml");
    reply({{"link", t.link}, {"frames", t.count}});
  }
  json reload_tables(const std::vector<std::string>& fail) override {
    for (const auto& f : fail) {
      if (f != "M0D0") throw Error("failure '" + f + "' is neither a chip nor a port");
    }
    return {{"version", 2}};
  }
  json admin_link(const std::string& port, bool) override {
    if (port != "M0D0P2") throw Error("'" + port + "' is not a wired port of stub.yaml");
    return {{"ok", true}};
  }
  json chip_action(const std::string& chip, bool) override {
    if (chip != "M0D0") throw Error("'" + chip + "' is not a chip of stub.yaml");
    return {{"ok", true}};
  }
  json pause_injection(bool paused) override { return {{"paused", paused}}; }
  void snapshot(Reply reply) override { reply({{"chips", json::array()}}); }
  void capture(const CaptureRequest& c, Reply reply) override {
    if (c.sink.empty() || c.sink.size() > 100) std::abort();
    for (const auto& l : c.links) {
      if (l != "M0D0P2") throw Error("'" + l + "' is not a wired port of stub.yaml");
    }
    reply({{"ok", true}, {"sink", c.sink}});
  }
  void deliveries(bool, Reply reply) override { reply({{"deliveries", json::object()}}); }
  void stop() override { ++stops; }
  int stops = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Stub stub;
  stub.up = size % 7 != 0;  // now and then, a system still coming up
  std::string_view line(reinterpret_cast<const char*>(data), size);
  int replies = 0;
  handle_request(line, stub, [&](const std::string& reply) {
    ++replies;
    // One line, ending in '\n', of valid JSON: an object with an error or an answer.
    if (reply.empty() || reply.back() != '\n' || reply.find('\n') != reply.size() - 1) std::abort();
    json doc = json::parse(reply, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) std::abort();
    if (doc.contains("error") && (!doc["error"].is_string() || doc.size() != 1)) std::abort();
  });
  if (replies != 1 || stub.stops > 1) std::abort();
  return 0;
}
