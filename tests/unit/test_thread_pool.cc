// kernels::ThreadPool: every item is run exactly once whatever the pool size,
// item count and grain; slots stay in range and are never shared by two
// threads at once; nested calls run inline; pools used from several threads
// at once, and destroyed idle (spinning or asleep), behave.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "kernels/thread_pool.h"

namespace qfold {
namespace test {
namespace {

using kernels::ThreadPool;

// Runs n items through pool (grain > 0) or the free ParallelFor (grain 0), or
// ParallelForShares (shares), and checks: each item once, ranges inside
// [0, n) and no longer than the grain (a pool without workers runs [0, n) at
// once), slot in range and used by one thread at a time.
void CheckCovers(ThreadPool* pool, int64_t n, int64_t grain, bool shares = false) {
  CAPTURE(n);
  CAPTURE(grain);
  std::vector<std::atomic<int>> hits(size_t(n > 0 ? n : 1));
  for (auto& h : hits) h.store(0);
  const int threads = kernels::NumThreads(pool);
  std::vector<std::atomic<int>> in_slot(static_cast<size_t>(threads));
  for (auto& s : in_slot) s.store(0);
  std::atomic<bool> bad_range{false}, bad_slot{false}, shared_slot{false};
  auto fn = [&](int64_t b, int64_t e, int slot) {
    if (b < 0 || e > n || b >= e || (grain > 0 && threads > 1 && e - b > grain)) bad_range = true;
    if (slot < 0 || slot >= threads) {
      bad_slot = true;
      return;
    }
    if (in_slot[size_t(slot)].fetch_add(1) != 0) shared_slot = true;
    for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    in_slot[size_t(slot)].fetch_sub(1);
  };
  if (shares)
    kernels::ParallelForShares(pool, n, grain, fn);
  else if (grain > 0)
    pool->ParallelFor(n, grain, fn);
  else
    kernels::ParallelFor(pool, n, fn);
  CHECK_FALSE(bad_range.load());
  CHECK_FALSE(bad_slot.load());
  CHECK_FALSE(shared_slot.load());
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += hits[size_t(i)].load() != 1;
  CHECK(wrong == 0);
}

TEST_CASE("thread pool: every item exactly once, fewer and more items than threads") {
  for (int threads : {1, 2, 3, 4}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    CHECK(pool.num_threads() == threads);
    for (int64_t n : {0, 1, 2, 3, 5, 17, 64, 1000, 100003})
      for (int64_t grain : {0, 1, 2, 7, 1000}) CheckCovers(&pool, n, grain);
  }
  CheckCovers(nullptr, 1000, 0);  // no pool: the caller alone
}

TEST_CASE("thread pool: shares cover every item exactly once") {
  for (int threads : {1, 2, 3, 4}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 5, 17, 64, 1000, 100003})
      for (int64_t grain : {1, 2, 7, 1000}) CheckCovers(&pool, n, grain, /*shares=*/true);
  }
  CheckCovers(nullptr, 1000, 10, /*shares=*/true);
}

TEST_CASE("thread pool: explicit share bounds: every item once, ranges on each share's grain grid") {
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    for (int64_t grain : {1, 2, 3, 8}) {
      CAPTURE(grain);
      // Uneven shares, an empty one, and a span not starting at 0.
      std::vector<int64_t> bounds = {5};
      for (int s = 0; s < threads; ++s) bounds.push_back(bounds.back() + (s == 1 ? 0 : 7 + 13 * s));
      std::vector<std::atomic<int>> hits(size_t(bounds.back()));
      for (auto& h : hits) h.store(0);
      std::atomic<bool> bad{false};
      kernels::ParallelForBounds(&pool, bounds.data(), grain, [&](int64_t b, int64_t e, int slot) {
        if (slot < 0 || slot >= threads || b >= e) bad = true;
        // Inside one share, starting on its grain grid (one thread: all at once).
        int s = 0;
        while (s + 1 < threads && b >= bounds[size_t(s + 1)]) ++s;
        if (threads > 1 && (e > bounds[size_t(s + 1)] || e - b > grain ||
                            (b - bounds[size_t(s)]) % grain != 0))
          bad = true;
        for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
      });
      CHECK_FALSE(bad.load());
      for (int64_t i = 0; i < bounds.back(); ++i) CHECK(hits[size_t(i)].load() == (i >= 5 ? 1 : 0));
    }
  }
}

TEST_CASE("thread pool: each slot starts on its own share; a late one's share is taken over") {
  ThreadPool pool(2);
  // The worker is slow (1 ms per range), so the caller starts long before
  // the worker could have reached the caller's share.
  std::atomic<int64_t> first_begin[2] = {{-1}, {-1}};
  std::atomic<int64_t> by_slot[2] = {{0}, {0}};
  kernels::ParallelForShares(&pool, 1000, 10, [&](int64_t b, int64_t e, int slot) {
    int64_t none = -1;
    first_begin[slot].compare_exchange_strong(none, b);
    if (slot == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    by_slot[slot] += e - b;
  });
  CHECK(first_begin[0].load() == 0);
  // Nobody else takes the worker's share from the front: its first range is
  // that front, or it came when nothing was left.
  CHECK((first_begin[1].load() == -1 || first_begin[1].load() == 500));
  CHECK(by_slot[0].load() + by_slot[1].load() == 1000);
  // The caller did its own share and took most of the slow worker's.
  CHECK(by_slot[0].load() > 700);
}

TEST_CASE("thread pool: many tiny calls in a row") {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  int64_t expect = 0;
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 1 + call % 4;
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i + 1);
    });
    expect += n * (n + 1) / 2;
  }
  CHECK(sum.load() == expect);
}

TEST_CASE("thread pool: the caller takes the share of a worker that falls behind") {
  ThreadPool pool(2);
  std::atomic<int64_t> by_caller{0}, by_worker{0};
  pool.ParallelFor(200, 1, [&](int64_t b, int64_t e, int slot) {
    if (slot != 0) {
      // A descheduled worker: it holds one item long after the caller is done.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      by_worker += e - b;
    } else {
      by_caller += e - b;
    }
  });
  CHECK(by_caller.load() + by_worker.load() == 200);
  CHECK(by_worker.load() <= 2);
}

TEST_CASE("thread pool: a call from inside a task runs inline on that thread") {
  ThreadPool pool(2);
  std::atomic<int> outer_items{0}, inner_items{0}, moved{0}, wrong_slot{0};
  pool.ParallelFor(8, 1, [&](int64_t b, int64_t e, int slot) {
    const std::thread::id self = std::this_thread::get_id();
    for (int64_t i = b; i < e; ++i) {
      ++outer_items;
      pool.ParallelFor(50, 1, [&](int64_t ib, int64_t ie, int inner_slot) {
        if (std::this_thread::get_id() != self) ++moved;
        if (inner_slot != slot) ++wrong_slot;
        inner_items += int(ie - ib);
      });
      kernels::ParallelFor(&pool, 30, [&](int64_t ib, int64_t ie, int inner_slot) {
        if (std::this_thread::get_id() != self) ++moved;
        if (inner_slot != slot) ++wrong_slot;
        inner_items += int(ie - ib);
      });
    }
  });
  CHECK(outer_items.load() == 8);
  CHECK(inner_items.load() == 8 * 80);
  CHECK(moved.load() == 0);
  CHECK(wrong_slot.load() == 0);
}

TEST_CASE("thread pool: two pools used at once from two threads, and one pool from two") {
  ThreadPool a(2), b(2);
  auto hammer = [](ThreadPool* pool, int64_t* out) {
    int64_t total = 0;
    for (int call = 0; call < 3000; ++call) {
      std::atomic<int64_t> sum{0};
      pool->ParallelFor(64, 4, [&](int64_t lo, int64_t hi, int) {
        for (int64_t i = lo; i < hi; ++i) sum.fetch_add(i);
      });
      total += sum.load();
    }
    *out = total;
  };
  const int64_t expect = 3000 * (63 * 64 / 2);
  int64_t ra = 0, rb = 0;
  std::thread ta(hammer, &a, &ra), tb(hammer, &b, &rb);
  ta.join();
  tb.join();
  CHECK(ra == expect);
  CHECK(rb == expect);
  // Two outside callers of one pool take turns.
  std::thread t1(hammer, &a, &ra), t2(hammer, &a, &rb);
  t1.join();
  t2.join();
  CHECK(ra == expect);
  CHECK(rb == expect);
}

TEST_CASE("thread pool: destroyed idle, spinning or asleep") {
  { ThreadPool never_used(3); }
  for (int wait_ms : {0, 1, 20}) {
    CAPTURE(wait_ms);
    auto pool = std::make_unique<ThreadPool>(3);
    std::atomic<int64_t> sum{0};
    pool->ParallelFor(100, 1, [&](int64_t b, int64_t e, int) { sum += e - b; });
    CHECK(sum.load() == 100);
    // 0: workers still spin; 20 ms: they sleep on the condition variable.
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    if (wait_ms == 20) {  // a sleeping pool wakes for the next call
      pool->ParallelFor(100, 1, [&](int64_t b, int64_t e, int) { sum += e - b; });
      CHECK(sum.load() == 200);
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    }
    pool.reset();
  }
}

TEST_CASE("ThreadPool: an exception in any chunk reaches the caller; the pool still works") {
  // Red-team reproducer (issue 18): std::bad_alloc thrown in a worker escaped
  // the thread (std::terminate: the C API aborted, Python crashed).
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    for (int64_t bad : {int64_t(0), int64_t(37), int64_t(99)}) {
      CAPTURE(bad);
      std::atomic<int64_t> ran{0};
      bool caught = false;
      try {
        pool.ParallelFor(100, 1, [&](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) {
            if (i == bad) throw std::bad_alloc();
            ran.fetch_add(1);
          }
        });
      } catch (const std::bad_alloc&) {
        caught = true;
      }
      CHECK(caught);
      CHECK(ran.load() < 100);
      CheckCovers(&pool, 1000, 7);  // the next job runs normally
    }
  }
}

}  // namespace
}  // namespace test
}  // namespace qfold
