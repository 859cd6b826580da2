#!/usr/bin/python3
"""Restore DeepSpeed's elasticity solver from the shared web-page seed into a runnable package.

The seed (``shared/seeds/002_87447181318dfd9e.txt``) is DeepSpeed's ``deepspeed/elasticity/elasticity.py`` as a web
page left it: every source line is followed by a line holding a single ``|``, each source line got a trailing ``" |"``
and all indentation (and all comments) is gone.  This script

1. drops the separator lines and the trailing ``" |"`` (a bare ``|`` is an empty source line),
2. checks the sha256 fingerprint of that de-piped text against ``indent_map.json`` (a changed seed is an error),
3. re-indents every non-empty line with the number of spaces listed in ``indent_map.json``
   (whitespace only: no token is added, removed or changed),
4. applies one edit, the rule of DeepSpeed PR #8237 in ``get_candidate_batch_sizes``
   (``if base > cap: continue`` / ``if base == cap: append(base)`` instead of ``if base >= cap: append(base)``),
   unless ``--pre-8237`` is given,
5. writes a package ``OUT/deepspeed/...`` around it.  ``constants.py`` and ``config.py`` are not in the seed; they are
   our own code written from the reference (shared/reference/deepspeed_elasticity_launcher_comm.md, sections 1.3/1.4).

No DeepSpeed code is stored in this repository: the output directory is generated at run time.

Usage:
    /usr/bin/python3 bench/deepspeed_peer/restore.py --out /tmp/dspeer
    PYTHONPATH=/tmp/dspeer /usr/bin/python3 -c "from deepspeed.elasticity import compute_elastic_config"
"""

import argparse
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_SEED = os.path.normpath(os.path.join(REPO, "..", "shared", "seeds", "002_87447181318dfd9e.txt"))
DEFAULT_INDENT_MAP = os.path.join(HERE, "indent_map.json")

# Version reported by the restored package (DeepSpeed version.txt at the reference snapshot).
DEEPSPEED_VERSION = "0.19.6"


class RestoreError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------------
# Seed handling
# ---------------------------------------------------------------------------------------------------------------------
def depipe(seed_text):
    """Return the list of (unindented) source lines of the seed, validating the page layout."""
    raw = seed_text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    if len(raw) < 2:
        raise RestoreError(f"seed layout: only {len(raw)} line(s); expected '|' separator lines alternating with "
                           f"source lines")
    # Layout: odd lines (1-based) are bare '|' separators, even lines are source lines ('<code> |', or '|' when
    # empty).  The page ends with an (empty) source line and no final newline.
    lines = []
    for idx, line in enumerate(raw):
        lineno = idx + 1
        if idx % 2 == 0:
            if line != "|":
                raise RestoreError(f"seed layout: line {lineno} should be a bare '|' separator, got {line!r}")
            continue
        if line == "|":
            lines.append("")
        elif line.endswith(" |"):
            lines.append(line[:-2])
        else:
            raise RestoreError(f"seed layout: line {lineno} should end with ' |' (or be a bare '|'), got {line!r}")
    return lines


def fingerprint(lines):
    return hashlib.sha256(("\n".join(lines) + "\n").encode("utf-8")).hexdigest()


def load_indent_map(path):
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except OSError as e:
        raise RestoreError(f"cannot read indent map {path}: {e}") from e
    except json.JSONDecodeError as e:
        raise RestoreError(f"indent map {path} is not valid JSON: {e}") from e
    for key in ("seed_fingerprint_sha256", "line_count", "nonempty_line_count", "indents"):
        if key not in m:
            raise RestoreError(f"indent map {path} lacks key {key!r}")
    if len(m["indents"]) != m["nonempty_line_count"]:
        raise RestoreError(f"indent map {path}: {len(m['indents'])} indents listed but nonempty_line_count is "
                           f"{m['nonempty_line_count']}")
    if not all(isinstance(i, int) and 0 <= i < 400 for i in m["indents"]):
        raise RestoreError(f"indent map {path}: indents must be small non-negative integers")
    return m


def reindent(lines, imap, seed_path, map_path):
    fp = fingerprint(lines)
    if fp != imap["seed_fingerprint_sha256"]:
        raise RestoreError(
            f"seed {seed_path} does not match the indentation map {map_path}:\n"
            f"  de-piped seed fingerprint sha256 {fp}\n"
            f"  expected                         {imap['seed_fingerprint_sha256']}\n"
            f"  ({len(lines)} lines, {sum(1 for l in lines if l)} non-empty; map expects {imap['line_count']} / "
            f"{imap['nonempty_line_count']}).\n"
            f"The seed changed, so the committed indentation map no longer applies; rebuild the map for the new seed.")
    out = []
    it = iter(imap["indents"])
    for line in lines:
        if line == "":
            out.append("")
        else:
            if line != line.lstrip(" \t"):
                raise RestoreError(f"seed line {line!r} is already indented; expected unindented text")
            out.append(" " * next(it) + line)
    return out


# PR #8237 (DeepSpeed, merged 2026-08-11): a base greater than the cap is skipped; equal is kept unscaled.
PR8237_OLD = ("if base >= max_acceptable_batch_size:", "candidate_batch_size.append(base)")
PR8237_NEW = (
    (0, "if base > max_acceptable_batch_size:"),
    (4, "continue"),
    (0, "if base == max_acceptable_batch_size:"),
    (4, "candidate_batch_size.append(base)"),
)


def apply_pr8237(src_lines):
    hits = [
        i for i in range(len(src_lines) - 1)
        if src_lines[i].strip() == PR8237_OLD[0] and src_lines[i + 1].strip() == PR8237_OLD[1]
    ]
    if len(hits) != 1:
        raise RestoreError(f"PR #8237 edit: expected exactly one '{PR8237_OLD[0]}' / '{PR8237_OLD[1]}' pair in the "
                           f"restored elasticity.py, found {len(hits)}")
    i = hits[0]
    indent = len(src_lines[i]) - len(src_lines[i].lstrip(" "))
    new = [" " * (indent + extra) + text for extra, text in PR8237_NEW]
    return src_lines[:i] + new + src_lines[i + 2:]


def restore_elasticity_source(seed_path, map_path, pre_8237=False):
    try:
        with open(seed_path, encoding="utf-8") as f:
            seed_text = f.read()
    except OSError as e:
        raise RestoreError(f"cannot read seed {seed_path}: {e}") from e
    imap = load_indent_map(map_path)
    lines = depipe(seed_text)
    src = reindent(lines, imap, seed_path, map_path)
    if not pre_8237:
        src = apply_pr8237(src)
    text = "\n".join(src) + "\n"
    try:
        compile(text, "deepspeed/elasticity/elasticity.py", "exec")
    except SyntaxError as e:
        raise RestoreError(f"restored elasticity.py does not compile: {e}") from e
    return text, fingerprint(lines)


# ---------------------------------------------------------------------------------------------------------------------
# Our own modules (written from the reference, not copied)
# ---------------------------------------------------------------------------------------------------------------------
GENERATED = "# Generated by Stretch bench/deepspeed_peer/restore.py -- do not edit, do not commit.\n"

DEEPSPEED_INIT = GENERATED + '''"""Minimal stand-in for the deepspeed package: only what deepspeed.elasticity needs."""
from .git_version_info import version as __version__
'''

GIT_VERSION_INFO = GENERATED + f'''version = "{DEEPSPEED_VERSION}"
git_hash = "unknown"
git_branch = "unknown"
'''

UTILS = GENERATED + '''"""Logger stand-in for deepspeed.utils.logger.

DeepSpeed logs at INFO level to stdout; the peer logs to stderr at the level given by the environment variable
STRETCH_PEER_LOG_LEVEL (default WARNING) so that benchmark and vector runs stay quiet.  The solver's f-strings are
evaluated either way, as in DeepSpeed.
"""
import logging
import os
import sys

logger = logging.getLogger("DeepSpeed")
if not logger.handlers:
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s"))
    logger.addHandler(_handler)
    logger.propagate = False
logger.setLevel(os.environ.get("STRETCH_PEER_LOG_LEVEL", "WARNING").upper())
'''

ELASTICITY_INIT = GENERATED + '''from .elasticity import compute_elastic_config, elasticity_enabled, ensure_immutable_elastic_config
from .config import ElasticityError, ElasticityConfigError, ElasticityIncompatibleWorldSize, ElasticityConfig
from .constants import ENABLED, ENABLED_DEFAULT, ELASTICITY
'''

# Reference section 1.3.
CONSTANTS = GENERATED + '''"""Keys and defaults of the "elasticity" config section (reference section 1.3)."""

ELASTICITY = "elasticity"

LATEST_ELASTICITY_VERSION = 0.2

ENABLED = "enabled"
ENABLED_DEFAULT = False

MAX_ACCEPTABLE_BATCH_SIZE = "max_train_batch_size"
MAX_ACCEPTABLE_BATCH_SIZE_DEFAULT = 2000

MICRO_BATCHES = "micro_batch_sizes"
MICRO_BATCHES_DEFAULT = [2, 4, 6]

MIN_GPUS = "min_gpus"
MIN_GPUS_DEFAULT = 1

MAX_GPUS = "max_gpus"
MAX_GPUS_DEFAULT = 10000

NUM_GPUS_PER_NODE = "num_gpus_per_node"
NUM_GPUS_PER_NODE_DEFAULT = 1

MODEL_PARALLEL_SIZE = "model_parallel_size"
MODEL_PARALLEL_SIZE_DEFAULT = 1

MIN_TIME = "min_time"
MIN_TIME_DEFAULT = 0

PREFER_LARGER_BATCH = "prefer_larger_batch"
PREFER_LARGER_BATCH_DEFAULT = True

IGNORE_NON_ELASTIC_BATCH_INFO = "ignore_non_elastic_batch_info"
IGNORE_NON_ELASTIC_BATCH_INFO_DEFAULT = False

VERSION = "version"
VERSION_DEFAULT = LATEST_ELASTICITY_VERSION

MINIMUM_DEEPSPEED_VERSION = "0.3.8"

DEEPSPEED_ELASTICITY_CONFIG = "DEEPSPEED_ELASTICITY_CONFIG"
'''

# Reference section 1.4: error classes and ElasticityConfig, same validation order and messages.
CONFIG = GENERATED + '''"""Elasticity error classes and config object (reference section 1.4)."""
import json

from .constants import (ENABLED, ENABLED_DEFAULT, MAX_ACCEPTABLE_BATCH_SIZE, MAX_ACCEPTABLE_BATCH_SIZE_DEFAULT,
                        MICRO_BATCHES, MICRO_BATCHES_DEFAULT, MIN_GPUS, MIN_GPUS_DEFAULT, MAX_GPUS, MAX_GPUS_DEFAULT,
                        MODEL_PARALLEL_SIZE, MODEL_PARALLEL_SIZE_DEFAULT, NUM_GPUS_PER_NODE,
                        NUM_GPUS_PER_NODE_DEFAULT, MIN_TIME, MIN_TIME_DEFAULT, VERSION, VERSION_DEFAULT,
                        PREFER_LARGER_BATCH, PREFER_LARGER_BATCH_DEFAULT, IGNORE_NON_ELASTIC_BATCH_INFO,
                        IGNORE_NON_ELASTIC_BATCH_INFO_DEFAULT)


class ElasticityError(Exception):
    """Base class of all elasticity errors."""


class ElasticityConfigError(ElasticityError):
    """Invalid elasticity configuration."""


class ElasticityIncompatibleWorldSize(ElasticityError):
    """The world size is not one of the valid GPU counts of the config."""


class ElasticityConfig:
    """The "elasticity" sub-dictionary of a ds_config, validated."""

    def __init__(self, param_dict):
        self.enabled = param_dict.get(ENABLED, ENABLED_DEFAULT)
        if self.enabled:
            if MAX_ACCEPTABLE_BATCH_SIZE not in param_dict:
                raise ElasticityConfigError(f"Elasticity config missing {MAX_ACCEPTABLE_BATCH_SIZE}")
            self.max_acceptable_batch_size = param_dict[MAX_ACCEPTABLE_BATCH_SIZE]
            if MICRO_BATCHES not in param_dict:
                raise ElasticityConfigError(f"Elasticity config missing {MICRO_BATCHES}")
            self.micro_batches = param_dict[MICRO_BATCHES]
        else:
            self.max_acceptable_batch_size = param_dict.get(MAX_ACCEPTABLE_BATCH_SIZE,
                                                            MAX_ACCEPTABLE_BATCH_SIZE_DEFAULT)
            self.micro_batches = param_dict.get(MICRO_BATCHES, MICRO_BATCHES_DEFAULT)

        if not isinstance(self.micro_batches, list):
            raise ElasticityConfigError(f"Elasticity expected value of {MICRO_BATCHES} to be a list of micro batches, "
                                        f"instead is: {type(self.micro_batches)}, containing: {self.micro_batches}")
        if not all(isinstance(m, int) for m in self.micro_batches):
            raise ElasticityConfigError(f"Elasticity expected {MICRO_BATCHES} to only contain a list of integers, "
                                        f"instead contains: f{self.micro_batches}")
        if not all(m > 0 for m in self.micro_batches):
            raise ElasticityConfigError(f"Elasticity expected {MICRO_BATCHES} to only contain positive integers, "
                                        f"instead contains: f{self.micro_batches}")

        self.min_gpus = param_dict.get(MIN_GPUS, MIN_GPUS_DEFAULT)
        self.max_gpus = param_dict.get(MAX_GPUS, MAX_GPUS_DEFAULT)
        if self.min_gpus < 1 or self.max_gpus < 1:
            raise ElasticityConfigError("Elasticity min/max gpus must be > 0, "
                                        f"given min_gpus: {self.min_gpus}, max_gpus: {self.max_gpus}")
        if self.max_gpus < self.min_gpus:
            raise ElasticityConfigError("Elasticity min_gpus cannot be greater than max_gpus, "
                                        f"given min_gpus: {self.min_gpus}, max_gpus: {self.max_gpus}")

        self.model_parallel_size = param_dict.get(MODEL_PARALLEL_SIZE, MODEL_PARALLEL_SIZE_DEFAULT)
        if self.model_parallel_size < 1:
            raise ElasticityConfigError("Model-Parallel size cannot be less than 1, "
                                        f"given model-parallel size: {self.model_parallel_size}")

        self.num_gpus_per_node = param_dict.get(NUM_GPUS_PER_NODE, NUM_GPUS_PER_NODE_DEFAULT)
        if self.num_gpus_per_node < 1:
            raise ElasticityConfigError("Number of GPUs per node cannot be less than 1, "
                                        f"given number of GPUs per node: {self.num_gpus_per_node}")

        self.min_time = param_dict.get(MIN_TIME, MIN_TIME_DEFAULT)
        if self.min_time < 0:
            raise ElasticityConfigError(f"Elasticity min time needs to be >= 0: given {self.min_time}")

        self.version = param_dict.get(VERSION, VERSION_DEFAULT)
        self.prefer_larger_batch_size = param_dict.get(PREFER_LARGER_BATCH, PREFER_LARGER_BATCH_DEFAULT)
        self.ignore_non_elastic_batch_info = param_dict.get(IGNORE_NON_ELASTIC_BATCH_INFO,
                                                            IGNORE_NON_ELASTIC_BATCH_INFO_DEFAULT)

    def repr(self):
        return self.__dict__

    def __repr__(self):
        return json.dumps(self.__dict__, sort_keys=True, indent=4)
'''

# `packaging` is not installed on the reference machine; DeepSpeed only uses packaging.version.parse to compare
# versions.  Like the reference runs, we stub it with a dotted-integer tuple parser.
PACKAGING_INIT = GENERATED + '''"""Stub of the `packaging` distribution: only packaging.version.parse, for dotted-integer versions."""
'''

PACKAGING_VERSION = GENERATED + '''"""packaging.version stub: parse("0.19.6") -> a comparable tuple-backed Version (dotted integers only)."""
import re

_DOTTED = re.compile(r"^\\s*v?(\\d+(?:\\.\\d+)*)\\s*$")


class InvalidVersion(ValueError):
    pass


class Version:
    def __init__(self, text):
        m = _DOTTED.match(str(text))
        if not m:
            raise InvalidVersion(f"Invalid version: {text!r} (the Stretch packaging stub only parses dotted integers)")
        parts = [int(p) for p in m.group(1).split(".")]
        while len(parts) > 1 and parts[-1] == 0:
            parts.pop()
        self._key = tuple(parts)
        self.public = m.group(1)

    def __lt__(self, other):
        return self._key < other._key

    def __le__(self, other):
        return self._key <= other._key

    def __eq__(self, other):
        return isinstance(other, Version) and self._key == other._key

    def __ge__(self, other):
        return self._key >= other._key

    def __gt__(self, other):
        return self._key > other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"<Version({self.public!r})>"


def parse(text):
    return Version(text)
'''


def write_package(out_dir, elasticity_src, seed_path, seed_fp, pre_8237, packaging_shim=True):
    files = {
        "deepspeed/__init__.py": DEEPSPEED_INIT,
        "deepspeed/git_version_info.py": GIT_VERSION_INFO,
        "deepspeed/utils.py": UTILS,
        "deepspeed/elasticity/__init__.py": ELASTICITY_INIT,
        "deepspeed/elasticity/constants.py": CONSTANTS,
        "deepspeed/elasticity/config.py": CONFIG,
        "deepspeed/elasticity/elasticity.py": elasticity_src,
    }
    if packaging_shim:
        files["packaging/__init__.py"] = PACKAGING_INIT
        files["packaging/version.py"] = PACKAGING_VERSION
    for rel, text in files.items():
        path = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    info = {
        "seed": os.path.abspath(seed_path),
        "seed_fingerprint_sha256": seed_fp,
        "elasticity_py_sha256": hashlib.sha256(elasticity_src.encode("utf-8")).hexdigest(),
        "edits": [] if pre_8237 else ["PR #8237 get_candidate_batch_sizes cap rule"],
        "packaging_shim": packaging_shim,
        "deepspeed_version": DEEPSPEED_VERSION,
    }
    with open(os.path.join(out_dir, "PEER_INFO.json"), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    return info


def restore(out_dir, seed_path=DEFAULT_SEED, map_path=DEFAULT_INDENT_MAP, pre_8237=False, packaging_shim=True):
    """Restore the peer into out_dir; returns the PEER_INFO dict.  Raises RestoreError."""
    src, seed_fp = restore_elasticity_source(seed_path, map_path, pre_8237=pre_8237)
    return write_package(out_dir, src, seed_path, seed_fp, pre_8237, packaging_shim)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Restore DeepSpeed's elasticity solver (runnable Python package) from the shared seed text. "
        "Writes OUT/deepspeed/{__init__,git_version_info,utils}.py, OUT/deepspeed/elasticity/{__init__,elasticity,"
        "constants,config}.py and OUT/packaging (version-parse stub). Use with PYTHONPATH=OUT and /usr/bin/python3.")
    ap.add_argument("--seed", default=DEFAULT_SEED, help=f"seed text file (default: {DEFAULT_SEED})")
    ap.add_argument("--out", required=True, help="output directory (created if missing; files are overwritten)")
    ap.add_argument("--indent-map", default=DEFAULT_INDENT_MAP, help="indentation map JSON (default: %(default)s)")
    ap.add_argument("--pre-8237", action="store_true",
                    help="do not apply the PR #8237 cap rule (gives the seed's own, older get_candidate_batch_sizes)")
    ap.add_argument("--no-packaging-shim", action="store_true",
                    help="do not write OUT/packaging (then a real `packaging` must be importable)")
    args = ap.parse_args(argv)
    try:
        info = restore(args.out, args.seed, args.indent_map, pre_8237=args.pre_8237,
                       packaging_shim=not args.no_packaging_shim)
    except RestoreError as e:
        print(f"restore.py: error: {e}", file=sys.stderr)
        return 2
    print(f"restored DeepSpeed elasticity peer into {os.path.abspath(args.out)} "
          f"(seed sha256 {info['seed_fingerprint_sha256'][:16]}..., edits: {', '.join(info['edits']) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
