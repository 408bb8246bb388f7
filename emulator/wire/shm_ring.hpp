// A single-producer single-consumer ring of datagrams in shared memory: one direction of a
// link between two chips on one host (--transport shm). The producer copies a datagram's
// pieces in (the one copy a kernel would make); the consumer reads each datagram in place and
// frees a batch at once. No locks and no system calls: a head and a tail, each written by one
// side only (release) and read by the other (acquire).
//
// Like a socket's receive buffer, a full ring refuses the datagram (push returns false) and
// the sender counts it lost: the TT-link's go-back-N recovers, as from a drop on the wire.
// Waking a sleeping consumer is the caller's business (the chip's doorbell).
//
// Layout: a 192-byte header (head, tail and the geometry on their own cache lines), then
// `capacity` bytes of records: an 8-byte record header (length, kind), the datagram, padding
// to 8 bytes. A record never wraps; the producer pads to the end first. Offsets count from an
// origin that the producer moves to its tail whenever it finds the ring empty: a ring whose
// consumer keeps up then reuses its first pages, mapped and warm in cache, instead of
// streaming through its whole capacity (sized for a window of the largest frames) and
// touching cold memory on every lap.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "emulator/wire/datagram.hpp"

namespace ttemu::wire {

class ShmRing {
 public:
  // Bytes of shared memory a ring of `capacity` bytes (a power of two, at least 4 KiB) takes.
  static size_t bytes_for(size_t capacity);
  // Lays out an empty ring in `memory` (bytes_for(capacity) bytes, 64-byte aligned).
  static ShmRing create(void* memory, size_t capacity);
  // The ring another process created at `memory`; throws std::runtime_error if it is not one
  // (wrong magic, or a capacity that does not fit `size`).
  static ShmRing attach(void* memory, size_t size);

  // Copies the datagram in; false (nothing written) when it does not fit now.
  bool push(const Datagram& d);
  bool empty() const;
  // Calls f(bytes) for up to `max` datagrams, oldest first, each read in place, then frees
  // them; returns how many. A record that cannot be one (a length past the ring) drops
  // everything published so far and counts it in corrupt().
  template <class F>
  size_t consume(size_t max, F&& f);
  uint64_t corrupt() const { return corrupt_; }

 private:
  struct Header;
  ShmRing(Header* h, uint8_t* data) : h_(h), data_(data) {}
  bool next(uint64_t& pos, uint64_t tail, uint64_t origin, std::span<const uint8_t>& out);

  Header* h_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t corrupt_ = 0;
};

struct ShmRing::Header {
  alignas(64) std::atomic<uint64_t> head;  // written by the consumer
  alignas(64) std::atomic<uint64_t> tail;  // written by the producer
  std::atomic<uint64_t> origin;  // the position at offset 0; the producer's, published with tail
  alignas(64) uint64_t magic;
  uint64_t capacity;
};

template <class F>
size_t ShmRing::consume(size_t max, F&& f) {
  const uint64_t tail = h_->tail.load(std::memory_order_acquire);
  // Stored before that tail; the producer moves it again only once this consume has freed all.
  const uint64_t origin = h_->origin.load(std::memory_order_relaxed);
  uint64_t pos = h_->head.load(std::memory_order_relaxed);
  size_t n = 0;
  std::span<const uint8_t> bytes;
  while (n < max && pos != tail && next(pos, tail, origin, bytes)) {
    f(bytes);
    ++n;
  }
  h_->head.store(pos, std::memory_order_release);
  return n;
}

}  // namespace ttemu::wire
