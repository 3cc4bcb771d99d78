#pragma once
// TVMBackendAllocWorkspace / FreeWorkspace on the host: a per-thread stack of
// 64-byte aligned blocks carved from chunks that are kept for reuse, so the
// steady state allocates nothing. Kernels free in LIFO order; an out-of-order
// free is tolerated (the block is released when everything above it is).
//
// A chunk is not zeroed (kernels write their workspace before they read it), so a
// thread's pages are touched only as far as its kernels use them: a pool worker whose
// tasks ask 1,792 bytes holds one page of its 64 KiB chunk, not sixteen.
//
// The arena grows by chunks (each at least twice the last) while a kernel needs more
// than it holds; when the outermost workspace_scope of a thread ends (a run, a pool
// task) with more than one chunk, they are given back and replaced by one chunk of the
// most ever held at once (settle). A thread then keeps that peak, not the sum of the
// chunks grown toward it (ResNet-18's convolutions asked 615 KiB, then 841 KiB: 1.8 MiB
// held in two chunks, 1.4 MiB of it touched, against one of 841 KiB), and once a run has
// settled it, later runs allocate nothing.
//
// While one thread runs an executor's steps alone, the executor may lend it, for the step
// running, bytes of its activation storage that no value holds then (lend()): blocks are
// carved from there first, on the same stack, and count toward neither the chunks nor the
// peak. ResNet-18's 841 KiB convolutions find such room; only what finds none (its
// max-pool, at the step where the activations peak) sizes the thread's own chunk.

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <vector>

#include "aligned_memory.hpp"
#include "shape.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

class workspace_scope;

/// Bytes an executor lends the thread running its step alone (see workspace_arena::lend).
struct lent_region {
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
};

class workspace_arena {
 public:
  /// Throws gexec::error when the memory cannot be had.
  void* allocate(std::uint64_t nbytes) {
    if (nbytes > static_cast<std::uint64_t>(PTRDIFF_MAX) / 2)
      throw error(errc::out_of_memory, "workspace of " + std::to_string(nbytes) + " bytes");
    std::size_t n = static_cast<std::size_t>(align_up(nbytes == 0 ? 1 : nbytes, 64));
    while (current_ < chunks_.size() && chunks_[current_].size - chunks_[current_].used < n) ++current_;
    if (current_ == chunks_.size()) {
      std::size_t last = chunks_.empty() ? 0 : chunks_.back().size;
      std::size_t size = std::max({n, 2 * last, chunks_.empty() ? peak_ : 0, std::size_t{1} << 16});
      stack_.reserve(stack_.size() + 1);  // nothing to undo below if this throws
      chunks_.push_back({std::unique_ptr<std::byte, long_lived_delete>(static_cast<std::byte*>(allocate_long_lived(size, false))), size, 0});
    }
    chunk& c = chunks_[current_];
    void* p = c.memory.get() + c.used;
    stack_.push_back({p, current_, c.used, n, false});
    c.used += n;
    in_use_ += n;
    peak_ = std::max<std::size_t>(peak_, static_cast<std::size_t>(in_use_));
    return p;
  }

  /// A block of `nbytes` from `region` (memory lent for the step running: see the top of
  /// this file), or null where it does not fit there or blocks from another region are
  /// still out. Throws gexec::error when the stack cannot grow.
  void* lend(std::uint64_t nbytes, lent_region region) {
    if (reinterpret_cast<std::uintptr_t>(region.data) % 64 != 0 || nbytes > region.bytes) return nullptr;
    if (region.data != lent_.data || region.bytes != lent_.bytes) {
      if (lent_used_ != 0) return nullptr;
      lent_ = region;
    }
    const std::uint64_t n = align_up(nbytes == 0 ? 1 : nbytes, 64);
    if (n > lent_.bytes - lent_used_) return nullptr;
    void* p = lent_.data + lent_used_;
    stack_.push_back({p, lent_chunk, static_cast<std::size_t>(lent_used_), static_cast<std::size_t>(n), false});
    lent_used_ += n;
    return p;
  }
  /// Bytes of lent memory (lend()) handed out and not yet released.
  [[nodiscard]] std::uint64_t lent_in_use() const noexcept { return lent_used_; }
  /// Whether `p` is a block lend() gave out and that is not yet released.
  [[nodiscard]] bool lent(const void* p) const noexcept {
    return lent_used_ != 0 && std::less_equal<>()(static_cast<const void*>(lent_.data), p) &&
           std::less<>()(p, static_cast<const void*>(lent_.data + lent_used_));
  }

  /// Bytes the arena holds in its chunks, allocated or not.
  [[nodiscard]] std::uint64_t reserved() const noexcept {
    std::uint64_t r = 0;
    for (const chunk& c : chunks_) r += c.size;
    return r;
  }

  /// Bytes handed out and not yet released.
  [[nodiscard]] std::uint64_t in_use() const noexcept { return in_use_; }

  /// Where the stack stands now; release_to(mark) gives back everything allocated since,
  /// freed or not (a kernel that never frees its workspace does not grow the arena run
  /// after run).
  [[nodiscard]] std::size_t mark() const noexcept { return stack_.size(); }
  void release_to(std::size_t mark) noexcept {
    while (stack_.size() > mark) {
      const block& b = stack_.back();
      if (b.chunk == lent_chunk) {
        lent_used_ = b.offset;
      } else {
        chunks_[b.chunk].used = b.offset;
        current_ = b.chunk;
        in_use_ -= b.size;
      }
      stack_.pop_back();
    }
    if (stack_.empty()) current_ = 0;
  }

  /// With nothing allocated and more than one chunk: gives them back and takes one chunk
  /// of the most ever allocated at once (where that cannot be had, none: the next
  /// allocate() takes it).
  void settle() noexcept {
    if (!stack_.empty() || chunks_.size() <= 1) return;
    chunks_.clear();
    current_ = 0;
    try {
      chunks_.push_back({std::unique_ptr<std::byte, long_lived_delete>(static_cast<std::byte*>(allocate_long_lived(peak_, false))), peak_, 0});
    } catch (...) {
    }
  }

  /// 0 on success, -1 for a pointer this thread did not allocate.
  int free(void* p) {
    auto it = std::find_if(stack_.rbegin(), stack_.rend(), [p](const block& b) { return b.ptr == p && !b.freed; });
    if (it == stack_.rend()) return -1;
    it->freed = true;
    std::size_t top = stack_.size();
    while (top > 0 && stack_[top - 1].freed) --top;
    release_to(top);
    return 0;
  }

  static workspace_arena& this_thread() {
    thread_local workspace_arena arena;
    return arena;
  }

 private:
  struct long_lived_delete {  // large chunks are mappings of their own, unmapped whole
    void operator()(std::byte* p) const { free_long_lived(p); }
  };
  struct chunk {
    std::unique_ptr<std::byte, long_lived_delete> memory;
    std::size_t size;
    std::size_t used;
  };
  struct block {
    void* ptr;
    std::size_t chunk;
    std::size_t offset;
    std::size_t size;
    bool freed;
  };
  static constexpr std::size_t lent_chunk = SIZE_MAX;  ///< block::chunk of a block from lent_
  std::vector<chunk> chunks_;
  std::vector<block> stack_;
  lent_region lent_;           ///< the region lend() carves from now
  std::uint64_t lent_used_ = 0;
  std::size_t current_ = 0;
  std::uint64_t in_use_ = 0;
  std::size_t peak_ = 0;  // the most bytes ever handed out at once
  std::size_t scopes_ = 0;  // workspace_scopes open on this thread

  friend class workspace_scope;
};

/// Gives back, when it ends, the workspace this thread took during its life.
class workspace_scope {
 public:
  workspace_scope() noexcept : arena_(workspace_arena::this_thread()), mark_(arena_.mark()) { ++arena_.scopes_; }
  ~workspace_scope() {
    arena_.release_to(mark_);
    if (--arena_.scopes_ == 0) arena_.settle();  // the thread's outermost scope: a run or a task ended
  }
  workspace_scope(const workspace_scope&) = delete;
  workspace_scope& operator=(const workspace_scope&) = delete;

 private:
  workspace_arena& arena_;
  std::size_t mark_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
