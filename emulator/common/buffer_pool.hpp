// Byte buffers that a chip's data path hands from owner to owner instead of copying: a packet's
// buffer is filled once when it arrives (or is injected), then moves through the routing
// buffers into a TT-link's retransmission window and comes back here once acknowledged. Kept
// buffers keep their capacity, so the per-packet path allocates nothing once warm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ttemu {

class BufferPool {
 public:
  explicit BufferPool(size_t keep = 1024) : keep_(keep) {}

  // An empty buffer, with the capacity of one used before if there is one.
  std::vector<uint8_t> take() {
    if (spare_.empty()) return {};
    std::vector<uint8_t> v = std::move(spare_.back());
    spare_.pop_back();
    // The next one's first line is fetched now: a buffer that came back long ago is cold, and
    // the first store into it (a packet's arrival) stalled for it, 5 % of a Galaxy's chips' time.
    if (!spare_.empty()) __builtin_prefetch(spare_.back().data(), 1);
    return v;
  }
  // Takes a buffer back (up to `keep` of them; a buffer without storage is not worth keeping).
  void give(std::vector<uint8_t>&& v) {
    if (spare_.size() >= keep_ || v.capacity() == 0) return;
    v.clear();
    spare_.push_back(std::move(v));
  }
  size_t spare() const { return spare_.size(); }

 private:
  size_t keep_;
  std::vector<std::vector<uint8_t>> spare_;
};

}  // namespace ttemu
