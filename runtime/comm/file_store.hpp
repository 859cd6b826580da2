#pragma once
// A Store kept in one file on a file system every rank can see (c10d's FileStore): for jobs
// started without a reachable master, and for tests with ranks as processes. Writers append
// records under an exclusive flock; readers replay the file. The file is created on first use;
// removing it is the caller's business (it holds no secrets but can grow with many adds).

#include <memory>
#include <string>

#include "runtime/comm/store.hpp"

namespace stretch::comm {

class FileStore final : public Store {
 public:
  // Throws StoreError naming the path when the file cannot be opened or created.
  explicit FileStore(std::string path, Duration timeout = kDefaultTimeout);
  ~FileStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::optional<Duration> timeout = std::nullopt) override;
  bool deleteKey(const std::string& key) override;
  std::int64_t numKeys() override;

  const std::string& path() const noexcept { return path_; }

 private:
  struct State;
  std::string path_;
  std::unique_ptr<State> state_;
};

}  // namespace stretch::comm
