#pragma once
// The job's store token: a secret every process of one job shares (STRETCH_STORE_TOKEN), so that
// a stray process cannot join the job's store by accident. It travels in clear text over TCP;
// it keeps out only those who cannot read the job's traffic (docs/launch.md, "Security").

#include <cstddef>
#include <string>

namespace stretch::launcher {

// 32 random hex digits from std::random_device.
std::string randomToken();

// A file holding the token for agents that cannot get it on stdin (pdsh forwards no stdin):
// $HOME/.stretch/tokens/job-<random>, the directories mode 0700 and the file 0600, created
// exclusively (never through an existing file or link), removed by the destructor. The agents
// read it with --token_file, so their command line and environment never hold the token; the
// hosts must see the launcher's home directory (a shared home, as pdsh clusters usually have).
class TokenFile {
 public:
  // Throws IoError naming the path when HOME is unset or the file cannot be created privately.
  explicit TokenFile(const std::string& token);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

// Writes `text` to a new file at `path` with mode 0600 (O_CREAT | O_EXCL | O_NOFOLLOW; an
// existing file is replaced only after unlinking it). IoError naming the path on failure.
void writePrivateFile(const std::string& path, const std::string& text);

// A token a user chose (STRETCH_STORE_TOKEN, `stretch agent --token_stdin` or --token_file) must
// have at least kMinTokenLength characters other than whitespace: a short or blank one (16
// spaces) can be guessed. ConfigError naming `source` and the length (never the token) otherwise.
inline constexpr std::size_t kMinTokenLength = 16;
void checkTokenStrength(const std::string& token, const std::string& source);

// `text` with every occurrence of `token` replaced by "<token>" (for messages and logs).
std::string maskToken(std::string text, const std::string& token);

}  // namespace stretch::launcher
