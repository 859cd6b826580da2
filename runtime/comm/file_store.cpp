// FileStore: an append-only record log under flock.
//
// File layout: the 8-byte header "STRFS01\n", then records, each
//   u8 op (1 = set, 2 = delete) | u32 key length | [op 1: u64 value length] | key | [value]
// with little-endian integers. Writers take an exclusive flock, replay any records other
// processes appended since their last look, append one record and unlock; readers replay under a
// shared flock. Every FileStore object caches the replayed map and the offset it has read up to,
// so a call costs one lock plus the bytes appended since the previous call.
//
// A writer that died mid-append leaves a truncated last record; readers stop before it and the
// next writer cuts it off before appending. The descriptor is reopened after fork() so that a
// child never shares its parent's open file description (flock is per description).

#include "runtime/comm/file_store.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

#include <fmt/format.h>

#include "runtime/comm/detail/socket.hpp"
#include "runtime/comm/errors.hpp"

namespace stretch::comm {

namespace {

using detail::UniqueFd;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kHeader = "STRFS01\n";
constexpr std::uint8_t kOpSet = 1;
constexpr std::uint8_t kOpDelete = 2;
constexpr auto kFirstBackoff = std::chrono::milliseconds(1);
constexpr auto kMaxBackoff = std::chrono::milliseconds(50);

std::uint64_t decodeLe(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void encodeLe(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

std::string shown(std::string_view text) {
  return text.size() > 64 ? std::string(text.substr(0, 64)) + "..." : std::string(text);
}

}  // namespace

struct FileStore::State {
  std::mutex mutex;
  std::string name;  // "FileStore <path>"
  UniqueFd fd;
  pid_t owner = 0;
  std::unordered_map<std::string, std::string> values;
  std::uint64_t offset = 0;  // bytes replayed so far (header included)

  void open(const std::string& path);
  // Replays records appended since `offset`. Returns the file size seen; a truncated record at
  // the end stays unread (offset stops before it).
  std::uint64_t refresh();
  void append(std::uint8_t op, const std::string& key, const std::string* value);
  [[noreturn]] void ioError(std::string_view what, int err) const {
    throw StoreError(fmt::format("{}: {} failed: {}", name, what, detail::errnoText(err)));
  }
  // Takes the process-local mutex for one call, reopening the file first in a forked child.
  std::unique_lock<std::mutex> enter(const std::string& path) {
    std::unique_lock lock(mutex);
    if (owner != ::getpid())
      open(path);
    return lock;
  }

  // Holds an flock for one call; `mutex` must be held too (flock does not exclude threads
  // sharing one descriptor).
  class Lock {
   public:
    Lock(State& state, int operation) : state_(state) {
      while (::flock(state_.fd.get(), operation) != 0) {
        if (errno != EINTR)
          state_.ioError("flock", errno);
      }
    }
    ~Lock() { ::flock(state_.fd.get(), LOCK_UN); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    State& state_;
  };
};

void FileStore::State::open(const std::string& path) {
  fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid())
    ioError("open", errno);
  owner = ::getpid();
}

std::uint64_t FileStore::State::refresh() {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    ioError("fstat", errno);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < offset) {
    // Someone truncated the file under us: start over from what is there now.
    values.clear();
    offset = 0;
  }
  if (size == offset)
    return size;
  std::string bytes(size - offset, '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd.get(), bytes.data() + done, bytes.size() - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      ioError("read", errno);
    if (n == 0)
      break;  // shrank while we read; parse what we have
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  std::size_t pos = 0;
  if (offset == 0) {
    if (bytes.size() < kHeader.size())
      return size;  // a writer is creating it (or died doing so)
    if (std::string_view(bytes).substr(0, kHeader.size()) != kHeader) {
      throw StoreError(fmt::format("{}: not a FileStore file (header \"{}\", expected \"{}\")",
                                   name, shown(bytes.substr(0, kHeader.size())), "STRFS01\\n"));
    }
    pos = kHeader.size();
  }
  while (pos < bytes.size()) {
    const std::size_t start = pos;
    const std::size_t avail = bytes.size() - pos;
    const auto op = static_cast<std::uint8_t>(bytes[pos]);
    if (op != kOpSet && op != kOpDelete) {
      throw StoreError(fmt::format("{}: corrupt record at offset {} (op {}, expected 1 or 2)", name,
                                   offset + start, op));
    }
    const std::size_t fixed = op == kOpSet ? 13 : 5;
    if (avail < fixed)
      break;
    const std::uint64_t keyLen = decodeLe(bytes.data() + pos + 1, 4);
    const std::uint64_t valueLen = op == kOpSet ? decodeLe(bytes.data() + pos + 5, 8) : 0;
    if (keyLen > avail - fixed || valueLen > avail - fixed - keyLen)
      break;  // truncated: still being written, or its writer died
    pos += fixed;
    std::string key(bytes.data() + pos, keyLen);
    pos += keyLen;
    if (op == kOpSet) {
      values[std::move(key)].assign(bytes.data() + pos, valueLen);
      pos += valueLen;
    } else {
      values.erase(key);
    }
  }
  offset += pos;
  return size;
}

void FileStore::State::append(std::uint8_t op, const std::string& key, const std::string* value) {
  const std::uint64_t size = refresh();
  if (size > offset && offset >= kHeader.size()) {
    // A writer died mid-record (we hold the exclusive lock, so nobody is writing now).
    if (::ftruncate(fd.get(), static_cast<off_t>(offset)) != 0)
      ioError("ftruncate", errno);
  }
  std::string record;
  if (offset == 0) {
    if (::ftruncate(fd.get(), 0) != 0)
      ioError("ftruncate", errno);
    record.append(kHeader);
  }
  record.push_back(static_cast<char>(op));
  encodeLe(record, key.size(), 4);
  if (op == kOpSet)
    encodeLe(record, value->size(), 8);
  record.append(key);
  if (op == kOpSet)
    record.append(*value);
  std::size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::pwrite(fd.get(), record.data() + done, record.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      [[maybe_unused]] const int rc = ::ftruncate(fd.get(), static_cast<off_t>(offset));
      ioError("write", err);
    }
    done += static_cast<std::size_t>(n);
  }
  offset += record.size();
  if (op == kOpSet)
    values[key] = *value;
  else
    values.erase(key);
}

FileStore::FileStore(std::string path, Duration timeout)
    : Store(timeout), path_(std::move(path)), state_(std::make_unique<State>()) {
  state_->name = fmt::format("FileStore {}", path_);
  if (path_.empty())
    throw StoreError("FileStore: path = \"\": expected a file path every rank can reach");
  state_->open(path_);
  std::lock_guard lock(state_->mutex);
  State::Lock flock(*state_, LOCK_SH);
  state_->refresh();  // fail now on a file that is not ours
}

FileStore::~FileStore() = default;

void FileStore::set(const std::string& key, const std::string& value) {
  checkKey(state_->name, key);
  auto lock = state_->enter(path_);
  State::Lock flock(*state_, LOCK_EX);
  state_->append(kOpSet, key, &value);
}

std::string FileStore::get(const std::string& key) {
  checkKey(state_->name, key);
  const Duration limit = timeout();
  const auto deadline = Clock::now() + limit;
  auto backoff = std::chrono::duration_cast<Clock::duration>(kFirstBackoff);
  for (;;) {
    {
      auto lock = state_->enter(path_);
      State::Lock flock(*state_, LOCK_SH);
      state_->refresh();
      if (const auto it = state_->values.find(key); it != state_->values.end())
        return it->second;
    }
    const auto now = Clock::now();
    if (now >= deadline)
      throwTimeout(state_->name, {key}, limit);
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min<Clock::duration>(backoff * 2, kMaxBackoff);
  }
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  checkKey(state_->name, key);
  auto lock = state_->enter(path_);
  State::Lock flock(*state_, LOCK_EX);
  state_->refresh();
  std::int64_t current = 0;
  if (const auto it = state_->values.find(key); it != state_->values.end()) {
    const std::string& text = it->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw StoreError(fmt::format("{}: add on key \"{}\" whose value \"{}\" is not an integer",
                                   state_->name, key, shown(text)));
    }
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    throw StoreError(fmt::format("{}: add {} to key \"{}\" = {} overflows int64", state_->name,
                                 delta, key, current));
  }
  const std::string text = std::to_string(result);
  state_->append(kOpSet, key, &text);
  return result;
}

std::string FileStore::compareSet(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  checkKey(state_->name, key);
  auto lock = state_->enter(path_);
  State::Lock flock(*state_, LOCK_EX);
  state_->refresh();
  const auto it = state_->values.find(key);
  if (it == state_->values.end() && !expected.empty())
    return expected;
  if (it != state_->values.end() && it->second != expected)
    return it->second;
  state_->append(kOpSet, key, &desired);
  return desired;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  auto lock = state_->enter(path_);
  State::Lock flock(*state_, LOCK_SH);
  state_->refresh();
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& key) { return state_->values.contains(key); });
}

void FileStore::wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) {
  const Duration limit = timeout.value_or(this->timeout());
  const auto deadline = Clock::now() + limit;
  auto backoff = std::chrono::duration_cast<Clock::duration>(kFirstBackoff);
  for (;;) {
    std::vector<std::string> missing;
    {
      auto lock = state_->enter(path_);
      State::Lock flock(*state_, LOCK_SH);
      state_->refresh();
      for (const auto& key : keys) {
        if (!state_->values.contains(key))
          missing.push_back(key);
      }
    }
    if (missing.empty())
      return;
    const auto now = Clock::now();
    if (now >= deadline)
      throwTimeout(state_->name, missing, limit);
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min<Clock::duration>(backoff * 2, kMaxBackoff);
  }
}

bool FileStore::deleteKey(const std::string& key) {
  checkKey(state_->name, key);
  auto lock = state_->enter(path_);
  State::Lock flock(*state_, LOCK_EX);
  state_->refresh();
  if (!state_->values.contains(key))
    return false;
  state_->append(kOpDelete, key, nullptr);
  return true;
}

std::int64_t FileStore::numKeys() {
  auto lock = state_->enter(path_);
  State::Lock flock(*state_, LOCK_SH);
  state_->refresh();
  return static_cast<std::int64_t>(state_->values.size());
}

}  // namespace stretch::comm
