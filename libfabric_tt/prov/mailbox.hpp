// The layout of a provider endpoint's region of its chip's DRAM, and of the records that carry
// messages between endpoints. One region per worker core, below the sockets' default DSCBs:
//
//   control   the slot counter: a sender takes slot = atomic read-increment of it
//   slots     one header per sender: who it is, where its credits go
//   credits   this endpoint's own credit words, one per peer it sends to (peers write them)
//   staging   where outgoing records and RMA data wait for the router to pull them
//   inbox     one ring per slot: records written by that sender only, read here in order
//
// A record is written by one RDMA write: header, payload, trailer. The trailer is the write's
// last word, which the receiving chip's center commits after the rest of it (session/center.hpp),
// and every write of one sender to one receiver travels one FVC and one route, so the records
// land in order: a receiver that finds the trailer a record's header promises has the whole
// record. The trailer mixes the record's sequence number with the connection's nonce, so stale
// bytes of an earlier lap or an earlier connection, or a payload's own bytes, never pass for one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ttemu::fi {

inline constexpr uint64_t kMiB = 1 << 20;
inline constexpr int kSlots = 64;                 // senders per endpoint (itself included)
inline constexpr uint64_t kRing = 256 << 10;      // bytes of one sender's inbox ring
inline constexpr uint64_t kMaxRecordPayload = kRing / 4;
inline constexpr uint64_t kControlOffset = 0;
inline constexpr uint64_t kSlotsOffset = 4096;
inline constexpr uint64_t kCreditsOffset = kSlotsOffset + kSlots * 64;
inline constexpr uint64_t kStagingOffset = 64 << 10;
inline constexpr uint64_t kStaging = 4 * kMiB;
inline constexpr uint64_t kInboxOffset = 8 * kMiB;
inline constexpr uint64_t kRegion = kInboxOffset + kSlots * kRing;  // 24 MiB
// Below the sockets' default DSCBs (256 KiB for each of 128 endpoints at the top of DRAM).
inline constexpr uint64_t kDscbArea = 128 * (256 << 10);

// A provider address: a job-local endpoint (the Ultra Ethernet seed's job-relative address):
// chip, core and endpoint index, with where its region lies and the key that opens it.
struct Addr {
  uint32_t magic = 0;
  uint16_t mesh = 0, device = 0;
  uint16_t core = 0, index = 0;
  uint32_t reserved = 0;
  uint64_t region = 0;  // chip address of the region (TT_FABRIC_DRAM | offset)
  uint64_t key = 0;     // the region's memory key (0: none)
};
static_assert(sizeof(Addr) == 32);
inline constexpr uint32_t kAddrMagic = 0x31415454;  // "TTA1"

// A sender's entry in the receiver's slots: written once, before its first record; its last
// word, the nonce (never 0), lands last, so a slot whose nonce is set is complete.
struct SlotHeader {
  uint16_t mesh, device, core, index;
  uint64_t credit_key;      // the key of the sender's region
  uint64_t credit_offset;   // where in it the receiver writes how far it has read
  uint64_t region;          // the sender's region (its chip address)
  uint64_t reserved[3];
  uint64_t nonce;           // the connection's: records' trailers are mixed with it
};
static_assert(sizeof(SlotHeader) == 64);

enum RecordFlags : uint32_t {
  kFirst = 1,    // the first record of a message: msg_len, tag and data are its
  kLast = 2,     // the last record of a message
  kTagged = 4,
  kWrap = 8,     // no message: the ring goes on at its start
  kCqData = 16,  // the message carries remote CQ data
};

struct RecordHeader {
  uint64_t seq;      // 1, 2, ... per ring
  uint32_t len;      // payload bytes in this record
  uint32_t flags;
  uint64_t msg_len;  // the message's bytes (first record)
  uint64_t tag;
  uint64_t data;
  uint64_t reserved;
};
static_assert(sizeof(RecordHeader) == 48);

// The bytes a record of `len` payload bytes takes in a ring: header, payload, trailer, padded.
constexpr uint64_t record_bytes(uint64_t len) { return (sizeof(RecordHeader) + ((len + 7) & ~uint64_t{7}) + 8 + 63) & ~uint64_t{63}; }
constexpr uint64_t trailer_offset(uint64_t len) { return sizeof(RecordHeader) + ((len + 7) & ~uint64_t{7}); }
// The trailer of record `seq` of a connection (splitmix64 of the two).
constexpr uint64_t trailer(uint64_t nonce, uint64_t seq) {
  uint64_t z = nonce + seq * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace ttemu::fi
