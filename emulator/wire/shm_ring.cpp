#include "emulator/wire/shm_ring.hpp"

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace ttemu::wire {

namespace {

constexpr uint64_t kMagic = 0x7474656d'72696e67ull;  // "ttemring"
constexpr size_t kRecordHeader = 8;
constexpr uint32_t kData = 1, kPad = 2;

struct RecordHeader {
  uint32_t length;
  uint32_t kind;
};
static_assert(sizeof(RecordHeader) == kRecordHeader);

constexpr size_t padded(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace

size_t ShmRing::bytes_for(size_t capacity) { return sizeof(Header) + capacity; }

ShmRing ShmRing::create(void* memory, size_t capacity) {
  if (capacity < 4096 || (capacity & (capacity - 1)) != 0) {
    throw std::invalid_argument("a ring's capacity is a power of two of at least 4 KiB");
  }
  auto* h = new (memory) Header;
  h->head.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_relaxed);
  h->origin.store(0, std::memory_order_relaxed);
  h->capacity = capacity;
  h->magic = kMagic;
  return ShmRing(h, static_cast<uint8_t*>(memory) + sizeof(Header));
}

ShmRing ShmRing::attach(void* memory, size_t size) {
  auto* h = static_cast<Header*>(memory);
  if (size < sizeof(Header) || h->magic != kMagic || bytes_for(h->capacity) > size ||
      (h->capacity & (h->capacity - 1)) != 0) {
    throw std::runtime_error("not a datagram ring (bad magic or size)");
  }
  return ShmRing(h, static_cast<uint8_t*>(memory) + sizeof(Header));
}

bool ShmRing::push(const Datagram& d) {
  const uint64_t cap = h_->capacity;
  const size_t need = kRecordHeader + padded(d.size());
  if (need > cap) return false;
  const uint64_t tail = h_->tail.load(std::memory_order_relaxed);
  const uint64_t head = h_->head.load(std::memory_order_acquire);
  uint64_t origin = h_->origin.load(std::memory_order_relaxed);
  if (tail == head && origin != tail) {
    // Empty, the consumer done with every record: start again at offset 0 (published by the
    // release of tail below).
    origin = tail;
    h_->origin.store(origin, std::memory_order_relaxed);
  }
  const size_t at = (tail - origin) & (cap - 1);
  const size_t to_end = cap - at;
  const size_t pad = need > to_end ? to_end : 0;  // a record never wraps
  if (tail - head + pad + need > cap) return false;
  uint64_t pos = tail;
  if (pad) {
    const RecordHeader r{static_cast<uint32_t>(pad - kRecordHeader), kPad};
    std::memcpy(data_ + at, &r, sizeof r);
    pos += pad;
  }
  uint8_t* out = data_ + ((pos - origin) & (cap - 1));
  const RecordHeader r{static_cast<uint32_t>(d.size()), kData};
  std::memcpy(out, &r, sizeof r);
  d.copy_to(out + kRecordHeader);
  h_->tail.store(pos + need, std::memory_order_release);
  return true;
}

bool ShmRing::empty() const {
  return h_->head.load(std::memory_order_relaxed) == h_->tail.load(std::memory_order_acquire);
}

bool ShmRing::next(uint64_t& pos, uint64_t tail, uint64_t origin, std::span<const uint8_t>& out) {
  const uint64_t cap = h_->capacity;
  while (pos != tail) {
    const size_t at = (pos - origin) & (cap - 1);
    RecordHeader r;
    std::memcpy(&r, data_ + at, sizeof r);
    const size_t span = kRecordHeader + padded(r.length);
    if ((r.kind != kData && r.kind != kPad) || span > cap - at || span > tail - pos) {
      ++corrupt_;  // the producer never writes this: drop what is published and go on
      pos = tail;
      return false;
    }
    pos += span;
    if (r.kind == kData) {
      out = {data_ + at + kRecordHeader, r.length};
      return true;
    }
  }
  return false;
}

}  // namespace ttemu::wire
