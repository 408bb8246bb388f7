// A first-in first-out queue that keeps its storage: a ring over a vector whose capacity only
// grows (doubling when full). std::deque frees a block every few pops and allocates one every
// few pushes, which put allocations on the packet path of the routers' buffers and the links'
// backlogs; this queue allocates only while it grows to the deepest it has been.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace ttemu {

template <class T>
class Fifo {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  // The i-th from the front.
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }

  void push_back(T&& v) { emplace_back(std::move(v)); }
  template <class... A>
  T& emplace_back(A&&... args) {
    if (size_ == slots_.size()) grow();
    T& slot = slots_[(head_ + size_) & (slots_.size() - 1)];
    slot = T{std::forward<A>(args)...};
    ++size_;
    return slot;
  }
  // The slot keeps no resources of what it held (a moved-from or reset value).
  void pop_front() {
    slots_[head_] = T{};
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  void clear() {
    while (!empty()) pop_front();
  }

 private:
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 8 : slots_.size() * 2);  // a power of two
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_.swap(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0, size_ = 0;
};

}  // namespace ttemu
