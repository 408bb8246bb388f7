// Packet captures (docs/capture.md): `ttemu sim --capture` records the Galaxy's TT-link traffic
// as pcapng, and tshark with the shipped dissector (tools/wireshark/ttlink.lua) decodes it field
// by field as ttemu's own parsers read the same bytes: every frame's header, CRC status and
// fabric packet. Every link end captured is an interface named after it; the packets are those
// of the traffic pattern; a byte corrupted in a copy of the capture shows as a bad CRC.
// `ttemu capture` records a running Galaxy's links while `ttemu traffic` runs: the same file,
// the same decoding, every write of the pattern there once, and the capture replays in the
// simulator to the pattern's deliveries.
// Skipped when tshark (Debian package tshark) is not installed.
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "emulator/link/efc.hpp"
#include "emulator/link/frame.hpp"
#include "emulator/routing/packet.hpp"
#include "emulator/transport/lanes.hpp"
#include "emulator/wire/pcapng.hpp"
#include "tests/system_support.hpp"

namespace ttemu::test {
namespace {

// tshark on the PATH, or "" (test_support's run() does not search).
std::string find_tshark() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path p = fs::path(dir) / "tshark";
    if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

// What a datagram holds, field by field, each field's values in frame order (as tshark's
// `-T fields -E occurrence=a` lists them).
using Fields = std::map<std::string, std::vector<uint64_t>>;

const std::vector<std::string> kFields = {
    "ttlink.dest_addr", "ttlink.tx_seq", "ttlink.rx_seq", "ttlink.type", "ttlink.flags", "ttlink.length",
    "ttlink.session", "ttlink.crc", "ttlink.crc.status", "ttlink.hello.nonce", "ttlink.hello.port",
    "ttfabric.command", "ttfabric.src_mesh", "ttfabric.src_device", "ttfabric.dst_mesh", "ttfabric.dst_device",
    "ttfabric.dst_addr", "ttfabric.return_addr", "ttfabric.packet_id", "ttfabric.size", "ttfabric.fvc",
    "ttfabric.lane", "ttfabric.ttl", "ttfabric.txn_id", "ttfabric.plane", "ttfabric.credit.lane",
    "ttfabric.credit.count"};

// The same fields as ttemu reads them (link::parse_datagram, routing::Packet::peek).
Fields decode(std::span<const uint8_t> datagram) {
  Fields f;
  for (const auto& name : kFields) f[name];
  const size_t skip = link::decode_fallback(datagram) ? link::kFallbackHeaderBytes : 0;
  const auto r = link::parse_datagram(datagram.subspan(skip), [&](const link::ParsedFrame& frame) {
    const auto& h = frame.header;
    f["ttlink.dest_addr"].push_back(h.dest_addr);
    f["ttlink.tx_seq"].push_back(h.tx_seq);
    f["ttlink.rx_seq"].push_back(h.rx_seq);
    f["ttlink.type"].push_back(static_cast<uint64_t>(h.type));
    f["ttlink.flags"].push_back(h.flags);
    f["ttlink.length"].push_back(h.length);
    f["ttlink.session"].push_back(h.session);
    f["ttlink.crc"].push_back(frame.crc);
    f["ttlink.crc.status"].push_back(link::crc_ok(frame, {}) ? 1 : 0);  // a short run never wraps
    if (h.type == link::FrameType::kHello && frame.payload.size() == sizeof(link::HelloBody)) {
      link::HelloBody b;
      std::memcpy(&b, frame.payload.data(), sizeof b);
      f["ttlink.hello.nonce"].push_back(b.nonce);
      f["ttlink.hello.port"].push_back(b.port);
    }
    if (h.type != link::FrameType::kData) return;
    if (h.dest_addr >= transport::kLinkPacketAddr && h.dest_addr < transport::kLinkPacketAddr + 0x100) {
      routing::PacketHeader p;
      if (!routing::Packet::peek(frame.payload, p)) return;
      f["ttfabric.command"].push_back(static_cast<uint64_t>(p.command));
      f["ttfabric.src_mesh"].push_back(p.src_mesh);
      f["ttfabric.src_device"].push_back(p.src_device);
      f["ttfabric.dst_mesh"].push_back(p.dst_mesh);
      f["ttfabric.dst_device"].push_back(p.dst_device);
      f["ttfabric.dst_addr"].push_back(p.dst_addr);
      f["ttfabric.return_addr"].push_back(p.return_addr);
      f["ttfabric.packet_id"].push_back(p.packet_id);
      f["ttfabric.size"].push_back(p.size);
      f["ttfabric.fvc"].push_back(p.fvc);
      f["ttfabric.lane"].push_back(h.dest_addr - transport::kLinkPacketAddr);
      f["ttfabric.ttl"].push_back(p.ttl);
      f["ttfabric.txn_id"].push_back(p.txn_id);
      f["ttfabric.plane"].push_back(p.plane);
    } else if (h.dest_addr >= transport::kLinkCreditAddr && h.dest_addr < transport::kLinkCreditAddr + 0x100 &&
               frame.payload.size() == 4) {
      uint32_t n;
      std::memcpy(&n, frame.payload.data(), 4);
      f["ttfabric.credit.lane"].push_back(h.dest_addr - transport::kLinkCreditAddr);
      f["ttfabric.credit.count"].push_back(n);
    }
  });
  EXPECT_FALSE(r.malformed);
  return f;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

struct TsharkRow {
  std::string interface;
  Fields fields;
};

// tshark with the dissector: one row per datagram, in file order.
std::vector<TsharkRow> tshark_rows(const std::string& tshark, const fs::path& file) {
  std::vector<std::string> args = {tshark, "-X", "lua_script:" TTEMU_SOURCE "/tools/wireshark/ttlink.lua", "-r",
                                   file.string(), "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
                                   "-e", "frame.interface_name"};
  for (const auto& f : kFields) args.insert(args.end(), {"-e", f});
  const auto r = run(args);
  EXPECT_EQ(r.status, 0) << r.stderr_text;
  std::vector<TsharkRow> rows;
  for (const auto& line : split(r.stdout_text, '\n')) {
    if (line.empty()) continue;
    const auto cols = split(line, '\t');
    EXPECT_EQ(cols.size(), kFields.size() + 1) << line;
    if (cols.size() != kFields.size() + 1) break;
    TsharkRow row{.interface = cols[0], .fields = {}};
    for (size_t i = 0; i < kFields.size(); ++i) {
      auto& values = row.fields[kFields[i]];
      if (cols[i + 1].empty()) continue;
      for (const auto& v : split(cols[i + 1], ',')) values.push_back(std::stoull(v, nullptr, 0));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

TEST(Capture, GalaxyTrafficDecodesInTsharkFieldByField) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  const std::string tshark = find_tshark();
  if (tshark.empty()) GTEST_SKIP() << "tshark is not installed (Debian package tshark; bash tools/dev installs it)";
  TempDir dir;
  const fs::path cap = dir / "galaxy.pcapng";
  const auto sim = ttemu({"sim", topo("galaxy.yaml"), "--pattern", "unicast", "--src", "M0D0", "--dst", "M0D31",
                          "--count", "2", "--size", "256", "--latency-samples", "1", "--capture", cap.string()});
  ASSERT_EQ(sim.status, 0) << sim.out;
  const wire::Capture c = wire::read_pcapng(cap.string());

  // Every link end is an interface named after it, described with its peer.
  const control::System sys = load("galaxy.yaml");
  std::set<std::string> names, expected_names;
  for (const auto& l : sys.links) {
    for (const auto& end : {l.a, l.b}) expected_names.insert(routing::to_string(end));
  }
  for (const auto& i : c.interfaces) {
    names.insert(i.name);
    const auto peer = sys.peer(*routing::parse_port(i.name));
    ASSERT_TRUE(peer) << i.name;
    EXPECT_EQ(i.description, i.name + " -> " + routing::to_string(*peer));
  }
  EXPECT_EQ(names, expected_names);
  EXPECT_EQ(c.interfaces.size(), expected_names.size());

  // tshark decodes each datagram as ttemu does, frame by frame.
  const auto rows = tshark_rows(tshark, cap);
  ASSERT_EQ(rows.size(), c.datagrams.size());
  ASSERT_GT(rows.size(), 0u);
  std::set<std::pair<std::string, std::string>> pairs;
  std::set<uint64_t> write_ids;
  size_t packets = 0, credits = 0, hellos = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto& d = c.datagrams[k];
    EXPECT_EQ(rows[k].interface, c.interfaces[d.interface].name) << "datagram " << k + 1;
    const Fields ours = decode(d.bytes);
    for (const auto& name : kFields) {
      EXPECT_EQ(rows[k].fields.at(name), ours.at(name)) << name << " in datagram " << k + 1;
    }
    for (uint64_t s : ours.at("ttlink.crc.status")) EXPECT_EQ(s, 1u) << "datagram " << k + 1;
    const auto& cmd = ours.at("ttfabric.command");
    for (size_t i = 0; i < cmd.size(); ++i) {
      const std::string src = routing::to_string(routing::ChipId{static_cast<uint16_t>(ours.at("ttfabric.src_mesh")[i]),
                                                                 static_cast<uint16_t>(ours.at("ttfabric.src_device")[i])});
      const std::string dst = routing::to_string(routing::ChipId{static_cast<uint16_t>(ours.at("ttfabric.dst_mesh")[i]),
                                                                 static_cast<uint16_t>(ours.at("ttfabric.dst_device")[i])});
      pairs.emplace(src, dst);
      if (cmd[i] == static_cast<uint64_t>(routing::Command::kWrite)) write_ids.insert(ours.at("ttfabric.packet_id")[i]);
    }
    packets += cmd.size();
    credits += ours.at("ttfabric.credit.count").size();
    hellos += ours.at("ttlink.hello.nonce").size();
  }
  // The unicast pattern's writes and their acks, and nothing else; and the links' own traffic.
  const std::set<std::pair<std::string, std::string>> pattern = {{"M0D0", "M0D31"}, {"M0D31", "M0D0"}};
  EXPECT_EQ(pairs, pattern);
  EXPECT_GE(write_ids.size(), 3u);  // --count 2, and a latency sample
  EXPECT_GT(packets, 0u);
  EXPECT_GT(credits, 0u);
  EXPECT_GE(hellos, expected_names.size());  // every end said hello

  // One byte corrupted (a data frame's tx_seq) in a copy: tshark reports that frame's CRC bad.
  size_t victim = rows.size();
  for (size_t k = 0; k < c.datagrams.size() && victim == rows.size(); ++k) {
    const auto& b = c.datagrams[k].bytes;
    if (!link::decode_fallback(b) && b.size() > 8 && b[8] == static_cast<uint8_t>(link::FrameType::kData)) victim = k;
  }
  ASSERT_LT(victim, rows.size());
  std::string file = slurp(cap);
  const auto& vb = c.datagrams[victim].bytes;
  const auto at = file.find(std::string(vb.begin(), vb.end()));
  ASSERT_NE(at, std::string::npos);
  file[at + 4] = static_cast<char>(file[at + 4] ^ 0x01);
  const fs::path bad = dir / "corrupted.pcapng";
  write_file(bad, file);
  const auto r = run({tshark, "-X", "lua_script:" TTEMU_SOURCE "/tools/wireshark/ttlink.lua", "-r", bad.string(), "-Y",
                      "ttlink.crc.status == 0", "-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  std::vector<std::string> lines;
  for (const auto& line : split(r.stdout_text, '\n')) {
    if (!line.empty()) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 1u) << r.stdout_text;
  EXPECT_EQ(split(lines[0], '\t')[0], std::to_string(victim + 1));
  EXPECT_NE(lines[0].find("Bad CRC32"), std::string::npos) << lines[0];
}

// The JSON objects among a command's output lines (the capture's summary, traffic's reports).
std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  for (const auto& line : split(out, '\n')) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) v.push_back(std::move(j));
  }
  return v;
}

nlohmann::json with_key(const std::vector<nlohmann::json>& objects, const std::string& key) {
  for (const auto& j : objects) {
    if (j.contains(key)) return j;
  }
  return {};
}

TEST(LiveCapture, GalaxyTrafficIsRecordedWholeDecodesInTsharkAndReplaysInTheSimulator) {
  const std::string tshark = find_tshark();
  if (tshark.empty()) GTEST_SKIP() << "tshark is not installed (Debian package tshark; bash tools/dev installs it)";
  TempDir dir;
  const fs::path cap = dir / "live.pcapng";
  System sys({topo("galaxy.yaml")});
  const auto before = std::chrono::system_clock::now();
  const auto r = ttemu({"capture", "--job", sys.job(), "-o", cap.string(), "--json", "--", TTEMU_BINARY, "traffic",
                        "--pattern", "all_to_all", "--size", "256", "--count", "1", "--latency-samples", "1", "--json"});
  const auto after = std::chrono::system_clock::now();
  ASSERT_EQ(r.status, 0) << r.out;
  const auto lines = json_lines(r.stdout_text);
  const auto summary = with_key(lines, "datagrams"), traffic = with_key(lines, "verified");
  ASSERT_FALSE(summary.is_null()) << r.out;
  ASSERT_FALSE(traffic.is_null()) << r.out;
  EXPECT_EQ(traffic["errors"], 0);
  EXPECT_EQ(summary["dropped"], 0) << r.out;
  EXPECT_EQ(summary["datagrams"], summary["recorded_by_chips"]) << r.out;
  EXPECT_EQ(summary["ended_by"], "command");

  const wire::Capture c = wire::read_pcapng(cap.string());
  const control::System galaxy = load("galaxy.yaml");
  EXPECT_EQ(c.interfaces.size(), 2 * galaxy.links.size());
  EXPECT_EQ(summary["datagrams"], c.datagrams.size());
  ASSERT_GT(c.datagrams.size(), 0u);
  // Wall-clock timestamps, inside the capture's run.
  const auto ns = [](auto t) { return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()); };
  for (const auto& d : c.datagrams) {
    ASSERT_GE(d.ns, ns(before));
    ASSERT_LE(d.ns, ns(after));
  }

  // tshark decodes each datagram as ttemu does; every CRC is good; the pattern's writes are
  // there, every ordered pair of chips, each write once (retransmissions and later hops share
  // the source's packet id).
  const auto rows = tshark_rows(tshark, cap);
  ASSERT_EQ(rows.size(), c.datagrams.size());
  std::set<std::pair<std::string, std::string>> write_pairs;
  std::set<std::pair<std::string, uint64_t>> writes;
  for (size_t k = 0; k < rows.size(); ++k) {
    const Fields ours = decode(c.datagrams[k].bytes);
    EXPECT_EQ(rows[k].interface, c.interfaces[c.datagrams[k].interface].name);
    for (const auto& name : kFields) ASSERT_EQ(rows[k].fields.at(name), ours.at(name)) << name << " in datagram " << k + 1;
    for (uint64_t st : ours.at("ttlink.crc.status")) ASSERT_EQ(st, 1u) << "datagram " << k + 1;
    const auto& cmd = ours.at("ttfabric.command");
    for (size_t i = 0; i < cmd.size(); ++i) {
      if (cmd[i] != static_cast<uint64_t>(routing::Command::kWrite) || ours.at("ttfabric.size")[i] != 256) continue;
      const std::string src = routing::to_string(routing::ChipId{static_cast<uint16_t>(ours.at("ttfabric.src_mesh")[i]),
                                                                 static_cast<uint16_t>(ours.at("ttfabric.src_device")[i])});
      const std::string dst = routing::to_string(routing::ChipId{static_cast<uint16_t>(ours.at("ttfabric.dst_mesh")[i]),
                                                                 static_cast<uint16_t>(ours.at("ttfabric.dst_device")[i])});
      write_pairs.emplace(src, dst);
      writes.emplace(src, ours.at("ttfabric.packet_id")[i]);
    }
  }
  EXPECT_EQ(write_pairs.size(), 32u * 31u);
  EXPECT_EQ(writes.size(), traffic["pairs"].get<size_t>());

  // The live capture replays in the simulator: each pair delivered its one 256-byte write.
  const auto replay = ttemu({"sim", topo("galaxy.yaml"), "--replay", cap.string(), "--json"});
  ASSERT_EQ(replay.status, 0) << replay.out;
  const auto rep = with_key(json_lines(replay.stdout_text), "deliveries");
  ASSERT_FALSE(rep.is_null()) << replay.out;
  EXPECT_EQ(rep["complete"], true);
  const auto& by_pair = rep["deliveries"]["by_pair"];
  EXPECT_EQ(by_pair.size(), 32u * 31u);
  for (const auto& p : by_pair) EXPECT_GE(p["bytes"].get<uint64_t>(), 256u) << p.dump();

  // And back on the running system: ttemu traffic --replay delivers what the simulator does,
  // for the live capture and for one the simulator made.
  const fs::path simcap = dir / "sim.pcapng";
  const auto simrun = ttemu({"sim", topo("galaxy.yaml"), "--pattern", "one_to_all", "--src", "M0D7", "--size", "1000",
                             "--count", "3", "--capture", simcap.string()});
  ASSERT_EQ(simrun.status, 0) << simrun.out;
  for (const auto& file : {cap, simcap}) {
    const auto live = ttemu({"traffic", "--job", sys.job(), "--replay", file.string(), "--json"});
    ASSERT_EQ(live.status, 0) << live.out;
    const auto lr = with_key(json_lines(live.stdout_text), "equal");
    ASSERT_FALSE(lr.is_null()) << live.out;
    EXPECT_EQ(lr["equal"], true) << live.out;
    EXPECT_EQ(lr["delivered"], lr["expected"]);
    EXPECT_GE(lr["delivered"]["packets"].get<uint64_t>(), file == cap ? 32u * 31u : 31u * 3u) << live.out;
  }
  EXPECT_EQ(sys.stop(), 0);
}

TEST(LiveCapture, ATrafficReplayRefusesWhatARunningSystemCannotReissue) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  TempDir dir;
  const fs::path reads = dir / "reads.pcapng";
  const auto simrun = ttemu({"sim", topo("n300.yaml"), "--pattern", "unicast", "--op", "read", "--count", "2", "--capture", reads.string()});
  ASSERT_EQ(simrun.status, 0) << simrun.out;
  System sys({topo("n300.yaml")});
  auto r = ttemu({"traffic", "--job", sys.job(), "--replay", reads.string()});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("a running system replays writes and atomic increments only"), std::string::npos) << r.out;
  r = ttemu({"traffic", "--job", sys.job(), "--replay", reads.string(), "--pattern", "unicast"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("excludes"), std::string::npos) << r.out;
  EXPECT_EQ(sys.stop(), 0);
}

TEST(LiveCapture, BadRequestsAreOneLineAndLeaveNoFile) {
  TTEMU_ONCE_FOR_ALL_TRANSPORTS();
  TempDir dir;
  System sys({topo("n300.yaml")});
  const fs::path f = dir / "x.pcapng";
  auto r = ttemu({"capture", "--job", sys.job(), "-o", f.string(), "--link", "M0D0P99", "--duration", "1"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--link: 'M0D0P99' is not a wired port of"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(f));
  r = ttemu({"capture", "--job", sys.job(), "-o", (dir / "no" / "such" / "dir.pcapng").string(), "--duration", "1"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("-o: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no/such/dir.pcapng"), std::string::npos) << r.out;
  // One capture at a time: a second, run while the first records, is refused and leaves no file;
  // the first ends with the command's status.
  const fs::path a = dir / "a.pcapng", b = dir / "b.pcapng";
  r = ttemu({"capture", "--job", sys.job(), "-o", a.string(), "--", TTEMU_BINARY, "capture", "--job", sys.job(), "-o",
             b.string(), "--duration", "1"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("another ttemu capture is running"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(b));
  EXPECT_EQ(wire::read_pcapng(a.string()).interfaces.size(), 4u);  // N300: two links, four ends
  EXPECT_EQ(sys.stop(), 0);
}

TEST(LiveCapture, CtrlCEndsItCleanlyAndAKilledCapturerIsTakenOver) {
  TempDir dir;
  System sys({topo("n300.yaml")});
  // Ctrl-C: the file is complete (its interfaces, whatever came), the exit status 0.
  for (int sig : {SIGINT, SIGKILL}) {
    const fs::path f = dir / fmt::format("sig{}.pcapng", sig);
    int fd = -1;
    const pid_t pid = spawn({TTEMU_BINARY, "capture", "--job", sys.job(), "-o", f.string(), "--link", "M0D0P2"}, fd);
    std::string out;
    ASSERT_TRUE(read_until(fd, out, [&] { return out.find("ttemu capture: recording 2 link end(s)") != std::string::npos; },
                           std::chrono::seconds(30))) << out;
    ::kill(pid, sig);
    read_until(fd, out, [] { return false; }, std::chrono::seconds(30));  // to its end
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (sig == SIGINT) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
      EXPECT_EQ(wire::read_pcapng(f.string()).interfaces.size(), 2u) << out;
    }
  }
  // The killed one never stopped its capture: the next takes it over.
  const fs::path f = dir / "next.pcapng";
  const auto r = ttemu({"capture", "--job", sys.job(), "-o", f.string(), "--duration", "0.2", "--json"});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(wire::read_pcapng(f.string()).interfaces.size(), 4u);
  EXPECT_EQ(sys.stop(), 0);
}

}  // namespace
}  // namespace ttemu::test
