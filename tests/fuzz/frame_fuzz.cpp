// libFuzzer target: arbitrary bytes as a datagram, to the frame parser and to a TT-link end
// (handshaking and up). Nothing may crash, hang or be delivered.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "emulator/link/frame.hpp"
#include "emulator/link/tt_link.hpp"

using namespace ttemu::link;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> d(data, size);
  size_t frames = 0;
  ParseResult r = parse_datagram(d, [&](const ParsedFrame& f) {
    if (f.payload.size() != f.header.length) std::abort();
    ++frames;
  });
  if (r.frames != frames) std::abort();

  static LinkCounters counters;
  LinkConfig cfg;
  TtLink link(cfg, {1, 0, 0, 1}, {1, 0, 1, 2}, 7, counters);
  bool delivered = false;
  link.set_delivery([&](uint32_t, std::span<const uint8_t>) { delivered = true; });
  link.start(Time{0});
  link.on_datagram(d, Time{1});
  link.on_timer(Time{1'000'000'000});
  std::vector<ttemu::wire::Datagram> out;
  link.poll_transmit(Time{2}, out);
  link.recycle(out);
  // Without a completed handshake no data frame may reach the routing layer.
  if (delivered) std::abort();
  return 0;
}
