#include "runtime/config/elasticity_config.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <new>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/config/elasticity_reader.hpp"
#include "runtime/config/json_reader.hpp"

namespace stretch::config {

std::string_view toString(ElasticityVersion version) noexcept {
  switch (version) {
    case ElasticityVersion::V0_1:
      return "0.1";
    case ElasticityVersion::V0_2:
      return "0.2";
    case ElasticityVersion::Exact:
      return "exact";
  }
  return "?";
}

namespace detail {

using namespace json;

namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

constexpr std::array<std::string_view, 13> kElasticityKeys = {"enabled",
                                                              "max_train_batch_size",
                                                              "micro_batch_sizes",
                                                              "min_gpus",
                                                              "max_gpus",
                                                              "num_gpus_per_node",
                                                              "model_parallel_size",
                                                              "min_time",
                                                              "prefer_larger_batch",
                                                              "ignore_non_elastic_batch_info",
                                                              "version",
                                                              "target_batch_size",
                                                              "batch_tolerance"};

constexpr std::string_view kAcceptedVersions = "0.1, 0.2, \"0.1\", \"0.2\" or \"exact\"";

const std::string kTrainBatchLimitText =
    fmt::format("an integer in [1, {}] (2^40)", kMaxTrainBatchLimit);

// DeepSpeed compares float(version): the numbers 0.1 / 0.2 and their string forms are the same.
ElasticityVersion versionFromNumber(const ObjectReader& reader, double number,
                                    const std::string& shownNumber) {
  if (number == 0.1) {
    return ElasticityVersion::V0_1;
  }
  if (number == 0.2) {
    return ElasticityVersion::V0_2;
  }
  if (number > 0.2) {
    reader.fail("version",
                fmt::format("{} (attempting to run elasticity version {} but runtime only supports "
                            "up to 0.2)",
                            kAcceptedVersions, shownNumber));
  }
  reader.fail("version", kAcceptedVersions);
}

ElasticityVersion readVersion(const ObjectReader& reader) {
  const Json* value = reader.find("version");
  if (value == nullptr) {
    return ElasticityVersion::V0_2;  // LATEST_ELASTICITY_VERSION
  }
  if (value->is_number()) {
    return versionFromNumber(reader, value->get<double>(),
                             reader.written(*value, reader.childPath("version")));
  }
  if (value->is_string()) {
    const auto& text = value->get_ref<const std::string&>();
    if (text == "exact") {
      return ElasticityVersion::Exact;
    }
    double number = 0.0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, number);
    if (ec == std::errc() && ptr == end && std::isfinite(number)) {
      return versionFromNumber(reader, number, shorten(text));
    }
  }
  reader.fail("version", kAcceptedVersions);
}

std::vector<std::int64_t> readMicroBatches(const ObjectReader& reader) {
  const Json* value = reader.find("micro_batch_sizes");
  const std::string path = reader.childPath("micro_batch_sizes");
  constexpr std::string_view kListExpected = "a non-empty list of positive integers";
  if (!value->is_array()) {
    reader.failValue(path, *value, kListExpected);
  }
  if (value->empty()) {
    // DeepSpeed accepts [] here and then fails inside numpy's lcm; reject it up front.
    reader.failValue(path, *value, kListExpected);
  }
  if (value->size() > kMaxMicroBatchCount) {
    reader.failValue(path, *value,
                     fmt::format("a list of at most {} micro batch sizes", kMaxMicroBatchCount));
  }
  std::vector<std::int64_t> sizes;
  sizes.reserve(value->size());
  const IntRule positive{1, kInt64Max, "a positive integer"};
  for (std::size_t i = 0; i < value->size(); ++i) {
    const std::string elementPath = fmt::format("{}[{}]", path, i);
    const Json& element = (*value)[i];
    const std::int64_t size = readIntElement(reader, element, elementPath, positive);
    if (size > kMaxTrainBatchLimit) {
      reader.failValue(elementPath, element,
                       fmt::format("a positive integer of at most {} (2^40)", kMaxTrainBatchLimit));
    }
    sizes.push_back(size);
  }
  return sizes;
}

}  // namespace

ElasticityConfig readElasticity(const ObjectReader& reader) {
  ElasticityConfig config;
  config.enabled = reader.readBool("enabled").value_or(false);

  // DeepSpeed: the two keys only fall back to their defaults when elasticity is disabled.
  if (config.enabled) {
    if (!reader.has("max_train_batch_size")) {
      reader.fail("max_train_batch_size",
                  "a positive integer: it is required when elasticity is enabled (DeepSpeed: "
                  "Elasticity config missing max_train_batch_size)");
    }
    if (!reader.has("micro_batch_sizes")) {
      reader.fail("micro_batch_sizes",
                  "a non-empty list of positive integers: it is required when elasticity is "
                  "enabled (DeepSpeed: Elasticity config missing micro_batch_sizes)");
    }
  }
  if (reader.has("micro_batch_sizes")) {
    config.microBatchSizes = readMicroBatches(reader);
  }
  if (auto v = reader.readInt("max_train_batch_size",
                              IntRule{1, kMaxTrainBatchLimit, kTrainBatchLimitText})) {
    config.maxTrainBatchSize = *v;
  }

  const IntRule positive{1, kInt64Max, "a positive integer"};
  config.minGpus = reader.readInt("min_gpus", positive).value_or(config.minGpus);
  config.maxGpus = reader.readInt("max_gpus", positive).value_or(config.maxGpus);
  if (config.minGpus > config.maxGpus) {
    const std::string_view key = reader.has("min_gpus") ? "min_gpus" : "max_gpus";
    reader.fail(key, fmt::format("min_gpus <= max_gpus (given min_gpus: {}, max_gpus: {})",
                                 config.minGpus, config.maxGpus));
  }
  config.modelParallelSize =
      reader.readInt("model_parallel_size", positive).value_or(config.modelParallelSize);
  config.numGpusPerNode =
      reader.readInt("num_gpus_per_node", positive).value_or(config.numGpusPerNode);
  config.minTime = reader.readNumber("min_time", NumberRule{0.0, false, "a number >= 0 (minutes)"})
                       .value_or(config.minTime);

  config.version = readVersion(reader);
  config.preferLargerBatch = reader.readBool("prefer_larger_batch").value_or(true);
  config.ignoreNonElasticBatchInfo =
      reader.readBool("ignore_non_elastic_batch_info").value_or(false);

  const bool exact = config.version == ElasticityVersion::Exact;
  for (std::string_view key : {"target_batch_size", "batch_tolerance"}) {
    if (reader.has(key) && !exact) {
      reader.fail(key, fmt::format("no {} with version {}: it is a Stretch key that only "
                                   "version \"exact\" reads",
                                   key, toString(config.version)));
    }
  }
  config.targetBatchSize = reader.readInt(
      "target_batch_size", IntRule{1, kMaxTrainBatchLimit, kTrainBatchLimitText, false, true});
  if (auto tolerance =
          reader.readNumber("batch_tolerance", NumberRule{0.0, false, "a number in [0, 1)"})) {
    if (*tolerance >= 1.0) {
      reader.fail("batch_tolerance", "a number in [0, 1)");
    }
    config.batchTolerance = *tolerance;
  }

  static constexpr std::array<std::string_view, 0> kNoIgnoredKeys{};
  reader.reportKeys(KeySet{kElasticityKeys, kNoIgnoredKeys});
  return config;
}

}  // namespace detail

ElasticityConfig parseElasticitySection(std::string_view jsonText, std::string_view source,
                                        std::vector<std::string>& warnings) {
  try {
    const json::JsonDocument document = json::parseJsonDocument(jsonText, source, "elasticity");
    json::KeyReport report;
    // The section itself, as DeepSpeed's schedulers export it, or a whole config holding one
    // (what DeepSpeed's own test put there): read the section either way, never a half-empty
    // section with defaults that would then be "different" from the runtime's.
    const bool wholeConfig = document.root.is_object() && document.root.contains("elasticity") &&
                             document.root.at("elasticity").is_object() &&
                             !document.root.contains("max_train_batch_size");
    const json::ObjectReader reader(document,
                                    wholeConfig ? document.root.at("elasticity") : document.root,
                                    "elasticity", json::ErrorKind::Elasticity, report);
    ElasticityConfig config = detail::readElasticity(reader);
    for (std::string& warning : report.warnings()) {
      warnings.push_back(std::move(warning));
    }
    return config;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& ex) {
    throw InternalError(fmt::format("{}: unexpected error while reading the elasticity section: {}",
                                    source, ex.what()));
  }
}

ElasticityConfig parseElasticitySection(std::string_view jsonText, std::string_view source) {
  std::vector<std::string> ignored;
  return parseElasticitySection(jsonText, source, ignored);
}

}  // namespace stretch::config
