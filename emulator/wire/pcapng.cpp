#include "emulator/wire/pcapng.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace ttemu::wire {

static_assert(std::endian::native == std::endian::little, "pcapng sections are written in the host's byte order");

namespace {

// Block types and options of the pcapng specification (draft-ietf-opsawg-pcapng).
constexpr uint32_t kSectionHeader = 0x0A0D0D0A;
constexpr uint32_t kInterfaceDescription = 1;
constexpr uint32_t kEnhancedPacket = 6;
constexpr uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr uint16_t kOptEnd = 0, kShbUserAppl = 4, kIfName = 2, kIfDescription = 3, kIfTsresol = 9;

size_t padded(size_t n) { return (n + 3) & ~size_t{3}; }

template <class T>
void put(std::vector<uint8_t>& b, T v) {
  const auto at = b.size();
  b.resize(at + sizeof v);
  std::memcpy(b.data() + at, &v, sizeof v);
}
void put_bytes(std::vector<uint8_t>& b, std::span<const uint8_t> bytes) {
  b.insert(b.end(), bytes.begin(), bytes.end());
  b.resize(padded(b.size()));
}
void put_option(std::vector<uint8_t>& b, uint16_t code, std::span<const uint8_t> value) {
  put(b, code);
  put(b, static_cast<uint16_t>(value.size()));
  put_bytes(b, value);
}
void put_option(std::vector<uint8_t>& b, uint16_t code, const std::string& text) {
  put_option(b, code, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}
// A block: type, total length, body, total length again.
std::vector<uint8_t> block(uint32_t type, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> b;
  const auto total = static_cast<uint32_t>(12 + body.size());
  put(b, type);
  put(b, total);
  b.insert(b.end(), body.begin(), body.end());
  put(b, total);
  return b;
}

void put_be16(uint8_t* at, uint16_t v) {
  at[0] = static_cast<uint8_t>(v >> 8);
  at[1] = static_cast<uint8_t>(v);
}
uint16_t get_be16(const uint8_t* at) { return static_cast<uint16_t>(at[0] << 8 | at[1]); }

// IPv4 127.0.0.1 -> 127.0.0.1, UDP local -> peer, checksum of the IP header filled in (the UDP
// checksum is 0: none, as IPv4 allows).
void ip_udp_headers(uint8_t* h, size_t payload, uint16_t id, uint16_t src, uint16_t dst) {
  std::memset(h, 0, kCaptureIpUdpBytes);
  h[0] = 0x45;  // version 4, 5 words
  put_be16(h + 2, static_cast<uint16_t>(kCaptureIpUdpBytes + payload));
  put_be16(h + 4, id);
  h[6] = 0x40;  // don't fragment
  h[8] = 64;    // TTL
  h[9] = 17;    // UDP
  const uint8_t loopback[4] = {127, 0, 0, 1};
  std::memcpy(h + 12, loopback, 4);
  std::memcpy(h + 16, loopback, 4);
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += get_be16(h + i);
  while (sum > 0xFFFF) sum = (sum & 0xFFFF) + (sum >> 16);
  put_be16(h + 10, static_cast<uint16_t>(~sum));
  put_be16(h + 20, src);
  put_be16(h + 22, dst);
  put_be16(h + 24, static_cast<uint16_t>(8 + payload));
}

}  // namespace

PcapngWriter::PcapngWriter(const std::string& path, std::vector<CaptureInterface> interfaces)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc), interfaces_(std::move(interfaces)) {
  if (!out_) throw std::runtime_error(fmt::format("cannot write the capture {}", path));
  std::vector<uint8_t> shb;
  put(shb, kByteOrderMagic);
  put(shb, uint16_t{1});  // version 1.0
  put(shb, uint16_t{0});
  put(shb, int64_t{-1});  // section length: not given
  put_option(shb, kShbUserAppl, std::string("ttemu"));
  put(shb, kOptEnd), put(shb, uint16_t{0});
  auto b = block(kSectionHeader, shb);
  for (const auto& i : interfaces_) {
    std::vector<uint8_t> idb;
    put(idb, kLinktypeRaw);
    put(idb, uint16_t{0});
    put(idb, uint32_t{0});  // snap length: no limit
    put_option(idb, kIfName, i.name);
    put_option(idb, kIfDescription, i.description);
    const uint8_t nanoseconds = 9;
    put_option(idb, kIfTsresol, std::span<const uint8_t>(&nanoseconds, 1));
    put(idb, kOptEnd), put(idb, uint16_t{0});
    const auto ib = block(kInterfaceDescription, idb);
    b.insert(b.end(), ib.begin(), ib.end());
  }
  out_.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  flush();
}

void PcapngWriter::write(size_t interface, std::chrono::nanoseconds at, std::span<const uint8_t> datagram) {
  const auto& i = interfaces_.at(interface);
  const size_t captured = kCaptureIpUdpBytes + datagram.size();
  const auto ns = static_cast<uint64_t>(at.count());
  std::vector<uint8_t> epb;
  epb.reserve(20 + padded(captured));
  put(epb, static_cast<uint32_t>(interface));
  put(epb, static_cast<uint32_t>(ns >> 32));
  put(epb, static_cast<uint32_t>(ns));
  put(epb, static_cast<uint32_t>(captured));
  put(epb, static_cast<uint32_t>(captured));
  epb.resize(epb.size() + kCaptureIpUdpBytes);
  ip_udp_headers(epb.data() + epb.size() - kCaptureIpUdpBytes, datagram.size(), ip_id_++, i.local_port, i.peer_port);
  put_bytes(epb, datagram);
  const auto b = block(kEnhancedPacket, epb);
  out_.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

void PcapngWriter::flush() {
  out_.flush();
  if (!out_) throw std::runtime_error(fmt::format("cannot write the capture {}", path_));
}

namespace {

template <class T>
T get(std::span<const uint8_t> b, size_t at) {
  if (at + sizeof(T) > b.size()) throw std::runtime_error("pcapng: a block runs past its end");
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// The options of a block from `at` to its end, by code (text options only).
void read_options(std::span<const uint8_t> body, size_t at, CaptureInterface& out) {
  while (at + 4 <= body.size()) {
    const auto code = get<uint16_t>(body, at), len = get<uint16_t>(body, at + 2);
    if (code == kOptEnd) return;
    if (at + 4 + len > body.size()) throw std::runtime_error("pcapng: an option runs past its block");
    const std::string value(reinterpret_cast<const char*>(body.data() + at + 4), len);
    if (code == kIfName) out.name = value;
    if (code == kIfDescription) out.description = value;
    at += 4 + padded(len);
  }
}

Capture parse_pcapng(std::span<const uint8_t> all) {
  // Every pcapng file starts with a section header (an empty file, a pcap or a text is not one).
  if (all.size() < 12 || get<uint32_t>(all, 0) != kSectionHeader) {
    throw std::runtime_error("not a pcapng file (it does not start with a section header)");
  }
  Capture c;
  size_t at = 0;
  while (at < all.size()) {
    const auto type = get<uint32_t>(all, at), total = get<uint32_t>(all, at + 4);
    if (total < 12 || total % 4 != 0 || at + total > all.size()) throw std::runtime_error("pcapng: a bad block length");
    const auto body = all.subspan(at + 8, total - 12);
    if (type == kSectionHeader && get<uint32_t>(body, 0) != kByteOrderMagic) {
      throw std::runtime_error("pcapng: not a little-endian section");
    } else if (type == kInterfaceDescription) {
      if (get<uint16_t>(body, 0) != kLinktypeRaw) throw std::runtime_error("pcapng: an interface not of LINKTYPE_RAW");
      read_options(body, 8, c.interfaces.emplace_back());
    } else if (type == kEnhancedPacket) {
      CapturedDatagram d;
      d.interface = get<uint32_t>(body, 0);
      d.ns = uint64_t{get<uint32_t>(body, 4)} << 32 | get<uint32_t>(body, 8);
      const auto len = get<uint32_t>(body, 12);
      if (d.interface >= c.interfaces.size() || 20 + size_t{len} > body.size()) throw std::runtime_error("pcapng: a bad packet block");
      const auto ip = body.subspan(20, len);
      const size_t ihl = ip.empty() ? 0 : size_t{4} * (ip[0] & 0x0Fu);
      if (ip.size() < ihl + 8 || (ip[0] >> 4) != 4 || ip[9] != 17) throw std::runtime_error("pcapng: a packet that is not IPv4/UDP");
      d.src_port = get_be16(ip.data() + ihl);
      d.dst_port = get_be16(ip.data() + ihl + 2);
      d.bytes.assign(ip.begin() + static_cast<std::ptrdiff_t>(ihl + 8), ip.end());
      c.datagrams.push_back(std::move(d));
    }
    at += total;
  }
  return c;
}

}  // namespace

Capture read_pcapng(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read the capture {}", path));
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return parse_pcapng(file);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace ttemu::wire
