// qfold subcommands. Each returns the process exit code: 0 success,
// 2 bad input or usage (the message names the file, node or tensor), 1 internal error.
#pragma once
#include <string>
#include <vector>

#include "qfold/status.h"

namespace qfold {
namespace cli {

using Args = std::vector<std::string>;

int Convert(const Args& args);
int Run(const Args& args);
int Inspect(const Args& args);
int Check(const Args& args);   // cli/check.cc
int Verify(const Args& args);  // cli/verify.cc
int Bench(const Args& args);   // cli/bench.cc

// Prints "qfold <cmd>: error: <message>" and returns the exit code for `st`.
int Fail(const char* cmd, const Status& st);
int UsageError(const char* cmd, const std::string& msg, const char* usage);

}  // namespace cli
}  // namespace qfold
