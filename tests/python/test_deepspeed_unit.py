"""DeepSpeed's own elasticity unit tests, case by case, against stretch.deepspeed.

DeepSpeed's tests/unit/elasticity/test_elastic.py (read at commit c5601dbe of deepspeedai/DeepSpeed,
the last version before the feature was removed) checks compute_elastic_config on one 10k-batch
config and its variations, and checks deepspeed.initialize's handling of batch keys and of a
changed scheduler config. Each case below restates one of those tests in our own code, with
DeepSpeed's inputs and DeepSpeed's expected answers or exception classes; the initialize cases go
through stretch.config, which is where Stretch applies a config to a job. The answers that
fixtures/elasticity/deepspeed_cases.json recorded from older DeepSpeed runs are checked in
test_deepspeed.py; this file adds the cases DeepSpeed's last version changed or added (the micro
batch per data-parallel rank under model parallelism, the batch size within its maximum)."""

import copy
import json

import pytest

import stretch
from stretch.deepspeed import (
    DEEPSPEED_ELASTICITY_CONFIG,
    ElasticityConfigError,
    ElasticityError,
    ElasticityIncompatibleWorldSize,
    compute_elastic_config,
)

VERSION = "0.18.0"  # any DeepSpeed version that supports elasticity (DeepSpeed passed its own)

BASE = {
    "elasticity": {
        "enabled": True,
        "max_train_batch_size": 10000,
        "micro_batch_sizes": [8, 12, 16, 17],
        "min_gpus": 32,
        "max_gpus": 1500,
        "min_time": 20,
        "version": 0.1,
    }
}


def config(**changes):
    result = copy.deepcopy(BASE)
    result["elasticity"].update(changes)
    return result


def without(key):
    result = copy.deepcopy(BASE)
    del result["elasticity"][key]
    return result


@pytest.fixture(autouse=True)
def no_world_size(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv(DEEPSPEED_ELASTICITY_CONFIG, raising=False)


def test_the_10k_batch_and_its_23_gpu_counts():
    batch, gpus = compute_elastic_config(BASE, VERSION)
    assert batch == 9792
    assert len(gpus) == 23
    for count in gpus:
        assert batch % count == 0
        assert any((batch // count) % micro == 0 for micro in [8, 12, 16, 17])


def test_a_world_size_chooses_the_micro_batch():
    assert compute_elastic_config(BASE, VERSION, world_size=64)[2] == 17


def test_a_world_size_outside_the_valid_counts_is_incompatible():
    with pytest.raises(ElasticityIncompatibleWorldSize):
        compute_elastic_config(BASE, VERSION, world_size=128)


def test_the_micro_batch_needs_a_world_size():
    with pytest.raises(ElasticityConfigError):
        compute_elastic_config(BASE, VERSION, return_microbatch=True)


def test_the_world_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "64")
    batch, _, micro = compute_elastic_config(BASE, VERSION, return_microbatch=True)
    assert (batch, micro) == (9792, 17)
    monkeypatch.setenv("WORLD_SIZE", "128")
    with pytest.raises(ElasticityIncompatibleWorldSize):
        compute_elastic_config(BASE, VERSION, return_microbatch=True)


@pytest.mark.parametrize(
    "ds_config, target",
    [
        (BASE, "0.2"),  # a DeepSpeed older than elasticity
        (config(enabled=False), VERSION),
        (config(version="0.3"), VERSION),  # an elasticity version from the future
        (without("max_train_batch_size"), VERSION),
        (without("micro_batch_sizes"), VERSION),
        ({"elasticity": {"enabled": True}}, VERSION),
        (config(model_parallel_size=4, num_gpus_per_node=8, version=0.1), VERSION),
        (config(micro_batch_sizes=[1, 4, -1, 2, -10]), VERSION),
        (config(min_gpus=-1), VERSION),
        (config(max_gpus=-1), VERSION),
        (config(micro_batch_sizes=5), VERSION),
        (config(micro_batch_sizes=["a", None, 0.5]), VERSION),
        (config(micro_batch_sizes=[2, 0.5, 4]), VERSION),
    ],
    ids=[
        "old_deepspeed", "disabled", "future_version", "missing_max_batch",
        "missing_micro_batches", "empty_section", "model_parallel_in_v0.1",
        "negative_micro_batches", "negative_min_gpus", "negative_max_gpus",
        "micro_batches_not_a_list", "micro_batches_not_numbers", "fractional_micro_batch",
    ],
)
def test_configs_deepspeed_refused(ds_config, target):
    with pytest.raises(ElasticityError):
        compute_elastic_config(ds_config, target)


def test_model_parallel_larger_than_a_node_is_refused():
    with pytest.raises(ElasticityError):
        compute_elastic_config(
            config(model_parallel_size=16, num_gpus_per_node=8, version=0.2), VERSION, world_size=16
        )


def test_model_parallel_within_a_node_is_accepted(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "16")
    compute_elastic_config(config(model_parallel_size=4, num_gpus_per_node=8, version=0.2), VERSION)


@pytest.mark.parametrize(
    "model_parallel, micro_batches, expected_micro",
    [(1, [4, 8], 4), (2, [4, 8], 8), (4, [4, 8], 8), (2, [8], 8), (4, [8], 8)],
)
def test_the_micro_batch_divides_the_batch_per_data_parallel_rank(
    monkeypatch, model_parallel, micro_batches, expected_micro
):
    monkeypatch.setenv("WORLD_SIZE", "16")
    ds_config = config(version=0.2, model_parallel_size=model_parallel, num_gpus_per_node=8,
                       max_train_batch_size=64, micro_batch_sizes=micro_batches, min_gpus=16,
                       max_gpus=16)
    batch, _, micro = compute_elastic_config(ds_config, VERSION, return_microbatch=True)
    assert micro == expected_micro
    assert (batch // (16 // model_parallel)) % micro == 0


def test_the_largest_micro_batch_that_fits_the_batch_per_gpu():
    ds_config = config(max_train_batch_size=32, micro_batch_sizes=[1, 2, 3, 7], min_gpus=1)
    assert compute_elastic_config(ds_config, VERSION, world_size=4)[2] == 3


def test_the_batch_stays_within_its_maximum():
    ds_config = config(max_train_batch_size=100, micro_batch_sizes=[8, 10, 12], min_gpus=1)
    assert compute_elastic_config(ds_config, VERSION)[0] <= 100


# DeepSpeed's three initialize cases, through stretch.config (the config a job runs with).
INITIALIZE = {
    "train_batch_size": 2,
    "elasticity": {
        "enabled": True,
        "max_train_batch_size": 4,
        "micro_batch_sizes": [1, 2, 3, 4],
        "min_gpus": 1,
        "max_gpus": 4,
        "min_time": 20,
        "version": 0.1,
    },
}


def test_batch_keys_beside_elasticity_are_refused():
    with pytest.raises(ElasticityError, match="train_batch_size"):
        stretch.config(INITIALIZE, world_size=2)


def test_batch_keys_beside_elasticity_can_be_ignored():
    ds_config = copy.deepcopy(INITIALIZE)
    ds_config["elasticity"]["ignore_non_elastic_batch_info"] = True
    with pytest.warns(UserWarning):
        resolved = stretch.config(ds_config, world_size=2)
    assert resolved["train_batch_size"] == 4
    assert resolved["train_micro_batch_size_per_gpu"] * 2 == 4


@pytest.mark.parametrize("whole_config", [False, True], ids=["section", "whole_config"])
def test_a_config_that_differs_from_the_schedulers_is_refused(monkeypatch, whole_config):
    # Schedulers export the section; DeepSpeed's test exported the whole config. Either way the
    # error names the key that differs and the scheduler's value.
    ds_config = copy.deepcopy(INITIALIZE)
    ds_config["elasticity"]["ignore_non_elastic_batch_info"] = True
    scheduler = copy.deepcopy(ds_config)
    scheduler["elasticity"]["max_train_batch_size"] = 27
    exported = scheduler if whole_config else scheduler["elasticity"]
    monkeypatch.setenv(DEEPSPEED_ELASTICITY_CONFIG, json.dumps(exported))
    with pytest.raises(ElasticityError, match="max_train_batch_size = 27: expected 4"):
        stretch.config(ds_config, world_size=2)
