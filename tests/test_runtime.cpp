// gexec's implementations of TVM's backend hooks: the workspace (the thread pool's
// tests are in test_thread_pool.cpp).

#include <gexec/detail/workspace.hpp>

#include <doctest/doctest.h>

#include <cstdint>

TEST_CASE("workspace blocks are 64-byte aligned, distinct, reused LIFO, and tolerate out-of-order frees") {
  gexec::detail::workspace_arena arena;
  void* a = arena.allocate(100);
  void* b = arena.allocate(1 << 20);  // larger than the first chunk
  void* c = arena.allocate(0);
  for (void* p : {a, b, c}) CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  CHECK(a != b);
  CHECK(b != c);
  CHECK(arena.free(b) == 0);  // out of order: released once c is
  CHECK(arena.free(c) == 0);
  void* b2 = arena.allocate(1 << 20);
  CHECK(b2 == b);
  CHECK(arena.free(b2) == 0);
  CHECK(arena.free(a) == 0);
  CHECK(arena.allocate(64) == a);
  int x = 0;
  CHECK(arena.free(&x) == -1);
}
