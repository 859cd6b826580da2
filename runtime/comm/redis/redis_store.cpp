#include "runtime/comm/redis/redis_store.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <hiredis/hiredis.h>
#include <mutex>
#include <string_view>
#include <sys/time.h>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "runtime/comm/detail/printable.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/store_registry.hpp"

namespace stretch::comm::redis {

namespace {

using Clock = std::chrono::steady_clock;
using detail::printable;

constexpr auto kFirstBackoff = std::chrono::milliseconds(1);
constexpr auto kMaxPollBackoff = std::chrono::milliseconds(50);
constexpr auto kMaxConnectBackoff = std::chrono::milliseconds(1000);

// Atomic on the server: Redis runs a script without interleaving other commands.
constexpr std::string_view kCompareSetScript = R"lua(
local current = redis.call('GET', KEYS[1])
if current == false then
  if ARGV[1] == '' then
    redis.call('SET', KEYS[1], ARGV[2])
    return ARGV[2]
  end
  return ARGV[1]
end
if current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return ARGV[2]
end
return current
)lua";

struct ReplyDeleter {
  void operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* context) const noexcept { redisFree(context); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

timeval toTimeval(Clock::duration d) {
  const auto us =
      std::max<long long>(1000, std::chrono::duration_cast<std::chrono::microseconds>(d).count());
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(us / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
  return tv;
}

// SCAN MATCH pattern for "every key starting with prefix".
std::string globPrefix(std::string_view prefix) {
  std::string out;
  for (const char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\')
      out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('*');
  return out;
}

std::vector<std::string> unique(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  std::unordered_set<std::string_view> seen;
  for (const auto& key : keys) {
    if (seen.insert(key).second)
      out.push_back(key);
  }
  return out;
}

}  // namespace

struct RedisStore::Connection {
  std::mutex mutex;
  ContextPtr context;
  std::string name;  // "RedisStore host:port"

  // Connects with backoff until `deadline`; the caller holds `mutex`.
  void connect(const RedisStoreOptions& options, Clock::time_point deadline);
  // Runs one command; reconnects first when the connection was lost. The caller holds `mutex`.
  ReplyPtr command(const RedisStoreOptions& options, Duration timeout,
                   const std::vector<std::string_view>& args, std::string_view what);
};

void RedisStore::Connection::connect(const RedisStoreOptions& options, Clock::time_point deadline) {
  context.reset();
  const auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  int attempts = 0;
  std::string lastError = "none";
  for (;;) {
    ++attempts;
    const auto remaining =
        std::max<Clock::duration>(deadline - Clock::now(), std::chrono::milliseconds(1));
    ContextPtr attempt(redisConnectWithTimeout(
        options.host.c_str(), options.port,
        toTimeval(std::min<Clock::duration>(remaining, std::chrono::seconds(5)))));
    if (attempt == nullptr) {
      lastError = "out of memory";
    } else if (attempt->err != 0) {
      lastError = attempt->errstr;
    } else {
      redisSetTimeout(attempt.get(), toTimeval(options.timeout));
      if (!options.password.empty()) {
        const char* argv[] = {"AUTH", options.password.c_str()};
        const size_t lens[] = {4, options.password.size()};
        ReplyPtr reply(static_cast<redisReply*>(redisCommandArgv(attempt.get(), 2, argv, lens)));
        if (reply == nullptr) {
          lastError = attempt->errstr;
        } else if (reply->type == REDIS_REPLY_ERROR) {
          throw StoreError(
              fmt::format("{}: AUTH rejected: {}", name, std::string_view(reply->str, reply->len)));
        } else {
          context = std::move(attempt);
          return;
        }
      } else {
        context = std::move(attempt);
        return;
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      throw StoreError(fmt::format(
          "{}: could not connect within {} ({} attempt{}, last error: {}); check the Redis host "
          "and port and that redis-server is running",
          name, formatDuration(std::chrono::duration_cast<Duration>(now - start)), attempts,
          attempts == 1 ? "" : "s", lastError));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxConnectBackoff);
  }
}

ReplyPtr RedisStore::Connection::command(const RedisStoreOptions& options, Duration timeout,
                                         const std::vector<std::string_view>& args,
                                         std::string_view what) {
  if (context == nullptr || context->err != 0)
    connect(options, Clock::now() + timeout);
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lens.push_back(arg.size());
  }
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(context.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
  if (reply == nullptr) {
    const std::string error = context->errstr;
    context.reset();  // reconnect on the next call
    throw StoreError(fmt::format("{}: {} failed: {}", name, what, error));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    throw StoreError(fmt::format("{}: {}: Redis replied: {}", name, what,
                                 std::string_view(reply->str, reply->len)));
  }
  return reply;
}

RedisStore::RedisStore(const RedisStoreOptions& options)
    : Store(options.timeout), options_(options), connection_(std::make_unique<Connection>()) {
  connection_->name = options_.host.find(':') != std::string::npos
                          ? fmt::format("RedisStore [{}]:{}", options_.host, options_.port)
                          : fmt::format("RedisStore {}:{}", options_.host, options_.port);
  if (options_.port < 1 || options_.port > 65535) {
    throw StoreError(
        fmt::format("{}: port = {}: expected 1 to 65535", connection_->name, options_.port));
  }
  std::lock_guard lock(connection_->mutex);
  connection_->connect(options_, Clock::now() + options_.timeout);
}

RedisStore::~RedisStore() = default;

void RedisStore::set(const std::string& key, const std::string& value) {
  checkKey(connection_->name, key);
  const std::string full = options_.keyPrefix + key;
  std::lock_guard lock(connection_->mutex);
  connection_->command(options_, timeout(), {"SET", full, value},
                       fmt::format("SET \"{}\"", printable(full)));
}

std::string RedisStore::get(const std::string& key) {
  checkKey(connection_->name, key);
  const std::string full = options_.keyPrefix + key;
  const Duration limit = timeout();
  const auto deadline = Clock::now() + limit;
  auto backoff = std::chrono::duration_cast<Clock::duration>(kFirstBackoff);
  for (;;) {
    {
      std::lock_guard lock(connection_->mutex);
      ReplyPtr reply = connection_->command(options_, limit, {"GET", full},
                                            fmt::format("GET \"{}\"", printable(full)));
      if (reply->type == REDIS_REPLY_STRING)
        return std::string(reply->str, reply->len);
    }
    const auto now = Clock::now();
    if (now >= deadline)
      throwTimeout(connection_->name, {full}, limit);
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min<Clock::duration>(backoff * 2, kMaxPollBackoff);
  }
}

std::int64_t RedisStore::add(const std::string& key, std::int64_t delta) {
  checkKey(connection_->name, key);
  const std::string full = options_.keyPrefix + key;
  const std::string amount = std::to_string(delta);
  std::lock_guard lock(connection_->mutex);
  ReplyPtr reply = connection_->command(options_, timeout(), {"INCRBY", full, amount},
                                        fmt::format("INCRBY \"{}\" {}", printable(full), delta));
  if (reply->type != REDIS_REPLY_INTEGER) {
    throw StoreError(fmt::format("{}: INCRBY \"{}\": unexpected reply type {}", connection_->name,
                                 printable(full), reply->type));
  }
  return static_cast<std::int64_t>(reply->integer);
}

std::string RedisStore::compareSet(const std::string& key, const std::string& expected,
                                   const std::string& desired) {
  checkKey(connection_->name, key);
  const std::string full = options_.keyPrefix + key;
  std::lock_guard lock(connection_->mutex);
  ReplyPtr reply = connection_->command(options_, timeout(),
                                        {"EVAL", kCompareSetScript, "1", full, expected, desired},
                                        fmt::format("compareSet \"{}\"", printable(full)));
  if (reply->type != REDIS_REPLY_STRING) {
    throw StoreError(fmt::format("{}: compareSet \"{}\": unexpected reply type {}",
                                 connection_->name, printable(full), reply->type));
  }
  return std::string(reply->str, reply->len);
}

bool RedisStore::check(const std::vector<std::string>& keys) {
  if (keys.empty())
    return true;
  std::vector<std::string> fulls;
  for (const auto& key : unique(keys)) {
    checkKey(connection_->name, key);
    fulls.push_back(options_.keyPrefix + key);
  }
  std::vector<std::string_view> args{"EXISTS"};
  args.insert(args.end(), fulls.begin(), fulls.end());
  std::lock_guard lock(connection_->mutex);
  ReplyPtr reply = connection_->command(options_, timeout(), args, "EXISTS");
  return reply->type == REDIS_REPLY_INTEGER &&
         reply->integer == static_cast<long long>(fulls.size());
}

void RedisStore::wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) {
  const Duration limit = timeout.value_or(this->timeout());
  const auto deadline = Clock::now() + limit;
  auto backoff = std::chrono::duration_cast<Clock::duration>(kFirstBackoff);
  for (;;) {
    if (check(keys))
      return;
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<std::string> missing;
      for (const auto& key : keys) {
        if (!check({key}))
          missing.push_back(options_.keyPrefix + key);
      }
      throwTimeout(connection_->name, missing, limit);
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min<Clock::duration>(backoff * 2, kMaxPollBackoff);
  }
}

bool RedisStore::deleteKey(const std::string& key) {
  checkKey(connection_->name, key);
  const std::string full = options_.keyPrefix + key;
  std::lock_guard lock(connection_->mutex);
  ReplyPtr reply = connection_->command(options_, timeout(), {"DEL", full},
                                        fmt::format("DEL \"{}\"", printable(full)));
  return reply->type == REDIS_REPLY_INTEGER && reply->integer > 0;
}

std::int64_t RedisStore::numKeys() {
  std::lock_guard lock(connection_->mutex);
  if (options_.keyPrefix.empty()) {
    ReplyPtr reply = connection_->command(options_, timeout(), {"DBSIZE"}, "DBSIZE");
    return reply->type == REDIS_REPLY_INTEGER ? static_cast<std::int64_t>(reply->integer) : 0;
  }
  // SCAN may return a key more than once; count distinct names.
  const std::string pattern = globPrefix(options_.keyPrefix);
  std::unordered_set<std::string> seen;
  std::string cursor = "0";
  do {
    ReplyPtr reply = connection_->command(
        options_, timeout(), {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, "SCAN");
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_ARRAY) {
      throw StoreError(fmt::format("{}: SCAN: unexpected reply shape", connection_->name));
    }
    cursor.assign(reply->element[0]->str, reply->element[0]->len);
    const redisReply* names = reply->element[1];
    for (std::size_t i = 0; i < names->elements; ++i)
      seen.emplace(names->element[i]->str, names->element[i]->len);
  } while (cursor != "0");
  return static_cast<std::int64_t>(seen.size());
}

void registerRedisStore() {
  registerStoreScheme("redis", [](const StoreInit& init) -> std::shared_ptr<Store> {
    RedisStoreOptions options;
    options.host = init.host;
    options.port = init.port;
    if (const char* password = std::getenv("STRETCH_REDIS_PASSWORD"))
      options.password = password;
    options.keyPrefix = init.path.empty() ? std::string("stretch/") : init.path;
    if (options.keyPrefix.back() != '/')
      options.keyPrefix += '/';
    options.timeout = init.timeout;
    return std::make_shared<RedisStore>(options);
  });
}

std::string hiredisVersion() {
  return fmt::format("{}.{}.{}", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
}

}  // namespace stretch::comm::redis
