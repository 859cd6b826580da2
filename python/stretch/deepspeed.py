"""DeepSpeed's removed elasticity API (``deepspeed.elasticity``) as a drop-in.

DeepSpeed removed its elasticity feature in 2026; scripts that did
``from deepspeed.elasticity import compute_elastic_config`` broke. Changing that line to
``from stretch.deepspeed import compute_elastic_config`` is the whole migration: the functions
below have DeepSpeed's names, signatures, return shapes and exception classes, and read the
same environment variables (``WORLD_SIZE``, ``DEEPSPEED_ELASTICITY_CONFIG``); the messages are
Stretch's (they name the key, the value and what was expected). The answers
come from Stretch's C++ solver, which reproduces DeepSpeed's and fixes the cases where DeepSpeed
crashes or returns an unusable plan (docs/compatibility.md lists each).
"""

import json
import logging
import os

from . import _count, _stretch
from ._errors import (
    ConfigError,
    ElasticityConfigError,
    ElasticityError,
    ElasticityIncompatibleWorldSize,
)

logger = logging.getLogger("stretch.deepspeed")

ELASTICITY = "elasticity"
ENABLED = "enabled"
ENABLED_DEFAULT = False
DEEPSPEED_ELASTICITY_CONFIG = "DEEPSPEED_ELASTICITY_CONFIG"
LATEST_ELASTICITY_VERSION = 0.2
MINIMUM_DEEPSPEED_VERSION = "0.3.8"


def elasticity_enabled(ds_config: dict):
    """Whether ``ds_config`` has an elasticity section with ``"enabled": true``."""
    if ELASTICITY not in ds_config:
        return False
    return ds_config[ELASTICITY].get(ENABLED, ENABLED_DEFAULT)


def ensure_immutable_elastic_config(runtime_elastic_config_dict: dict):
    """Ensure the resource scheduler saw the same elastic config the runtime uses.

    Compares ``max_train_batch_size``, ``micro_batch_sizes`` and ``version`` of the elasticity
    section in ``DEEPSPEED_ELASTICITY_CONFIG`` with ``runtime_elastic_config_dict`` and raises
    ElasticityConfigError when they differ; logs a warning when the variable is unset.
    """
    warning = _stretch.ensure_immutable(
        json.dumps(runtime_elastic_config_dict), os.environ.get(DEEPSPEED_ELASTICITY_CONFIG)
    )
    if warning:
        logger.warning(warning)


def _world_size(world_size):
    """``world_size`` checked as the package's other arguments are (an int, not a bool; in the
    int64 range the solver takes), with DeepSpeed's exception class for a bad value: TypeError
    for another type, ElasticityConfigError naming the argument, the value and the range."""
    try:
        return _count(
            world_size, "world_size", allow_none=False, low=0,
            note=" (0 for none: elasticity version 0.2 then reads WORLD_SIZE)",
        )
    except ConfigError as e:
        raise ElasticityConfigError(str(e)) from None


def compute_elastic_config(
    ds_config: dict, target_deepspeed_version: str, world_size=0, return_microbatch=False
):
    """Core DeepSpeed elasticity API: the train batch size that stays valid across the most GPU
    counts, and those counts.

    Returns ``(final_batch_size, valid_gpus)``; with ``world_size > 0`` (checked against the
    valid sizes: ElasticityIncompatibleWorldSize) or ``return_microbatch``,
    ``(final_batch_size, valid_gpus, micro_batch_size)``. Elasticity version 0.2 needs the
    world size, from ``world_size`` or the ``WORLD_SIZE`` environment variable.

    ``world_size`` must be an int in [0, 2**63 - 1] (TypeError for another type, ``bool``
    included; ElasticityConfigError for a negative or larger one).
    """
    if not isinstance(ds_config, dict):
        raise ValueError(
            "Expected ds_config to be a dictionary but received "
            f"a {type(ds_config)}, containing: {ds_config}"
        )
    if ELASTICITY not in ds_config:
        raise ElasticityConfigError(
            f"'{ELASTICITY}' is missing from config json,"
            " please add it if running an elastic training job."
        )
    world_size = _world_size(world_size)
    plan = json.loads(
        _stretch.elastic(
            json.dumps(ds_config[ELASTICITY]),
            ELASTICITY,
            world_size,
            bool(return_microbatch),
            os.environ.get("WORLD_SIZE"),
            str(target_deepspeed_version),
            True,
        )
    )
    for message in plan["warnings"]:
        logger.warning(message)
    valid_gpus = plan["valid_gpus"]
    logger.info(f"Valid World Size (GPUs / Model Parallel Size): {valid_gpus}")
    if world_size > 0 or return_microbatch:
        return plan["final_batch_size"], valid_gpus, plan["micro_batch"]
    return plan["final_batch_size"], valid_gpus


__all__ = [
    "compute_elastic_config",
    "elasticity_enabled",
    "ensure_immutable_elastic_config",
    "ElasticityError",
    "ElasticityConfigError",
    "ElasticityIncompatibleWorldSize",
    "DEEPSPEED_ELASTICITY_CONFIG",
]
