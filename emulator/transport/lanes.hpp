// TT-transport (spec 2.3): fabric virtual channels and the lanes they travel in between two
// routers, and where packets and credits go in a TT-link frame. FVCs 0 .. data_fvcs-1 carry
// data; FVC data_fvcs is the control FVC (2.3.2). Each FVC has four lanes on every link, each
// with its own routing buffer and credits:
//   class 0 while a packet is in its source mesh, class 1 once it has entered another (an
//   inter-mesh channel: rings of meshes stay deadlock-free);
//   requests (writes, reads, atomics) apart from answers (acks, NACKs, read responses), so an
//   answer never waits behind a request (the SUE seed's VC0/VC1).
// Layout on the wire: docs/packet-format.md.
#pragma once

#include <cstdint>

namespace ttemu::transport {

inline constexpr int kLanesPerFvc = 4;

inline constexpr uint8_t lane(uint8_t fvc, int cls, bool answer) {
  return static_cast<uint8_t>(kLanesPerFvc * fvc + 2 * (answer ? 1 : 0) + cls);
}
inline constexpr uint8_t fvc_of_lane(uint8_t lane) { return static_cast<uint8_t>(lane / kLanesPerFvc); }
inline constexpr int class_of_lane(uint8_t lane) { return lane % 2; }
inline constexpr bool answer_lane(uint8_t lane) { return (lane / 2) % 2 == 1; }
inline constexpr int lanes_for(int fvcs) { return kLanesPerFvc * fvcs; }
inline constexpr uint8_t control_fvc(int data_fvcs) { return static_cast<uint8_t>(data_fvcs); }

// TT-link destination addresses of fabric traffic between two routers: one encoded packet for
// the receiver's routing buffer of a lane, or 4 bytes (u32 n) giving back n of that lane's
// credits to the receiver of the frame.
inline constexpr uint32_t kLinkPacketAddr = 0x1000;  // + lane
inline constexpr uint32_t kLinkCreditAddr = 0x2000;  // + lane

}  // namespace ttemu::transport
