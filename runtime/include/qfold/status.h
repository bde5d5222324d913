// Status: how every runtime call reports failure. The runtime never throws
// or aborts on bad input; it returns one of these with a message that names
// the file, operator or tensor involved.
#pragma once
#include <string>
#include <utility>

namespace qfold {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // caller's fault: wrong shape, unknown input name...
  kInvalidModel,     // the .qfm (or .onnx) is malformed
  kUnsupported,      // valid, but qfold cannot run it
  kIoError,
  kInternal,
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

#define QF_RETURN_IF_ERROR(expr)      \
  do {                                \
    ::qfold::Status _qf_st = (expr);  \
    if (!_qf_st.ok()) return _qf_st; \
  } while (0)

}  // namespace qfold
