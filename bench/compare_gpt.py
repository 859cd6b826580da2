#!/usr/bin/python3
"""Side-by-side GPT benchmark: `stretch-train-gpt` (examples/gpt, the Stretch engine) vs the same
model, data, data order, optimizer, schedule and clipping in PyTorch (bench/gpt_peer/gpt_peer.py,
Debian's python3-torch), fp32 on CPU by default, one thread per rank, ranks as processes over Gloo.

--device cuda --dtype fp32|fp16|bf16 runs both sides on the GPU (issue 33's table): ours with
STRETCH_ACCELERATOR=cuda and the config's fp16/bf16 section, the peer with autocast (and a
GradScaler for fp16); rank r on GPU r mod the GPUs, over NCCL when every rank has a GPU, else Gloo
staged through host memory (both sides choose alike). The memory compared is then the device
memory the caching allocator reserved at its peak (ours: LibTorch's CUDA allocator statistics in
stretch-train-gpt's summary; the peer: torch.cuda.max_memory_reserved), the largest rank's; peak
RSS is printed beside it. Part (a) runs in fp32 only.

(a) correctness, for each rank count R of --ranks (default 1 and 2): ours trains the small preset
    with dropout 0 for --check-steps steps (default 20) and writes its initial weights
    (--export-init); the peer trains from those weights, same config and seed. The per-step
    losses (mean of the step's micro batches, averaged over the ranks) must agree within
    --tolerance (default 1e-4). Step 1's loss depends only on the weights and the data, so a
    step-1 difference points at the model or the data order; later ones at the optimizer,
    schedule or clipping.
    (This check found the engine's clipping norm summed in fp32 over the whole flat gradient,
    ~4e-5 relative off on 0.8 M elements: 7e-5 loss drift in 20 steps. The engine now sums
    per-parameter norms in double, as clip_grad_norm_ and DeepSpeed do.)
(b) throughput and memory, for each R: the bench preset (6 layers, 8 heads, width 512, context
    256, ~19 M parameters, dropout 0.1, fixtures/jobs/gpt/ds_config_bench.json) for --steps
    steps (default 12). Tokens/s = train_batch_size x context / the median step time. Ours
    reports the median over all its steps (its --json summary has no warm-up exclusion; the
    median is robust to the first one or two slow steps); the peer leaves out its first
    --warmup steps (default 2) and takes the median of the rest; both take the upper median.
    Peak RSS: the largest rank's ru_maxrss. With --repeat K (default 2) the runs alternate
    order each round and every run keeps its best tokens/s and its lowest peak RSS.
    Targets per R: ours/peer tokens/s >= 1.0 and ours/peer peak RSS (device memory on a GPU) <= 1.0.

Ours runs as R processes of BUILD/bin/stretch-train-gpt with RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR=127.0.0.1, MASTER_PORT and OMP_NUM_THREADS=1 (one process without them when R = 1);
the peer as `gpt_peer.py --ranks R` (torch.multiprocessing, gloo, DDP with no_sync, or the bare
model on one rank). Every run is bounded by --timeout seconds: a run that outlives it is killed
and named on stderr, the table of the finished runs is still printed, and the exit status is 3.

Exit status: 0 every check and target met, 1 one missed (losses disagree, or a ratio), 2 setup
error (no binary, no torch, bad options), 3 a run stalled or failed (named on stderr).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

from bounded_run import Failed, Stalled, run_bounded
from torch_peer import python_with_torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "gpt_peer"))
from gpt_peer import read_config  # noqa: E402 (bench/gpt_peer/gpt_peer.py; no torch at import)
REPO = os.path.dirname(HERE)
PEER = os.path.join(HERE, "gpt_peer", "gpt_peer.py")
DATA = os.path.join(REPO, "fixtures", "data", "text", "licenses.txt.gz")
CONFIGS = {"small": os.path.join(REPO, "fixtures", "jobs", "gpt", "ds_config.json"),
           "bench": os.path.join(REPO, "fixtures", "jobs", "gpt", "ds_config_bench.json")}
QUIET = ["--log-every", "0", "--eval-every", "0", "--sample-chars", "0"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(text, label):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise Failed(f"{label}: no JSON summary on stdout: {text.strip()[-400:]!r}")


def run_ours(exe, ranks, args, timeout, label, device="cpu", extra_env=None):
    port = free_port()
    commands = []
    for r in range(ranks):
        env = dict(os.environ, OMP_NUM_THREADS="1", STRETCH_ACCELERATOR=device, **(extra_env or {}))
        for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(key, None)
        if ranks > 1:
            env.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
        commands.append(([exe] + args, env))
    results = run_bounded(commands, label, timeout)
    return last_json(results[0][1], label)


def run_peer(python, ranks, args, timeout, label):
    """The PyTorch peer's run. Its own --timeout ends it 15 s before ours, so that a hung rank
    prints its stacks (torch_peer.spawn_ranks) before it is killed. A peer that hangs (torch's
    gloo, not our code) is tried once more, saying so; a peer that fails otherwise is not."""
    cmd = [python, PEER, "--ranks", str(ranks), "--json", "--timeout", f"{max(timeout - 15, 1):g}"] + args
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for attempt in (1, 2):
        try:
            return last_json(run_bounded([cmd], label, timeout, env=env)[0][1], label)
        except (Stalled, Failed) as e:
            if attempt == 2 or (isinstance(e, Failed) and "timed out after" not in str(e)):
                raise
            print(f"compare_gpt: {e}\ncompare_gpt: the peer hung; running it once more", file=sys.stderr,
                  flush=True)


def mib(r, key="peak_rss_bytes"):
    return r.get(key, 0) / 2**20


class DriverMemory:
    """Peak device memory in use as the driver sees it (NVML's memory.used of every visible GPU,
    summed) while a run lasts, less what was in use before it: the CUDA contexts, the allocator's
    reserve and whatever a library allocates beside the allocator, all ranks together. Sampled
    every 20 ms on a thread (pynvml, else nvidia-smi). None where no driver answers."""

    def __init__(self):
        self.read = None
        try:
            import pynvml  # nvidia-ml-py
            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.read = lambda: sum(pynvml.nvmlDeviceGetMemoryInfo(h).used for h in handles)
        except Exception:  # no pynvml or no driver: try nvidia-smi
            def smi():
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=10)
                return sum(int(x) for x in out.stdout.split()) * 2**20
            try:
                smi()
                self.read = smi
            except Exception:
                self.read = None

    def measure(self, fn):
        """fn()'s result with peak_driver_used_bytes added (when a driver answers)."""
        if self.read is None:
            return fn()
        import threading
        baseline = self.read()
        peak = [baseline]
        done = threading.Event()

        def sample():
            while not done.wait(0.02):
                peak[0] = max(peak[0], self.read())
        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            result = fn()
        finally:
            done.set()
            thread.join()
        peak[0] = max(peak[0], self.read())
        return dict(result, peak_driver_used_bytes=peak[0] - baseline)


def parse_shape(text):
    """--shape LAYERSxHEADSxWIDTH as the two sides' --layers/--heads/--width arguments."""
    if not text:
        return []
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--shape {text!r}: expected LAYERSxHEADSxWIDTH, e.g. 12x12x768")
    layers, heads, width = (int(p) for p in parts)
    if width % heads:
        raise ValueError(f"--shape {text!r}: the width {width} is not a multiple of the heads {heads}")
    return ["--layers", str(layers), "--heads", str(heads), "--width", str(width)]


def with_precision(path, dtype, tmp):
    """`path`'s config with DeepSpeed's fp16 or bf16 section enabled (both sides read it: ours
    trains in that precision with fp32 master weights, the peer under autocast, fp16 with a
    GradScaler); `path` itself for fp32."""
    if dtype == "fp32":
        return path
    config = read_config(path)  # the peer's reader: DeepSpeed's // and /* */ comments
    config.pop("fp16", None)
    config.pop("bf16", None)
    config[dtype] = {"enabled": True}
    out = os.path.join(tmp, f"{dtype}_{os.path.basename(path)}")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return out


# ---- (a) correctness ---------------------------------------------------------------------------

def check_losses(ours, peer):
    a, b = ours["losses"], peer["losses"]
    if len(a) != len(b) or not a:
        return {"steps": (len(a), len(b)), "step1_diff": float("nan"), "max_diff": float("inf"),
                "worst_step": 0, "ours": a, "peer": b}
    diffs = [abs(x - y) for x, y in zip(a, b)]
    worst = max(range(len(diffs)), key=lambda i: diffs[i])
    return {"steps": len(a), "step1_diff": diffs[0], "max_diff": diffs[worst], "worst_step": worst + 1,
            "diffs": diffs, "ours": a, "peer": b,
            "parameters": (ours.get("parameters"), peer.get("parameters"))}


def print_correctness(checks, ranks_list, steps, tolerance):
    print(f"# (a) correctness: small preset, dropout 0, fp32, {steps} steps from the same initial "
          f"weights; per-step loss |ours - peer| (target <= {tolerance:g})")
    print(f"{'ranks':<6} {'step-1 |diff|':>14} {'max |diff|':>11} {'at step':>8} {'ours final':>11} "
          f"{'peer final':>11}  result")
    for r in ranks_list:
        c = checks.get(r)
        if c is None:
            print(f"{r:<6} {'-':>14} {'-':>11} {'-':>8} {'-':>11} {'-':>11}  -")
            continue
        ok = c["max_diff"] <= tolerance
        print(f"{r:<6} {c['step1_diff']:>14.3e} {c['max_diff']:>11.3e} {c['worst_step']:>8} "
              f"{c['ours'][-1] if c['ours'] else float('nan'):>11.6f} "
              f"{c['peer'][-1] if c['peer'] else float('nan'):>11.6f}  {'ok' if ok else 'MISS'}")


# ---- (b) throughput and memory -----------------------------------------------------------------

# The memory a target compares: device memory reserved by the caching allocator on a GPU
# (the engine's accelerator statistics against torch.cuda.max_memory_reserved), else peak RSS.
MEMORY = {"cpu": ("peak_rss_bytes", "peak RSS"),
          "cuda": ("peak_device_reserved_bytes", "device memory")}


def best(a, b):
    if a is None:
        return dict(b)
    kept = dict(a, tokens_per_second=max(a["tokens_per_second"], b["tokens_per_second"]))
    for key in ("peak_rss_bytes", "peak_device_reserved_bytes", "peak_device_allocated_bytes",
                "peak_driver_used_bytes"):
        if key in a and key in b:
            kept[key] = min(a[key], b[key])
    return kept


def print_throughput(results, ranks_list, title, device="cpu"):
    key, name = MEMORY[device]
    print(title)
    print(f"{'run':<38} {'tokens/s':>10} {'peak RSS MiB':>13} {'device MiB':>11} {'driver MiB':>11} "
          f"{'tokens/s ours/peer':>19} {name + ' ours/peer':>25} {'driver ours/peer':>17}")
    for r in ranks_list:
        ours, peer = results.get(("ours", r)), results.get(("peer", r))
        for side, res in (("Stretch (stretch-train-gpt)", ours), ("PyTorch (gpt_peer.py)", peer)):
            label = f"{side}, {r} rank{'s' if r > 1 else ''}"
            if res is None:
                print(f"{label:<38} {'-':>10} {'-':>13} {'-':>11} {'-':>11}")
            else:
                print(f"{label:<38} {res['tokens_per_second']:>10.0f} {mib(res):>13.0f} "
                      f"{mib(res, 'peak_device_reserved_bytes'):>11.0f} "
                      f"{mib(res, 'peak_driver_used_bytes'):>11.0f}", end="")
                if side.startswith("PyTorch") and ours is not None and res.get(key):
                    driver = (f"{ours['peak_driver_used_bytes'] / res['peak_driver_used_bytes']:>16.2f}x"
                              if ours.get("peak_driver_used_bytes") and res.get("peak_driver_used_bytes")
                              else f"{'-':>17}")
                    print(f" {ours['tokens_per_second'] / res['tokens_per_second']:>18.2f}x "
                          f"{ours.get(key, 0) / res[key]:>24.2f}x {driver}")
                else:
                    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="build directory holding bin/stretch-train-gpt (default: %(default)s)")
    ap.add_argument("--ranks", default="1,2",
                    help="comma-separated rank counts for both parts (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=12,
                    help="(b) steps per throughput run (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="(b) the peer's first N steps are not timed (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="(b) rounds, alternating the order; best tokens/s and lowest RSS kept "
                         "(default: %(default)s)")
    ap.add_argument("--check-steps", type=int, default=20,
                    help="(a) steps of the loss-curve comparison (default: %(default)s)")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="(a) largest allowed per-step |loss difference| (default: %(default)g)")
    ap.add_argument("--seed", type=int, default=0, help="--seed of both sides (default: %(default)s)")
    ap.add_argument("--data", default=DATA, help="text corpus for both sides (default: %(default)s)")
    ap.add_argument("--only", choices=["correctness", "throughput"],
                    help="run one part only (default: both)")
    ap.add_argument("--python", help="interpreter with torch (default: this one, else /usr/bin/python3)")
    ap.add_argument("--timeout", type=float, default=900,
                    help="seconds allowed for each run (one side, one rank count, one round; "
                         "default: %(default)s)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where both sides train; cuda: STRETCH_ACCELERATOR=cuda for ours, "
                         "gpt_peer.py --device cuda, memory = device memory reserved "
                         "(default: %(default)s)")
    ap.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default="fp32",
                    help="precision of both sides: the config's fp16/bf16 section for ours, "
                         "autocast (+ GradScaler for fp16) for the peer; (a) runs in fp32 only "
                         "(default: %(default)s)")
    ap.add_argument("--shape", metavar="LxHxW",
                    help="(b) the model's layers, heads and width on both sides instead of the bench "
                         "preset's 6x8x512 (e.g. 12x12x768, ~85 M parameters)")
    ap.add_argument("--ours-env", metavar="NAME=VALUE", action="append", default=[],
                    help="(b) a variable for our side only, e.g. PYTORCH_CUDA_ALLOC_CONF="
                         "expandable_segments:True (repeatable)")
    ap.add_argument("--json", metavar="FILE", help="also write the results to FILE")
    args = ap.parse_args()
    try:
        ranks_list = [int(x) for x in args.ranks.split(",") if x.strip()]
    except ValueError:
        ranks_list = []
    problems = []
    if not ranks_list or any(r < 1 for r in ranks_list):
        problems.append(f"--ranks {args.ranks!r}: comma-separated positive integers")
    if args.steps < 1 or not 0 <= args.warmup < args.steps:
        problems.append(f"--steps {args.steps} / --warmup {args.warmup}: steps >= 1, 0 <= warmup < steps")
    try:
        shape = parse_shape(args.shape)
    except ValueError as e:
        shape = []
        problems.append(str(e))
    ours_env = {}
    for item in args.ours_env:
        name, eq, value = item.partition("=")
        if not eq or not name:
            problems.append(f"--ours-env {item!r}: expected NAME=VALUE")
        ours_env[name] = value
    if args.check_steps < 1 or args.repeat < 1:
        problems.append("--check-steps and --repeat must be positive")
    exe = os.path.join(args.build, "bin", "stretch-train-gpt")
    if not os.access(exe, os.X_OK):
        problems.append(f"{exe} not found; build the project first")
    if not os.path.isfile(args.data):
        problems.append(f"--data {args.data}: no such file")
    if args.dtype == "fp16" and args.device != "cuda":
        problems.append("--dtype fp16: needs --device cuda (the peer's fp16 is CUDA autocast "
                        "with a GradScaler)")
    if problems:
        for p in problems:
            print(f"compare_gpt: error: {p}", file=sys.stderr)
        return 2
    python = python_with_torch(args.python, "compare_gpt")
    torch_version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                                   stdout=subprocess.PIPE, text=True).stdout.strip()
    common = ["--seed", str(args.seed), "--data", args.data]
    peer_device = ["--device", args.device]
    out = {"torch_version": torch_version, "cpus": os.cpu_count(), "load_before": os.getloadavg(),
           "device": args.device, "dtype": args.dtype, "shape": args.shape,
           "ours_env": args.ours_env, "correctness": {},
           "throughput": {}}
    tmp_configs = tempfile.TemporaryDirectory(prefix="compare_gpt_configs.")
    mem_key, mem_name = MEMORY[args.device]
    checks = {}
    results = {}
    failed = []

    def stop(error, where):
        kind = "stalled" if isinstance(error, Stalled) else "failed"
        print(f"compare_gpt: error: {error}", file=sys.stderr)
        if args.only != "throughput":
            print_correctness(checks, ranks_list, args.check_steps, args.tolerance)
        if args.only != "correctness" and (results or where.startswith("(b)")):
            print_throughput(results, ranks_list, f"# (b) finished before {where} {kind} (best of the "
                                                  "rounds done; missing runs are -)", args.device)
        if args.json:
            out["correctness"] = {str(r): c for r, c in checks.items()}
            out["throughput"] = {f"{side}_{r}": res for (side, r), res in results.items()}
            out["stalled" if kind == "stalled" else "failed"] = str(error)
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
        return 3

    # (a) correctness: fp32 only (half precision rounds differently on the two sides: ours keeps
    # fp16/bf16 weights with fp32 masters, the peer fp32 weights under autocast)
    if args.only != "throughput" and args.dtype != "fp32":
        print(f"# (a) correctness: skipped for --dtype {args.dtype} (the loss-curve check is "
              "fp32's; run it with --dtype fp32)")
    elif args.only != "throughput":
        with tempfile.TemporaryDirectory(prefix="compare_gpt.") as tmp:
            for r in ranks_list:
                init = os.path.join(tmp, f"init_{r}.pt")
                cfg = CONFIGS["small"]
                ours_args = (["--preset", "small", "--config", cfg, "--dropout", "0",
                              "--steps", str(args.check_steps), "--export-init", init, "--json"]
                             + QUIET + common)
                peer_args = (["--preset", "small", "--config", cfg, "--dropout", "0",
                              "--steps", str(args.check_steps), "--init-from", init] + common)
                try:
                    label = f"(a) Stretch, small, {r} rank(s)"
                    print(f"compare_gpt: {label}", file=sys.stderr, flush=True)
                    ours = run_ours(exe, r, ours_args, args.timeout, label, args.device)
                    label = f"(a) PyTorch peer, small, {r} rank(s)"
                    print(f"compare_gpt: {label}", file=sys.stderr, flush=True)
                    peer = run_peer(python, r, peer_args + peer_device, args.timeout, label)
                except (Stalled, Failed) as e:
                    return stop(e, label)
                checks[r] = check_losses(ours, peer)
                if ours.get("parameters") != peer.get("parameters"):
                    print(f"compare_gpt: warning: parameter counts differ: ours {ours.get('parameters')}, "
                          f"peer {peer.get('parameters')}", file=sys.stderr)
                if checks[r]["max_diff"] > args.tolerance:
                    failed.append(f"losses on {r} rank(s)")
        out["correctness"] = {str(r): c for r, c in checks.items()}
        print_correctness(checks, ranks_list, args.check_steps, args.tolerance)

    # (b) throughput and memory
    if args.only != "correctness":
        cfg = with_precision(CONFIGS["bench"], args.dtype, tmp_configs.name)
        base = ["--preset", "bench", "--config", cfg, "--steps", str(args.steps)] + shape + common
        driver = DriverMemory() if args.device == "cuda" else None
        for k in range(args.repeat):
            runs = []
            for r in ranks_list:
                runs.append((("ours", r), f"Stretch, bench, {r} rank(s)",
                             lambda label, r=r: run_ours(exe, r, base + ["--json", "--eval-windows", "1"]
                                                         + QUIET, args.timeout, label, args.device,
                                                         ours_env)))
                runs.append((("peer", r), f"PyTorch peer, bench, {r} rank(s)",
                             lambda label, r=r: run_peer(python, r, base + ["--warmup", str(args.warmup)]
                                                         + peer_device, args.timeout, label)))
            if k % 2 == 1:
                runs.reverse()
            for key, name, fn in runs:
                label = f"(b) round {k + 1}: {name}"
                print(f"compare_gpt: {label}", file=sys.stderr, flush=True)
                try:
                    result = driver.measure(lambda: fn(label)) if driver else fn(label)
                    results[key] = best(results.get(key), result)
                except (Stalled, Failed) as e:
                    return stop(e, f"(b) round {k + 1}'s {name}")
        load_after = os.getloadavg()
        print(f"# (b) throughput: bench preset (6 x 512, context 256, dropout 0.1"
              f"{'; shape ' + args.shape if args.shape else ''}), {args.dtype} on "
              f"{args.device}, {args.steps} steps (peer: first {args.warmup} untimed), best of "
              f"{args.repeat}; torch {torch_version}; {os.cpu_count()} CPUs; load "
              f"{out['load_before'][0]:.2f} -> {load_after[0]:.2f}")
        print_throughput(results, ranks_list, "", args.device)
        for r in ranks_list:
            ours, peer = results[("ours", r)], results[("peer", r)]
            speed = ours["tokens_per_second"] / peer["tokens_per_second"]
            if not peer.get(mem_key) or not ours.get(mem_key):
                print(f"compare_gpt: error: {r} rank(s): no {mem_key} in "
                      f"{'our' if not ours.get(mem_key) else 'the peer'}'s summary (a build "
                      "without CUDA in its LibTorch reports none)", file=sys.stderr)
                failed.append(f"{mem_name} on {r} rank(s) not measured")
                continue
            memory = ours[mem_key] / peer[mem_key]
            ok_speed, ok_memory = speed >= 1.0, memory <= 1.0
            print(f"{r} rank(s): tokens/s ours/peer {speed:.2f}x (target >= 1.0) "
                  f"{'ok' if ok_speed else 'MISS'}; {mem_name} ours/peer {memory:.2f}x "
                  f"(target <= 1.0) {'ok' if ok_memory else 'MISS'}")
            if not ok_speed:
                failed.append(f"tokens/s on {r} rank(s)")
            if not ok_memory:
                failed.append(f"{mem_name} on {r} rank(s)")
            driver_ratio = (ours["peak_driver_used_bytes"] / peer["peak_driver_used_bytes"]
                            if ours.get("peak_driver_used_bytes") and peer.get("peak_driver_used_bytes")
                            else None)
            if driver_ratio is not None:
                print(f"{r} rank(s): device memory in use by the driver's count ours/peer "
                      f"{driver_ratio:.2f}x (target <= 1.0) {'ok' if driver_ratio <= 1.0 else 'MISS'}")
                if driver_ratio > 1.0:
                    failed.append(f"driver-counted device memory on {r} rank(s)")
            out["throughput"][str(r)] = {"ours": ours, "peer": peer, "tokens_per_second_ratio": speed,
                                         "memory_ratio": memory, "memory": mem_key,
                                         "driver_memory_ratio": driver_ratio}
        out["load_after"] = load_after

    out["missed"] = failed
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if failed:
        print(f"compare_gpt: missed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
