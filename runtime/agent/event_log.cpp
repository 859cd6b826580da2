#include "runtime/agent/event_log.hpp"

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/overloaded.hpp"

namespace stretch::agent {

namespace {

// Length of the valid UTF-8 sequence starting at text[i], 0 when it is not valid (overlong
// forms, surrogates and code points above U+10FFFF are not).
std::size_t utf8Length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0Fu;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07u;
  } else {
    return 0;
  }
  if (i + n > text.size()) {
    return 0;
  }
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0u) != 0x80u) {
      return 0;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3Fu);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
  if (overlong || surrogate || cp > 0x10FFFF) {
    return 0;
  }
  return n;
}

}  // namespace

std::string jsonString(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8Length(text, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
  return out;
}

std::string toJsonLine(const EventRecord& r) {
  std::string out =
      fmt::format("{{\"time_ns\":{},\"event\":{}", r.time.count(), jsonString(r.event));
  if (r.generation) {
    out += fmt::format(",\"generation\":{}", *r.generation);
  }
  if (r.worldSize) {
    out += fmt::format(",\"world_size\":{}", *r.worldSize);
  }
  if (r.batch) {
    out += fmt::format(
        ",\"batch\":{{\"train_batch_size\":{},\"train_micro_batch_size_per_gpu\":{},"
        "\"gradient_accumulation_steps\":{}}}",
        r.batch->trainBatchSize, r.batch->microBatchPerGpu, r.batch->gradientAccumulation);
  }
  if (r.restartCount) {
    out += fmt::format(",\"restart_count\":{}", *r.restartCount);
  }
  if (r.resumeStep) {
    out += fmt::format(",\"resume_step\":{}", *r.resumeStep);
  }
  if (r.exitCode) {
    out += fmt::format(",\"exit_code\":{}", *r.exitCode);
  }
  if (!r.nodes.empty()) {
    out += ",\"nodes\":[";
    for (std::size_t i = 0; i < r.nodes.size(); ++i) {
      if (i > 0) {
        out += ',';
      }
      out += jsonString(r.nodes[i]);
    }
    out += ']';
  }
  if (!r.reason.empty()) {
    out += ",\"reason\":";
    out += jsonString(r.reason);
  }
  out += '}';
  return out;
}

EventRecord recordOf(const Action& action, Time now, std::optional<std::int64_t> resumeStep) {
  EventRecord r;
  r.time = now;
  std::visit(Overloaded{
                 [&](const StartWorkers& a) {
                   r.event = "start_workers";
                   r.generation = a.generation;
                   r.worldSize = a.worldSize;
                   r.batch = a.batch;
                   r.restartCount = a.restartCount;
                   r.resumeStep = resumeStep;
                   for (const NodeAssignment& node : a.nodes) {
                     r.nodes.push_back(node.nodeId);
                   }
                   r.reason = a.reason;
                 },
                 [&](const StopWorkers& a) {
                   r.event = "stop_workers";
                   r.generation = a.generation;
                   r.reason = a.reason;
                 },
                 [&](const Wait& a) {
                   r.event = "wait";
                   r.reason = a.reason;
                 },
                 [&](const Finish& a) {
                   r.event = "finish";
                   r.generation = a.generation;
                 },
                 [&](const Fail& a) {
                   r.event = "fail";
                   r.exitCode = a.exitCode;
                   r.reason = a.message;
                 },
                 [&](const LogEvent& a) {
                   r.event = a.event;
                   r.reason = a.reason;
                 },
             },
             action);
  return r;
}

EventLog::EventLog(std::ostream& out) : out_(&out) {}

EventLog::EventLog(const std::filesystem::path& path)
    : file_(path, std::ios::out | std::ios::app | std::ios::binary), out_(&file_) {
  if (!file_) {
    throw IoError(
        ErrorDetail{"event log", path.string(), "a file that can be opened for appending"});
  }
}

void EventLog::write(const EventRecord& record) {
  const std::string line = toJsonLine(record) + '\n';
  const std::lock_guard lock(mutex_);
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
  out_->flush();
  if (!*out_) {
    throw IoError(ErrorDetail{"event log", record.event, "a stream that accepts writes"});
  }
}

}  // namespace stretch::agent
