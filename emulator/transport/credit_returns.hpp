// Credits a router owes the routers upstream of it (spec 2.3: credit-based flow control per
// lane): every packet it takes out of a routing buffer frees a slot the far end may fill again.
// They go back in batches, once half a buffer is owed on a lane or after `delay` (0: at once),
// so a stream costs a fraction of a credit frame per packet and fewer wake-ups upstream; and
// sooner, riding on a datagram that goes to their port anyway (take()), so that they cost
// neither a datagram nor a wake-up of their own.
// Nothing is due before the earliest deadline unless half a buffer is owed: the per-packet
// path does not look at every lane.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace ttemu::transport {

class CreditReturns {
 public:
  using Time = std::chrono::nanoseconds;
  // slots: one per (port, lane) the node keeps; half: how many owed send at once.
  CreditReturns(size_t slots, uint32_t half, Time delay) : owed_(slots), half_(half), delay_(delay) {}

  void owe(size_t slot, uint32_t n, Time now);
  // Hands every batch due now to send(slot, n).
  template <class Send>
  void flush(Time now, Send&& send);
  // Hands what is owed on slots [first, first + count) to send(slot, n), due or not.
  template <class Send>
  void take(size_t first, size_t count, Send&& send);
  std::optional<Time> next_deadline() const {
    return owing_ > 0 ? std::optional<Time>(next_due_) : std::nullopt;
  }
  bool empty() const { return owing_ == 0; }
  // Forgets what is owed on `slot` (the router it was owed to is gone).
  void forget(size_t slot) {
    if (owed_[slot].n > 0) --owing_;
    owed_[slot].n = 0;
  }

 private:
  struct Owed {
    uint32_t n = 0;
    Time since{};
  };
  std::vector<Owed> owed_;
  uint32_t half_;
  Time delay_;
  size_t owing_ = 0;  // entries with n > 0
  Time next_due_{Time::max()};
  bool half_owed_ = false;
};

inline void CreditReturns::owe(size_t slot, uint32_t n, Time now) {
  Owed& o = owed_[slot];
  if (o.n == 0) {
    o.since = now, ++owing_;
    if (now + delay_ < next_due_) next_due_ = now + delay_;
  }
  o.n += n;
  if (o.n >= half_) half_owed_ = true;
}

template <class Send>
void CreditReturns::flush(Time now, Send&& send) {
  if (owing_ == 0 || (!half_owed_ && now < next_due_)) return;
  next_due_ = Time::max();
  half_owed_ = false;
  for (size_t i = 0; owing_ > 0 && i < owed_.size(); ++i) {
    Owed& o = owed_[i];
    if (o.n == 0) continue;
    if (o.n < half_ && now < o.since + delay_) {
      if (o.since + delay_ < next_due_) next_due_ = o.since + delay_;
      continue;
    }
    send(i, o.n);
    o.n = 0;
    --owing_;
  }
}

template <class Send>
void CreditReturns::take(size_t first, size_t count, Send&& send) {
  for (size_t i = first; owing_ > 0 && i < first + count; ++i) {
    Owed& o = owed_[i];
    if (o.n == 0) continue;
    send(i, o.n);
    o.n = 0;
    --owing_;
  }
  // With some still owed, next_due_ may now be early: flush() finds nothing due then and
  // moves it on.
  if (owing_ == 0) next_due_ = Time::max(), half_owed_ = false;
}

}  // namespace ttemu::transport
