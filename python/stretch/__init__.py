"""Stretch from Python: the elastic batch solver, the config checks, the simulator and the planner
over the same C++ as the ``stretch`` command line (docs/python.md).

    >>> import stretch
    >>> stretch.elastic({"elasticity": {"enabled": True, "max_train_batch_size": 2000,
    ...                  "micro_batch_sizes": [2, 4, 6], "min_gpus": 1, "max_gpus": 64,
    ...                  "version": 0.1}})["final_batch_size"]
    1680

Configs are given as a dict, a JSON string (DeepSpeed's comments and trailing commas allowed) or
a path. Errors raise the classes of ``stretch._errors`` (``stretch.ElasticityConfigError``, ...)
with the command line's messages. DeepSpeed's removed elasticity API is in
:mod:`stretch.deepspeed`.
"""

import json
import math
import os
import warnings as _warnings

from . import _stretch
from ._errors import *  # noqa: F401,F403  (the exception classes are part of the API)
from ._errors import __all__ as _error_names

__version__ = "0.1.0"

#: The DeepSpeed release whose elasticity semantics Stretch follows (the default target version).
COMPATIBLE_DEEPSPEED_VERSION = _stretch.compatible_deepspeed_version


#: The most replicas :func:`simulate` runs (``stretch sim --seeds``), and :func:`plan`'s.
MAX_SEEDS = _stretch.max_seeds
MAX_PLAN_SEEDS = _stretch.max_plan_seeds

_INT64_MAX = (1 << 63) - 1
_MAX_NESTING = 64  # the C++ reader's limit (runtime/config/json_reader.hpp)


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _too_large(what, size):
    limit = _stretch.max_input_bytes()
    if size > limit:
        raise ConfigError(
            f"{what}: it is at least {size} bytes, more than the limit of {limit} bytes (set "
            "STRETCH_MAX_INPUT_BYTES to give larger ones)"
        )


def _check_document(document, what):
    """Checks a dict before it is written as JSON, as a file would be checked when read: string
    keys only, finite numbers, integers in the JSON reader's range, no more than 64 levels, and
    at most STRETCH_MAX_INPUT_BYTES (64 MiB by default) of text, each problem named by its path
    ("job.checkpoint.save_seconds", "scale_events[0]")."""
    budget = _stretch.max_input_bytes()
    size = 0
    stack = [(document, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        shown = path or what
        if depth > _MAX_NESTING:
            raise ConfigError(f"{shown}: nested deeper than {_MAX_NESTING} levels")
        if isinstance(value, dict):
            size += 2
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ConfigError(
                        f"{shown}: the key {_short(key)} ({type(key).__name__}) is not a string: "
                        "expected string keys (JSON object keys are strings)"
                    )
                size += len(key) + 4
                stack.append((item, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(value, (list, tuple)):
            size += 2
            for index, item in enumerate(value):
                size += 1
                stack.append((item, f"{path}[{index}]", depth + 1))
        elif isinstance(value, str):
            size += len(value) + 2
        elif value is None or isinstance(value, bool):
            size += 5
        elif isinstance(value, int):
            if not -(1 << 63) <= value < (1 << 64):
                raise ConfigError(
                    f"{shown} = {_short(value)}: expected an integer in [-2**63, 2**64)"
                )
            size += 20
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ConfigError(
                    f"{shown} = {value}: expected a finite number (JSON has no NaN or infinity)"
                )
            size += 24
        else:
            raise ConfigError(
                f"{shown} = {_short(value)}: a {type(value).__name__} cannot be written as JSON "
                "(expected a dict, list, str, int, float, bool or None)"
            )
        if size > budget:
            _too_large(what, size)


def _dict_text(document, what):
    _check_document(document, what)
    try:
        return json.dumps(document, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        raise ConfigError(f"{what}: the dict cannot be written as JSON: {e}") from None


def _path(value, what):
    """A path given as str, bytes or os.PathLike, refused when it holds a NUL character (the
    operating system would read it as a shorter path)."""
    path = os.fsdecode(os.fspath(value))
    if "\0" in path:
        raise ConfigError(
            f"{what}: the path {_short(path)} contains a NUL character: expected a file path"
        )
    if len(path) > 4096:  # PATH_MAX: longer text that is no JSON is not a path either
        raise ConfigError(
            f"{what}: {_short(path)} is {len(path)} characters long: expected a file path (at "
            "most 4096 characters) or JSON text"
        )
    return path


def _config_text(config, what="config"):
    """(JSON text, source name) of a config given as a dict, a JSON string or a path."""
    if isinstance(config, dict):
        return _dict_text(config, what), "<dict>"
    if isinstance(config, os.PathLike) or (
        isinstance(config, str) and not config.lstrip().startswith(("{", "/*", "//"))
    ):
        path = _path(config, what)
        data = _stretch.read_file(path, what)
        return data.decode("utf-8", errors="replace"), path
    if isinstance(config, str):
        _too_large(what, len(config))
        return config, "<string>"
    raise TypeError(
        f"{what}: expected a dict, a JSON string or a path, got {type(config).__name__}"
    )


def _count(value, name, allow_none=True, low=0, high=_INT64_MAX, expected="a number of GPUs",
           note=""):
    """An int argument in [low, high]: TypeError for another type, ConfigError naming the
    argument, the value and the range otherwise."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__} {_short(value)}")
    if not low <= value <= high:
        raise ConfigError(f"{name} = {value}: expected {expected} in [{low}, {high}]{note}")
    return value


def _warn(messages):
    for message in messages:
        _warnings.warn(message, stacklevel=3)


def elastic(config, world_size=None, version=None):
    """The elastic batch plan of a DeepSpeed config, as ``stretch elastic --json`` prints it.

    Returns ``{"final_batch_size": int, "valid_gpus": [int, ...], "micro_batch": int or None}``:
    the global batch that stays valid across the most world sizes, every valid size (GPU counts
    for elasticity version 0.1; data-parallel sizes for 0.2 and "exact"), and for ``world_size``
    (total GPUs; version 0.2 reads ``WORLD_SIZE`` when it is None) the micro batch per GPU.
    ``version`` is the DeepSpeed version a scheduler targets (default
    ``COMPATIBLE_DEEPSPEED_VERSION``). Unknown keys warn (``UserWarning``).

    Raises ElasticityConfigError (a bad or disabled section), ElasticityError (no plan),
    ElasticityIncompatibleWorldSize (``world_size`` is not valid), ConfigError (malformed JSON,
    bad types), IoError (a path that cannot be read), TypeError (an argument of the wrong type).
    """
    text, source = _config_text(config)
    world = _count(world_size, "world_size")
    if version is not None and not isinstance(version, str):
        raise TypeError(f"version: expected a string such as '0.18.2', got {type(version).__name__}")
    if version is not None:
        _too_large("version", len(version))
    result = json.loads(
        _stretch.elastic(
            text,
            source,
            world or 0,
            False,
            os.environ.get("WORLD_SIZE"),
            version or COMPATIBLE_DEEPSPEED_VERSION,
            False,
        )
    )
    _warn(result.pop("warnings"))
    result.pop("version")
    return result


def config(config, world_size=None):
    """The normalised DeepSpeed config: every key Stretch knows, defaults filled in.

    With ``world_size`` (total GPUs) the three batch keys hold the batch a job of that size
    trains with, as DeepSpeed's runtime resolves them (the elastic plan's when elasticity is on):
    ``train_batch_size``, ``train_micro_batch_size_per_gpu`` and ``gradient_accumulation_steps``.
    Unknown keys and overridden batch keys warn (``UserWarning``). Raises like :func:`elastic`.
    """
    text, source = _config_text(config)
    world = _count(world_size, "world_size", allow_none=True, low=1)
    result = json.loads(_stretch.config(text, source, world))
    _warn(result.pop("warnings"))
    normalised = result["config"]
    batch = result.get("batch")
    if batch is not None:
        for key in ("train_batch_size", "train_micro_batch_size_per_gpu",
                    "gradient_accumulation_steps"):
            normalised[key] = batch[key]
    return normalised


def _document(document, what, base_dir):
    """(text, path, base_dir) of a scenario or job given as a dict, JSON text or a path: a path
    is read by the C++ itself (relative paths inside resolve from its folder), text and dicts
    resolve theirs from base_dir (default: the current directory)."""
    base = os.fspath(base_dir) if base_dir is not None else os.getcwd()
    if base_dir is not None:
        base = _path(base_dir, "base_dir")
    if isinstance(document, dict):
        return _dict_text(document, what), "", base
    if isinstance(document, os.PathLike) or (
        isinstance(document, str) and not document.lstrip().startswith("{")
    ):
        return "", _path(document, what), ""
    if isinstance(document, str):
        _too_large(what, len(document))
        return document, "", base
    raise TypeError(
        f"{what}: expected a dict, a JSON string or a path, got {type(document).__name__}"
    )


def _threads(threads):
    if threads is None:
        return 0  # the machine's cores
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads < 1 << 31:
        raise TypeError(
            f"threads: expected None or a positive int below 2**31, got {_short(threads)}"
        )
    return threads


def simulate(scenario, seeds=1, threads=None, events=False, step_level=False, progress=None,
             base_dir=None):
    """Simulate a scenario, as ``stretch sim --json`` does, and return its result as a dict.

    ``scenario`` is a dict, a JSON string or a path (docs/simulator.md). ``seeds`` replicas run
    on ``threads`` threads (default: every core). With ``events`` the result has ``"events"``:
    replica 0's agent events, the records ``stretch launch --event_log`` writes. ``progress`` is
    called with the fraction done (0 to 1) from the calling thread. The GIL is released while
    the simulation runs, and Ctrl-C stops it (KeyboardInterrupt). Relative paths inside a dict
    or JSON text (cluster presets, failure tables) resolve from ``base_dir`` (default: the
    current directory); inside a file, from its folder.
    """
    text, path, base = _document(scenario, "scenario", base_dir)
    count = _count(seeds, "seeds", allow_none=False, low=1, high=MAX_SEEDS,
                   expected="a number of replicas")
    result = _stretch.simulate(text, path, base, count, _threads(threads), bool(events),
                               bool(step_level), progress)
    return json.loads(result)


def plan(job, seeds=None, threads=None, progress=None, base_dir=None):
    """Plan an elastic job, as ``stretch plan --format json`` does: the ``stretch.plan/1``
    document as a dict (docs/planner.md).

    ``job`` is a dict, a JSON string or a path. ``seeds`` overrides the job's Monte Carlo
    replicas per scale-table row (0: analytic). ``threads``, ``progress``, ``base_dir`` and
    Ctrl-C as in :func:`simulate`.
    """
    text, path, base = _document(job, "job", base_dir)
    count = _count(seeds, "seeds", low=0, high=MAX_PLAN_SEEDS,
                   expected="a number of replicas", note=" (0: analytic estimates)")
    return json.loads(_stretch.plan(text, path, base, count, _threads(threads), progress))


class WorkerBatch:
    """The batch ``stretch launch`` chose for this worker's generation (docs/launch.md)."""

    __slots__ = ("train_batch_size", "micro_batch_size", "gradient_accumulation_steps",
                 "generation", "ds_config")

    def __init__(self, train_batch_size, micro_batch_size, gradient_accumulation_steps,
                 generation, ds_config):
        self.train_batch_size = train_batch_size
        self.micro_batch_size = micro_batch_size
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.generation = generation
        self.ds_config = ds_config

    def __repr__(self):
        return (f"WorkerBatch(train_batch_size={self.train_batch_size}, "
                f"micro_batch_size={self.micro_batch_size}, "
                f"gradient_accumulation_steps={self.gradient_accumulation_steps}, "
                f"generation={self.generation}, ds_config={self.ds_config!r})")

    def __eq__(self, other):
        return isinstance(other, WorkerBatch) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)


def worker_batch():
    """The launcher's batch contract for this worker: ``STRETCH_TRAIN_BATCH_SIZE``,
    ``STRETCH_MICRO_BATCH_SIZE``, ``STRETCH_GRADIENT_ACCUMULATION_STEPS``, ``STRETCH_GENERATION``
    and ``STRETCH_DS_CONFIG`` (None when absent), read as the Stretch engine reads them.

    Raises ConfigError outside ``stretch launch`` (the variables are not set) and when only
    some are set or one is not a number.
    """
    batch = json.loads(_stretch.worker_batch())
    if batch is None:
        raise ConfigError(
            "worker_batch: STRETCH_TRAIN_BATCH_SIZE, STRETCH_MICRO_BATCH_SIZE and "
            "STRETCH_GRADIENT_ACCUMULATION_STEPS are not set: this process was not started by "
            "`stretch launch`"
        )
    generation = os.environ.get("STRETCH_GENERATION")
    try:
        generation = int(generation) if generation is not None else None
    except ValueError:
        raise ConfigError(f"STRETCH_GENERATION = {generation}: expected a number") from None
    return WorkerBatch(batch["train_batch_size"], batch["micro_batch_size"],
                       batch["gradient_accumulation_steps"], generation,
                       os.environ.get("STRETCH_DS_CONFIG"))


__all__ = ["elastic", "config", "simulate", "plan", "worker_batch", "WorkerBatch",
           "COMPATIBLE_DEEPSPEED_VERSION", *_error_names]
