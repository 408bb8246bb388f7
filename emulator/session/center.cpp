#include "emulator/session/center.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace ttemu::session {

using routing::Command;

Packet Center::reply_to(const routing::PacketHeader& h, Command c, uint8_t fvc) const {
  Packet r;
  r.header = routing::answer_to(self_, h, c, fvc);
  r.bytes = buffers_.take();
  return r;
}

void Center::ack(const routing::PacketHeader& h, Result& out) const {
  // One ack per source core and transaction in a batch, counting the packets in `arg`: a
  // stream of writes costs the way back one packet per batch, not one per packet.
  for (auto& r : out.replies) {
    auto& a = r.header;
    if (a.command == Command::kWriteAck && a.dst_mesh == h.src_mesh && a.dst_device == h.src_device &&
        a.src_core == h.src_core && a.txn_id == h.txn_id && a.plane == h.plane) {
      ++a.arg;
      return;
    }
  }
  Packet r = reply_to(h, Command::kWriteAck, static_cast<uint8_t>(data_fvcs_));
  r.header.arg = 1;
  out.replies.push_back(std::move(r));
}

std::optional<uint64_t> Center::admit(const routing::PacketHeader& h, uint64_t span, uint32_t need) const {
  std::optional<uint64_t> addr;
  if (h.key != 0) {
    // A NOC multicast writes every Tensix core's L1: no one window covers that.
    const bool noc = h.command == Command::kMcastWrite && (h.wrap & routing::kMcastNoc);
    if (windows_ && !noc) addr = resolve(*windows_, h.key, h.dst_addr, span, need);
  } else if (mode_ == MemoryMode::kOpen) {
    addr = h.dst_addr;
  }
  if (!addr && windows_) windows_->refused.fetch_add(1, std::memory_order_relaxed);
  return addr;
}

Packet Center::nack(const routing::PacketHeader& h, routing::NackReason why) const {
  Packet r = reply_to(h, Command::kNack, static_cast<uint8_t>(data_fvcs_));
  r.header.wrap = why;
  return r;
}

// A packet's last 8 bytes land after the rest of it, with release order: a reader in another
// process that sees them (an acquire load) sees the whole packet, and every packet committed
// before it. Packets of one route commit in order, so the last word of a write announces the
// write (libfabric_tt/prov's records end in such a word). The rest is one plain copy.
void commit_last_word_last(std::span<uint8_t> dst, std::span<const uint8_t> src) {
  const size_t n = src.size();
  if (n < 8) {
    std::memcpy(dst.data(), src.data(), n);
    return;
  }
  if (n > 8) std::memcpy(dst.data(), src.data(), n - 8);
  std::atomic_thread_fence(std::memory_order_release);
  uint8_t* last = dst.data() + n - 8;
  if (reinterpret_cast<uintptr_t>(last) % 8 == 0) {
    uint64_t word;
    std::memcpy(&word, src.data() + n - 8, 8);
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(last)).store(word, std::memory_order_relaxed);
  } else {
    std::memcpy(last, src.data() + n - 8, 8);  // (x86 keeps the order of plain stores too)
  }
}

bool Center::commit(const routing::PacketHeader& h, uint64_t addr, std::span<const uint8_t> payload) const {
  if (h.command != Command::kMcastWrite || !(h.wrap & routing::kMcastNoc)) {
    auto dst = mem_(addr, payload.size());
    if (dst.size() != payload.size()) return false;
    commit_last_word_last(dst, payload);  // the commit
    return true;
  }
  // NOC multicast: the offset in every Tensix core's L1, each write inside that core's L1.
  if (cores_ <= 0 || addr + payload.size() > core_l1_) return false;
  for (int c = 0; c < cores_; ++c) {
    auto dst = mem_(static_cast<uint64_t>(c) * core_l1_ + addr, payload.size());
    if (dst.size() != payload.size()) return false;
    std::memcpy(dst.data(), payload.data(), payload.size());
  }
  return true;
}

void Center::on_packet(Packet& p, Result& out) {
  const auto& h = p.header;
  const auto control = static_cast<uint8_t>(data_fvcs_);
  const auto respond_on = routing::answer_fvc(h, control);
  switch (h.command) {
    case Command::kWrite:
    case Command::kMcastWrite: {
      // Refused, or outside this chip's memory: nothing is written and the source hears why.
      const auto payload = p.payload();
      // A keyed write's packets each answer for the whole write: [dst_addr, return_addr).
      const bool whole = h.command == Command::kWrite && h.key != 0 && h.return_addr > h.dst_addr;
      const auto addr = admit(h, whole ? std::max<uint64_t>(payload.size(), h.return_addr - h.dst_addr) : payload.size(), kRemoteWrite);
      if (!addr) out.replies.push_back(nack(h, routing::kNackPermission));
      else if (commit(h, *addr, payload)) ack(h, out);
      else out.replies.push_back(nack(h, routing::kNackDropped));
      break;
    }
    case Command::kReadRequest: {
      const auto addr = admit(h, h.size, kRemoteRead);
      auto src = addr ? mem_(*addr, h.size) : std::span<uint8_t>();
      if (src.size() != h.size || !addr) {
        out.replies.push_back(nack(h, addr ? routing::kNackDropped : routing::kNackPermission));
        break;
      }
      Packet r = reply_to(h, Command::kReadResponse, respond_on);
      r.header.dst_addr = h.return_addr;
      r.set_payload(src);
      r.header.size = h.size;
      out.replies.push_back(std::move(r));
      break;
    }
    case Command::kAtomicInc:
    case Command::kAtomicReadInc: {
      const auto addr = admit(h, 4, kRemoteWrite);  // an atomic writes: it needs the write right
      auto word = addr ? mem_(*addr, 4) : std::span<uint8_t>();
      if (word.size() != 4) {
        out.replies.push_back(nack(h, addr ? routing::kNackDropped : routing::kNackPermission));
        break;
      }
      uint32_t old = 0;
      std::memcpy(&old, word.data(), 4);
      // 3.6: the counter wraps to 0 past 2^(wrap+1) - 1.
      const uint64_t limit = h.wrap >= 31 ? (1ull << 32) : (1ull << (h.wrap + 1));
      const auto next = static_cast<uint32_t>((uint64_t{old} + h.arg) % limit);
      std::memcpy(word.data(), &next, 4);
      if (h.command == Command::kAtomicInc) {
        ack(h, out);
      } else {
        Packet r = reply_to(h, Command::kReadResponse, respond_on);
        r.header.dst_addr = h.return_addr;
        r.header.size = 4;
        std::memcpy(r.resize_payload(4).data(), &old, 4);
        out.replies.push_back(std::move(r));
      }
      break;
    }
    case Command::kReadResponse: {
      const auto payload = p.payload();
      auto dst = mem_(h.dst_addr, payload.size());
      if (dst.size() == payload.size()) std::memcpy(dst.data(), payload.data(), payload.size());
      out.for_workers.push_back(std::move(p));
      break;
    }
    case Command::kWriteAck:
    case Command::kNack:
      out.for_workers.push_back(std::move(p));
      break;
    default:  // sockets: the fabric node hands those to its SocketLayer
      break;
  }
}

}  // namespace ttemu::session
