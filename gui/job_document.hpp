#pragma once
// The job being planned: a simulator scenario (sim/scenario.hpp) with the planner's optional
// "plan" object (planner/plan_input.hpp) and its DeepSpeed config, kept as the JSON documents the
// user opens and saves, edited one field at a time through the form.
//
// Nothing here validates by itself: every check is the config layer's (config::parseConfig) or
// the simulator's and the planner's (planner::parsePlanInput), so the form shows exactly the
// messages `stretch config`, `stretch sim` and `stretch plan` print. A field's text becomes JSON as
// literally as possible (a number when it reads as one, else a string) so that a typo reaches the
// config layer and comes back as its message ("elasticity.micro_batch_sizes[1] = "x": expected a
// positive integer"), never as a crash or a silently dropped value. An empty field removes its key
// (the default applies, or the config layer says the key is missing).
//
// No Qt: the models and the window sit on top. Thread safety: a plain value; not shared.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/plan_input.hpp"
#include "runtime/config/elasticity_config.hpp"
#include "runtime/elasticity/solver.hpp"
#include "sim/scenario.hpp"

namespace stretch::gui {

// Which document a field edits.
enum class FieldTarget { Config, Scenario };

// How a field's text becomes JSON.
enum class FieldKind {
  Integer,      // a number (or the text as a string, for the config layer to reject)
  Number,       // same; kept separate so the form can pick a validator-free editor per kind
  IntegerList,  // "2, 4, 8" or "2 4 8": a JSON array
  Choice,       // one of FieldSpec::choices; "0.1"/"0.2" are written as numbers
  Flag,         // "true" / "false"
  File,         // a path, relative to the scenario's folder
  Preset,       // cluster.preset: a preset name, or "" for the scenario's own cluster figures
};

// One input of the form. id is the field's JSON path in its document ("elasticity.min_gpus" in
// the config, "failures.node_mtbf_hours" in the scenario): errors whose path starts with it are
// shown at the field, and the form names its widget after it.
struct FieldSpec {
  std::string_view id;
  FieldTarget target;
  FieldKind kind;
  std::string_view label;
  std::string_view help;
  std::string_view defaultText;  // what applies when the key is absent ("" when nothing does)
  std::span<const std::string_view> choices;  // Choice only
};

// Every field the form shows, in order: the elasticity section, then the scenario.
std::span<const FieldSpec> fieldSpecs();
// The spec with this id; nullptr when there is none.
const FieldSpec* findField(std::string_view id);

// A bad input: the error's path (when it has one) and its complete message.
struct FieldError {
  std::string path;  // "elasticity.micro_batch_sizes[1]", "failures.shape", or ""
  std::string message;
  // The field the error belongs to: the FieldSpec whose id is the path or a prefix of it at a
  // '.' or '[' boundary, for the given target; nullptr when none (shown as a general error).
  const FieldSpec* field(FieldTarget target) const;
};

// What the elasticity section gives: the valid world sizes table, or the error to show.
struct ElasticityView {
  bool enabled = false;
  config::ElasticityVersion version = config::ElasticityVersion::V0_1;
  std::int64_t finalBatchSize = 0;
  std::int64_t modelParallelSize = 1;
  std::vector<elasticity::WorldSizeRow> rows;
  // v0.2 sizes its batch for the current world size: the cluster's GPU count (0 when unknown).
  std::int64_t currentGpus = 0;
  std::optional<FieldError> error;
  std::vector<std::string> warnings;  // the config layer's (unknown keys, ignored keys)
};

// The job as the planner reads it (the scenario with the edited config, plus the file's "plan"
// object when it has one), or the first error.
struct ScenarioCheck {
  std::optional<planner::PlanInput> input;
  std::optional<FieldError> error;
  const sim::Scenario* scenario() const { return input ? &input->scenario : nullptr; }
};

class JobDocument {
 public:
  // The bundled example job (fixtures/gui/example_job.json, compiled in).
  JobDocument();

  // Reads a scenario file; its config comes inline or from job.config_file. Throws IoError when
  // a file cannot be read, ConfigError when it is not JSON (the scenario's own values are checked
  // later, field by field, so that a bad value can be corrected in the form).
  static JobDocument fromScenarioFile(const std::filesystem::path& path);
  // A document from scenario JSON text; relative paths resolve against baseDir.
  static JobDocument fromScenarioText(std::string_view text, const std::filesystem::path& baseDir,
                                      std::string_view source = "<scenario>");
  // Replaces the config with a DeepSpeed config file (relaxed JSON: comments, trailing commas).
  // Throws IoError / ConfigError; the document is unchanged then.
  void loadConfigFile(const std::filesystem::path& path);
  // Replaces the config with config JSON text. Throws ConfigError for text that is not JSON.
  void setConfigText(std::string_view text, std::string_view source = "<config>");

  // Writes the scenario with its config inline (a self-contained job file). Throws IoError.
  void saveScenario(const std::filesystem::path& path);
  // Writes the DeepSpeed config. Throws IoError.
  void saveConfig(const std::filesystem::path& path);

  // The field's value as the form shows it ("" when its key is absent).
  std::string fieldText(const FieldSpec& field) const;
  // Sets the field from text (see the header comment). Never throws for any text.
  void setFieldText(const FieldSpec& field, std::string_view text);

  // The config layer's verdict on the config and the solver's plan. Never throws. Reentrant:
  // a copy of the document may be evaluated on another thread.
  ElasticityView evaluateElasticity() const;
  // Batch sizes the exact solver would scan for the current config (0 for other versions or an
  // invalid config): its time grows with this, ~6 ns per batch, so a wide search (the form
  // uses > 2^21) is better run off the GUI thread.
  std::int64_t exactSearchWidth() const;
  // The job the simulator and the planner would run (planner::parsePlanInput). Never throws.
  ScenarioCheck checkScenario() const;

  // The cluster presets offered by the form (names in the preset folder).
  std::vector<std::string> presetNames() const;

  std::string scenarioText() const;  // the scenario with the config inline, pretty-printed
  std::string configText() const;    // the config, pretty-printed
  const std::filesystem::path& scenarioPath() const noexcept { return scenarioPath_; }
  const std::filesystem::path& configPath() const noexcept { return configPath_; }
  const std::filesystem::path& baseDir() const noexcept { return baseDir_; }
  // Where Save writes (a document restored from the last session keeps its file).
  void setScenarioPath(const std::filesystem::path& path) { scenarioPath_ = path; }
  std::string name() const;

  // Writes text to a file (a trailing newline added). Throws IoError naming the path.
  static void writeText(const std::filesystem::path& path, const std::string& text);

 private:
  explicit JobDocument(std::nullopt_t);  // empty, for the factories
  nlohmann::json& documentOf(FieldTarget target);
  const nlohmann::json& documentOf(FieldTarget target) const;
  std::filesystem::path presetDir() const;
  nlohmann::json assembledScenario() const;

  nlohmann::json scenario_ = nlohmann::json::object();  // without job.config / job.config_file
  nlohmann::json config_ = nlohmann::json::object();
  // The scenario's cluster as it came (explicit figures), restored when "custom" is picked again.
  nlohmann::json customCluster_;
  std::filesystem::path baseDir_;
  std::filesystem::path scenarioPath_;
  std::filesystem::path configPath_;
};

// Parses relaxed JSON (comments, trailing commas) into an object: nlohmann's reader with
// comments first, the config layer's normalised form when that fails (trailing commas). Throws
// ConfigError naming source when the text is not a JSON object.
nlohmann::json parseConfigJson(std::string_view text, std::string_view source);

}  // namespace stretch::gui
