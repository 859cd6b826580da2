"""stretch.simulate, stretch.plan and stretch.worker_batch: the CLI's answers, events, progress,
Ctrl-C, and the launcher's batch contract."""

import json
import os
import signal
import threading
import time

import pytest

import stretch
from conftest import cli_json, fixture

SCENARIO = fixture("scenarios", "daly_exponential.json")
JOB = fixture("plans", "example.json")


def without_timings(value):
    """The result without what varies run to run (wall-clock times, thread counts)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items()
                if "wall" not in k and k not in ("threads", "processes")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_simulate_gives_the_clis_result():
    ours = stretch.simulate(SCENARIO, seeds=3)
    theirs = cli_json("sim", str(SCENARIO), "--seeds", "3", "--quiet")
    assert without_timings(ours) == without_timings(theirs)
    # The same scenario as a dict: its relative paths resolve from the current directory.
    as_dict = json.loads(SCENARIO.read_text())
    cwd = os.getcwd()
    os.chdir(SCENARIO.parent)
    try:
        again = stretch.simulate(as_dict, seeds=3)
    finally:
        os.chdir(cwd)
    ours.pop("scenario"), again.pop("scenario")
    assert without_timings(again) == without_timings(ours)


def test_simulate_returns_the_agent_events_and_reports_progress():
    seen = []
    result = stretch.simulate(SCENARIO, seeds=1, events=True, progress=seen.append)
    events = result["events"]
    assert events and all("event" in e and "time_ns" in e for e in events)
    assert "start_workers" in [e["event"] for e in events]
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)


@pytest.mark.parametrize(
    "long_call",
    [
        lambda: stretch.simulate(fixture("scenarios", "llama3_like.json"), seeds=100_000),
        # About 200 s of planning on 2 cores (2,000 seeds take 4.3 s).
        lambda: stretch.plan(fixture("plans", "llama3_16k.json"), seeds=100_000),
    ],
    ids=["simulate", "plan"],
)
def test_ctrl_c_stops_a_long_call(long_call):
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            long_call()
    finally:
        timer.cancel()
    assert time.monotonic() - start < 10


def test_an_exception_in_the_progress_callback_stops_the_simulation():
    def stop(fraction):
        raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        stretch.simulate(fixture("scenarios", "llama3_like.json"), seeds=100_000, progress=stop)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: stretch.simulate(SCENARIO, seeds=0), stretch.ConfigError),
        (lambda: stretch.simulate(SCENARIO, threads=0), TypeError),
        (lambda: stretch.simulate(42), TypeError),
        (lambda: stretch.simulate("/nonexistent/scenario.json"), stretch.IoError),
        (lambda: stretch.simulate({"cluster": {"nodes": -1}}), stretch.ConfigError),
        (lambda: stretch.plan(JOB, seeds=-1), stretch.ConfigError),
    ],
)
def test_bad_input_raises_a_clear_error(call, error):
    with pytest.raises(error):
        call()


def test_plan_gives_the_clis_document():
    ours = stretch.plan(JOB, seeds=0)
    theirs = cli_json("plan", str(JOB), "--seeds", "0", "--format", "json", "--quiet", flag=None)
    assert ours["schema"] == "stretch.plan/1"
    assert without_timings(ours) == without_timings(theirs)


def test_worker_batch_reads_the_launchers_contract(monkeypatch):
    for name in ("STRETCH_TRAIN_BATCH_SIZE", "STRETCH_MICRO_BATCH_SIZE",
                 "STRETCH_GRADIENT_ACCUMULATION_STEPS", "STRETCH_GENERATION", "STRETCH_DS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(stretch.ConfigError, match="not started by `stretch launch`"):
        stretch.worker_batch()
    monkeypatch.setenv("STRETCH_TRAIN_BATCH_SIZE", "96")
    with pytest.raises(stretch.ConfigError, match="STRETCH_MICRO_BATCH_SIZE"):
        stretch.worker_batch()
    monkeypatch.setenv("STRETCH_MICRO_BATCH_SIZE", "4")
    monkeypatch.setenv("STRETCH_GRADIENT_ACCUMULATION_STEPS", "3")
    monkeypatch.setenv("STRETCH_GENERATION", "2")
    monkeypatch.setenv("STRETCH_DS_CONFIG", "/job/ds.json")
    assert stretch.worker_batch() == stretch.WorkerBatch(96, 4, 3, 2, "/job/ds.json")


# Issue 42, items 7 and 8: every argument and every document bounded and checked by name, never
# a MemoryError, a vector length error, an InternalError, a silently shortened path or a
# TypeError that quotes the whole scenario.
SIMPLE_ELASTIC = {"elasticity": {"enabled": True, "max_train_batch_size": 8,
                                 "micro_batch_sizes": [1], "min_gpus": 1, "max_gpus": 8,
                                 "version": 0.1}}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: stretch.simulate(SCENARIO, seeds=10**8),
         r"^seeds = 100000000: expected a number of replicas in \[1, 1000000\]$"),
        (lambda: stretch.simulate(SCENARIO, seeds=2**62), r"^seeds = 4611686018427387904: "),
        (lambda: stretch.simulate(SCENARIO, seeds=2**64), r"^seeds = 18446744073709551616: "),
        (lambda: stretch.simulate(SCENARIO, seeds=-1),
         r"^seeds = -1: expected a number of replicas in \[1, 1000000\]$"),
        (lambda: stretch.plan(JOB, seeds=10**8),
         r"^seeds = 100000000: expected a number of replicas in \[0, 1000000\] \(0: analytic"),
        (lambda: stretch.plan(JOB, seeds=2**64), r"^seeds = 18446744073709551616: "),
        (lambda: stretch.elastic(SIMPLE_ELASTIC, world_size=2**64),
         r"^world_size = 18446744073709551616: expected a number of GPUs in \[0, "),
        (lambda: stretch.config(SIMPLE_ELASTIC, world_size=2**64), r"^world_size = 1844674"),
    ],
)
def test_counts_are_bounded_and_named(call, message):
    with pytest.raises(stretch.ConfigError, match=message) as caught:
        call()
    assert "cluster" not in str(caught.value) and "elasticity" not in str(caught.value)


def test_the_maxima_are_part_of_the_api():
    assert stretch.MAX_SEEDS == 1_000_000
    assert stretch.MAX_PLAN_SEEDS == 1_000_000


def test_a_seed_count_the_cli_module_gets_directly_is_checked_too():
    with pytest.raises(stretch.ConfigError, match=r"seeds = 100000000"):
        stretch._stretch.simulate("", str(SCENARIO), "", 10**8, 0, False, False, None)
    with pytest.raises(stretch.ConfigError, match=r"seeds = 100000000"):
        stretch._stretch.plan("", str(JOB), "", 10**8, 0, None)
    with pytest.raises(stretch.ConfigError, match=r"without NUL characters"):
        stretch._stretch.read_file(str(SCENARIO) + "\0.txt", "scenario")


def test_a_path_with_a_nul_character_is_refused_not_shortened():
    for call in (lambda: stretch.simulate(str(SCENARIO) + "\0junk"),
                 lambda: stretch.plan(str(JOB) + "\0junk"),
                 lambda: stretch.elastic(str(SCENARIO) + "\0junk"),
                 lambda: stretch.simulate(json.loads(SCENARIO.read_text()),
                                          base_dir=str(SCENARIO.parent) + "\0x")):
        with pytest.raises(stretch.ConfigError, match="contains a NUL character"):
            call()


def scenario_dict():
    return json.loads(SCENARIO.read_text())


def test_dict_values_json_cannot_hold_are_named_by_their_key():
    doc = scenario_dict()
    doc["failures"]["node_mtbf_hours"] = float("nan")
    with pytest.raises(stretch.ConfigError,
                       match=r"^failures\.node_mtbf_hours = nan: expected a finite number"):
        stretch.simulate(doc, base_dir=SCENARIO.parent)
    doc = scenario_dict()
    doc["job"]["checkpoint"]["save_seconds"] = float("inf")
    with pytest.raises(stretch.ConfigError, match=r"^job\.checkpoint\.save_seconds = inf"):
        stretch.simulate(doc, base_dir=SCENARIO.parent)
    doc = scenario_dict()
    doc["scale_events"] = [{"at_hours": 1, "kind": "join", "nodes": 10**30}]
    with pytest.raises(stretch.ConfigError, match=r"^scale_events\[0\]\.nodes = 10+: expected an"):
        stretch.simulate(doc, base_dir=SCENARIO.parent)
    doc = scenario_dict()
    doc["job"]["checkpoint"][30] = 1  # json.dumps would have written "30"
    with pytest.raises(stretch.ConfigError,
                       match=r"^job\.checkpoint: the key 30 \(int\) is not a string"):
        stretch.simulate(doc, base_dir=SCENARIO.parent)
    with pytest.raises(stretch.ConfigError, match=r"^elasticity: the key None"):
        stretch.elastic({"elasticity": {None: 1}})
    with pytest.raises(stretch.ConfigError, match=r"^job\.note = \{1, 2\}: a set cannot"):
        stretch.simulate({**scenario_dict(), "job": {"note": {1, 2}}})


def test_the_weibull_shape_is_checked_by_range_not_by_an_internal_check():
    doc = scenario_dict()
    doc["failures"] = {"model": "weibull", "node_mtbf_hours": 10, "shape": 1e-9}
    with pytest.raises(stretch.ConfigError, match=r"^failures\.shape = 1e-09: expected the "
                                                  r"Weibull shape k, a number in \[0\.1, 100\]$"):
        stretch.simulate(doc, base_dir=SCENARIO.parent)


def test_text_and_dicts_are_bounded_like_files(monkeypatch):
    monkeypatch.setenv("STRETCH_MAX_INPUT_BYTES", "4096")
    big = scenario_dict()
    big["description"] = "x" * 5000
    for call in (lambda: stretch.simulate(big, base_dir=SCENARIO.parent),
                 lambda: stretch.simulate(json.dumps(big), base_dir=SCENARIO.parent),
                 lambda: stretch.elastic({**SIMPLE_ELASTIC, "note": "y" * 5000}),
                 lambda: stretch.config(json.dumps({**SIMPLE_ELASTIC, "note": "y" * 5000}))):
        with pytest.raises(stretch.ConfigError, match=r"more than the limit of 4096 bytes \(set "
                                                      r"STRETCH_MAX_INPUT_BYTES"):
            call()
    with pytest.raises(stretch.ConfigError, match=r"^scenario = 5\d\d\d bytes: expected at most "
                                                  r"4096 bytes"):
        stretch._stretch.simulate(json.dumps(big), "", str(SCENARIO.parent), 1, 0, False, False,
                                  None)
    # Under the limit, the same documents run.
    small = scenario_dict()
    assert stretch.simulate(small, base_dir=SCENARIO.parent)["seeds"] == 1
    deep = {"elasticity": dict(SIMPLE_ELASTIC["elasticity"])}
    node = deep
    for _ in range(100):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(stretch.ConfigError, match="nested deeper than 64 levels"):
        stretch.elastic(deep)
