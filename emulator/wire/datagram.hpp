// One datagram to send, as a gather list (scatter-gather I/O): pieces it owns (frame headers,
// CRCs, acknowledgements, hellos) and pieces it borrows (frame payloads that stay in a TT-link's
// retransmission window). A transport hands the pieces to the kernel as one iovec array, so a
// payload goes from the window to the socket without a copy in user space.
//
// Borrowed bytes must stay put until the transport has taken the datagram (the TT-link keeps
// acknowledged payloads until its sent datagrams are handed back, TtLink::recycle).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace ttemu::wire {

class Datagram {
 public:
  // Linux takes at most this many pieces per datagram (UIO_MAXIOV).
  static constexpr size_t kMaxPieces = 1024;

  // The receiver need not be woken for this datagram: it holds nothing but an acknowledgement
  // that can wait until the receiver wakes for something else or for its own timer.
  bool lazy = false;

  struct Mark {
    size_t pieces, owned, size;
  };

  // Empties the datagram; its storage stays for the next one (no allocation per datagram).
  void clear() {
    lazy = false;
    npieces_ = 0;
    nowned_ = 0;
    size_ = 0;
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t pieces() const { return npieces_; }

  // Room for n bytes the datagram owns, to be written now (the span is valid until the next
  // append). Owned bytes that follow owned bytes extend the same piece.
  std::span<uint8_t> append_owned(size_t n) {
    const size_t at = nowned_;
    if (at + n > owned_.size()) owned_.resize(std::max({owned_.size() * 2, at + n, size_t{256}}));
    nowned_ = at + n;
    extend_owned(at, n);
    return {owned_.data() + at, n};
  }
  void append_copy(std::span<const uint8_t> bytes) {
    if (!bytes.empty()) std::memcpy(append_owned(bytes.size()).data(), bytes.data(), bytes.size());
  }
  // Bytes the datagram refers to without copying.
  void append_borrowed(std::span<const uint8_t> bytes) {
    if (bytes.empty()) return;
    add_piece({bytes.data(), 0, bytes.size()});
    size_ += bytes.size();
  }

  // Where the datagram stands now, to take back everything appended after (rewind).
  Mark mark() const { return {npieces_, nowned_, size_}; }
  void rewind(const Mark& m) {
    npieces_ = m.pieces;
    nowned_ = m.owned;
    size_ = m.size;
    if (npieces_ > 0 && pieces_[npieces_ - 1].borrowed == nullptr) {
      pieces_[npieces_ - 1].length = nowned_ - pieces_[npieces_ - 1].offset;
    }
  }
  // The owned bytes appended since `m` when nothing borrowed was appended since (a frame built
  // whole, to be corrupted on purpose).
  std::span<uint8_t> owned_since(const Mark& m) { return {owned_.data() + m.owned, nowned_ - m.owned}; }

  // Calls f(span) for each piece in order.
  template <class F>
  void for_each_piece(F&& f) const {
    for (size_t i = 0; i < npieces_; ++i) {
      const Piece& p = pieces_[i];
      f(std::span<const uint8_t>(p.borrowed ? p.borrowed : owned_.data() + p.offset, p.length));
    }
  }
  // The pieces as iovecs, appended to out (valid while the datagram is unchanged).
  void gather(std::vector<iovec>& out) const {
    for_each_piece([&](std::span<const uint8_t> s) { out.push_back({const_cast<uint8_t*>(s.data()), s.size()}); });
  }
  // The datagram's bytes in one piece it owns (for holding it back, or a wire that keeps it).
  void copy_to(std::vector<uint8_t>& out) const {
    out.resize(size_);
    copy_to(out.data());
  }
  // The same into size() bytes at `out`.
  void copy_to(uint8_t* out) const {
    for_each_piece([&](std::span<const uint8_t> s) {
      std::memcpy(out, s.data(), s.size());
      out += s.size();
    });
  }
  std::vector<uint8_t> to_bytes() const {
    std::vector<uint8_t> v;
    copy_to(v);
    return v;
  }
  // Some piece borrows bytes that start at `p`.
  bool borrows(const uint8_t* p) const {
    for (size_t i = 0; i < npieces_; ++i) {
      if (pieces_[i].borrowed == p) return true;
    }
    return false;
  }
  // Makes every piece owned: the datagram no longer refers to anything outside itself.
  void own() {
    if (npieces_ == 1 && pieces_[0].borrowed == nullptr) return;
    std::vector<uint8_t> bytes;
    copy_to(bytes);
    const bool was_lazy = lazy;
    clear();
    lazy = was_lazy;
    append_copy(bytes);
  }

 private:
  struct Piece {
    const uint8_t* borrowed;  // nullptr: owned_[offset, offset + length)
    size_t offset;
    size_t length;
  };

  void add_piece(const Piece& p) {
    if (npieces_ == pieces_.size()) pieces_.resize(std::max<size_t>(16, pieces_.size() * 2));
    pieces_[npieces_++] = p;
  }
  void extend_owned(size_t at, size_t n) {
    if (npieces_ > 0 && pieces_[npieces_ - 1].borrowed == nullptr) {
      pieces_[npieces_ - 1].length += n;
    } else {
      add_piece({nullptr, at, n});
    }
    size_ += n;
  }

  // Storage grows and is kept; only the first npieces_ / nowned_ are in use.
  std::vector<Piece> pieces_;
  std::vector<uint8_t> owned_;
  size_t npieces_ = 0, nowned_ = 0, size_ = 0;
};

}  // namespace ttemu::wire
