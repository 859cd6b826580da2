"""Helpers shared by check_fixture.py, make_vectors.py and bench/compare_deepspeed.py.

* restore the DeepSpeed elasticity peer into a directory (restore.py) and import it,
* run one case (ds_config, world_size, env WORLD_SIZE, return_microbatch) with a deterministic environment,
* turn DeepSpeed's answer (tuple or exception) into the JSON form used by fixtures/elasticity/deepspeed_vectors.json.
"""

import atexit
import builtins
import importlib
import numbers
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import restore as _restore  # noqa: E402

TARGET_DEEPSPEED_VERSION = "0.19.6"
_UNSET = object()


class PeerError(Exception):
    pass


def check_interpreter():
    """The reference ran on Debian's python3 3.11 with numpy; fail early with a clear message otherwise."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise PeerError(f"numpy is not importable by {sys.executable}; run the scripts with Debian's /usr/bin/python3 "
                        f"(python3-numpy), not the pyenv python3 that comes first on PATH")


def load_peer(peer_dir):
    """Import deepspeed.elasticity from peer_dir (purging any previously imported copy). Returns the module."""
    check_interpreter()
    for name in list(sys.modules):
        if name == "deepspeed" or name.startswith("deepspeed.") or name == "packaging" or name.startswith("packaging."):
            del sys.modules[name]
    peer_dir = os.path.abspath(peer_dir)
    while peer_dir in sys.path:
        sys.path.remove(peer_dir)
    sys.path.insert(0, peer_dir)
    importlib.invalidate_caches()
    mod = importlib.import_module("deepspeed.elasticity.elasticity")
    if not os.path.abspath(mod.__file__).startswith(peer_dir + os.sep):
        raise PeerError(f"imported {mod.__file__}, expected the restored peer under {peer_dir}")
    return mod


def restore_and_load(seed=None, pre_8237=False, out_dir=None):
    """Restore into out_dir (default: a temp dir removed at exit) and import it. Returns (module, peer_dir, info)."""
    if out_dir is None:
        out_dir = tempfile.mkdtemp(prefix="stretch-dspeer-")
        atexit.register(shutil.rmtree, out_dir, True)
    try:
        info = _restore.restore(out_dir, seed or _restore.DEFAULT_SEED, pre_8237=pre_8237)
    except _restore.RestoreError as e:
        raise PeerError(f"cannot restore the DeepSpeed peer: {e}") from e
    return load_peer(out_dir), out_dir, info


class world_size_env:
    """Context manager: set WORLD_SIZE to value (str) or unset it (None); restores the previous state."""

    def __init__(self, value):
        self.value = value

    def __enter__(self):
        self.saved = os.environ.get("WORLD_SIZE", _UNSET)
        if self.value is None:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = str(self.value)
        return self

    def __exit__(self, *exc):
        if self.saved is _UNSET:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = self.saved
        return False


def _to_int(x, what):
    """numpy / bool / int -> int. Any other type (a float batch, say) is an error we want to see, not hide."""
    if isinstance(x, numbers.Integral):
        return int(x)
    raise PeerError(f"DeepSpeed returned a non-integer {what}: {x!r} ({type(x).__name__})")


def error_class_name(exc, elasticity_module):
    """Name of the exception class, mapped to the nearest DeepSpeed elasticity or builtin class.

    numpy raises private subclasses (e.g. _UFuncNoLoopError < UFuncTypeError < TypeError); those are reported
    by their nearest builtin base (TypeError) so that the vectors name portable classes.
    """
    ds_classes = {elasticity_module.ElasticityError, elasticity_module.ElasticityConfigError,
                  elasticity_module.ElasticityIncompatibleWorldSize}
    for cls in type(exc).__mro__:
        if cls in ds_classes or getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return type(exc).__name__


def normalize_result(ret):
    if not isinstance(ret, tuple) or len(ret) not in (2, 3):
        raise PeerError(f"unexpected return value from compute_elastic_config: {ret!r}")
    fbs, valid = ret[0], ret[1]
    out = {"final_batch_size": _to_int(fbs, "final_batch_size")}
    if valid is None:
        out["valid_gpus"] = None
    elif isinstance(valid, list):
        out["valid_gpus"] = [_to_int(v, "valid_gpus element") for v in valid]
    else:
        raise PeerError(f"unexpected valid_gpus {valid!r} ({type(valid).__name__})")
    if len(ret) == 3:
        out["micro_batch"] = None if ret[2] is None else _to_int(ret[2], "micro_batch")
    return out


def run_case(mod, case, target=TARGET_DEEPSPEED_VERSION):
    """Run one case dict (keys: config, world_size, env_WORLD_SIZE?, return_microbatch?, target_deepspeed_version?).

    Returns (expected_dict, raw_return_or_exception).
    """
    target = case.get("target_deepspeed_version", target)
    with world_size_env(case.get("env_WORLD_SIZE")):
        try:
            ret = mod.compute_elastic_config(case["config"], target, world_size=case.get("world_size", 0),
                                             return_microbatch=case.get("return_microbatch", False))
        except Exception as e:  # DeepSpeed's own exceptions are the facts we record
            return {"error": error_class_name(e, mod), "message": str(e)}, e
    return normalize_result(ret), ret
