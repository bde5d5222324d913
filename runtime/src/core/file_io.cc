#include "core/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>

namespace qfold {
namespace fileio {

namespace {

Status IoError(const std::string& path, const std::string& what) {
  return Status(StatusCode::kIoError, path + ": " + what);
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Temp files of writes in progress, for the signal handler: fixed slots of
// plain char arrays, because a handler may only call async-signal-safe
// functions (unlink) and must not allocate or lock.
constexpr int kTempSlots = 32;
struct TempSlot {
  std::atomic<bool> claimed{false};  // owned by a writer
  std::atomic<bool> ready{false};    // path complete: the handler may unlink it
  char path[PATH_MAX];
};
TempSlot g_temp[kTempSlots];

int RegisterTemp(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    bool expected = false;
    if (!g_temp[i].claimed.compare_exchange_strong(expected, true)) continue;
    std::memcpy(g_temp[i].path, path.c_str(), path.size() + 1);
    g_temp[i].ready.store(true);
    return i;
  }
  return -1;  // all slots busy: the file is still removed on errors, not on signals
}

void UnregisterTemp(int slot) {
  if (slot < 0) return;
  g_temp[slot].ready.store(false);
  g_temp[slot].claimed.store(false);
}

extern "C" void RemoveTempsAndDie(int sig) {
  for (TempSlot& s : g_temp)
    if (s.ready.load()) unlink(s.path);
  signal(sig, SIG_DFL);
  raise(sig);
}

std::atomic<unsigned> g_temp_counter{0};

template <typename Bytes>
Status ReadAll(const std::string& path, size_t max_bytes, Bytes* out) {
  out->clear();
  int fd = -1;
  uint64_t size = 0;
  QF_RETURN_IF_ERROR(OpenRegularFile(path, &fd, &size));
  if (size > max_bytes) {
    close(fd);
    return Status(StatusCode::kInvalidModel, path + ": " + std::to_string(size) +
                                                 " bytes is over the limit of " +
                                                 std::to_string(max_bytes) + " bytes");
  }
  try {
    out->resize(size_t(size));
  } catch (const std::bad_alloc&) {
    close(fd);
    return IoError(path, "out of memory reading " + std::to_string(size) + " bytes");
  }
  size_t done = 0;
  while (done < out->size()) {
    ssize_t r = read(fd, &(*out)[done], out->size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = errno;
      close(fd);
      return IoError(path, r == 0 ? "file shrank while reading"
                                  : std::string("read failed: ") + std::strerror(err));
    }
    done += size_t(r);
  }
  close(fd);
  return Status::Ok();
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status OpenRegularFile(const std::string& path, int* fd, uint64_t* size) {
  *fd = -1;
  // O_NONBLOCK: opening a FIFO without a writer would otherwise wait forever.
  int f = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f < 0) return IoError(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (fstat(f, &st) != 0) {
    const int err = errno;
    close(f);
    return IoError(path, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(f);
    return IoError(path, std::string("is ") + KindOf(st.st_mode) + ", not a regular file");
  }
  const int flags = fcntl(f, F_GETFL);
  if (flags >= 0) fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  *fd = f;
  *size = uint64_t(st.st_size);
  return Status::Ok();
}

Status ReadRegularFile(const std::string& path, size_t max_bytes, std::string* out) {
  return ReadAll(path, max_bytes, out);
}

Status ReadRegularFile(const std::string& path, size_t max_bytes, std::vector<uint8_t>* out) {
  return ReadAll(path, max_bytes, out);
}

Status CheckOutputPath(const std::string& path, const std::vector<std::string>& inputs) {
  auto refuse = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, path + ": refusing to write the output: " + why);
  };
  if (path.empty()) return Status(StatusCode::kInvalidArgument, "empty output path");
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return IoError(path, std::string("cannot stat: ") + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) return refuse("it is a symbolic link");
  if (!S_ISREG(st.st_mode)) return refuse(std::string("it is ") + KindOf(st.st_mode));
  // Root passes access(W_OK) on any file: the mode bits decide as well.
  if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || access(path.c_str(), W_OK) != 0)
    return refuse("it is read-only");
  for (const std::string& in : inputs) {
    struct stat is;
    if (!in.empty() && stat(in.c_str(), &is) == 0 && is.st_dev == st.st_dev &&
        is.st_ino == st.st_ino)
      return refuse("it is the input file '" + in + "'");
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const void* bytes, size_t size,
                       const std::vector<std::string>& inputs) {
  QF_RETURN_IF_ERROR(CheckOutputPath(path, inputs));
  // Same folder as the target, so the rename never crosses file systems; a
  // dot name, so a folder listing during the write does not show it.
  const std::string dir = DirOf(path);
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const std::string tmp = (dir == "/" ? "" : dir) + "/." + base + ".tmp." +
                          std::to_string(getpid()) + "." + std::to_string(g_temp_counter++);
  const int slot = RegisterTemp(tmp);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    UnregisterTemp(slot);
    return IoError(path, std::string("cannot create: ") + std::strerror(err));
  }
  auto fail = [&](const char* what, int err) {
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    UnregisterTemp(slot);
    return IoError(path, std::string(what) + ": " + std::strerror(err));
  };
  const uint8_t* p = static_cast<const uint8_t*>(bytes);
  size_t done = 0;
  while (done < size) {
    ssize_t w = write(fd, p + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail("write failed", w < 0 ? errno : ENOSPC);
    done += size_t(w);
  }
  // fsync before the rename: after a crash the target is the old file or the
  // whole new one, never a renamed but empty one.
  if (fsync(fd) != 0) return fail("fsync failed", errno);
  const int closed = close(fd);
  fd = -1;
  if (closed != 0) return fail("close failed", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename into place", errno);
  UnregisterTemp(slot);
  return Status::Ok();
}

void InstallTempFileCleanup() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = RemoveTempsAndDie;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    // Keep an inherited "ignore" (nohup): the process must not start dying of it.
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace fileio
}  // namespace qfold
