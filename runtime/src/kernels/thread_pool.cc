// See thread_pool.h.
//
// Hand-off without waiting for late workers: the caller publishes a job by
// storing its generation in open_, runs chunks itself, then closes the job
// (open_ = 0) and waits only for workers that got in. A worker gets in by
// raising active_ and then checking that open_ still holds the job's
// generation; both sides use sequentially consistent operations, so either
// the worker sees the job closed and backs out without touching it, or the
// caller sees active_ > 0 and waits for it (spinning, then blocked on done_).
// A worker that was asleep or descheduled for the whole job simply misses it.
#include "kernels/thread_pool.h"

#include <chrono>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <immintrin.h>
#define QFOLD_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define QFOLD_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define QFOLD_CPU_RELAX() ((void)0)
#endif

namespace qfold {
namespace kernels {
namespace {

// How long an idle worker spins for the next job before it sleeps. One
// inference runs its parallel ops back to back, with serial ops between them
// that take a few to some tens of microseconds; a futex wake-up costs about as
// much again, and a worker that slept is late for the start of the op. After
// the first microseconds the spin yields between checks: on a loaded machine
// (this process sharing its CPU time with other programs) a worker that only
// pauses takes time the caller needs, and 2 threads measured slower than 1;
// yielding gives it up whenever something else can run.
constexpr auto kSpinMicros = std::chrono::microseconds(300);
constexpr auto kPauseOnlyMicros = std::chrono::microseconds(5);
// A spinning worker that still joins a job this late was not running: the
// machine is busy. Spinning then only lowers this process's share of the CPU
// (the scheduler weighs a group of threads by how many are runnable), so the
// pool stops spinning for kQuietFor and its threads sleep as soon as idle.
constexpr auto kLateJoin = std::chrono::microseconds(50);
constexpr auto kQuietFor = std::chrono::milliseconds(50);
// Late joins in a row (no timely one between) that make the pool quiet: one
// preemption of a spinning worker by another program on a machine with some
// load (a load average of 0.7 on 2 cores) made every inference for the next
// 50 ms run on one thread (a 3x3 64->64 int8 convolution at 56x56 had a
// median of 0.240 ms at 2 threads against 0.125 ms without quiet periods).
constexpr int kLateJoinsForQuiet = 3;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
// How long the caller spins for workers still inside a job before it blocks.
constexpr auto kCallerSpinMicros = std::chrono::microseconds(50);

// The pool whose task this thread is running, and its slot there: a
// ParallelFor on that pool from inside the task runs inline.
thread_local const ThreadPool* t_pool = nullptr;
thread_local int t_slot = 0;

struct TaskScope {
  const ThreadPool* pool;
  int slot;
  TaskScope(const ThreadPool* p, int s) : pool(t_pool), slot(t_slot) {
    t_pool = p;
    t_slot = s;
  }
  ~TaskScope() {
    t_pool = pool;
    t_slot = slot;
  }
};

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  workers_.reserve(size_t(std::max(0, num_threads - 1)));
  for (int slot = 1; slot < num_threads; ++slot) {
    try {
      workers_.emplace_back([this, slot] { Work(slot); });
    } catch (const std::system_error&) {
      break;  // the system is out of threads: run with those we have
    }
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  { std::lock_guard<std::mutex> lock(sleep_mu_); }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Run(int64_t n, int64_t grain, RangeFn call, const void* fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (t_pool == this) {  // nested: this thread already is one of ours
    call(fn, 0, n, t_slot);
    return;
  }
  if (workers_.empty() || n <= grain) {
    TaskScope scope(this, 0);
    call(fn, 0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> one_caller(caller_mu_);
  call_ = call;
  fn_ = fn;
  n_ = n;
  grain_ = grain;
  chunks_ = (n + grain - 1) / grain;
  next_.store(0, std::memory_order_relaxed);
  const uint64_t gen = ++generation_;
  const int64_t now = NowNs();
  published_ns_.store(now, std::memory_order_relaxed);
  open_.store(gen);
  // A quiet pool (a worker came late: the machine is busy) leaves its
  // sleeping workers asleep and the caller runs the job alone. Woken, such a
  // worker came 3-10 us late, and when it was preempted inside a range the
  // caller waited 20-40 us for it: Inception-v2 int8 at 2 threads ran in a
  // median 4.4-5.4 ms against 3.9 ms at 1 thread on this shared 2-core
  // machine. The pool wakes them again once kQuietFor has passed.
  if (sleepers_.load() > 0 && now >= quiet_until_ns_.load(std::memory_order_relaxed)) {
    { std::lock_guard<std::mutex> lock(sleep_mu_); }
    wake_.notify_all();
  }
  {
    TaskScope scope(this, 0);
    Drain(0);
  }
  open_.store(0);
  WaitForWorkers();
  RethrowJobError();
}

void ThreadPool::WaitForWorkers() {
  // Workers still running their last chunk. A chunk is short, so spin a
  // little; then block, because a worker that was preempted may need this
  // core (or this process's share of the machine) to finish.
  if (active_.load() == 0) return;
  const auto start = std::chrono::steady_clock::now();
  const bool spin = NowNs() >= quiet_until_ns_.load(std::memory_order_relaxed);
  for (int spins = 1; active_.load() != 0; ++spins) {
    QFOLD_CPU_RELAX();
    if (!spin ||
        (spins % 64 == 0 && std::chrono::steady_clock::now() - start > kCallerSpinMicros)) {
      std::unique_lock<std::mutex> lock(done_mu_);
      caller_waiting_.store(true);
      done_.wait(lock, [&] { return active_.load() == 0; });
      caller_waiting_.store(false);
      return;
    }
  }
}

void ThreadPool::Drain(int slot) {
  for (;;) {
    const int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks_) return;
    const int64_t b = c * grain_;
    // An exception must not leave a worker (std::terminate) nor the caller
    // while workers still use the job: kept, and rethrown by Run on the
    // calling thread once every worker has left; the remaining chunks are skipped.
    try {
      call_(fn_, b, std::min(n_, b + grain_), slot);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
      next_.store(chunks_, std::memory_order_relaxed);
    }
  }
}

void ThreadPool::RethrowJobError() {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    std::swap(e, error_);
  }
  if (e) std::rethrow_exception(e);
}

uint64_t ThreadPool::WaitForJob(uint64_t seen, bool* spun) {
  auto ready = [&](uint64_t g) { return g != 0 && g != seen; };
  const auto start = std::chrono::steady_clock::now();
  *spun = NowNs() >= quiet_until_ns_.load(std::memory_order_relaxed);
  for (int spins = 1; *spun; ++spins) {
    if (stop_.load(std::memory_order_relaxed)) return 0;
    const uint64_t g = open_.load(std::memory_order_relaxed);
    if (ready(g)) return g;
    QFOLD_CPU_RELAX();
    if (spins % 64 == 0) {
      const auto spent = std::chrono::steady_clock::now() - start;
      if (spent > kSpinMicros) break;
      if (spent > kPauseOnlyMicros) std::this_thread::yield();
    }
  }
  *spun = false;
  std::unique_lock<std::mutex> lock(sleep_mu_);
  sleepers_.fetch_add(1);
  uint64_t g = 0;
  wake_.wait(lock, [&] {
    g = open_.load();
    return stop_.load() || ready(g);
  });
  sleepers_.fetch_sub(1);
  return stop_.load() ? 0 : g;
}

void ThreadPool::Work(int slot) {
  t_pool = this;
  t_slot = slot;
  uint64_t seen = 0;
  for (;;) {
    bool spun = false;
    const uint64_t g = WaitForJob(seen, &spun);
    if (g == 0) return;
    if (spun) {
      const int64_t now = NowNs();
      const bool late = now - published_ns_.load(std::memory_order_relaxed) >
                        std::chrono::nanoseconds(kLateJoin).count();
      if (!late)
        late_joins_.store(0, std::memory_order_relaxed);
      else if (late_joins_.fetch_add(1, std::memory_order_relaxed) + 1 >= kLateJoinsForQuiet)
        quiet_until_ns_.store(now + std::chrono::nanoseconds(kQuietFor).count(),
                              std::memory_order_relaxed);
    }
    seen = g;
    active_.fetch_add(1);
    if (open_.load() == g) Drain(slot);
    if (active_.fetch_sub(1) == 1 && caller_waiting_.load()) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_.notify_one();
    }
  }
}

}  // namespace kernels
}  // namespace qfold
