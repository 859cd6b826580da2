#!/usr/bin/env python3
"""A plain PyTorch DistributedDataParallel job for `stretch launch` (gloo, env:// init).

    stretch launch --num_gpus 2 --elastic 1:2 --config examples/python/ds_config_elastic.json \
        --checkpoint_dir ckpt --log_dir logs \
      examples/python/train_ddp.py --steps 200 --checkpoint_dir ckpt

The launcher runs a PROGRAM ending in .py as `python3 -u PROGRAM ARGS` (DeepSpeed's rule), with
python3 from PATH; STRETCH_PYTHON names another interpreter (STRETCH_PYTHON=/usr/bin/python3 when
the first python3 on PATH has no torch). Jobs that are not elastic also get --local_rank=N, which
this script accepts and ignores (LOCAL_RANK says the same).

What it shows:
  - The global batch never changes with the world size. The batch comes from the launcher's
    contract: STRETCH_TRAIN_BATCH_SIZE, STRETCH_MICRO_BATCH_SIZE and
    STRETCH_GRADIENT_ACCUMULATION_STEPS (the elastic solver's answer for this generation's world
    size; stretch.worker_batch() reads them), else the batch DeepSpeed resolves from the config
    named by STRETCH_DS_CONFIG for this world size (stretch.config), else --global_batch split
    evenly over the ranks. micro * accum * world must equal the train batch. The stretch package
    must be importable (PYTHONPATH=build/python; docs/python.md).
  - Step s consumes the samples s*B .. s*B+B-1 of a fixed order (B = global batch); rank r takes
    its contiguous share as `accum` micro batches. Each rank's loss is the sum of its per-sample
    losses times world/B, and DDP averages gradients over the ranks, so the update is the
    single-process update on the whole global batch (up to floating-point summation order).
  - Rank 0 checkpoints (step, model, optimizer) every --checkpoint_every steps and at the end,
    atomically, in DeepSpeed's layout (`global_stepN.pt`, then `latest` naming it), and every
    start resumes from `latest`.
  - A dead peer makes gloo raise: the script exits 1 so that the agent restarts the generation.

Rank 0 prints one line per step (machine-readable key=value pairs):
    resumed_from=S generation=G world_size=W micro=M accum=A global_batch=B batch_source=...
        gloo_interface=I import_s=X rendezvous_s=Y time=T      (one line)
    step=S generation=G world_size=W micro=M accum=A global_batch=B loss=L time=T
    done steps=S generation=G world_size=W weights_sha256=H loss=L time=T
"""

import argparse
import contextlib
import datetime
import fcntl
import hashlib
import ipaddress
import os
import socket
import struct
import sys
import time
import warnings

STARTED = time.time()  # before `import torch`, which dominates a restart's startup

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

IMPORTED = time.time()

PROG = "train_ddp.py"
FEATURES = 16
CLASSES = 4
HIDDEN = 64


class UsageError(Exception):
    """Bad input: a broken batch contract or a bad option. Exit status 2."""


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200, help="train until this many steps are done")
    p.add_argument("--checkpoint_dir", default=None, help="checkpoint here and resume from here")
    p.add_argument("--checkpoint_every", type=int, default=20, help="checkpoint every N steps")
    p.add_argument("--global_batch", type=int, default=48,
                   help="global batch when the launcher gives no batch contract")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--dataset_size", type=int, default=4096)
    p.add_argument("--step_sleep", type=float, default=0.0,
                   help="seconds to sleep after every step (so that tests can act mid-run)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a collective waits for a peer before failing")
    # DeepSpeed's launcher passes --local_rank=N; LOCAL_RANK carries the same value.
    p.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("steps", "checkpoint_every", "global_batch", "dataset_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.step_sleep < 0 or args.timeout <= 0:
        raise UsageError("--step_sleep must be >= 0 and --timeout > 0")
    return args


def env_int(name, default=None):
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise UsageError(f"{name} is not set (run under `stretch launch` or torchrun)")
        return default
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{name}={value!r} is not an integer") from None


BATCH_VARS = ("STRETCH_TRAIN_BATCH_SIZE", "STRETCH_MICRO_BATCH_SIZE",
              "STRETCH_GRADIENT_ACCUMULATION_STEPS")
def import_stretch():
    """The stretch package (docs/python.md): the batch is read as the Stretch engine reads it."""
    try:
        import stretch
    except ImportError as e:
        raise UsageError(f"cannot import the stretch package ({e}): put it on the path, e.g. "
                         "PYTHONPATH=build/python (docs/python.md)") from None
    return stretch


def batch_contract(args, world):
    """(train_batch, micro, accum, source) for this world size; raises UsageError when broken."""
    stretch = import_stretch()
    if any(os.environ.get(v) for v in BATCH_VARS):
        try:
            batch = stretch.worker_batch()
        except stretch.StretchError as e:
            raise UsageError(f"batch contract incomplete or malformed: {e}") from None
        train, micro, accum = (batch.train_batch_size, batch.micro_batch_size,
                               batch.gradient_accumulation_steps)
        source = "env"
    elif os.environ.get("STRETCH_DS_CONFIG"):
        path = os.environ["STRETCH_DS_CONFIG"]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                resolved = stretch.config(path, world_size=world)
        except stretch.StretchError as e:
            raise UsageError(f"STRETCH_DS_CONFIG={path}: {e}") from None
        train = resolved["train_batch_size"]
        micro = resolved["train_micro_batch_size_per_gpu"]
        accum = resolved["gradient_accumulation_steps"]
        source = "ds_config"
    else:
        if args.global_batch % world != 0:
            raise UsageError(f"--global_batch {args.global_batch} does not split evenly over "
                             f"world size {world} (and no batch contract was given)")
        train, micro, accum = args.global_batch, args.global_batch // world, 1
        source = "global_batch"
    if min(train, micro, accum) < 1 or micro * accum * world != train:
        raise UsageError(f"batch contract violated ({source}): micro {micro} x accumulation {accum} "
                         f"x world size {world} = {micro * accum * world}, but the train batch "
                         f"is {train}")
    return train, micro, accum, source


def interface_with_address(address):
    """The name of the network interface holding IPv4 `address`, or None."""
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                got = fcntl.ioctl(s.fileno(), siocgifaddr, req)
            except OSError:
                continue
            if socket.inet_ntoa(got[20:24]) == address:
                return name
    return None


def choose_gloo_interface(master_addr, master_port):
    """Gloo binds the address the host name resolves to, falling back to loopback: wrong when
    the host name means 127.0.0.1 but the peers are elsewhere. Unless GLOO_SOCKET_IFNAME is set,
    use the interface this host reaches MASTER_ADDR through."""
    if os.environ.get("GLOO_SOCKET_IFNAME"):
        return os.environ["GLOO_SOCKET_IFNAME"] + " (GLOO_SOCKET_IFNAME)"
    try:
        master = socket.gethostbyname(master_addr)
        if ipaddress.ip_address(master).is_loopback:
            iface = interface_with_address(master) or "lo"
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((master, master_port))  # no packet: only picks the route
                iface = interface_with_address(s.getsockname()[0])
    except OSError:
        iface = None
    if iface is None:
        return "default"
    os.environ["GLOO_SOCKET_IFNAME"] = iface
    return iface


def make_dataset(seed, size):
    """A fixed classification set: a random teacher labels Gaussian inputs (no downloads)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(size, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, CLASSES, generator=g)
    y = (x @ teacher + 0.3 * torch.randn(size, CLASSES, generator=g)).argmax(dim=1)
    return x, y


def make_model(seed):
    torch.manual_seed(seed + 1)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, CLASSES))


def weights_sha256(model):
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def latest_step(checkpoint_dir):
    try:
        with open(os.path.join(checkpoint_dir, "latest"), encoding="utf-8") as f:
            tag = f.read().strip()
    except FileNotFoundError:
        return None
    if not tag.startswith("global_step") or not tag[len("global_step"):].isdigit():
        raise RuntimeError(f"{checkpoint_dir}/latest holds {tag!r}, not global_stepN")
    return int(tag[len("global_step"):])


def atomic_write(path, write):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(checkpoint_dir, step, model, optimizer):
    """Rank 0: global_step{step}.pt, then `latest` naming it, then drop all but the last two."""
    os.makedirs(checkpoint_dir, exist_ok=True)
    name = f"global_step{step}"
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    atomic_write(os.path.join(checkpoint_dir, name + ".pt"), lambda f: torch.save(state, f))
    atomic_write(os.path.join(checkpoint_dir, "latest"), lambda f: f.write(name.encode() + b"\n"))
    kept = sorted((int(n[len("global_step"):-3]) for n in os.listdir(checkpoint_dir)
                   if n.startswith("global_step") and n.endswith(".pt")
                   and n[len("global_step"):-3].isdigit()), reverse=True)
    stale = [f"global_step{old}.pt" for old in kept[2:]]
    # Temporary files of a rank 0 killed while saving.
    stale += [n for n in os.listdir(checkpoint_dir) if ".tmp." in n
              and not n.endswith(f".tmp.{os.getpid()}")]
    for name in stale:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(checkpoint_dir, name))


def load_checkpoint(checkpoint_dir, model, optimizer):
    """The step of `latest` after loading it, or 0 without a checkpoint."""
    if checkpoint_dir is None:
        return 0
    step = latest_step(checkpoint_dir)
    if step is None:
        return 0
    state = torch.load(os.path.join(checkpoint_dir, f"global_step{step}.pt"))
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"])


def log(line):
    print(f"{line} time={time.time():.6f}", flush=True)


def train(args):
    rank = env_int("RANK", 0)
    world = env_int("WORLD_SIZE", 1)
    generation = env_int("STRETCH_GENERATION", 0)
    if not 0 <= rank < world:
        raise UsageError(f"RANK={rank} is outside WORLD_SIZE={world}")
    train_batch, micro, accum, source = batch_contract(args, world)
    master_addr = os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    master_port = env_int("MASTER_PORT", 29500)
    os.environ.setdefault("MASTER_PORT", str(master_port))
    iface = choose_gloo_interface(master_addr, master_port)

    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    rendezvous = time.time()
    x, y = make_dataset(args.seed, args.dataset_size)
    model = make_model(args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    start = load_checkpoint(args.checkpoint_dir, model, optimizer)
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's weights
    fields = (f"generation={generation} world_size={world} micro={micro} accum={accum} "
              f"global_batch={train_batch}")
    if rank == 0:
        log(f"resumed_from={start} {fields} batch_source={source} gloo_interface={iface} "
            f"import_s={IMPORTED - STARTED:.3f} rendezvous_s={rendezvous - IMPORTED:.3f}")

    share = micro * accum  # this rank's samples per step
    loss = float("nan")
    for step in range(start, args.steps):
        first = step * train_batch + rank * share
        optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros(())
        for j in range(accum):
            index = (torch.arange(micro) + first + j * micro) % args.dataset_size
            # Gradients are all-reduced on the last micro batch only.
            sync = contextlib.nullcontext() if j == accum - 1 else ddp.no_sync()
            with sync:
                per_sample = F.cross_entropy(ddp(x[index]), y[index], reduction="sum")
                (per_sample * (world / train_batch)).backward()
            loss_sum += per_sample.detach()
        optimizer.step()
        dist.all_reduce(loss_sum)
        loss = loss_sum.item() / train_batch
        done = step + 1
        if rank == 0:
            log(f"step={done} {fields} loss={loss:.9f}")
            if args.checkpoint_dir and (done % args.checkpoint_every == 0 or done == args.steps):
                save_checkpoint(args.checkpoint_dir, done, model, optimizer)
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
    dist.barrier()  # nobody leaves while rank 0 still writes or serves the store
    if rank == 0:
        log(f"done steps={max(start, args.steps)} {fields} weights_sha256={weights_sha256(model)} "
            f"loss={loss:.9f}")
    dist.destroy_process_group()


def main(argv):
    try:
        args = parse_args(argv)
        train(args)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        return 2
    except RuntimeError as e:
        # Gloo raises when a peer dies or the store goes away: fail so that the agent restarts
        # the generation (the survivors' process group cannot be reused).
        rank = os.environ.get("RANK", "?")
        print(f"{PROG}: rank {rank}: training failed (a peer may have died): {e}",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)  # skip destructors that could wait on the dead peers
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
