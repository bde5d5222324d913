// A small process-wide thread pool for the kernels: ParallelFor(n, fn) runs
// fn(0) .. fn(n - 1), fn(0) on the calling thread. Callers split work so the
// result does not depend on n. When the pool is busy (another session, or a
// nested call) the tasks run one after another on the caller instead.
#pragma once
#include <functional>

namespace qfold {
namespace kernels {

void ParallelFor(int n, const std::function<void(int)>& fn);

}  // namespace kernels
}  // namespace qfold
