#!/usr/bin/env python3
"""examples/python/train_ddp.py with live recovery (stretch.torch): a worker's death costs the
step in flight, not a restart from the last checkpoint.

    stretch launch --num_gpus 4 --config examples/python/ds_config_elastic.json \\
        --log_dir logs /usr/bin/python3 -u examples/python/train_ddp_live.py \\
        --steps 200 --checkpoint_dir ckpt

(PYTHONPATH must reach the stretch package: PYTHONPATH=build/python; docs/python.md.)

What changed from train_ddp.py (the lines marked `# stretch.torch`):
  - `job = stretch.torch.init(model, optimizer, scheduler, ...)` instead of
    `dist.init_process_group` + `DistributedDataParallel(model)` + loading the checkpoint;
  - `for step in job.steps(args.steps):` and `with job.attempt():` around the step;
  - the batch (`job.micro_batch_size`, `job.gradient_accumulation_steps`,
    `job.train_batch_size`), the model (`job.model`, rebuilt for every generation) and this
    rank's samples (`job.micro_batches(step, N)`) come from the job, since they change when the
    world does;
  - `job.save_checkpoint()` (DeepSpeed's layout) and `job.finish()`.
Every collective of a step (the DDP backward, the loss all-reduce) comes before
`optimizer.step()`, which completes the step.

When a worker is SIGKILLed, the survivors go on at the smaller world size with the elastic
solver's batch for it (the global batch never changes), from the same step; the replacement the
agent starts receives the state from a survivor and the job grows back at a step boundary.

Every rank prints where it starts; rank 0 of each generation one line per step
(machine-readable key=value pairs):
    resumed_from=S generation=G world_size=W micro=M accum=A global_batch=B rank=R live=0|1
        joined=0|1 pid=P process_start=T0 ...
    step=S generation=G world_size=W micro=M accum=A global_batch=B loss=L lr=R time=T
    done steps=S generation=G world_size=W weights_sha256=H loss=L recoveries=K time=T
"""

import argparse
import hashlib
import os
import signal
import sys
import time

STARTED = time.time()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

IMPORTED = time.time()

PROG = "train_ddp_live.py"
FEATURES = 16
CLASSES = 4
HIDDEN = 64


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=200, help="train until this many steps are done")
    p.add_argument("--checkpoint_dir", default=None, help="checkpoint here and resume from here")
    p.add_argument("--checkpoint_every", type=int, default=50, help="checkpoint every N steps")
    p.add_argument("--global_batch", type=int, default=48,
                   help="global batch when the launcher gives no batch contract")
    p.add_argument("--ds_config", default=None,
                   help="the job's DeepSpeed config: its elastic solver gives every "
                        "generation's batch (checked against the launcher's)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--dataset_size", type=int, default=4096)
    p.add_argument("--step_sleep", type=float, default=0.0,
                   help="seconds to sleep after every step (so that tests can act mid-run)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a collective waits for a peer before failing")
    p.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for name in ("steps", "checkpoint_every", "global_batch", "dataset_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    return args


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


def log(line):
    print(f"{line} time={time.time():.6f}", flush=True)


def fault_script(step, rank):
    """The tests' fault hooks, as the C++ example jobs read them (examples/common/job_support.hpp),
    acting after a completed step, once per job (marker files in STRETCH_FAULT_DIR):
    STRETCH_FAULT_KILL_AT_STEP=S:R  rank R SIGKILLs itself after step S;
    STRETCH_FAULT_PAUSE_AT_STEPS=S,T  after step S every rank waits until pause_S.release exists
    (rank 0 creates pause_S.reached first), so that a test can take a node away or add one."""
    directory = os.environ.get("STRETCH_FAULT_DIR")
    if not directory:
        return
    kill = os.environ.get("STRETCH_FAULT_KILL_AT_STEP", "")
    if kill:
        at, _, victim = kill.partition(":")
        marker = os.path.join(directory, f"kill_{at}")
        if int(at) == step and int(victim) == rank and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(f"{rank}\n")
            print(f"fault script: rank {rank} kills itself after step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    pauses = [int(s) for s in os.environ.get("STRETCH_FAULT_PAUSE_AT_STEPS", "").split(",") if s]
    release = os.path.join(directory, f"pause_{step}.release")
    if step not in pauses or os.path.exists(release):
        return
    if rank == 0:
        with open(os.path.join(directory, f"pause_{step}.reached"), "w") as f:
            f.write("\n")
    deadline = time.monotonic() + 120
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            print(f"fault script: nobody released the pause at step {step}", flush=True)
            os._exit(3)
        time.sleep(0.005)


def train(args):
    try:
        import stretch.torch  # stretch.torch
    except ImportError as e:
        print(f"{PROG}: error: cannot import stretch.torch ({e}): put the package on the path, "
              "e.g. PYTHONPATH=build/python (docs/python.md)", file=sys.stderr, flush=True)
        return 2
    if os.environ.get("MASTER_ADDR", "127.0.0.1").startswith("127."):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one host: gloo over loopback

    x, y = make_dataset(args.seed, args.dataset_size)
    model = make_model(args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.5)
    job = stretch.torch.init(model, optimizer, scheduler,  # stretch.torch
                             checkpoint_dir=args.checkpoint_dir, ds_config=args.ds_config,
                             global_batch=args.global_batch, timeout=args.timeout)

    def fields():
        return (f"generation={job.generation} world_size={job.world_size} "
                f"micro={job.micro_batch_size} accum={job.gradient_accumulation_steps} "
                f"global_batch={job.train_batch_size}")

    # Every rank: where it starts (a joiner: the state it received) and how long that took.
    log(f"resumed_from={job.resumed_from} {fields()} rank={job.rank} "
        f"batch_source={job.batch_source} live={int(job.live)} joined={int(job.joined)} "
        f"pid={os.getpid()} process_start={STARTED:.6f} import_s={IMPORTED - STARTED:.3f} "
        f"started_s={time.time() - IMPORTED:.3f}")
    loss = float("nan")
    for step in job.steps(args.steps):  # stretch.torch
        with job.attempt():  # stretch.torch
            optimizer.zero_grad(set_to_none=True)
            loss_sum = torch.zeros(())
            scale = job.world_size / job.train_batch_size
            for j, index in enumerate(job.micro_batches(step, args.dataset_size)):
                with job.no_sync(j):  # gradients all-reduced on the last micro batch only
                    per_sample = F.cross_entropy(job.model(x[index]), y[index], reduction="sum")
                    (per_sample * scale).backward()
                loss_sum += per_sample.detach()
            dist.all_reduce(loss_sum)  # the generation's group is torch's default group
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()  # the step is done
            scheduler.step()
            loss = loss_sum.item() / job.train_batch_size
            if job.rank == 0:
                log(f"step={job.step} {fields()} loss={loss:.9f} lr={lr:.6g}")
        if job.rank == 0 and args.checkpoint_dir and job.step % args.checkpoint_every == 0:
            job.save_checkpoint()
        fault_script(job.step, job.rank)
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)
    if job.rank == 0 and args.checkpoint_dir:
        job.save_checkpoint()
    job.finish()  # stretch.torch
    if job.rank == 0:
        log(f"done steps={job.step} {fields()} weights_sha256={weights_sha256(model)} "
            f"loss={loss:.9f} recoveries={job.recoveries}")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip destructors: the process groups of past generations stay alive until the end.
    os._exit(0)


def main(argv):
    args = parse_args(argv)
    return train(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
