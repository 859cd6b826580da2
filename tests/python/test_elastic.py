"""stretch.elastic and stretch.config: the CLI's answers on every fixture, every way of giving a
config, clear errors for bad input, and no leaks."""

import gc
import json
import os
import resource
import warnings

import pytest

import stretch
from conftest import SOURCE, cli_json, fixture

ELASTIC_CONFIGS = sorted(
    p
    for p in [
        *fixture("configs", "valid").glob("*.json"),
        *fixture("configs", "invalid").glob("*.json"),
        fixture("examples", "ds_config_elastic.json"),
        fixture("jobs", "digits", "ds_config_elastic.json"),
        fixture("jobs", "gpt", "ds_config_elastic.json"),
    ]
    if "elasticity" in p.read_text(errors="replace")
)

SIMPLE = {
    "elasticity": {
        "enabled": True,
        "max_train_batch_size": 2000,
        "micro_batch_sizes": [2, 4, 6],
        "min_gpus": 1,
        "max_gpus": 64,
        "version": 0.1,
    }
}


def python_answer(path, world_size=None):
    """stretch.elastic's answer, or the CLI's error form for its exception."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return stretch.elastic(path, world_size=world_size)
    except stretch.StretchError as e:
        return {"error": type(e).__name__, "message": str(e)}


@pytest.mark.parametrize("path", ELASTIC_CONFIGS, ids=lambda p: p.name)
def test_the_same_answer_as_the_cli_on_every_fixture(path):
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    saved = os.environ.pop("WORLD_SIZE", None)
    try:
        ours = python_answer(path)
        theirs = cli_json("elastic", "-c", str(path), env=env)
        assert ours == theirs
        for world in (ours.get("valid_gpus") or [])[:3] + [3]:
            theirs = cli_json("elastic", "-c", str(path), "-w", str(world), env=env)
            assert python_answer(path, world) == theirs, world
    finally:
        if saved is not None:
            os.environ["WORLD_SIZE"] = saved


def test_a_dict_a_json_string_a_path_and_a_pathlike_give_one_answer(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(SIMPLE))
    expected = stretch.elastic(SIMPLE)
    assert expected["final_batch_size"] > 0
    assert stretch.elastic(json.dumps(SIMPLE)) == expected
    assert stretch.elastic(str(path)) == expected
    assert stretch.elastic(path) == expected
    # DeepSpeed's JSON dialect: comments and trailing commas.
    assert stretch.elastic("// a comment\n" + json.dumps(SIMPLE)[:-1] + ",}") == expected


def test_a_world_size_gives_its_micro_batch_and_an_invalid_one_the_deepspeed_error():
    plan = stretch.elastic(SIMPLE)
    world = plan["valid_gpus"][-1]
    sized = stretch.elastic(SIMPLE, world_size=world)
    micro = sized["micro_batch"]
    assert micro in SIMPLE["elasticity"]["micro_batch_sizes"]
    assert (sized["final_batch_size"] // world) % micro == 0
    invalid = next(w for w in range(1, 65) if w not in plan["valid_gpus"])
    with pytest.raises(stretch.ElasticityIncompatibleWorldSize, match=f"world_size = {invalid}:"):
        stretch.elastic(SIMPLE, world_size=invalid)


@pytest.mark.parametrize(
    "call, error, text",
    [
        (lambda: stretch.elastic([1, 2]), TypeError, "expected a dict, a JSON string or a path"),
        (lambda: stretch.elastic(SIMPLE, world_size="4"), TypeError, "world_size"),
        (lambda: stretch.elastic(SIMPLE, world_size=True), TypeError, "world_size"),
        (lambda: stretch.elastic(SIMPLE, world_size=-2), stretch.ConfigError, "world_size = -2"),
        (lambda: stretch.elastic(SIMPLE, version=3), TypeError, "version"),
        (lambda: stretch.elastic(SIMPLE, version="0.2"), stretch.ElasticityError, "0.3.8"),
        (lambda: stretch.elastic("{"), stretch.ConfigError, ""),
        (lambda: stretch.elastic({"elasticity": {"enabled": True, "max_train_batch_size": 8,
                                                 "micro_batch_sizes": [-1]}}),
         stretch.ElasticityConfigError, "micro_batch_sizes"),
        (lambda: stretch.elastic({"elasticity": {"enabled": False}}),
         stretch.ElasticityConfigError, "disabled"),
        (lambda: stretch.elastic("/nonexistent/ds.json"), stretch.IoError, "/nonexistent/ds.json"),
        (lambda: stretch.elastic("/dev/zero"), stretch.IoError, "character device"),
        (lambda: stretch.config(SIMPLE, world_size=0), stretch.ConfigError, "world_size = 0"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_the_errors_are_also_the_builtin_kinds_python_expects():
    assert issubclass(stretch.ConfigError, ValueError)
    assert issubclass(stretch.IoError, OSError)
    assert issubclass(stretch.ElasticityConfigError, stretch.ElasticityError)
    assert issubclass(stretch.ElasticityError, stretch.StretchError)


def test_a_100_mb_string_is_a_config_error_not_a_crash():
    huge = '{"elasticity": {"enabled": true, "note": "' + "x" * (100 << 20) + '"'
    with pytest.raises(stretch.ConfigError):
        stretch.elastic(huge)


def test_unknown_keys_warn():
    config = json.loads(json.dumps(SIMPLE))
    config["elasticity"]["max_train_batch_sise"] = 10
    with pytest.warns(UserWarning, match="max_train_batch_sise"):
        stretch.elastic(config)


def test_config_fills_defaults_and_resolves_the_batch_for_a_world_size():
    path = fixture("jobs", "digits", "ds_config_elastic.json")
    normalised = stretch.config(path)
    assert "zero_optimization" in normalised
    assert normalised["elasticity"]["enabled"] is True
    plan = stretch.elastic(path)
    world = plan["valid_gpus"][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sized = stretch.config(path, world_size=world)
    assert sized["train_batch_size"] == plan["final_batch_size"]
    assert (
        sized["train_micro_batch_size_per_gpu"] * sized["gradient_accumulation_steps"] * world
        == sized["train_batch_size"]
    )


def test_ten_thousand_calls_leak_nothing():
    for _ in range(100):
        stretch.elastic(SIMPLE, world_size=4)
    gc.collect()
    objects = len(gc.get_objects())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(10_000):
        stretch.elastic(SIMPLE, world_size=4)
        try:
            stretch.elastic(SIMPLE, world_size=7)
        except stretch.ElasticityIncompatibleWorldSize:
            pass
    gc.collect()
    assert len(gc.get_objects()) - objects < 100
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 20_000  # KiB


def test_help_explains_every_function():
    for function in (stretch.elastic, stretch.config):
        assert function.__doc__ and "Raises" in stretch.elastic.__doc__
    assert SOURCE.joinpath("python", "stretch", "__init__.pyi").exists()
