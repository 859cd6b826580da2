#pragma once
// The job's store token: a secret every process of one job shares (STRETCH_STORE_TOKEN), so that
// a stray process cannot join the job's store by accident. It travels in clear text over TCP;
// it keeps out only those who cannot read the job's traffic (docs/launch.md, "Security").

#include <string>

namespace stretch::launcher {

// 32 random hex digits from std::random_device.
std::string randomToken();

// `text` with every occurrence of `token` replaced by "<token>" (for messages and logs).
std::string maskToken(std::string text, const std::string& token);

}  // namespace stretch::launcher
