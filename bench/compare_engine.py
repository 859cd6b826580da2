#!/usr/bin/python3
"""Side-by-side engine benchmark: Stretch's engine vs PyTorch in the same run.

Two comparisons, same model (layers x Linear(hidden, hidden) + ReLU, Linear(hidden, 10)), global
batch, Adam, fp32, one thread per rank:
  (a) data parallel on R Gloo ranks: BUILD/bin/stretch-bench-engine (one process per rank,
      RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set here) vs torch DistributedDataParallel
      (bench/engine_peer/ddp_mlp_bench.py, Debian's python3-torch);
  (b) one process: the engine vs a plain LibTorch loop (stretch-bench-engine --mode plain).
With --repeat K each measurement alternates K times and keeps its best throughput and its
lowest peak RSS, which damps a shared machine's noise.

Targets: (a) engine steps/s >= 1.1 x DDP's and peak RSS <= DDP's; (b) engine overhead <= 3%
(steps/s >= 0.97 x the plain loop's). Exit status: 0 all met, 1 a target missed, 2 setup error.
"""

import argparse
import json
import os
import socket
import subprocess
import sys

from bounded_run import Failed, Stalled, run_bounded
from torch_peer import python_with_torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEER = os.path.join(HERE, "engine_peer", "ddp_mlp_bench.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ours(exe, mode, ranks, common, timeout, label):
    port = free_port()
    commands = []
    for r in range(ranks):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        if mode == "engine" and ranks > 1:
            env.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
        commands.append(([exe, "--mode", mode] + common, env))
    return json.loads(run_bounded(commands, label, timeout)[0][1])


def run_peer(python, mode, ranks, common, timeout, label):
    cmd = [python, PEER, "--mode", mode, "--ranks", str(ranks)] + common
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return json.loads(run_bounded([cmd], label, timeout, env=env)[0][1])


def print_table(results, labels, title=None):
    if title:
        print(title)
    print(f"{'run':<34} {'steps/s':>9} {'peak RSS MiB':>13}")
    for name, label in labels.items():
        r = results[name]
        if r is None:
            print(f"{label:<34} {'-':>9} {'-':>13}")
        else:
            print(f"{label:<34} {r['steps_per_s']:>9.2f} {r['peak_rss_mib']:>13.0f}")


def best(a, b):
    if a is None:
        return b
    return dict(a, steps_per_s=max(a["steps_per_s"], b["steps_per_s"]),
                peak_rss_mib=min(a["peak_rss_mib"], b["peak_rss_mib"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python", help="interpreter with torch (default: this one, else /usr/bin/python3)")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds allowed for each run (one side, one round; default: %(default)s)")
    ap.add_argument("--json", metavar="FILE", help="also write the results to FILE")
    args = ap.parse_args()
    exe = os.path.join(args.build, "bin", "stretch-bench-engine")
    if not os.access(exe, os.X_OK):
        print(f"compare_engine: error: {exe} not found; build the project first", file=sys.stderr)
        return 2
    python = python_with_torch(args.python, "compare_engine")
    common = ["--layers", str(args.layers), "--hidden", str(args.hidden), "--batch", str(args.batch),
              "--steps", str(args.steps), "--warmup", str(args.warmup)]
    load_before = os.getloadavg()
    results = {"engine_dp": None, "ddp": None, "engine_1": None, "plain": None}
    labels = {"engine_dp": f"Stretch engine, {args.ranks} Gloo ranks",
              "ddp": f"PyTorch DDP, {args.ranks} gloo ranks",
              "engine_1": "Stretch engine, 1 process",
              "plain": "plain LibTorch loop, 1 process"}
    for k in range(max(1, args.repeat)):
        runs = [("engine_dp", lambda label: run_ours(exe, "engine", args.ranks, common, args.timeout, label)),
                ("ddp", lambda label: run_peer(python, "ddp", args.ranks, common, args.timeout, label)),
                ("engine_1", lambda label: run_ours(exe, "engine", 1, common, args.timeout, label)),
                ("plain", lambda label: run_ours(exe, "plain", 1, common, args.timeout, label))]
        if k % 2 == 1:
            runs.reverse()
        for name, fn in runs:
            label = f"round {k + 1}: {labels[name]}"
            print(f"compare_engine: {label}", file=sys.stderr, flush=True)
            try:
                results[name] = best(results[name], fn(label))
            except (Stalled, Failed) as e:
                print(f"compare_engine: error: {e}", file=sys.stderr)
                print_table(results, labels, f"# finished before round {k + 1}'s {labels[name]} "
                                             f"{'stalled' if isinstance(e, Stalled) else 'failed'} "
                                             "(best of the rounds done; missing runs are -)")
                return 3
    load_after = os.getloadavg()
    torch_version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                                   stdout=subprocess.PIPE, text=True).stdout.strip()
    dp_ratio = results["engine_dp"]["steps_per_s"] / results["ddp"]["steps_per_s"]
    mem_ratio = results["engine_dp"]["peak_rss_mib"] / results["ddp"]["peak_rss_mib"]
    overhead = 1 - results["engine_1"]["steps_per_s"] / results["plain"]["steps_per_s"]
    print(f"# MLP {args.layers} x {args.hidden}, batch {args.batch}, Adam, fp32; {args.steps} timed steps; "
          f"best of {args.repeat}; torch {torch_version}; {os.cpu_count()} CPUs; load {load_before[0]:.2f} -> "
          f"{load_after[0]:.2f}")
    print_table(results, labels)
    ok_dp = dp_ratio >= 1.1
    ok_mem = mem_ratio <= 1.0
    ok_overhead = overhead <= 0.03
    print(f"throughput vs DDP: {dp_ratio:.2f}x (target >= 1.1) {'ok' if ok_dp else 'MISS'}")
    print(f"peak memory vs DDP: {mem_ratio:.2f}x (target <= 1.0) {'ok' if ok_mem else 'MISS'}")
    print(f"overhead vs plain loop: {overhead * 100:+.1f}% (target <= 3%) {'ok' if ok_overhead else 'MISS'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "throughput_ratio": dp_ratio, "memory_ratio": mem_ratio,
                       "overhead": overhead, "load_before": load_before, "load_after": load_after}, f, indent=1)
    return 0 if (ok_dp and ok_mem and ok_overhead) else 1


if __name__ == "__main__":
    sys.exit(main())
