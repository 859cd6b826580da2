"""stretch.torch's files (private; stretch/torch.py is the module to read first): checkpoints in
DeepSpeed's layout (``global_step{N}/mp_rank_00_model_states.pt`` and ``latest``, written
atomically, the newest kept) and the launcher's heartbeat file."""

import contextlib
import os

import torch

from ._errors import ConfigError

_MODEL_STATES = "mp_rank_00_model_states.pt"


def save_checkpoint(directory, step, state):
    """Writes `state` as step `step`'s checkpoint, then ``latest``, both atomically; keeps the two
    newest. The checkpoint's tag."""
    tag = f"global_step{step}"
    tag_dir = os.path.join(directory, tag)
    os.makedirs(tag_dir, exist_ok=True)
    _atomic_write(os.path.join(tag_dir, _MODEL_STATES), lambda f: torch.save(state, f))
    _atomic_write(os.path.join(directory, "latest"), lambda f: f.write(tag.encode()))
    _prune(directory, keep=2)
    return tag


def load_latest_checkpoint(directory):
    """The state ``latest`` names (a DeepSpeed checkpoint's too: ``global_steps`` taken from the
    tag when it lacks one), on the CPU; None when there is no ``latest``."""
    try:
        with open(os.path.join(directory, "latest"), encoding="utf-8") as f:
            tag = f.read().strip()
    except FileNotFoundError:
        return None
    path = os.path.join(directory, tag, _MODEL_STATES)
    try:
        state = torch.load(path, map_location="cpu")
    except FileNotFoundError:
        raise ConfigError(f"{directory}/latest = {tag!r}: {path} does not exist "
                          "(expected DeepSpeed's layout)") from None
    if "global_steps" not in state and tag.startswith("global_step"):
        state["global_steps"] = int(tag[len("global_step"):])
    return state


def write_heartbeat(path, text):
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{text}\n")
        os.replace(tmp, path)
    except OSError:
        pass


def _atomic_write(path, write):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _prune(directory, keep):
    steps = sorted((int(n[len("global_step"):]) for n in os.listdir(directory)
                    if n.startswith("global_step") and n[len("global_step"):].isdigit()),
                   reverse=True)
    for old in steps[keep:]:
        tag_dir = os.path.join(directory, f"global_step{old}")
        with contextlib.suppress(OSError):
            for name in os.listdir(tag_dir):
                os.remove(os.path.join(tag_dir, name))
            os.rmdir(tag_dir)
