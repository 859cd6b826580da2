#pragma once
// The TCPStore wire protocol: frame and field encoding shared by the server
// (runtime/comm/tcp_store_server.cpp), the client (runtime/comm/tcp_store_client.cpp) and the
// security tests that forge frames. Private to runtime/comm.
//
// Wire protocol (version 1). Every message is a frame:
//   u32 payload length (little-endian, > 0) | payload
// and every payload starts with a one-byte type. Fields are little-endian fixed-width integers
// (u8, u16, u32, i64) or strings (u32 length, then that many raw bytes: values are binary-safe).
//
//   client -> server                          server -> client
//   Hello      u32 magic "STRS", u16 version,  Ok | Rejected u8 reason, str message
//              str token   (must be first)
//   Set        str key, str value              Ok
//   Get        str key                         Value str | NotFound
//   Add        str key, i64 delta              Int i64
//   CompareSet str key, str expected, str des. Value str (the value stored afterwards)
//   Check      u32 n, n x str key              Bool u8
//   Wait       u32 n, n x str key              Ready (when every key exists; maybe much later)
//   CancelWait                                 [Ready], WaitCanceled u32 n, n x u32 index of a
//                                              key still missing
//   DeleteKey  str key                         Bool u8
//   NumKeys                                    Int i64
//   MultiGet   u32 n, n x str key              Values u32 n, n x (u8 present, [str value])
// Any request may instead get `Error str message` (bad key, oversized value, non-numeric add);
// the connection stays usable after an Error. Requests are answered in order, one at a time:
// while a Wait is pending the only valid request is CancelWait, which the client sends when its
// own timeout passes, then reads until WaitCanceled (a Ready that crossed it on the wire comes
// first and means the wait succeeded after all).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace stretch::comm::detail::tcpstore {

// "STRS" as the first four payload bytes after the Hello type byte.
inline constexpr std::uint32_t kMagic = 0x53525453u;
inline constexpr std::uint16_t kVersion = 1;
// Before the handshake, a frame longer than this is hostile: the Hello carries only a token.
inline constexpr std::size_t kMaxTokenBytes = 4096;
inline constexpr std::size_t kMaxHandshakeFrame = kMaxTokenBytes + 64;
// Fixed bytes around the variable fields of the largest request (CompareSet), for frame caps.
inline constexpr std::size_t kFrameOverhead = 64;

enum class Request : std::uint8_t {
  Hello = 0x01,
  Set = 0x02,
  Get = 0x03,
  Add = 0x04,
  CompareSet = 0x05,
  Check = 0x06,
  Wait = 0x07,
  CancelWait = 0x08,
  DeleteKey = 0x09,
  NumKeys = 0x0A,
  MultiGet = 0x0B,  // Store::tryMultiGet: never waits; a missing key is "not present"
};

enum class Reply : std::uint8_t {
  Ok = 0x80,
  Value = 0x81,
  NotFound = 0x82,
  Int = 0x83,
  Bool = 0x84,
  Ready = 0x85,
  WaitCanceled = 0x86,
  Error = 0x87,
  Rejected = 0x88,
  Values = 0x89,
};

enum class RejectReason : std::uint8_t { WrongToken = 1, BadVersion = 2, ConnectionLimit = 3 };

// Builds one frame: a 4-byte little-endian payload length, then the payload.
class FrameWriter {
 public:
  FrameWriter() { buffer_.assign(4, '\0'); }
  template <typename E>
  explicit FrameWriter(E type) : FrameWriter() {
    u8(static_cast<std::uint8_t>(type));
  }

  FrameWriter& u8(std::uint8_t v) {
    buffer_.push_back(static_cast<char>(v));
    return *this;
  }
  FrameWriter& u16(std::uint16_t v) { return le(v, 2); }
  FrameWriter& u32(std::uint32_t v) { return le(v, 4); }
  FrameWriter& i64(std::int64_t v) { return le(static_cast<std::uint64_t>(v), 8); }
  FrameWriter& str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    buffer_.append(s);
    return *this;
  }
  FrameWriter& raw(std::string_view s) {
    buffer_.append(s);
    return *this;
  }
  std::size_t payloadSize() const noexcept { return buffer_.size() - 4; }
  // The finished frame (length patched in); the writer is left empty.
  std::string take() {
    const auto n = static_cast<std::uint32_t>(payloadSize());
    for (int i = 0; i < 4; ++i)
      buffer_[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFFu);
    return std::move(buffer_);
  }

 private:
  FrameWriter& le(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i)
      buffer_.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
    return *this;
  }
  std::string buffer_;
};

inline std::uint32_t decodeU32(const char* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Reads fields from one payload. Any read past the end sets failed() and returns zero/empty
// values, so parsers check once at the end instead of after every field.
class FrameReader {
 public:
  explicit FrameReader(std::string_view payload) noexcept : data_(payload) {}

  std::uint8_t u8() noexcept { return static_cast<std::uint8_t>(le(1)); }
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(le(2)); }
  std::uint32_t u32() noexcept { return static_cast<std::uint32_t>(le(4)); }
  std::int64_t i64() noexcept { return static_cast<std::int64_t>(le(8)); }
  std::string_view str() noexcept {
    const std::uint32_t n = u32();
    if (failed_ || n > data_.size() - pos_) {
      failed_ = true;
      return {};
    }
    const std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::size_t remaining() const noexcept { return data_.size() - pos_; }
  bool failed() const noexcept { return failed_; }
  // True when every byte was consumed and nothing was read past the end.
  bool complete() const noexcept { return !failed_ && pos_ == data_.size(); }

 private:
  std::uint64_t le(std::size_t bytes) noexcept {
    if (failed_ || bytes > data_.size() - pos_) {
      failed_ = true;
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = bytes; i-- > 0;)
      v = (v << 8) | static_cast<unsigned char>(data_[pos_ + i]);
    pos_ += bytes;
    return v;
  }
  std::string_view data_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace stretch::comm::detail::tcpstore
