"""Shared helpers of the Python package's tests (run by CTest with PYTHONPATH=<build>/python,
STRETCH_SOURCE_DIR and STRETCH_CLI set; docs/python.md)."""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE = pathlib.Path(os.environ.get("STRETCH_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
CLI = os.environ.get("STRETCH_CLI", "")


def fixture(*parts):
    return SOURCE.joinpath("fixtures", *parts)


def cli_json(*args, env=None, flag="--json"):
    """`stretch ARGS --json`'s JSON output (its answer or its {"error", "message"})."""
    if not CLI:
        pytest.skip("STRETCH_CLI is not set (run through ctest)")
    run = subprocess.run(
        [CLI, *args, *([flag] if flag else [])], capture_output=True, text=True, timeout=120,
        env=env,
    )
    out = run.stdout.strip()
    assert out.startswith("{"), f"no JSON from {args}: {run.stdout[:300]!r} {run.stderr[:300]!r}"
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return json.loads(out.splitlines()[-1])
