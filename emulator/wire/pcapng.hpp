// Packet captures of TT-link datagrams as pcapng files (docs/capture.md), written as they go and
// read back whole.
//
// The file: one Section Header Block; one Interface Description Block per captured link end
// (if_name the end, "M0D0P8"; if_description both ends, "M0D0P8 -> M0D1P9"; if_tsresol 9:
// nanosecond timestamps); one Enhanced Packet Block per datagram that end sent.
//
// The encapsulation is LINKTYPE_RAW (101): each datagram behind a synthetic IPv4 header
// (127.0.0.1 to 127.0.0.1) and a UDP header from the sending end's port to its peer's, as the
// datagram would travel between two chip processes on one host. So Wireshark hands it to the
// TT-link dissector (tools/wireshark/ttlink.lua, a heuristic UDP dissector) without settings,
// and a live capture of the chip processes' UDP traffic decodes the same way.
//
// Little-endian hosts only (the section's byte order is the host's; frame.cpp asserts the same).
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace ttemu::wire {

inline constexpr uint16_t kLinktypeRaw = 101;  // raw IPv4/IPv6, no link-layer header
inline constexpr size_t kCaptureIpUdpBytes = 28;  // the synthetic IPv4 (20) and UDP (8) headers

// A link end whose sent datagrams a capture records.
struct CaptureInterface {
  std::string name;         // the end: "M0D0P8"
  std::string description;  // both ends: "M0D0P8 -> M0D1P9"
  uint16_t local_port = 0;  // the UDP ports of the synthetic headers: this end's ...
  uint16_t peer_port = 0;   // ... and its peer's
};

class PcapngWriter {
 public:
  // Creates (truncates) the file and writes the section header and the interfaces; throws
  // std::runtime_error naming the path if it cannot.
  PcapngWriter(const std::string& path, std::vector<CaptureInterface> interfaces);
  // One datagram sent by interfaces[interface] at `at` (time since the epoch of the capture).
  void write(size_t interface, std::chrono::nanoseconds at, std::span<const uint8_t> datagram);
  // Everything written so far is in the file; throws if the file could not take it.
  void flush();

 private:
  std::string path_;
  std::ofstream out_;
  std::vector<CaptureInterface> interfaces_;
  uint16_t ip_id_ = 0;
};

// A datagram as read back: the UDP payload, the interface it was captured on, its time.
struct CapturedDatagram {
  uint32_t interface = 0;
  uint64_t ns = 0;
  uint16_t src_port = 0, dst_port = 0;
  std::vector<uint8_t> bytes;
};
struct Capture {
  std::vector<CaptureInterface> interfaces;  // names and descriptions (ports left 0)
  std::vector<CapturedDatagram> datagrams;   // in file order
};
// Reads a capture written by PcapngWriter (one little-endian section, LINKTYPE_RAW IPv4/UDP
// packets; other block types are skipped). Throws std::runtime_error, the path first, for a
// file that cannot be read, does not start with a section header ("not a pcapng file"), or is
// malformed.
Capture read_pcapng(const std::string& path);

}  // namespace ttemu::wire
