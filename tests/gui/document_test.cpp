// JobDocument (gui/job_document.hpp): the form's fields over the scenario and config JSON, with
// every verdict from the config layer and the simulator.

#include <set>

#include <QDirIterator>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <nlohmann/json.hpp>

#include "gui/job_document.hpp"
#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/solver.hpp"
#include "tests/gui/gui_test_support.hpp"

namespace stretch::gui {

namespace {

const FieldSpec& spec(std::string_view id) {
  const FieldSpec* f = findField(id);
  if (f == nullptr) {
    qFatal("no field %s", std::string(id).c_str());
  }
  return *f;
}

std::filesystem::path path(const QString& p) {
  return std::filesystem::path(p.toStdString());
}

// The message the config layer gives for a config text (what `stretch config` prints).
std::string configLayerMessage(const std::string& text) {
  try {
    config::parseConfig(text, "config");
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class DocumentTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyFieldIsFindableAndUnique() {
    std::set<std::string_view> ids;
    for (const FieldSpec& f : fieldSpecs()) {
      QVERIFY2(ids.insert(f.id).second, std::string(f.id).c_str());
      QCOMPARE(findField(f.id), &f);
      QVERIFY(!f.label.empty());
      QVERIFY(f.kind != FieldKind::Choice || !f.choices.empty());
    }
    QCOMPARE(findField("no.such.field"), nullptr);
  }

  void bundledExampleSolves() {
    const JobDocument doc;
    QCOMPARE(doc.name(), std::string("example_job"));
    const ElasticityView view = doc.evaluateElasticity();
    QVERIFY2(!view.error, view.error ? view.error->message.c_str() : "");
    QVERIFY(view.enabled);
    QVERIFY(view.version == config::ElasticityVersion::V0_1);
    // The same plan the solver gives for the section written in the fixture.
    config::ElasticityConfig e;
    e.enabled = true;
    e.maxTrainBatchSize = 4096;
    e.microBatchSizes = {2, 4, 8};
    e.minGpus = 8;
    e.maxGpus = 512;
    e.version = config::ElasticityVersion::V0_1;
    const auto plan = elasticity::computeElasticConfig(e);
    QCOMPARE(view.finalBatchSize, plan.finalBatchSize);
    QCOMPARE(view.rows.size(), plan.validWorldSizes.size());
    const ScenarioCheck check = doc.checkScenario();
    QVERIFY2(check.input, check.error ? check.error->message.c_str() : "");
    QCOMPARE(check.scenario()->cluster.gpus(), std::int64_t{64});
  }

  void fieldTextRoundTrips() {
    JobDocument doc;
    QCOMPARE(doc.fieldText(spec("elasticity.micro_batch_sizes")), std::string("2, 4, 8"));
    QCOMPARE(doc.fieldText(spec("elasticity.version")), std::string("0.1"));
    QCOMPARE(doc.fieldText(spec("elasticity.enabled")), std::string("true"));
    QCOMPARE(doc.fieldText(spec("failures.node_mtbf_hours")), std::string("100"));
    QCOMPARE(doc.fieldText(spec("job.horizon_hours")), std::string());
    doc.setFieldText(spec("elasticity.micro_batch_sizes"), " 1 2,3 ,, 6 ");
    QCOMPARE(doc.fieldText(spec("elasticity.micro_batch_sizes")), std::string("1, 2, 3, 6"));
    doc.setFieldText(spec("job.checkpoint.interval_minutes"), "12.5");
    QCOMPARE(doc.fieldText(spec("job.checkpoint.interval_minutes")), std::string("12.5"));
    doc.setFieldText(spec("elasticity.version"), "exact");
    QVERIFY(doc.evaluateElasticity().version == config::ElasticityVersion::Exact);
    doc.setFieldText(spec("elasticity.version"), "0.1");
    QVERIFY(doc.evaluateElasticity().version == config::ElasticityVersion::V0_1);
    // Empty removes the key: the default applies (DeepSpeed's 0.2).
    doc.setFieldText(spec("elasticity.version"), "");
    QCOMPARE(doc.fieldText(spec("elasticity.version")), std::string());
    // A cost given per node count (docs/simulator.md) shows as its JSON and comes back as it,
    // and the scenario still checks; a number given instead replaces it.
    const std::string perNode = R"({"fixed_seconds":300,"per_node_seconds":0.01})";
    doc.setFieldText(spec("job.restart_overhead_seconds"), perNode);
    QCOMPARE(doc.fieldText(spec("job.restart_overhead_seconds")), perNode);
    doc.setFieldText(spec("job.restart_overhead_seconds"),
                     doc.fieldText(spec("job.restart_overhead_seconds")));
    QVERIFY(
        nlohmann::json::parse(doc.scenarioText())["job"]["restart_overhead_seconds"].is_object());
    const ScenarioCheck check = doc.checkScenario();
    QVERIFY2(check.input, check.error ? check.error->message.c_str() : "");
    doc.setFieldText(spec("job.restart_overhead_seconds"), "12");
    QCOMPARE(doc.fieldText(spec("job.restart_overhead_seconds")), std::string("12"));
    // Text that only looks like JSON stays text, and the scenario check names the field.
    doc.setFieldText(spec("job.restart_overhead_seconds"), "{oops");
    const ScenarioCheck broken = doc.checkScenario();
    QVERIFY(broken.error);
    QVERIFY2(broken.error->field(FieldTarget::Scenario) == &spec("job.restart_overhead_seconds"),
             broken.error->message.c_str());
  }

  void typoIsTheConfigLayersMessageAtItsField() {
    JobDocument doc;
    doc.setFieldText(spec("elasticity.micro_batch_sizes"), "2, x, 8");
    const ElasticityView view = doc.evaluateElasticity();
    QVERIFY(view.error);
    QCOMPARE(view.error->path, std::string("elasticity.micro_batch_sizes[1]"));
    QCOMPARE(view.error->field(FieldTarget::Config), &spec("elasticity.micro_batch_sizes"));
    QVERIFY(view.rows.empty());
    // Exactly what the config layer says about the same section.
    const std::string expected = configLayerMessage(
        R"({"elasticity": {"enabled": true, "max_train_batch_size": 4096,
            "micro_batch_sizes": [2, "x", 8], "min_gpus": 8, "max_gpus": 512,
            "version": 0.1, "prefer_larger_batch": true}})");
    QVERIFY(!expected.empty());
    QCOMPARE(view.error->message, expected);
  }

  void badNumbersReachTheirFields() {
    struct Case {
      const char* id;
      const char* text;
    };
    for (const Case& c :
         {Case{"elasticity.max_train_batch_size", "-4"}, Case{"elasticity.min_gpus", "0"},
          Case{"elasticity.max_gpus", "abc"}, Case{"elasticity.model_parallel_size", "1.5"}}) {
      JobDocument doc;
      doc.setFieldText(spec(c.id), c.text);
      const ElasticityView view = doc.evaluateElasticity();
      QVERIFY2(view.error, c.id);
      QVERIFY2(view.error->field(FieldTarget::Config) == &spec(c.id), view.error->message.c_str());
      QVERIFY2(view.error->message.find("expected") != std::string::npos,
               view.error->message.c_str());
    }
    for (const Case& c : {Case{"failures.node_mtbf_hours", "-5"}, Case{"cluster.nodes", "many"},
                          Case{"job.checkpoint.save_seconds", "-1"},
                          Case{"job.restart_overhead_seconds", "soon"}}) {
      JobDocument doc;
      doc.setFieldText(spec(c.id), c.text);
      const ScenarioCheck check = doc.checkScenario();
      QVERIFY2(check.error, c.id);
      QVERIFY2(!check.input, c.id);
      QVERIFY2(check.error->field(FieldTarget::Scenario) == &spec(c.id),
               check.error->message.c_str());
    }
  }

  void noTextEverThrows() {
    const char* nasty[] = {"",     " ",  "-1",  "0",    "1e400", "nan", "inf",
                           "abc",  "[",  "2,,", "\"",   "1e-9",  "1.5", "99999999999999999999",
                           "true", "{}", "0.3", "exact"};
    for (const FieldSpec& f : fieldSpecs()) {
      for (const char* text : nasty) {
        JobDocument doc;
        try {
          doc.setFieldText(f, text);
          (void)doc.evaluateElasticity();
          (void)doc.checkScenario();
          (void)doc.fieldText(f);
        } catch (const std::exception& e) {
          QFAIL(qPrintable(QStringLiteral("%1 = '%2' threw: %3")
                               .arg(QString::fromUtf8(f.id.data(), qsizetype(f.id.size())),
                                    QString::fromUtf8(text), QString::fromUtf8(e.what()))));
        }
      }
    }
  }

  void version02SizesForTheClusterGpus() {
    JobDocument doc;
    doc.setFieldText(spec("elasticity.version"), "0.2");
    doc.setFieldText(spec("elasticity.num_gpus_per_node"), "8");
    ElasticityView view = doc.evaluateElasticity();
    QVERIFY2(!view.error, view.error ? view.error->message.c_str() : "");
    QCOMPARE(view.currentGpus, std::int64_t{64});
    doc.setFieldText(spec("cluster.nodes"), "4");
    view = doc.evaluateElasticity();
    QCOMPARE(view.currentGpus, std::int64_t{32});
  }

  void presetReplacesExplicitFiguresAndComesBack() {
    JobDocument doc =
        JobDocument::fromScenarioFile(path(test::fixture("scenarios/daly_exponential.json")));
    const std::string original = doc.checkScenario().scenario()->cluster.name;
    QCOMPARE(doc.fieldText(spec("cluster.preset")), std::string());
    doc.setFieldText(spec("cluster.preset"), "dgx-h100");
    ScenarioCheck check = doc.checkScenario();
    QVERIFY2(check.input, check.error ? check.error->message.c_str() : "");
    QCOMPARE(check.scenario()->cluster.name, std::string("dgx-h100"));
    QCOMPARE(check.scenario()->cluster.nodes, std::int64_t{4});
    doc.setFieldText(spec("cluster.preset"), "");
    check = doc.checkScenario();
    QVERIFY2(check.input, check.error ? check.error->message.c_str() : "");
    QCOMPARE(check.scenario()->cluster.name, original);
    QCOMPARE(check.scenario()->cluster.intraNodeGBps, 450.0);
  }

  void unknownPresetNamesTheKey() {
    JobDocument doc;
    doc.setFieldText(spec("cluster.preset"), "no-such-cluster");
    const ScenarioCheck check = doc.checkScenario();
    QVERIFY(check.error);
    QCOMPARE(check.error->field(FieldTarget::Scenario), &spec("cluster.preset"));
    QVERIFY(!doc.presetNames().empty());
  }

  void saveAndReopen() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    JobDocument doc;
    doc.setFieldText(spec("elasticity.max_train_batch_size"), "2048");
    doc.setFieldText(spec("failures.model"), "weibull");
    doc.setFieldText(spec("failures.shape"), "0.7");
    const auto file = path(dir.filePath("job.json"));
    doc.saveScenario(file);
    QCOMPARE(doc.scenarioPath(), file);
    const JobDocument back = JobDocument::fromScenarioFile(file);
    QCOMPARE(back.scenarioText(), doc.scenarioText());
    QCOMPARE(back.fieldText(spec("failures.shape")), std::string("0.7"));
    QCOMPARE(back.evaluateElasticity().finalBatchSize, doc.evaluateElasticity().finalBatchSize);
    const ScenarioCheck check = back.checkScenario();
    QVERIFY2(check.input, check.error ? check.error->message.c_str() : "");
    QVERIFY(check.scenario()->failures.model == sim::FailureModelKind::Weibull);

    const auto configFile = path(dir.filePath("ds_config.json"));
    doc.saveConfig(configFile);
    const config::ParsedConfig parsed = config::loadConfig(configFile);
    QCOMPARE(parsed.config.elasticity.maxTrainBatchSize, std::int64_t{2048});
  }

  void relaxedConfigFileLoads() {
    // Comments and trailing commas, as the config layer accepts them.
    JobDocument doc;
    const QString file = test::fixture("examples/ds_config_elastic.json");
    doc.loadConfigFile(path(file));
    QCOMPARE(doc.configPath(), path(file));
    const ElasticityView view = doc.evaluateElasticity();
    QVERIFY2(!view.error, view.error ? view.error->message.c_str() : "");
    const config::ParsedConfig parsed = config::loadConfig(path(file));
    const auto plan = elasticity::computeElasticConfig(parsed.config.elasticity);
    QCOMPARE(view.finalBatchSize, plan.finalBatchSize);
    // Keys outside the elasticity section survive (the optimizer, as written).
    QVERIFY(doc.configText().find("AdamW") != std::string::npos);
  }

  void scenarioWithConfigFile() {
    const JobDocument doc =
        JobDocument::fromScenarioFile(path(test::fixture("scenarios/sim_to_real_digits.json")));
    QVERIFY(!doc.configPath().empty());
    const ScenarioCheck check = doc.checkScenario();
    QVERIFY2(check.input, check.error ? check.error->message.c_str() : "");
    // Saved jobs carry their config inline.
    QVERIFY(doc.scenarioText().find("\"config\"") != std::string::npos);
    QVERIFY(doc.scenarioText().find("config_file") == std::string::npos);
  }

  void planObjectIsThePlannersInput() {
    JobDocument doc;
    doc.setFieldText(spec("plan.objective"), "cost");
    doc.setFieldText(spec("plan.price_per_gpu_hour"), "2.5");
    doc.setFieldText(spec("plan.seeds"), "8");
    ScenarioCheck check = doc.checkScenario();
    QVERIFY2(check.input, check.error ? check.error->message.c_str() : "");
    QVERIFY(check.input->settings.objective == planner::Objective::Cost);
    QCOMPARE(*check.input->settings.pricePerGpuHour, 2.5);
    QCOMPARE(check.input->settings.seeds, std::int64_t{8});
    doc.setFieldText(spec("plan.objective"), "fastest");
    check = doc.checkScenario();
    QVERIFY(check.error);
    QCOMPARE(check.error->field(FieldTarget::Scenario), &spec("plan.objective"));
  }

  void qtChartsStaysInChartsCpp() {
    // gui/charts.hpp's promise: one file includes Qt Charts.
    QDirIterator it(test::sourceDir() + QStringLiteral("/gui"), {"*.cpp", "*.hpp", "*.in"},
                    QDir::Files);
    int files = 0;
    while (it.hasNext()) {
      const QString file = it.next();
      ++files;
      QFile f(file);
      QVERIFY(f.open(QIODevice::ReadOnly));
      const bool charts = f.readAll().contains("#include <QtCharts/");
      QVERIFY2(charts == file.endsWith(QStringLiteral("/charts.cpp")), qPrintable(file));
    }
    QVERIFY(files > 5);
  }

  void unreadableFilesAreIoErrors() {
    QVERIFY_THROWS_EXCEPTION(IoError, JobDocument::fromScenarioFile("/no/such/job.json"));
    JobDocument doc;
    QVERIFY_THROWS_EXCEPTION(IoError, doc.loadConfigFile("/no/such/ds_config.json"));
    QVERIFY_THROWS_EXCEPTION(ConfigError, JobDocument::fromScenarioText("[1, 2]", {}));
    QVERIFY_THROWS_EXCEPTION(ConfigError, doc.setConfigText("{\"a\": "));
    // The document is unchanged by a failed load.
    QVERIFY(doc.evaluateElasticity().enabled);
  }
};

}  // namespace stretch::gui

QTEST_GUILESS_MAIN(stretch::gui::DocumentTest)
#include "document_test.moc"
