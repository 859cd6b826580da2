"""stretch.deepspeed against DeepSpeed's own answers: the 23 cases DeepSpeed's unit tests ran
(fixtures/elasticity/deepspeed_cases.json) and the 160 vectors of DeepSpeed's compute_elastic_config
(deepspeed_vectors.json). Where Stretch deliberately differs (the C++ test's deviation list,
docs/compatibility.md) the answer must still be a usable plan or one of DeepSpeed's elasticity
errors; everywhere else it is DeepSpeed's, with DeepSpeed's exception class (the messages are
Stretch's: they name the key and the value)."""

import json
import logging
import re

import pytest

from conftest import SOURCE, fixture
from stretch.deepspeed import (
    DEEPSPEED_ELASTICITY_CONFIG,
    ElasticityConfigError,
    ElasticityError,
    ElasticityIncompatibleWorldSize,
    compute_elastic_config,
    elasticity_enabled,
    ensure_immutable_elastic_config,
)

ELASTICITY_ERRORS = {"ElasticityError", "ElasticityConfigError", "ElasticityIncompatibleWorldSize"}

DEVIATIONS = set(
    re.findall(
        r'\{"([^"]+)", Deviation::',
        SOURCE.joinpath("tests", "runtime", "elasticity", "deepspeed_deviations.inc").read_text(),
    )
)

VECTORS = json.loads(fixture("elasticity", "deepspeed_vectors.json").read_text())
CASES = json.loads(fixture("elasticity", "deepspeed_cases.json").read_text())


def all_cases():
    for case in CASES["compute_elastic_config_cases"]:
        yield case
    for case in VECTORS["cases"]:
        yield {"target_deepspeed_version": VECTORS["target_deepspeed_version"], **case}


def outcome(case, monkeypatch):
    if "env_WORLD_SIZE" in case:
        monkeypatch.setenv("WORLD_SIZE", case["env_WORLD_SIZE"])
    else:
        monkeypatch.delenv("WORLD_SIZE", raising=False)
    try:
        return compute_elastic_config(
            case["config"],
            case.get("target_deepspeed_version", "0.19.6"),
            world_size=case.get("world_size", 0),
            return_microbatch=case.get("return_microbatch", False),
        ), None
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return None, e


@pytest.mark.parametrize("case", list(all_cases()), ids=lambda c: c["name"])
def test_deepspeeds_answer_and_exception_class(case, monkeypatch):
    expected = case["expected"]
    answer, error = outcome(case, monkeypatch)
    expected_error = expected.get("error", expected.get("expected_error"))
    if case["name"] in DEVIATIONS:
        # Stretch answers with a usable plan or one of DeepSpeed's elasticity errors.
        if error is not None:
            assert type(error).__name__ in ELASTICITY_ERRORS | {"ConfigError", "ValueError"}, error
        else:
            batch, valid = answer[0], answer[1]
            assert batch > 0 and valid and all(batch % g == 0 for g in valid)
        return
    if expected_error is not None:
        assert error is not None, f"answered {answer}; DeepSpeed raised {expected_error}"
        assert type(error).__name__ == expected_error, error
        return
    assert error is None, f"{type(error).__name__}: {error}"
    shape = 3 if "micro_batch" in expected else 2
    assert len(answer) == shape
    assert answer[0] == expected["final_batch_size"]
    assert answer[1] == expected["valid_gpus"]
    if shape == 3:
        assert answer[2] == expected["micro_batch"]


def test_deepspeeds_checks_before_the_solver():
    with pytest.raises(ValueError, match="Expected ds_config to be a dictionary"):
        compute_elastic_config([], "0.19.6")
    with pytest.raises(ElasticityConfigError, match="'elasticity' is missing from config json"):
        compute_elastic_config({}, "0.19.6")
    assert issubclass(ElasticityIncompatibleWorldSize, ElasticityError)


def test_elasticity_enabled():
    assert not elasticity_enabled({})
    assert not elasticity_enabled({"elasticity": {}})
    assert elasticity_enabled({"elasticity": {"enabled": True}})


SECTION = {"enabled": True, "max_train_batch_size": 2000, "micro_batch_sizes": [2, 4, 6],
           "version": 0.1}


def test_ensure_immutable_elastic_config(monkeypatch, caplog):
    monkeypatch.delenv(DEEPSPEED_ELASTICITY_CONFIG, raising=False)
    monkeypatch.delenv("STRETCH_ELASTICITY_CONFIG", raising=False)
    with caplog.at_level(logging.WARNING, logger="stretch.deepspeed"):
        ensure_immutable_elastic_config(SECTION)
    assert DEEPSPEED_ELASTICITY_CONFIG in caplog.text
    monkeypatch.setenv(DEEPSPEED_ELASTICITY_CONFIG, json.dumps(SECTION))
    ensure_immutable_elastic_config(SECTION)
    changed = dict(SECTION, max_train_batch_size=1000)
    monkeypatch.setenv(DEEPSPEED_ELASTICITY_CONFIG, json.dumps(changed))
    with pytest.raises(ElasticityConfigError, match="max_train_batch_size = 1000: expected 2000"):
        ensure_immutable_elastic_config(SECTION)


INT64_MAX = (1 << 63) - 1


@pytest.mark.parametrize(
    "world_size, error, message",
    [
        ("4", TypeError, "world_size: expected an int, got str '4'"),
        (4.0, TypeError, "world_size: expected an int, got float 4.0"),
        (None, TypeError, "world_size: expected an int, got NoneType None"),
        (True, TypeError, "world_size: expected an int, got bool True"),
        (-4, ElasticityConfigError,
         f"world_size = -4: expected a number of GPUs in [0, {INT64_MAX}] (0 for none: elasticity "
         "version 0.2 then reads WORLD_SIZE)"),
        (1 << 70, ElasticityConfigError,
         f"world_size = {1 << 70}: expected a number of GPUs in [0, {INT64_MAX}]"),
    ],
    ids=["str", "float", "None", "bool", "negative", "beyond-int64"],
)
def test_world_size_is_checked_naming_the_argument_the_value_and_the_range(
    world_size, error, message
):
    # Before, these reached the C++ binding unchecked: pybind11's "incompatible function
    # arguments" for a str, float, None or a number beyond int64; True solved as world size 1.
    with pytest.raises(error) as raised:
        compute_elastic_config({"elasticity": SECTION}, "0.19.6", world_size=world_size)
    assert message in str(raised.value)
    assert type(raised.value) is error


def test_world_size_zero_and_the_int64_maximum_reach_the_solver(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert compute_elastic_config({"elasticity": SECTION}, "0.19.6", world_size=0)[0] == 1680
    with pytest.raises(ElasticityIncompatibleWorldSize, match=f"world_size = {INT64_MAX}:"):
        compute_elastic_config({"elasticity": SECTION}, "0.19.6", world_size=INT64_MAX)
