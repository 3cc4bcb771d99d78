// gexec's implementations of TVM's backend hooks: thread pool, barrier, workspace.

#include <gexec/detail/thread_pool.hpp>
#include <gexec/detail/workspace.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace {

struct barrier_check {
  std::vector<int> stage1;
  std::atomic<int> wrong{0};
  std::atomic<int> max_task{-1};
};

int barrier_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  auto& c = *static_cast<barrier_check*>(cdata);
  for (int round = 0; round < 20; ++round) {
    c.stage1[static_cast<std::size_t>(task_id)] = round;
    gexec::detail::thread_pool::barrier(penv);
    for (int t = 0; t < penv->num_task; ++t)
      if (c.stage1[static_cast<std::size_t>(t)] != round) ++c.wrong;
    gexec::detail::thread_pool::barrier(penv);
  }
  int seen = c.max_task.load();
  while (task_id > seen && !c.max_task.compare_exchange_weak(seen, task_id)) {
  }
  return 0;
}

}  // namespace

TEST_CASE("a launch runs every task at once, so repeated barriers hold") {
  for (int threads : {1, 2, 3, 4, 8}) {
    CAPTURE(threads);
    gexec::detail::thread_pool pool(threads);
    for (int requested : {0, 2, 64}) {
      CAPTURE(requested);
      barrier_check c;
      c.stage1.assign(64, -1);
      REQUIRE(pool.launch(&barrier_task, &c, requested) == 0);
      CHECK(c.wrong == 0);
      const int expected = requested == 0 || requested > threads ? threads : requested;
      CHECK(c.max_task == expected - 1);
    }
  }
}

TEST_CASE("a failing task's message reaches the launching thread") {
  gexec::detail::thread_pool pool(3);
  auto fail_on_2 = [](int task_id, TVMParallelGroupEnv*, void*) -> int {
    if (task_id != 2) return 0;
    gexec::detail::set_last_error("task 2 says no");
    return -1;
  };
  gexec::detail::last_error().clear();
  CHECK(pool.launch(fail_on_2, nullptr, 0) == -1);
  CHECK(gexec::detail::take_last_error() == "task 2 says no");
  CHECK(pool.launch([](int, TVMParallelGroupEnv*, void*) { return 0; }, nullptr, 0) == 0);
}

TEST_CASE("nested launches run in the calling task") {
  gexec::detail::thread_pool& pool = gexec::detail::thread_pool::instance();
  static std::atomic<int> inner_tasks{0};
  inner_tasks = 0;
  auto outer = [](int, TVMParallelGroupEnv*, void*) -> int {
    return gexec::detail::thread_pool::instance().launch(
        [](int, TVMParallelGroupEnv* penv, void*) -> int {
          inner_tasks += penv->num_task;
          return 0;
        },
        nullptr, 4);
  };
  CHECK(pool.launch(outer, nullptr, 0) == 0);
  CHECK(inner_tasks == pool.num_threads());  // one single-task inner launch per outer task
}

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
