// Checkpoint file I/O (runtime/engine/checkpoint_io.hpp).
//
// Built twice (tests/runtime/engine/checkpoint.cmake):
//  - checkpoint_io_test (unit): names, SHA-256, atomic writes, latest, state-file round trips
//    with fp32/fp16/bf16/int64 tensors and nested values, the manifest, verification, and
//    corruption (rapidcheck: truncations and byte flips always give a CheckpointError; the seed
//    is printed as "Using configuration: seed=..." and replayed with RC_PARAMS="seed=N");
//  - checkpoint_torch_test (integration, STRETCH_CHECKPOINT_TEST_INTEGRATION=1): torch.load in
//    Python 1.13 (/usr/bin/python3 or $STRETCH_TORCH_PYTHON) reads what we write and we read what
//    torch.save writes, compared value by value (tensor bytes through SHA-256, floats by bit
//    pattern). Skips, saying why, when that interpreter cannot import torch.

#include "runtime/engine/checkpoint_io.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <rapidcheck.h>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <torch/types.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/common/posix_files.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/torch_python.hpp"

#ifndef STRETCH_CHECKPOINT_TEST_INTEGRATION
#define STRETCH_CHECKPOINT_TEST_INTEGRATION 0
#endif

namespace stretch::engine {
namespace {

namespace fs = std::filesystem;

// Temporary directories: the shared test support.
using stretch::test::errorOf;
using stretch::test::TempDir;

[[maybe_unused]] void writeBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// File operations go through runtime/common/posix_files, as the code under test does: a
// std::filesystem call in a process linked against PyTorch 2.11's LibTorch can crash
// (docs/gpu.md).
[[maybe_unused]] std::vector<std::string> listDir(const fs::path& dir) {
  return listDirectory(dir);
}

// A state dict with every kind of value a checkpoint holds.
StateDict sampleState() {
  torch::manual_seed(7);
  StateDict inner;
  inner["w_fp16"] = torch::randn({3, 5}).to(torch::kHalf);
  inner["w_bf16"] = torch::randn({4}).to(torch::kBFloat16);
  inner["step"] = std::int64_t{12};
  c10::impl::GenericList mixed(c10::AnyType::get());
  mixed.push_back(std::int64_t{1});
  mixed.push_back(std::string("two"));
  mixed.push_back(3.5);
  mixed.push_back(c10::IValue());
  StateDict state;
  state["fp32"] = torch::randn({2, 3, 4});
  state["int64"] = torch::arange(-5, 1000, 7, torch::kLong);
  state["scalar"] = torch::tensor(2.5);
  state["empty"] = torch::zeros({0, 3});
  state["transposed"] = torch::randn({3, 2}).t();  // non-contiguous
  state["inner"] = toIValue(inner);
  state["mixed"] = mixed;
  state["shape"] = c10::List<std::int64_t>({2, 3, 4});
  state["pair"] = c10::ivalue::Tuple::create({c10::IValue(std::int64_t{1}), c10::IValue("z")});
  state["lr"] = 1e-3;
  state["big"] = std::int64_t{1} << 62;
  state["negative"] = std::int64_t{-3};
  state["name"] = std::string("global_step12 \xc3\xa9");
  state["flag"] = true;
  state["nothing"] = c10::IValue();
  return state;
}

// A canonical description of a value, identical to describe() in the Python snippet below:
// one line per value, dict keys sorted, tensors by dtype, shape and SHA-256 of their bytes,
// floats by bit pattern, strings as hex UTF-8.
std::string dtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    case c10::ScalarType::Long:
      return "int64";
    case c10::ScalarType::Int:
      return "int32";
    case c10::ScalarType::Byte:
      return "uint8";
    case c10::ScalarType::Bool:
      return "bool";
    default:
      return c10::toString(t);
  }
}

std::string hexOf(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : s) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

void describe(const c10::IValue& v, const std::string& path, std::vector<std::string>& out) {
  if (v.isTensor()) {
    const at::Tensor t = v.toTensor().contiguous();
    std::string shape = "[";
    for (std::size_t i = 0; i < t.sizes().size(); ++i) {
      shape += (i ? ", " : "") + std::to_string(t.sizes()[i]);
    }
    shape += "]";
    const auto* data = static_cast<const char*>(t.data_ptr());
    const std::string bytes(data, t.nbytes());
    out.push_back(path + " T " + dtypeName(t.scalar_type()) + " " + shape + " " + sha256Hex(bytes));
  } else if (v.isGenericDict()) {
    const auto dict = v.toGenericDict();
    out.push_back(path + " D " + std::to_string(dict.size()));
    std::vector<std::pair<std::string, c10::IValue>> items;
    for (const auto& e : dict) {
      items.emplace_back(e.key().isString() ? e.key().toStringRef() : e.key().tagKind(), e.value());
    }
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, value] : items) {
      describe(value, path + "." + key, out);
    }
  } else if (v.isBool()) {
    out.push_back(path + " B " + std::to_string(v.toBool() ? 1 : 0));
  } else if (v.isInt()) {
    out.push_back(path + " I " + std::to_string(v.toInt()));
  } else if (v.isDouble()) {
    const double d = v.toDouble();
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    out.push_back(path + " F " + std::to_string(bits));
  } else if (v.isString()) {
    out.push_back(path + " S " + hexOf(v.toStringRef()));
  } else if (v.isNone()) {
    out.push_back(path + " N");
  } else if (v.isList()) {
    const auto list = v.toListRef();
    out.push_back(path + " L " + std::to_string(list.size()));
    for (std::size_t i = 0; i < list.size(); ++i) {
      describe(list[i], path + "[" + std::to_string(i) + "]", out);
    }
  } else if (v.isTuple()) {
    const auto& elems = v.toTupleRef().elements();
    out.push_back(path + " U " + std::to_string(elems.size()));
    for (std::size_t i = 0; i < elems.size(); ++i) {
      describe(elems[i], path + "[" + std::to_string(i) + "]", out);
    }
  } else {
    out.push_back(path + " ? " + v.tagKind());
  }
}

std::string describe(const c10::IValue& v) {
  std::vector<std::string> lines;
  describe(v, "$", lines);
  std::string out;
  for (const std::string& l : lines) {
    out += l + "\n";
  }
  return out;
}

#if !STRETCH_CHECKPOINT_TEST_INTEGRATION

// ---- names ----

TEST(CheckpointNames, FollowDeepSpeed) {
  EXPECT_EQ(modelStatesName(), "mp_rank_00_model_states.pt");
  EXPECT_EQ(modelStatesName(3), "mp_rank_03_model_states.pt");
  EXPECT_EQ(modelStatesName(12), "mp_rank_12_model_states.pt");
  EXPECT_EQ(zeroOptimStatesName(0), "zero_pp_rank_0_mp_rank_00_optim_states.pt");
  EXPECT_EQ(zeroOptimStatesName(17, 2), "zero_pp_rank_17_mp_rank_02_optim_states.pt");
  EXPECT_EQ(zeroOptimStatesName(1, 0, true), "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt");
}

TEST(CheckpointSha256, KnownVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir dir;
  const std::string big(300'000, 'x');  // several read chunks
  writeBytes(dir.path() / "f", big);
  EXPECT_EQ(sha256OfFile(dir.path() / "f"), sha256Hex(big));
  EXPECT_NE(errorOf<CheckpointError>([&] {
              sha256OfFile(dir.path() / "missing");
            }).find("cannot open checkpoint file"),
            std::string::npos);
}

// ---- durable writes ----

TEST(CheckpointWrite, AtomicWriteReplacesAndLeavesNoTemporaries) {
  TempDir dir;
  const fs::path file = dir.path() / "a" / "b" / "latest";  // parents are created
  writeTextAtomically(file, "first");
  EXPECT_EQ(stretch::test::readFileIfAny(file), "first");
  const FileRecord r = writeFileAtomically(file, "second, longer");
  EXPECT_EQ(stretch::test::readFileIfAny(file), "second, longer");
  EXPECT_EQ(r, (FileRecord{"latest", 14, sha256Hex("second, longer")}));
  EXPECT_EQ(listDir(file.parent_path()), std::vector<std::string>{"latest"});
}

TEST(CheckpointWrite, FailuresAreCheckpointErrors) {
  TempDir dir;
  writeBytes(dir.path() / "plain", "x");
  // A parent that is a file.
  EXPECT_NE(errorOf<CheckpointError>([&] {
              writeTextAtomically(dir.path() / "plain" / "f", "t");
            }).find("cannot create directory"),
            std::string::npos);
  // The target is a directory: rename fails, the temporary is removed.
  makeDirectories(dir.path() / "isdir" / "inner");
  EXPECT_NE(errorOf<CheckpointError>([&] {
              writeTextAtomically(dir.path() / "isdir", "t");
            }).find("cannot rename"),
            std::string::npos);
  EXPECT_EQ(listDir(dir.path()), (std::vector<std::string>{"isdir", "plain"}));
}

TEST(CheckpointLatest, ReadWriteAndValidation) {
  TempDir dir;
  EXPECT_EQ(readLatest(dir.path()), std::nullopt);
  writeLatest(dir.path(), "global_step100");
  EXPECT_EQ(stretch::test::readFileIfAny(dir.path() / "latest"),
            "global_step100");  // no newline, as DeepSpeed
  EXPECT_EQ(readLatest(dir.path()), "global_step100");
  writeBytes(dir.path() / "latest", "  tag7\n");  // DeepSpeed strips
  EXPECT_EQ(readLatest(dir.path()), "tag7");
  writeBytes(dir.path() / "latest", " \n");
  EXPECT_NE(errorOf<CheckpointError>([&] {
              readLatest(dir.path());
            }).find("expected the tag of a checkpoint directory"),
            std::string::npos);
  writeBytes(dir.path() / "latest", "../elsewhere");
  EXPECT_NE(errorOf<CheckpointError>([&] { readLatest(dir.path()); }), "");
  for (const std::string bad : {"", ".", "..", "a/b", "a\nb"}) {
    EXPECT_NE(errorOf<CheckpointError>([&] { writeLatest(dir.path(), bad); }), "") << bad;
  }
  EXPECT_EQ(errorOf<CheckpointError>([] { validateTag("a/b"); }),
            "checkpoint tag = 'a/b': expected a non-empty directory name without '/', NUL or "
            "line breaks, not '.' or '..'");
}

// ---- state files ----

TEST(CheckpointState, RoundTripKeepsEveryValue) {
  TempDir dir;
  const StateDict state = sampleState();
  const FileRecord r = saveStateFile(dir.path() / modelStatesName(), state);
  EXPECT_EQ(r.name, "mp_rank_00_model_states.pt");
  EXPECT_EQ(r.bytes, fileSize(dir.path() / r.name));
  EXPECT_EQ(r.sha256, sha256OfFile(dir.path() / r.name));

  const StateDict back = loadStateDict(dir.path() / r.name);
  EXPECT_EQ(describe(toIValue(back)), describe(toIValue(state)));
  ASSERT_EQ(back.size(), state.size());
  EXPECT_EQ(back.at("fp32").toTensor().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(back.at("fp32").toTensor(), state.at("fp32").toTensor()));
  const StateDict inner = toStateDict(back.at("inner"));
  EXPECT_EQ(inner.at("w_fp16").toTensor().scalar_type(), torch::kHalf);
  EXPECT_TRUE(torch::equal(inner.at("w_fp16").toTensor(),
                           toStateDict(state.at("inner")).at("w_fp16").toTensor()));
  EXPECT_EQ(inner.at("w_bf16").toTensor().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(back.at("int64").toTensor().scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(back.at("transposed").toTensor(), state.at("transposed").toTensor()));
  EXPECT_EQ(back.at("big").toInt(), std::int64_t{1} << 62);
  EXPECT_EQ(back.at("lr").toDouble(), 1e-3);
  EXPECT_EQ(back.at("name").toStringRef(), "global_step12 \xc3\xa9");
  EXPECT_TRUE(back.at("nothing").isNone());
  EXPECT_EQ(toStateDict(toIValue(back)).size(), back.size());
}

TEST(CheckpointState, SameValueSameBytes) {
  TempDir dir;
  const FileRecord a = saveStateFile(dir.path() / "a.pt", sampleState());
  const FileRecord b = saveStateFile(dir.path() / "b.pt", sampleState());
  EXPECT_EQ(a.sha256, b.sha256);
}

TEST(CheckpointState, NonDictAndBadKeysAreReported) {
  EXPECT_EQ(errorOf<CheckpointError>([] { toStateDict(c10::IValue(std::int64_t{3}), "x"); }),
            "x is of type Int, expected a dict with string keys");
  c10::impl::GenericDict intKeys(c10::IntType::get(), c10::AnyType::get());
  intKeys.insert(std::int64_t{1}, std::int64_t{2});
  EXPECT_EQ(errorOf<CheckpointError>([&] { toStateDict(intKeys, "x"); }),
            "x has a key of type Int, expected a dict with string keys");
  TempDir dir;
  saveStateFile(dir.path() / "list.pt", c10::IValue(c10::List<std::int64_t>({1, 2})));
  EXPECT_NE(errorOf<CheckpointError>([&] {
              loadStateDict(dir.path() / "list.pt");
            }).find("list.pt' is of type GenericList, expected a dict"),
            std::string::npos);
  EXPECT_EQ(errorOf<CheckpointError>([&] { loadStateFile(dir.path() / "none.pt"); }),
            "checkpoint file '" + (dir.path() / "none.pt").string() + "' is missing");
  writeBytes(dir.path() / "garbage.pt", "this is not a zip archive at all");
  EXPECT_NE(errorOf<CheckpointError>([&] {
              loadStateFile(dir.path() / "garbage.pt");
            }).find("garbage.pt' is not a readable torch.save / pickle_save archive (32 bytes)"),
            std::string::npos);
  writeBytes(dir.path() / "empty.pt", "");
  EXPECT_NE(errorOf<CheckpointError>([&] { loadStateFile(dir.path() / "empty.pt"); }), "");
}

// ---- manifest ----

CheckpointManifest sampleManifest() {
  CheckpointManifest m;
  m.tag = "global_step8";
  m.dpWorldSize = 4;
  m.zeroStage = 2;
  m.add({modelStatesName(), 123, sha256Hex("a")});
  m.add({zeroOptimStatesName(0), 45, sha256Hex("b")});
  return m;
}

TEST(CheckpointManifestTest, JsonRoundTripAndLookup) {
  CheckpointManifest m = sampleManifest();
  EXPECT_EQ(m.version, stretchVersionString());
  EXPECT_FALSE(m.version.empty());
  const std::string json = m.toJson();
  EXPECT_NE(json.find("\"dp_world_size\": 4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"zero_stage\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"stretch_version\""), std::string::npos) << json;
  EXPECT_EQ(CheckpointManifest::fromJson(json, "m"), m);
  ASSERT_NE(m.find(modelStatesName()), nullptr);
  EXPECT_EQ(m.find(modelStatesName())->bytes, 123u);
  EXPECT_EQ(m.find("nope"), nullptr);
  m.add({modelStatesName(), 7, sha256Hex("c")});  // replaces
  EXPECT_EQ(m.files.size(), 2u);
  EXPECT_EQ(m.find(modelStatesName())->bytes, 7u);

  TempDir dir;
  writeManifest(dir.path(), m);
  EXPECT_EQ(readManifest(dir.path()), m);
  EXPECT_NE(
      errorOf<CheckpointError>([&] { readManifest(dir.path() / "other"); }).find("is missing"),
      std::string::npos);
}

TEST(CheckpointManifestTest, RecordsTravelAsJson) {
  const std::vector<FileRecord> records = sampleManifest().files;
  std::string text = recordsToJson(records);
  text.append(40, ' ');  // padded to a common length for an all_gather
  EXPECT_EQ(recordsFromJson(text), records);
  EXPECT_TRUE(recordsFromJson("[]").empty());
  EXPECT_NE(
      errorOf<CheckpointError>([] { recordsFromJson("{}", "rank 3"); }).find("rank 3: <root>"),
      std::string::npos);
}

TEST(CheckpointManifestTest, MalformedManifestsNameTheKey) {
  const std::string good = sampleManifest().toJson();
  auto errorFor = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return errorOf<CheckpointError>(
        [&] { CheckpointManifest::fromJson(text, "ckpt/manifest.json"); });
  };
  EXPECT_EQ(errorFor("\"format_version\": 1", "\"format_version\": 2"),
            "ckpt/manifest.json: format_version = 2: expected 1");
  EXPECT_EQ(errorFor("\"dp_world_size\": 4", "\"dp_world_size\": 0"),
            "ckpt/manifest.json: dp_world_size = 0: expected a positive integer");
  EXPECT_EQ(errorFor("\"zero_stage\": 2", "\"zero_stage\": 5"),
            "ckpt/manifest.json: zero_stage = 5: expected an integer in [0, 3]");
  EXPECT_EQ(errorFor("\"dp_world_size\": 4,", ""),
            "ckpt/manifest.json: dp_world_size = missing: expected a positive integer");
  EXPECT_EQ(errorFor("\"mp_rank_00_model_states.pt\"", "\"../../etc/passwd\""),
            "ckpt/manifest.json: files[0].name = \"../../etc/passwd\": expected a relative file "
            "name inside the tag directory");
  EXPECT_EQ(errorFor("\"mp_rank_00_model_states.pt\"", "\"/abs\""),
            "ckpt/manifest.json: files[0].name = \"/abs\": expected a relative file name inside "
            "the tag directory");
  EXPECT_EQ(errorFor("\"bytes\": 123", "\"bytes\": -1"),
            "ckpt/manifest.json: files[0].bytes = -1: expected a non-negative integer");
  EXPECT_EQ(errorFor(sha256Hex("a"), "ABC"),
            "ckpt/manifest.json: files[0].sha256 = \"ABC\": expected 64 lower-case hex digits");
  EXPECT_EQ(
      errorFor("\"zero_pp_rank_0_mp_rank_00_optim_states.pt\"", "\"mp_rank_00_model_states.pt\""),
      "ckpt/manifest.json: files[1].name = \"mp_rank_00_model_states.pt\": expected a name "
      "listed once");
  EXPECT_NE(errorFor("{", "[").find("ckpt/manifest.json is not valid JSON"), std::string::npos);
  EXPECT_EQ(errorOf<CheckpointError>([] { CheckpointManifest::fromJson("[]", "m"); }),
            "m: <root> = []: expected an object");
}

#endif  // !STRETCH_CHECKPOINT_TEST_INTEGRATION

// ---- verification ----

struct WrittenCheckpoint {
  TempDir dir;
  CheckpointManifest manifest;
  fs::path tagDir() const { return dir.path() / "global_step3"; }
  fs::path file() const { return tagDir() / modelStatesName(); }
};

std::unique_ptr<WrittenCheckpoint> writeCheckpoint() {
  auto c = std::make_unique<WrittenCheckpoint>();
  c->manifest.tag = "global_step3";
  c->manifest.dpWorldSize = 2;
  c->manifest.zeroStage = 1;
  c->manifest.add(saveStateFile(c->file(), sampleState()));
  StateDict shard;
  shard["fp32"] = torch::ones({16});
  c->manifest.add(saveStateFile(c->tagDir() / zeroOptimStatesName(1), shard));
  writeManifest(c->tagDir(), c->manifest);
  writeLatest(c->dir.path(), "global_step3");
  return c;
}

#if !STRETCH_CHECKPOINT_TEST_INTEGRATION

TEST(CheckpointVerify, IntactCheckpointLoads) {
  const auto c = writeCheckpoint();
  EXPECT_EQ(readLatest(c->dir.path()), "global_step3");
  const CheckpointManifest m = readManifest(c->tagDir());
  EXPECT_EQ(m, c->manifest);
  verifyAll(c->tagDir(), m);
  EXPECT_EQ(describe(loadStateFile(c->file(), m)), describe(toIValue(sampleState())));
  EXPECT_TRUE(
      torch::equal(toStateDict(loadVerifiedStateFile(c->tagDir(), m, zeroOptimStatesName(1)))
                       .at("fp32")
                       .toTensor(),
                   torch::ones({16})));
  EXPECT_EQ(listDir(c->tagDir()),
            (std::vector<std::string>{"manifest.json", "mp_rank_00_model_states.pt",
                                      "zero_pp_rank_1_mp_rank_00_optim_states.pt"}));
}

TEST(CheckpointVerify, EachProblemIsNamed) {
  const auto c = writeCheckpoint();
  const std::string original = stretch::test::readFileIfAny(c->file());
  const FileRecord& record = *c->manifest.find(modelStatesName());
  const std::string file = c->file().string();
  auto both = [&](const std::string& expected) {
    EXPECT_EQ(errorOf<CheckpointError>([&] { verifyFile(c->tagDir(), record); }), expected);
    EXPECT_EQ(errorOf<CheckpointError>([&] { loadStateFile(c->file(), c->manifest); }), expected);
  };
  const std::string size = std::to_string(original.size());

  removePath(c->file());
  both(file + " = missing: expected a file of " + size + " bytes listed in manifest.json");

  writeBytes(c->file(), original.substr(0, 100));
  both(file + " = 100 bytes: expected " + size +
       " bytes as listed in manifest.json (the file is truncated)");

  writeBytes(c->file(), original + "x");
  both(file + " = " + std::to_string(original.size() + 1) + " bytes: expected " + size +
       " bytes as listed in manifest.json (the file is longer than written)");

  std::string flipped = original;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x10);
  writeBytes(c->file(), flipped);
  both(file + " = sha256 " + sha256Hex(flipped) + ": expected sha256 " + record.sha256 +
       " as listed in manifest.json (the file is corrupt)");

  writeBytes(c->file(), original);
  EXPECT_NO_THROW(verifyFile(c->tagDir(), record));
  EXPECT_EQ(
      errorOf<CheckpointError>([&] { loadVerifiedStateFile(c->tagDir(), c->manifest, "x.pt"); }),
      (c->tagDir() / "x.pt").string() + " = not listed: expected a file listed in " +
          (c->tagDir() / "manifest.json").string());
  EXPECT_NE(errorOf<CheckpointError>([&] {
              verifyFile(c->tagDir(), FileRecord{"../escape", 1, sha256Hex("")});
            }).find("expected a relative file name inside the tag directory"),
            std::string::npos);
}

TEST(CheckpointVerify, ErrorsAreIoErrors) {
  const auto c = writeCheckpoint();
  removePath(c->file());
  try {
    verifyAll(c->tagDir(), c->manifest);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_STREQ(e.kind(), "CheckpointError");
  }
}

// Truncations and byte flips anywhere in a state file: a verified load always reports a
// CheckpointError; an unverified load of the same bytes either reports a CheckpointError or
// (a flip the zip format does not notice, e.g. in tensor data) returns a value - it never
// crashes or lets another exception escape. A truncation is always noticed.
RC_GTEST_PROP(CheckpointCorruption, AlwaysACheckpointErrorNeverACrash, ()) {
  static const std::unique_ptr<WrittenCheckpoint> c = writeCheckpoint();
  static const std::string original = stretch::test::readFileIfAny(c->file());
  const fs::path scratch = c->dir.path() / "scratch";
  makeDirectories(scratch);
  std::string bytes = original;
  const bool truncate = *rc::gen::arbitrary<bool>();
  if (truncate) {
    bytes.resize(*rc::gen::inRange<std::size_t>(0, original.size()));
  } else {
    const auto flips = *rc::gen::inRange(1, 5);
    for (int i = 0; i < flips; ++i) {
      const auto at = *rc::gen::inRange<std::size_t>(0, bytes.size());
      const auto mask = *rc::gen::inRange(1, 256);
      bytes[at] = static_cast<char>(static_cast<unsigned char>(bytes[at]) ^ mask);
    }
    RC_PRE(bytes != original);
  }
  const FileRecord record = *c->manifest.find(modelStatesName());
  writeBytes(scratch / record.name, bytes);
  CheckpointManifest m = c->manifest;
  bool verifiedThrew = false;
  try {
    loadStateFile(scratch / record.name, m);
  } catch (const CheckpointError&) {
    verifiedThrew = true;
  }
  RC_ASSERT(verifiedThrew);

  bool rawThrew = false;
  try {
    loadStateFile(scratch / record.name);
  } catch (const CheckpointError&) {
    rawThrew = true;
  }
  if (truncate) {
    RC_ASSERT(rawThrew);
  }
}

#else  // STRETCH_CHECKPOINT_TEST_INTEGRATION

// ---- Python torch.load / torch.save ----

using stretch::test::CommandResult;
using stretch::test::runCommand;
using stretch::test::torchPython;
using stretch::test::torchUnavailableReason;

constexpr const char* kDescribe = R"PY(
import hashlib, struct, sys, torch

def describe(v, path, out):
    if torch.is_tensor(v):
        t = v.detach().contiguous().reshape(-1)
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b''
        out.append('%s T %s %s %s' % (path, str(v.dtype).replace('torch.', ''), list(v.shape),
                                      hashlib.sha256(raw).hexdigest()))
    elif isinstance(v, dict):
        out.append('%s D %d' % (path, len(v)))
        for k in sorted(v):
            describe(v[k], '%s.%s' % (path, k), out)
    elif isinstance(v, bool):
        out.append('%s B %d' % (path, int(v)))
    elif isinstance(v, int):
        out.append('%s I %d' % (path, v))
    elif isinstance(v, float):
        out.append('%s F %d' % (path, struct.unpack('<Q', struct.pack('<d', v))[0]))
    elif isinstance(v, str):
        out.append('%s S %s' % (path, v.encode('utf-8').hex()))
    elif v is None:
        out.append('%s N' % path)
    elif isinstance(v, (list, tuple)):
        out.append('%s %s %d' % (path, 'L' if isinstance(v, list) else 'U', len(v)))
        for i, x in enumerate(v):
            describe(x, '%s[%d]' % (path, i), out)
    else:
        out.append('%s ? %s' % (path, type(v).__name__))

def show(v):
    out = []
    describe(v, '$', out)
    sys.stdout.write(''.join(line + '\n' for line in out))
)PY";

class CheckpointTorch : public testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = torchUnavailableReason(); !why.empty()) {
      GTEST_SKIP() << why;
    }
  }
  // Runs `body` after kDescribe; returns stdout (stderr is appended on failure).
  std::string python(const std::string& body) {
    const fs::path script = dir_.path() / "snippet.py";
    std::ofstream(script) << kDescribe << body;
    const CommandResult run = runCommand(torchPython() + " " + script.string() + " 2>&1");
    EXPECT_EQ(run.exitCode, 0) << run.output;
    return run.output;
  }
  TempDir dir_;
};

TEST_F(CheckpointTorch, TorchLoadReadsWhatWeWrite) {
  const fs::path file = dir_.path() / "tag" / modelStatesName();
  const StateDict state = sampleState();
  saveStateFile(file, state);
  const std::string fromPython = python("show(torch.load('" + file.string() + "'))\n");
  EXPECT_EQ(fromPython, describe(toIValue(state)));
  // Spot checks that the description covers what matters.
  EXPECT_NE(fromPython.find("$.inner.w_bf16 T bfloat16 [4] "), std::string::npos) << fromPython;
  EXPECT_NE(fromPython.find("$.inner.w_fp16 T float16 [3, 5] "), std::string::npos);
  EXPECT_NE(fromPython.find("$.pair U 2"), std::string::npos);
  EXPECT_NE(fromPython.find("$.big I 4611686018427387904"), std::string::npos);
}

TEST_F(CheckpointTorch, WeReadWhatTorchSaveWrites) {
  const fs::path file = dir_.path() / "py.pt";
  const std::string fromPython = python(
      "torch.manual_seed(3)\n"
      "d = {'fp32': torch.randn(4, 5), 'fp16': torch.randn(7).half(),\n"
      "     'bf16': torch.randn(2, 3).bfloat16(), 'int64': torch.arange(-9, 9),\n"
      "     'scalar': torch.tensor(1.25), 'transposed': torch.randn(3, 4).t(),\n"
      "     'nested': {'step': 5, 'lr': 0.1, 'name': 'adam \\u00e9', 'flag': False,\n"
      "                'none': None, 'shape': [2, 3], 'mixed': [1, 'a', 2.5, None],\n"
      "                'pair': (1, 'z')},\n"
      "     'big': 2**62, 'neg': -4}\n"
      "torch.save(d, '" +
      file.string() +
      "')\n"
      "show(d)\n");
  const c10::IValue loaded = loadStateFile(file);
  EXPECT_EQ(describe(loaded), fromPython);
  const StateDict state = toStateDict(loaded);
  EXPECT_EQ(state.at("bf16").toTensor().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(state.at("fp16").toTensor().scalar_type(), torch::kHalf);
}

TEST_F(CheckpointTorch, ModuleStateDicts) {
  const fs::path ordered = dir_.path() / "linear_ordered.pt";
  const fs::path plain = dir_.path() / "linear_dict.pt";
  const std::string fromPython = python(
      "torch.manual_seed(0)\n"
      "sd = torch.nn.Linear(3, 2).state_dict()\n"
      "torch.save(sd, '" +
      ordered.string() +
      "')\n"
      "torch.save(dict(sd), '" +
      plain.string() +
      "')\n"
      "show(dict(sd))\n");
  // A plain dict of the state dict loads with the same values.
  const c10::IValue loaded = loadStateFile(plain);
  EXPECT_EQ(describe(loaded), fromPython);
  EXPECT_EQ(toStateDict(loaded).at("weight").toTensor().sizes(), (std::vector<std::int64_t>{2, 3}));
  // nn.Module.state_dict() itself is an OrderedDict, which LibTorch 1.13's unpickler turns into
  // None: a clear CheckpointError, no crash. If a LibTorch upgrade starts supporting it, this
  // fails and the header comment of loadStateFile must change.
  EXPECT_NE(errorOf<CheckpointError>([&] {
              loadStateFile(ordered);
            }).find("linear_ordered.pt' is not a readable torch.save / pickle_save archive"),
            std::string::npos);
}

TEST_F(CheckpointTorch, LegacyTorchSaveFormatIsACheckpointError) {
  const fs::path file = dir_.path() / "legacy.pt";
  python("torch.save({'x': torch.ones(2)}, '" + file.string() +
         "', _use_new_zipfile_serialization=False)\n");
  EXPECT_NE(errorOf<CheckpointError>([&] {
              loadStateFile(file);
            }).find("legacy.pt' is not a readable torch.save / pickle_save archive"),
            std::string::npos);
}

TEST_F(CheckpointTorch, PythonSeesTheManifestDigests) {
  const auto c = writeCheckpoint();
  const std::string out = python(
      "import json, os\n"
      "d = '" +
      c->tagDir().string() +
      "'\n"
      "m = json.load(open(os.path.join(d, 'manifest.json')))\n"
      "for f in m['files']:\n"
      "    data = open(os.path.join(d, f['name']), 'rb').read()\n"
      "    assert len(data) == f['bytes'] and hashlib.sha256(data).hexdigest() == f['sha256']\n"
      "    torch.load(os.path.join(d, f['name']))\n"
      "print(len(m['files']), m['dp_world_size'], m['zero_stage'], m['tag'])\n");
  EXPECT_EQ(out, "2 2 1 global_step3\n");
}

#endif  // STRETCH_CHECKPOINT_TEST_INTEGRATION

}  // namespace
}  // namespace stretch::engine
