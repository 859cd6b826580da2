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
