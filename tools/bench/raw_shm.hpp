// One link's stream between two processes over a shared-memory ring with no emulator: the most
// that a link between two chips of one host can move on this machine today, measured in the
// same run as the shm transport (whose line-rate target, 12.5 GB/s, is an absolute figure; how
// fast this virtual machine's two CPUs share data varies by a factor of three between days).
//
// The producer sends `bytes` of payload in frames of `payload` bytes, packed `per_datagram` to
// a datagram as TT-link packs them, through a wire::ShmRing (the shm transport's); the consumer
// reads each datagram in place. Each side does TT-link's least work as the cost model
// grants it ("a CRC on each side, the payload copied in and out"): the producer computes each
// frame's CRC over its source memory and the ring's push is the copy in; the consumer checks
// the CRC in the ring and copies the payload out into its own memory. Nothing else: no
// acknowledgements, windows or retransmissions, and both sides spin (a full ring or an empty
// one is polled, never slept on), as chips do with --spin-us.
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>


#include "emulator/wire/datagram.hpp"
#include "emulator/wire/shm_ring.hpp"
#include "tools/bench/raw_udp.hpp"

namespace ttemu::bench {

// Payload bytes per second through the ring (0 if the run failed: a CRC that did not match,
// or a process that could not start).
inline double raw_shm_stream(size_t payload, size_t per_datagram, size_t bytes) {
  constexpr size_t kRing = size_t{4} << 20;   // twice a link's 1 MiB in flight, and room to spare
  constexpr size_t kMemory = size_t{4} << 20; // each side's own memory, cycled through
  constexpr size_t kHeader = 8;               // the frame's number and its CRC32
  struct Shared {
    std::atomic<uint64_t> failed;
  };
  const size_t ring_bytes = wire::ShmRing::bytes_for(kRing);
  void* memory = mmap(nullptr, 4096 + ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return 0;
  auto* shared = new (memory) Shared{};
  uint8_t* ring_memory = static_cast<uint8_t*>(memory) + 4096;
  wire::ShmRing ring = wire::ShmRing::create(ring_memory, kRing);
  const size_t frames = bytes / payload, slots = kMemory / payload;
  int result[2];
  if (pipe(result) != 0) {
    munmap(memory, 4096 + ring_bytes);
    return 0;
  }
  const pid_t pid = fork_baseline();
  if (pid == 0) {  // the consumer
    std::vector<uint8_t> sink(kMemory, 0);
    size_t got = 0;
    Clock::time_point first{};
    while (got < frames) {
      if (ring.empty()) __builtin_ia32_pause();  // (spinning on the tail's line would slow the producer)
      ring.consume(64, [&](std::span<const uint8_t> d) {
        if (got == 0) first = Clock::now();
        for (size_t at = 0; at + kHeader + payload <= d.size(); at += kHeader + payload, ++got) {
          uint32_t sum = 0;
          std::memcpy(&sum, d.data() + at + 4, 4);
          const uint8_t* p = d.data() + at + kHeader;
          if (link::crc32({p, payload}) != sum) shared->failed.store(1);
          std::memcpy(sink.data() + (got % slots) * payload, p, payload);
        }
      });
    }
    const double secs = std::chrono::duration<double>(Clock::now() - first).count();
    double rate = secs > 0 && !shared->failed.load() ? static_cast<double>(got * payload) / secs : 0;
    if (write(result[1], &rate, sizeof rate) != sizeof rate) _exit(1);
    _exit(0);
  }
  std::vector<uint8_t> source(kMemory);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  wire::Datagram d;
  for (size_t sent = 0; sent < frames && pid > 0;) {
    d.clear();
    const size_t n = std::min(per_datagram, frames - sent);
    for (size_t k = 0; k < n; ++k) {
      const uint8_t* p = source.data() + ((sent + k) % slots) * payload;
      const uint32_t number = static_cast<uint32_t>(sent + k), sum = link::crc32({p, payload});
      const auto h = d.append_owned(kHeader);
      std::memcpy(h.data(), &number, 4);
      std::memcpy(h.data() + 4, &sum, 4);
      d.append_borrowed({p, payload});
    }
    while (!ring.push(d)) __builtin_ia32_pause();
    sent += n;
  }
  double rate = 0;
  if (pid > 0 && read(result[0], &rate, sizeof rate) != sizeof rate) rate = 0;
  if (pid > 0) waitpid(pid, nullptr, 0);
  close(result[0]);
  close(result[1]);
  munmap(memory, 4096 + ring_bytes);
  return rate;
}

}  // namespace ttemu::bench
