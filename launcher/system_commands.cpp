#include "launcher/system_commands.hpp"

#include <functional>
#include <array>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "emulator/process/chip_process.hpp"
#include "emulator/chip/segments.hpp"
#include "emulator/common/error.hpp"
#include "emulator/common/input_text.hpp"
#include "emulator/link/fault_plan.hpp"
#include "emulator/node/snapshot.hpp"
#include "launcher/cli_checks.hpp"
#include "launcher/control_client.hpp"
#include "launcher/control_requests.hpp"
#include "launcher/event_log.hpp"
#include "launcher/launch.hpp"

namespace ttemu::launcher {

using nlohmann::json;

namespace {

// A socket's owner, as its endpoint names it (the worker's process; none when not known).
std::string owner_text(uint32_t owner) { return owner ? fmt::format(", process {}", owner) : std::string(); }

// A lane as people read it: "fvc 0 class 1 answer".
std::string lane_text(const node::LaneRef& l) { return fmt::format("fvc {} class {} {}", l.fvc, l.cls, l.kind); }

// Only what holds something: a chip that is idle, with every credit, takes no line.
void print_snapshot(const node::SystemSnapshot& s) {
  fmt::print("job {}  up {:.1f} s  tables v{}\n", s.job.value_or("?"), s.uptime_s.value_or(0), s.tables_version.value_or(0));
  int quiet = 0;
  for (const auto& c : s.chips) {
    if (!c.took()) {
      fmt::print("{}  {}\n", c.chip, c.dead ? "dead" : "did not answer (its event loop is stuck?)");
      continue;
    }
    std::vector<std::string> lines;
    for (const auto& b : c.buffers) {
      const node::HeadPacket& h = b.head;
      lines.push_back(fmt::format("  {} {}: {} packet(s); head {} {} -> {} id {} ttl {}, waited {:.1f} ms", b.input, lane_text(b.lane),
                                  b.packets, h.command, h.src, h.dst, h.packet_id, h.ttl, h.waited_ms));
    }
    for (const auto& p : c.ports) {
      std::vector<std::string> starved;
      for (const auto& l : p.starved_lanes) starved.push_back(lane_text(l));
      if (p.state == "up" && p.backlog == 0 && starved.empty() && !p.fallback_via) continue;
      lines.push_back(fmt::format("  {} {}{}: backlog {}, window room {}{}", p.port, p.state, p.fallback_via ? " via " + *p.fallback_via : "",
                                  p.backlog, p.window_room, starved.empty() ? "" : fmt::format(", no credit on {}", fmt::join(starved, ", "))));
    }
    for (const auto& k : c.sockets) {
      lines.push_back(fmt::format("  socket {} ({} {}, endpoint {}, core {}{}) {} with {} on fvc {}: {}", k.socket, k.type, k.direction,
                                  k.endpoint, k.core, owner_text(k.owner), k.state, k.remote, k.fvc,
                                  k.direction == "receive" ? fmt::format("{} B received, {} B read{}", k.received, k.read, k.backed_up ? ", backed up" : "")
                                                           : fmt::format("{} B queued, {} B sent", k.queued, k.sent)));
    }
    for (const auto& r : c.reservations) lines.push_back(fmt::format("  fvc {} toward {} reserved by {} endpoint {}", r.fvc, r.output, r.owner, r.endpoint));
    if (!c.stalled_fvcs.empty()) lines.insert(lines.begin(), fmt::format("  stalled FVCs: [{}]", fmt::join(c.stalled_fvcs, ",")));
    if (lines.empty()) {
      ++quiet;
      continue;
    }
    fmt::print("{}\n", c.chip);
    for (const auto& l : lines) fmt::print("{}\n", l);
  }
  fmt::print("{} chip(s) hold nothing and have every credit\n", quiet);
}

void print_status(const json& s) {
  int alive = 0;
  for (const auto& c : s["chips"]) alive += c["alive"].get<bool>();
  int up = 0;
  for (const auto& l : s["links"]) up += l["ends"][0]["state"] == "up" && l["ends"][1]["state"] == "up";
  std::set<std::string> modes;  // as the chips found they could (io_uring may fall back)
  for (const auto& c : s["chips"]) modes.insert(c.value("transport_mode", std::string("?")));
  std::string transport;
  for (const auto& m : modes) transport += (transport.empty() ? "" : "; ") + m;
  fmt::print("job {}  {}  up {:.1f} s  chips {}/{} running  links {}/{} up\n", s["job"].get<std::string>(),
             s["system"].get<std::string>(), s["uptime_s"].get<double>(), alive, s["chips"].size(), up,
             s["links"].size());
  const int spin = s.value("spin_us", 0);
  fmt::print("transport: {}\n", transport);
  fmt::print("waiting: {}\n", spin > 0 ? fmt::format("a chip polls for {} us after traffic, then sleeps (--spin-us)", spin)
                                        : std::string("a chip sleeps as soon as it is idle (--spin-us 0)"));
  std::map<std::string, int> on_cpus;  // the running chips by the CPUs they may run on (and host, over several)
  const bool hosts = !s.value("hosts", json::array()).empty();
  for (const auto& c : s["chips"]) {
    if (c.contains("cpus")) ++on_cpus[(hosts ? c.value("host", std::string()) + " CPUs " : std::string()) + c["cpus"].get<std::string>()];
  }
  std::vector<std::string> placed;
  for (const auto& [cpus, n] : on_cpus) placed.push_back(fmt::format("{} chip(s) on {}", n, cpus));
  if (!placed.empty()) fmt::print("cpus (--cpu-bind {}): {}\n", s.value("cpu_bind", std::string("none")), fmt::join(placed, "; "));
  std::map<std::string, int> policies;  // the running chips by their scheduling policy
  for (const auto& c : s["chips"]) {
    if (c.contains("sched")) ++policies[c["sched"].get<std::string>()];
  }
  std::vector<std::string> scheduled;
  for (const auto& [policy, n] : policies) scheduled.push_back(fmt::format("{} chip(s) {}", n, policy));
  if (!scheduled.empty()) fmt::print("scheduling (--sched {}): {}\n", s.value("sched", std::string("normal")), fmt::join(scheduled, "; "));
  uint64_t refused = 0;
  for (const auto& c : s["chips"]) refused += c.value("memory_refused", uint64_t{0});
  fmt::print("memory: {}, {} packet(s) refused for their key\n", s.value("memory", std::string("open")), refused);
  uint64_t inbox_strays = 0;  // (the links' own strays are in the table below)
  for (const auto& c : s["chips"]) {
    if (c.contains("lazy_inbox")) inbox_strays += c["lazy_inbox"].value("foreign", uint64_t{0});
  }
  if (inbox_strays > 0) fmt::print("lazy inboxes: {} stray datagram(s) dropped\n", inbox_strays);
  std::vector<std::string> voided;  // command slots whose workers died while writing them
  for (const auto& c : s["chips"]) {
    if (const auto n = c.value("command_slots_voided", uint64_t{0})) voided.push_back(fmt::format("{} on {}", n, c["name"].get<std::string>()));
  }
  if (!voided.empty()) {
    fmt::print("command slots voided (a worker died while writing a command): {}\n", fmt::join(voided, ", "));
  }
  uint64_t injected = 0, delivered = 0, events = 0;
  for (const auto& c : s["chips"]) {
    injected += c.value("packets_injected", uint64_t{0});
    delivered += c.value("packets_delivered", uint64_t{0});
    events += c.value("router_events", uint64_t{0});
  }
  fmt::print("fabric: {} packet(s) injected by workers, {} delivered to centers, {} router event(s)\n",
             injected, delivered, events);
  std::vector<json> drops;
  for (const auto& e : s.value("events", json::array())) {
    if (e.value("kind", "") == "dropped") drops.push_back(e);
  }
  for (size_t i = drops.size() > 10 ? drops.size() - 10 : 0; i < drops.size(); ++i) {  // the last ten
    fmt::print("  dropped: {}\n", drop_summary(drops[i]));
  }
  for (const auto& l : s["links"]) {
    for (const auto& end : l["ends"]) {
      if (!end.contains("fallback")) continue;
      fmt::print("  fallback channel: {}'s traffic travels {}'s wire ({})\n", end["port"].get<std::string>(),
                 end["fallback"]["via"].get<std::string>(), end["fallback"]["reason"].get<std::string>());
    }
  }
  for (const auto& c : s["chips"]) {  // sockets (spec 2.4, 4) and what their SSockets reserve
    for (const auto& k : c.value("sockets", json::array())) {
      fmt::print("  socket {} on {} (endpoint {}, core {}{}): {} {} {} epoch {} fvc {}, {}, {}\n", k["socket"].get<uint32_t>(),
                 c["name"].get<std::string>(), k["endpoint"].get<int>(), k["core"].get<int>(),
                 owner_text(k.value("owner", 0u)), k["type"].get<std::string>(),
                 k["direction"].get<std::string>() == "send" ? "to" : "from", k["remote"].get<std::string>(),
                 k["epoch"].get<uint32_t>(), k["fvc"].get<int>(), k["handshake"].get<std::string>(), k["state"].get<std::string>());
    }
    for (const auto& r : c.value("reservations", json::array())) {
      fmt::print("  reserved: fvc {} toward {} on {}, for {}'s socket endpoint {}\n", r["fvc"].get<int>(), r["output"].get<std::string>(),
                 c["name"].get<std::string>(), r["owner"].get<std::string>(), r["endpoint"].get<int>());
    }
  }
  if (s.contains("event_log")) fmt::print("event log: {} ('ttemu events' shows it)\n", s["event_log"].get<std::string>());
  // stray: foreign, stale and malformed datagrams and frames, both ends.
  fmt::print("{:<11} {:<11} {:>5} {:>9} {:>12} {:>12} {:>8} {:>8} {:>8} {:>8}\n", "link", "peer", "plane",
             "state", "frames a>b", "frames b>a", "crc err", "retrans", "stray", "downs");
  for (const auto& l : s["links"]) {
    const auto& a = l["ends"][0];
    const auto& b = l["ends"][1];
    auto c = [](const json& end, const char* k) { return end["counters"][k].get<uint64_t>(); };
    std::string state = a["state"] == b["state"] ? a["state"].get<std::string>()
                                                 : a["state"].get<std::string>() + "/" + b["state"].get<std::string>();
    fmt::print("{:<11} {:<11} {:>5} {:>9} {:>12} {:>12} {:>8} {:>8} {:>8} {:>8}\n", l["a"].get<std::string>(),
               l["b"].get<std::string>(), l["plane"].get<int>(), state, c(a, "frames_tx"), c(b, "frames_tx"),
               c(a, "crc_errors") + c(b, "crc_errors"), c(a, "retransmits") + c(b, "retransmits"),
               c(a, "foreign") + c(b, "foreign") + c(a, "stale") + c(b, "stale") + c(a, "malformed") +
                   c(b, "malformed"),
               c(a, "down_transitions") + c(b, "down_transitions"));
  }
}

// One of a pair of operator verbs on a running system (kill|restart, down|up, pause|resume):
// `first` tells which. It sends one control request, made from the verb and its operand (if it
// takes one), and prints one line of the answer, or the answer itself with --json.
struct OperatorVerb {
  const char* name;
  const char* help;
};
void add_operator_verbs(CLI::App* parent, std::array<OperatorVerb, 2> verbs, const char* operand_name, const char* operand_help,
                        const std::shared_ptr<std::string>& job,
                        std::function<json(bool first, const std::string& operand)> make_request,
                        std::function<std::string(bool first, const json& answer)> line) {
  parent->require_subcommand(1);
  auto operand = std::make_shared<std::string>();
  auto json_out = std::make_shared<bool>(false);
  for (const auto& verb : verbs) {
    const bool first = &verb == &verbs[0];
    auto* cmd = parent->add_subcommand(verb.name, verb.help);
    if (operand_name) cmd->add_option(operand_name, *operand, operand_help)->required();
    cmd->add_option("--job", *job, kJobHelp);
    cmd->add_flag("--json", *json_out, "Print one JSON object");
    cmd->callback([=] {
      const json r = request(control_socket(*job), make_request(first, *operand));
      if (*json_out) fmt::print("{}\n", r.dump());
      else fmt::print("{}\n", line(first, r));
    });
  }
}

}  // namespace

void add_launch_options(CLI::App* cmd, LaunchOptions& lo) {
  cmd->add_option("FILE", lo.file, "System specification (default: the Galaxy 4x8)");
  cmd->add_option("--faults", lo.faults, "Fault plan (YAML, see docs/fault-plan.md)");
  cmd->add_option("--seed", lo.seed, "Seed for fault injection (overrides the plan's)")
      ->check(whole_number<uint64_t>(0, link::kMaxSeed));
  cmd->add_option("--tables", lo.tables, "Routing tables (JSON from 'ttemu topo tables --json') instead of computed ones");
  cmd->add_option("--window", lo.window, "TT-link window, frames in flight")->check(whole_number(1, 32768));
  cmd->add_option("--window-kib", lo.window_kib, "TT-link window, KiB of payload in flight (0: no bound)")->check(whole_number(0, 1 << 20));
  cmd->add_option("--dram-mib", lo.dram_mib, "DRAM per chip in MiB (default: the architecture's)")
      ->check(whole_number<uint64_t>(1, kMaxDramMib));
  cmd->add_option("--ready-timeout", lo.ready_timeout, "Seconds allowed for every link to come up")
      ->check(number_in(0.001, 86400));
  cmd->add_option("--fvcs", lo.data_fvcs, "Data FVCs (a control FVC comes on top)")->check(whole_number(2, 8));
  cmd->add_option("--rb-packets", lo.rb_packets, "Routing buffer depth, packets per input per lane")->check(whole_number(1, 256));
  cmd->add_option("--ack-delay-us", lo.ack_delay_us, "TT-link: a pure ack waits this long for data to ride on")->check(whole_number(0, 10000));
  cmd->add_option("--credit-delay-us", lo.credit_delay_us, "Routers: return freed buffer slots after this long, or at half a buffer")->check(whole_number(0, 10000));
  cmd->add_option("--transport", lo.transport,
                     "How links move datagrams: udp (sockets), uring (the sockets through io_uring) or shm "
                     "(rings in shared memory, chips of one host); default: $TTEMU_TRANSPORT, else uring (udp where io_uring is refused)")
      ->check(CLI::IsMember(kTransports));
  cmd->add_option("--memory", lo.memory,
                     "open: writes, reads and atomics go anywhere; protected: each needs the key of a memory window "
                     "the target chip's worker registered (docs/api.md#memory-protection)")
      ->check(CLI::IsMember({"open", "protected"}));
  cmd->add_option("--spin-us", lo.spin_us,
                  fmt::format("Chips keep polling this long after traffic before they sleep (0: sleep at once); default: {} "
                              "when the host has a CPU per chip, else 0 (docs/fabric.md#transports)",
                              kAutoSpinUs))->check(whole_number(0, 100000));
  cmd->add_option("--cpu-bind", lo.cpu_bind,
                  "none: the kernel places the chips' processes; blocks: each host's chips are bound in compact blocks "
                  "of their meshes to its CPUs, a block per CPU (docs/fabric.md#cpu-binding)")
      ->check(CLI::IsMember({"none", "blocks"}));
  cmd->add_option("--sched", lo.sched,
                  "normal: the chips keep the launcher's scheduling policy; batch: they run under SCHED_BATCH, a woken chip "
                  "waiting for the running one instead of preempting it (more goodput with many chips per CPU, longer "
                  "round trips; docs/fabric.md#scheduling)")
      ->check(CLI::IsMember({"normal", "batch"}));
  cmd->add_option("--timer-slack-us", lo.timer_slack_us,
                  "Chips handle a deadline (a delayed ack, credits, a retransmission check) when traffic wakes them anyway, "
                  "and are woken for it alone at most this late (0: on time)")
      ->check(whole_number(0, 10000));
  cmd->add_option("--efc", lo.efc, "Ethernet Fallback Channel: a broken link's traffic moves onto a parallel link (on|off)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, bool>{{"on", true}, {"off", false}}, CLI::ignore_case));
  cmd->add_option("--efc-timeouts", lo.efc_timeouts, "EFC: retransmission timeouts in a row that break a link")->check(whole_number(1, 1000));
  cmd->add_option("--efc-error-rate", lo.efc_error_rate, "EFC: receive errors (CRC errors, gaps) per frame over an interval that break a link; 0: never")
      ->check(number_in(0, 1));
  cmd->add_option("--efc-interval-ms", lo.efc_interval_ms, "EFC: the interval the error rate is measured over")->check(whole_number(1, 600000));
  cmd->add_option("--status-interval-ms", lo.status_interval_ms,
                     "Chips report data rates per router and port (and error-rate alarms) this often while traffic flows; 0: never")
      ->check(whole_number(0, 3600000));
  cmd->add_option("--crc-alarm", lo.crc_alarm, "Status alarm: CRC errors per frame a port receives over an interval; 0: never")
      ->check(number_in(0, 1));
  cmd->add_option("--retransmit-alarm", lo.retransmit_alarm,
                     "Status alarm: retransmissions per data frame a port sends over an interval; 0: never")
      ->check(number_in(0, 1));
  cmd->add_option("--events-dir", lo.events_dir,
                     "Where the job's event log goes (default: $TTEMU_EVENTS_DIR, else $XDG_STATE_HOME/ttemu/events, else ~/.local/state/ttemu/events)");
  cmd->add_option("--timeout-ms", lo.timeout_ms, "Drop a packet whose head waits this long (spec 5.5)")->check(whole_number(1, 600000));
}

void add_system_commands(CLI::App& app, const std::vector<std::string>& client_command, int& exit_status) {
  // launch
  auto lo = std::make_shared<LaunchOptions>();
  auto* launch = app.add_subcommand("launch", "Start a system: one process per chip, links over UDP");
  add_launch_options(launch, *lo);
  launch->footer("Run a client against the live system: ttemu launch FILE -- CMD ARGS...\n"
                 "(it sees TTEMU_JOB, TTEMU_CONTROL and FI_PROVIDER_PATH with the tt libfabric provider; the system stops when it exits, with its status)");
  launch->callback([lo, &client_command, &exit_status] {
    if (lo->file.empty()) lo->file = default_system_file();
    lo->command = client_command;
    exit_status = run_launch(*lo);
  });

  // chip run (internal), chip kill|restart
  auto co = std::make_shared<std::tuple<std::string, std::string, int, std::string>>();
  auto* chip = app.add_subcommand("chip", "Kill or restart one chip of a running system");
  auto* run = chip->add_subcommand("run", "Run one chip (started by 'ttemu launch')");
  run->group("");  // hidden from --help
  run->add_option("--job", std::get<0>(*co))->required();
  run->add_option("--chip", std::get<1>(*co))->required();
  run->add_option("--control-fd", std::get<2>(*co))->required()->check(whole_number(0, 1 << 20));
  run->add_option("--control-socket", std::get<3>(*co));
  run->callback([co, &exit_status] {
    auto job = job::JobId::parse(std::get<0>(*co));
    auto id = routing::parse_chip(std::get<1>(*co));
    if (!job || !id) throw Error("ttemu chip run: bad --job or --chip");
    exit_status = process::run_chip({*job, *id, std::get<2>(*co), std::get<3>(*co)});
  });
  auto job = std::make_shared<std::string>();
  auto json_out = std::make_shared<bool>(false);
  add_operator_verbs(
      chip,
      {{{"kill", "Kill a chip's process (SIGKILL): its neighbours' links go down, routes go around it"},
        {"restart", "Start a killed chip again: empty memory, its links handshake anew, routes include it again"}}},
      "CHIP", "e.g. M0D5", job,
      [](bool kill, const std::string& name) { return json{{"cmd", "chip"}, {"chip", name}, {"action", kill ? "kill" : "restart"}}; },
      [](bool kill, const json& r) {
        return fmt::format("chip {} {} (pid {})", r["chip"].get<std::string>(), kill ? "killed" : "restarted", r["pid"].get<int>());
      });

  // links down|up
  add_operator_verbs(
      app.add_subcommand("links", "Take a link of a running system out of service, or back"),
      {{{"down", "Administratively down: the wire carries nothing (the EFC or a reroute takes its traffic)"},
        {"up", "Back in service"}}},
      "PORT", "Either end, e.g. M0D0P4", job,
      [](bool down, const std::string& port) { return json{{"cmd", "link_admin"}, {"port", port}, {"down", down}}; },
      [](bool down, const json& r) {
        const json later = r.value("at_restart", json::array());  // ends that take it when their chip restarts
        std::string ends;
        for (const auto& end : later) ends += fmt::format("{}{}", ends.empty() ? "" : " and ", end.get<std::string>());
        return fmt::format("link {}-{} {}{}", r["link"].get<std::string>(), r["peer"].get<std::string>(),
                           down ? "is out of service" : "is back in service",
                           later.empty() ? "" : fmt::format(" ({}: when {} restarts)", ends, later.size() > 1 ? "their chips" : "its chip"));
      });

  // tables reload
  auto* tables = app.add_subcommand("tables", "The routing tables of a running system");
  tables->require_subcommand(1);
  auto fail = std::make_shared<std::vector<std::string>>();
  auto* reload = tables->add_subcommand("reload", "Compute the tables again around what failed (and --fail) and load them into the routers");
  reload->add_option("--fail", *fail, "Also route around these links (MxDyPz) and chips (MxDy)");
  reload->add_option("--job", *job, kJobHelp);
  reload->add_flag("--json", *json_out, "Print one JSON object");
  reload->callback([fail, job, json_out] {
    auto r = request(control_socket(*job), {{"cmd", "tables"}, {"fail", *fail}});
    if (*json_out) {
      fmt::print("{}\n", r.dump());
      return;
    }
    fmt::print("routing tables v{} loaded around {}; {} unreachable pair(s); switch: {}\n", r["version"].get<int>(),
               r["failed"].get<std::string>(), r["unreachable_pairs"].get<long>(), r["switch"].get<std::string>());
  });

  // injection pause|resume
  add_operator_verbs(
      app.add_subcommand("injection", "Hold or release every worker's injection on a running system"),
      {{{"pause", "Routers take no new commands; what is in the fabric moves on"}, {"resume", "Routers take commands again"}}},
      nullptr, nullptr, job, [](bool paused, const std::string&) { return json{{"cmd", "injection"}, {"paused", paused}}; },
      [](bool paused, const json& r) {
        return fmt::format("injection {} on {} chip(s)", paused ? "paused" : "resumed", r["chips"].get<int>());
      });

  // status
  auto* status = app.add_subcommand("status", "Show a running system: chips, link states, counters");
  status->add_option("--job", *job, kJobHelp);
  status->add_flag("--json", *json_out, "Print the status as one JSON object");
  status->callback([job, json_out] {
    auto s = request(control_socket(*job), {{"cmd", "status"}});
    if (*json_out) fmt::print("{}\n", s.dump());
    else print_status(s);
  });

  // snapshot
  auto* snap = app.add_subcommand("snapshot", "Show what every chip holds now: routing buffers (their head packets and how long they waited), credits, links");
  snap->add_option("--job", *job, kJobHelp);
  snap->add_flag("--json", *json_out, "Print the snapshot as one JSON object");
  snap->callback([job, json_out] {
    auto s = request(control_socket(*job), {{"cmd", "snapshot"}});
    const node::SystemSnapshot snapshot = node::read_system_snapshot(s);  // (one format, checked)
    if (*json_out) fmt::print("{}\n", json(snapshot).dump());
    else print_snapshot(snapshot);
  });

  // link test / ping
  auto* linkcmd = app.add_subcommand("link", "Drive one TT-link of a running system");
  linkcmd->require_subcommand(1);
  // port, frames, stream payload size, ping count, ping payload size
  auto lt = std::make_shared<std::tuple<std::string, uint64_t, uint32_t, int, uint32_t>>("", 10000, 4096, 1000, 64);
  auto* test = linkcmd->add_subcommand("test", "Send a checked stream over a link; report goodput and errors");
  test->add_option("PORT", std::get<0>(*lt), "Sending end, e.g. M0D0P4")->required();
  test->add_option("--frames", std::get<1>(*lt), "Payloads to send")->default_val(10000)
      ->check(whole_number<int64_t>(1, kMaxStreamFrames));
  test->add_option("--size", std::get<2>(*lt), "Bytes per payload")->default_val(4096)
      ->check(whole_number<int64_t>(kMinTestPayload, kMaxTestPayload));
  test->add_option("--job", *job, kJobHelp);
  test->add_flag("--json", *json_out, "Print one JSON object");
  test->callback([lt, job, json_out] {
    auto r = request(control_socket(*job),
                     {{"cmd", "stream"}, {"link", std::get<0>(*lt)}, {"frames", std::get<1>(*lt)}, {"size", std::get<2>(*lt)}});
    if (*json_out) fmt::print("{}\n", r.dump());
    else {
      fmt::print("{} -> {}: {} payloads of {} B in {:.3f} s: {:.3f} GB/s; verified {}, errors {}; "
                 "retransmits {}, CRC errors {}\n",
                 r["link"].get<std::string>(), r["peer"].get<std::string>(), r["frames"].get<uint64_t>(),
                 std::get<2>(*lt), r["seconds"].get<double>(), r["gb_per_s"].get<double>(),
                 r["verified"].get<uint64_t>(), r["errors"].get<uint64_t>(), r["retransmits"].get<uint64_t>(),
                 r["crc_errors"].get<uint64_t>());
    }
    if (r["errors"].get<uint64_t>() != 0 || r["verified"].get<uint64_t>() != r["frames"].get<uint64_t>()) {
      throw Error("the stream did not arrive intact");
    }
  });
  auto* ping = linkcmd->add_subcommand("ping", "Round trips over a link (the peer echoes); report latency");
  ping->add_option("PORT", std::get<0>(*lt), "Sending end, e.g. M0D0P4")->required();
  ping->add_option("--count", std::get<3>(*lt), "Round trips")->default_val(1000)
      ->check(whole_number<int64_t>(1, kMaxPingCount));
  ping->add_option("--size", std::get<4>(*lt), "Bytes per payload")->default_val(64)
      ->check(whole_number<int64_t>(kMinTestPayload, kMaxTestPayload));
  ping->add_option("--job", *job, kJobHelp);
  ping->add_flag("--json", *json_out, "Print one JSON object");
  ping->callback([lt, job, json_out] {
    auto r = request(control_socket(*job),
                     {{"cmd", "ping"}, {"link", std::get<0>(*lt)}, {"count", std::get<3>(*lt)}, {"size", std::get<4>(*lt)}});
    std::vector<double> rtt = r["rtt_us"];
    std::sort(rtt.begin(), rtt.end());
    double sum = 0;
    for (double x : rtt) sum += x;
    json out = {{"link", r["link"]}, {"count", rtt.size()},
                {"min_us", rtt.empty() ? 0 : rtt.front()},
                {"avg_us", rtt.empty() ? 0 : sum / static_cast<double>(rtt.size())},
                {"p50_us", rtt.empty() ? 0 : rtt[rtt.size() / 2]},
                {"p99_us", rtt.empty() ? 0 : rtt[rtt.size() * 99 / 100]}};
    if (*json_out) fmt::print("{}\n", out.dump());
    else fmt::print("{}: {} round trips: min {:.1f} us, avg {:.1f} us, p50 {:.1f} us, p99 {:.1f} us\n",
                    r["link"].get<std::string>(), rtt.size(), out["min_us"].get<double>(), out["avg_us"].get<double>(),
                    out["p50_us"].get<double>(), out["p99_us"].get<double>());
  });

  // faults
  auto* faults = app.add_subcommand("faults", "Change fault injection on a running system");
  faults->require_subcommand(1);
  auto plan_file = std::make_shared<std::string>();
  auto from_now = std::make_shared<bool>(false);
  auto* apply = faults->add_subcommand("apply", "Replace the running system's faults with a plan");
  apply->add_option("PLAN", *plan_file, "Fault plan (YAML); an empty file clears all faults")->required();
  apply->add_option("--job", *job, kJobHelp);
  apply->add_flag("--from-now", *from_now, "The plan's down intervals count from now, not from when the links started");
  apply->callback([plan_file, job, from_now] {
    // Checked here, before anything is sent: bytes that are not UTF-8 cannot travel in JSON,
    // and the launcher reads requests of up to kMaxRequestBytes.
    const std::string text = read_text_file(*plan_file);
    check_utf8(text, *plan_file);
    const json req = {{"cmd", "faults"}, {"plan", text}, {"source", *plan_file}, {"from_now", *from_now}};
    if (const size_t n = req.dump(-1, ' ', false, json::error_handler_t::replace).size() + 1; n > kMaxRequestBytes) {
      throw Error(fmt::format("{}: too large to send ({} bytes as a request; the launcher takes up to {})",
                              *plan_file, n, kMaxRequestBytes));
    }
    auto r = request(control_socket(*job), req);
    fmt::print("applied {}: {} link direction(s) with faults\n", *plan_file, r["directions_with_faults"].get<int>());
  });

  // fabric stall / resume
  auto* fabric = app.add_subcommand("fabric", "Act on a running system's fabric routers");
  fabric->require_subcommand(1);
  auto stall_opts = std::make_shared<std::pair<std::string, int>>("", 0);
  for (const char* verb : {"stall", "resume"}) {
    bool stall = std::string(verb) == "stall";
    auto* cmd = fabric->add_subcommand(verb, stall ? "Stop a chip's center from consuming one FVC (a stalled consumer)"
                                                   : "Let a stalled chip's center consume again");
    cmd->add_option("CHIP", stall_opts->first, "e.g. M0D3")->required();
    // The largest system has 8 data FVCs and the control FVC, 8; the launcher checks the
    // running system's.
    cmd->add_option("--fvc", stall_opts->second, "FVC (data FVCs, then the control FVC)")->required()->check(whole_number(0, 8));
    cmd->add_option("--job", *job, kJobHelp);
    cmd->callback([stall_opts, job, stall] {
      request(control_socket(*job),
              {{"cmd", "stall"}, {"chip", stall_opts->first}, {"fvc", stall_opts->second}, {"stalled", stall}});
    });
  }

  // clean
  auto* clean = app.add_subcommand("clean", "Remove shared memory and sockets left by dead jobs");
  clean->callback([] {
    auto removed = job::clean_stale();
    for (const auto& r : removed) fmt::print("removed {}\n", r);
    fmt::print("{} leftover(s) removed\n", removed.size());
  });
}

}  // namespace ttemu::launcher
