// Packet captures (docs/capture.md): `ttemu sim --capture` records the Galaxy's TT-link traffic
// as pcapng, and tshark with the shipped dissector (tools/wireshark/ttlink.lua) decodes it field
// by field as ttemu's own parsers read the same bytes: every frame's header, CRC status and
// fabric packet. Every link end captured is an interface named after it; the packets are those
// of the traffic pattern; a byte corrupted in a copy of the capture shows as a bad CRC.
// Skipped when tshark (Debian package tshark) is not installed.
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "emulator/link/efc.hpp"
#include "emulator/link/frame.hpp"
#include "emulator/routing/packet.hpp"
#include "emulator/transport/lanes.hpp"
#include "emulator/wire/pcapng.hpp"
#include "tests/test_support.hpp"

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

}  // namespace
}  // namespace ttemu::test
