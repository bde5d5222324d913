// The threads of one Session: ThreadPool(n) starts n - 1 workers (none for
// n = 1); ThreadPool::ParallelFor hands contiguous ranges of items to the
// caller and the workers through an atomic counter, so a late or descheduled
// worker leaves its share to the others instead of holding up the op. The
// free ParallelFor the kernels call runs on it in shares (ParallelForShares):
// each thread the same part of the items every call first, then help with
// the others' parts. After a task, workers spin
// for a short while (kSpinMicros in thread_pool.cc) before they sleep, so the
// back-to-back parallel regions of one inference do not each pay a wake-up.
//
// Results must not depend on which thread runs which range: callers make every
// item's output independent of the ranges, and index per-thread scratch by the
// slot passed to fn (0 is the caller, 1 .. n - 1 the workers).
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace qfold {
namespace kernels {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();  // joins the workers; no ParallelFor may be running
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that take part in a ParallelFor, the caller included.
  int num_threads() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end, slot) on ranges of at most `grain` items that cover
  // [0, n) exactly once, and returns when all are done. The calling thread
  // takes part. Where only one thread can run (a pool without workers, or a
  // call made from inside fn, on any thread of this pool) fn gets [0, n) at
  // once, inline, with that thread's slot. One outside caller at a time:
  // others wait for it. An exception thrown by fn ends the job (chunks not yet
  // started are skipped) and is rethrown here, on the calling thread, after
  // every worker has left it.
  template <class F>
  void ParallelFor(int64_t n, int64_t grain, const F& fn) {
    Run(
        n, grain,
        [](const void* f, int64_t b, int64_t e, int slot) {
          (*static_cast<const F*>(f))(b, e, slot);
        },
        &fn);
  }

 private:
  using RangeFn = void (*)(const void* fn, int64_t begin, int64_t end, int slot);
  void Run(int64_t n, int64_t grain, RangeFn call, const void* fn);
  void Work(int slot);
  // Runs chunks of the open job until none is left; an exception from a
  // chunk is kept in error_ and ends the job.
  void Drain(int slot);
  // Caller side, after Drain: waits until no worker is inside the job.
  void WaitForWorkers();
  // Rethrows (on the calling thread) the first exception of the job, if any.
  void RethrowJobError();
  // The generation of the next job after `seen`, or 0 when stopping;
  // *spun tells whether it came while spinning (else after sleeping).
  uint64_t WaitForJob(uint64_t seen, bool* spun);

  std::vector<std::thread> workers_;
  std::mutex caller_mu_;  // one ParallelFor at a time
  // The job, written by the caller before it publishes open_.
  RangeFn call_ = nullptr;
  const void* fn_ = nullptr;
  int64_t n_ = 0, grain_ = 1, chunks_ = 0;
  std::atomic<int64_t> next_{0};  // next chunk to hand out
  std::mutex error_mu_;
  std::exception_ptr error_;       // first exception thrown by a chunk of the job
  std::atomic<uint64_t> open_{0};  // generation of the job on offer, 0 when none
  std::atomic<int> active_{0};     // workers inside (or checking) a job
  uint64_t generation_ = 0;        // caller side only
  std::atomic<bool> stop_{false};
  // Sleeping workers wait here; the caller notifies only when sleepers_ > 0.
  std::mutex sleep_mu_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  // The caller blocks here when workers take long to leave a job.
  std::mutex done_mu_;
  std::condition_variable done_;
  std::atomic<bool> caller_waiting_{false};
  // Spinning: when the last job was published, and the time until which the
  // pool does not spin because a spinning worker came late (thread_pool.cc).
  std::atomic<int64_t> published_ns_{0};
  std::atomic<int64_t> quiet_until_ns_{0};
  std::atomic<int> late_joins_{0};  // spinning workers' late joins in a row
};

inline int NumThreads(const ThreadPool* pool) {
  return pool ? pool->num_threads() : 1;
}

// The pool when `work` (in any unit: MACs, bytes...) gives two threads at
// least `min_per_thread` each, else null (the caller alone): below that the
// hand-off, the wait for the other thread's last range and the cache lines
// the threads then pass between them cost more than the second thread saves.
inline ThreadPool* PoolForWork(ThreadPool* pool, int64_t work, int64_t min_per_thread) {
  return NumThreads(pool) > 1 && work >= 2 * min_per_thread ? pool : nullptr;
}

// fn(begin, end, slot) over [bounds[0], bounds[threads]) in ranges of at
// most `grain` items, each slot running its own share first: items
// [bounds[slot], bounds[slot + 1]) from their front; then what is left of
// the other shares, from their backs (the last piece of their grain grid).
// A thread thus writes the same outputs
// call after call, whose cache lines then stay in its core instead of moving
// to the other one every run (a ParallelFor hands ranges out in whatever
// order the threads come), and a thread that falls behind still leaves its
// share to the others. Ranges start at a share's front bound and step by
// grain, so bounds and grain that are multiples of some unit keep every
// range whole units. bounds: num_threads + 1 nondecreasing values below 2^31 (more
// threads than kMaxShares, or more items, take the pool's ParallelFor);
// one thread (or no pool) runs the whole span at once.
constexpr int kMaxShares = 64;
template <class F>
void ParallelForBounds(ThreadPool* pool, const int64_t* bounds, int64_t grain, const F& fn) {
  const int threads = NumThreads(pool);
  const int64_t first = bounds[0], last = bounds[threads];
  if (last <= first) return;
  grain = std::max<int64_t>(1, grain);
  if (threads == 1) return fn(first, last, 0);
  if (threads > kMaxShares || last >= (int64_t(1) << 31))
    return pool->ParallelFor(last - first, grain, [&](int64_t b, int64_t e, int slot) {
      fn(first + b, first + e, slot);
    });
  // A share's items left, [front, back), as front << 32 | back.
  struct alignas(64) Share {
    std::atomic<uint64_t> left;
  };
  Share shares[kMaxShares];
  for (int s = 0; s < threads; ++s)
    shares[s].left.store(uint64_t(bounds[s]) << 32 | uint64_t(bounds[s + 1]));
  auto take = [grain](Share& share, bool front, int64_t* b, int64_t* e) {
    uint64_t v = share.left.load();
    for (;;) {
      const int64_t f = int64_t(v >> 32), k = int64_t(v & 0xffffffffu);
      if (f >= k) return false;
      const int64_t nf = front ? std::min(k, f + grain) : f;
      const int64_t nk = front ? k : f + (k - f - 1) / grain * grain;  // the last piece
      if (share.left.compare_exchange_weak(v, uint64_t(nf) << 32 | uint64_t(nk))) {
        *b = front ? f : nk;
        *e = front ? nf : k;
        return true;
      }
    }
  };
  pool->ParallelFor(threads, 1, [&](int64_t, int64_t, int slot) {
    int64_t b = 0, e = 0;
    while (take(shares[slot], true, &b, &e)) fn(b, e, slot);
    for (int k = 1; k < threads; ++k)
      while (take(shares[(slot + k) % threads], false, &b, &e)) fn(b, e, slot);
  });
}

// ParallelForBounds over [0, n) in ranges of at most `grain` items, each
// thread's share the slot-th of num_threads contiguous parts of the ranges.
template <class F>
void ParallelForShares(ThreadPool* pool, int64_t n, int64_t grain, const F& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int threads = NumThreads(pool);
  if (threads == 1) return fn(int64_t(0), n, 0);
  if (threads > kMaxShares || n >= (int64_t(1) << 31)) return pool->ParallelFor(n, grain, fn);
  const int64_t ranges = (n - 1) / grain + 1;
  int64_t bounds[kMaxShares + 1];
  for (int s = 0; s <= threads; ++s) bounds[s] = std::min(n, ranges * s / threads * grain);
  ParallelForBounds(pool, bounds, grain, fn);
}

// fn(begin, end, slot) over [0, n) on `pool` in shares (ParallelForShares),
// or in one call on this thread when pool is null (work too small to split
// passes null). Ranges are about n / (8 x threads) items, so a thread that
// falls behind costs little. Measured at 2 threads against ranges handed out
// as the threads came (Xeon, consecutive-pair ratios): DenseNet-121 int8
// 1.09x, SqueezeNet 1.05x, Inception-v1 1.04x (concatenations, pools and
// lookups no longer move their output lines between the cores every run).
template <class F>
void ParallelFor(ThreadPool* pool, int64_t n, const F& fn) {
  if (n <= 0) return;
  if (!pool || pool->num_threads() == 1) {
    fn(int64_t(0), n, 0);
    return;
  }
  ParallelForShares(pool, n, std::max<int64_t>(1, n / (8 * int64_t(pool->num_threads()))), fn);
}
// The same with ranges of at most `grain` items (a grain that keeps a
// cache-sized block together).
template <class F>
void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const F& fn) {
  if (n <= 0) return;
  if (!pool || pool->num_threads() == 1) {
    fn(int64_t(0), n, 0);
    return;
  }
  ParallelForShares(pool, n, grain, fn);
}

}  // namespace kernels
}  // namespace qfold
