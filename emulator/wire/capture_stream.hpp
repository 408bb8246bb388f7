// A live capture's stream (`ttemu capture`, docs/capture.md): while a capture runs, a chip
// process sends one record per datagram that a captured link end of it puts on the wire to the
// capture's sink, a Unix datagram socket in the abstract namespace that the capturing process
// owns (nothing in the file system to leave behind; it is gone when its owner is).
//
// A record is a CaptureRecord header (the sending chip and port, the time) followed by the
// datagram's bytes, one Unix datagram each, so a record never arrives in part.
//
// The chip's side (CaptureTap) sits between the chip node and its transport, so it sees what
// the node hands the transport: after fault injection, as the simulator's tap does. It waits
// for a slow capturer rather than lose records (a capture is a debugging tool: complete beats
// fast), but not for long: a record the sink has not taken within kCaptureStall is dropped and
// counted, and the next second's are dropped without waiting, so that a stopped capturer
// cannot stop the fabric. A sink that is gone ends the capture on the chip's side.
#pragma once

#include <bitset>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <sys/socket.h>

#include "emulator/wire/transport.hpp"

namespace ttemu::wire {

inline constexpr uint32_t kCaptureMagic = 0x50435454;  // "TTCP"
inline constexpr auto kCaptureStall = std::chrono::milliseconds(1000);

struct CaptureRecord {
  uint32_t magic = kCaptureMagic;
  uint16_t mesh = 0, device = 0;  // the sending chip
  uint8_t port = 0;               // the port whose wire the datagram went on
  uint8_t reserved[3]{};
  uint64_t ns = 0;  // when the chip handed it to its transport, with the rest of its batch (CLOCK_REALTIME, ns since 1970)
};
static_assert(sizeof(CaptureRecord) == 24);

// The abstract socket name of a sink exists (someone owns it).
bool capture_sink_exists(const std::string& name);

// The capturer's end: owns the socket and reads records from it.
class CaptureSink {
 public:
  CaptureSink();  // binds a fresh name, "ttemu-capture-<pid>-<n>"; throws Error if it cannot
  ~CaptureSink();
  CaptureSink(const CaptureSink&) = delete;
  CaptureSink& operator=(const CaptureSink&) = delete;
  const std::string& name() const { return name_; }
  int fd() const { return fd_; }  // readable when records wait
  // Reads the records waiting now, up to a batch, without blocking; f(record, datagram) for
  // each well-formed one (anything else sent to the name is counted in stray()). Returns how
  // many records it read.
  size_t receive(const std::function<void(const CaptureRecord&, std::span<const uint8_t>)>& f);
  uint64_t stray() const { return stray_; }

 private:
  int fd_ = -1;
  std::string name_;
  std::vector<uint8_t> buffers_;
  std::vector<mmsghdr> msgs_;  // a batch of records, each in its slot of buffers_ (set up once)
  std::vector<iovec> iov_;
  uint64_t stray_ = 0;
};

// The chip's end: a transport in front of the chip's own, recording what the tapped ports send.
class CaptureTap final : public Transport {
 public:
  explicit CaptureTap(Transport& inner) : inner_(inner) {}
  ~CaptureTap() override;
  CaptureTap(const CaptureTap&) = delete;
  CaptureTap& operator=(const CaptureTap&) = delete;

  // Starts recording `ports` of chip (mesh, device) to the sink named `sink`, counters from
  // zero; replaces a capture running. Throws Error when nothing listens at that name.
  void start(const std::string& sink, uint16_t mesh, uint16_t device, const std::vector<uint8_t>& ports);
  void stop();
  bool active() const { return fd_ >= 0; }
  uint64_t recorded() const { return recorded_; }
  uint64_t dropped() const { return dropped_; }
  // The sink went away during the capture (its owner ended without stopping it).
  bool sink_lost() const { return sink_lost_; }

  size_t send(uint8_t port, std::span<const Datagram> datagrams) override;
  bool defers_lazy() const override { return inner_.defers_lazy(); }

 private:
  void record(uint8_t port, uint64_t ns, const Datagram& d);

  Transport& inner_;
  int fd_ = -1;
  CaptureRecord header_{};
  std::bitset<256> tapped_;
  std::vector<iovec> iov_;
  std::vector<uint8_t> flat_;  // a datagram of too many pieces for one sendmsg, copied whole
  uint64_t recorded_ = 0, dropped_ = 0;
  bool sink_lost_ = false;
  std::chrono::steady_clock::time_point drop_until_{};
};

}  // namespace ttemu::wire
