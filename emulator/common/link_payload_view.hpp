// A TT-link payload seen in place: the destination address its frame names and its bytes
// (without the frame header's room). What a link hands back when its peer restarts, and what
// the fabric node reads packets from.
#pragma once

#include <cstdint>
#include <span>

namespace ttemu {

struct LinkPayloadView {
  uint32_t dest_addr;
  std::span<const uint8_t> payload;
};

}  // namespace ttemu
