#!/usr/bin/python3
"""The torch.distributed peer of `stretch bench comm`: the same sweep, measured the same way.

Ranks are processes started with torch.multiprocessing (spawn), joined with
init_process_group("gloo", init_method="tcp://127.0.0.1:PORT"); each sets torch.set_num_threads(1), as torchrun does
(OMP_NUM_THREADS=1) when it starts several processes per node.

Method, identical to bench/comm/comm_bench.hpp:
  - sizes min, 2 min, ... <= max; "bytes" as nccl-tests counts them (the buffer for all_reduce and broadcast, the
    gathered output for all_gather, the full input for reduce_scatter), rounded down to whole elements (to whole
    ranks x elements for all_gather and reduce_scatter), at least one; a size rounding to the previous row's is skipped;
  - per size: warm-up operations, a barrier, `iters` timed blocking operations (time.perf_counter around the loop), one
    checked operation; time = (end - start) / iters, maximum over the ranks (all_reduce MAX); wrong = elements differing
    from the expected integers, summed over the ranks;
  - default iterations: nccl-tests' -w 5 -n 20, capped at 512 MiB timed (at least 2) and 128 MiB of warm-up (at least 1)
    traffic per row; --warmup/--iters apply to every size;
  - timed operations run on zeros; the checked one on rank-dependent integers ((5 rank + i) % m + 1).

Operations (torch 1.13's gloo process group has neither reduce_scatter nor all_gather_into_tensor):
  all_reduce      dist.all_reduce(t)
  all_gather      dist.all_gather(list(out.chunk(n)), t)      (views of one output tensor)
  reduce_scatter  dist.all_reduce(t); out.copy_(t's chunk of this rank)   -- what a torch user would write
  broadcast       dist.broadcast(t, src=0)

Prints nccl-tests-like rows, or with --json one JSON array of
{"op", "ranks", "bytes", "time_us", "algbw_gbps", "busbw_gbps", "wrong"} rows (the schema of `stretch bench comm --json`).
Exit status: 0 ok, 1 a rank failed / timed out / a result was wrong, 2 bad arguments.
"""

import argparse
import datetime
import json
import re
import socket
import sys
import time

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
DTYPES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "int32": 4, "int64": 8, "uint8": 1}
EXACT = {"fp32": 1 << 24, "fp16": 1 << 11, "bf16": 1 << 8, "uint8": 255, "fp64": 2**31 - 1, "int32": 2**31 - 1,
         "int64": 2**31 - 1}
CHUNK = 1 << 22  # elements per step when filling and checking, to bound temporary memory


def parse_bytes(text):
    m = re.fullmatch(r"([0-9]+)(?:([kKmMgGtT])(?:i?[bB]|i)?|[bB])?", text)
    if not m or int(m.group(1)) == 0:
        return None
    shift = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[(m.group(2) or "").lower()]
    return int(m.group(1)) << shift


def sweep_sizes(lo, hi):
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= 2
    return sizes


def op_bytes(op, size, ranks, elt):
    unit = elt * (ranks if op in ("all_gather", "reduce_scatter") else 1)
    return max(size // unit, 1) * unit


def iteration_plan(nbytes, warmup, iters):
    b = max(nbytes, 1)
    it = iters if iters is not None else min(max((512 << 20) // b, 2), 20)
    wu = warmup if warmup is not None else min(max((128 << 20) // b, 1), 5)
    return wu, it


def modulus(dtype, ranks):
    return min(max(EXACT[dtype] // max(ranks, 1), 1), 61)


def bus_factor(op, n):
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def make_row(op, ranks, nbytes, seconds, wrong):
    algbw = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    return {"op": op, "ranks": ranks, "bytes": nbytes, "time_us": seconds * 1e6, "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor(op, ranks), "wrong": wrong}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- one rank --------------------------------------------------------------------------------------------------------

def _rank_main(rank, world, port, cfg, results):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    tdtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64,
              "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8}[cfg["dtype"]]
    elt = DTYPES[cfg["dtype"]]
    m = modulus(cfg["dtype"], world)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=cfg["timeout"]))

    def values(r, start, count):  # inputs of rank r at [start, start + count), as int64
        return (torch.arange(start, start + count, dtype=torch.int64) + 5 * r) % m + 1

    def fill(t, r):
        for s in range(0, t.numel(), CHUNK):
            c = min(CHUNK, t.numel() - s)
            t[s:s + c].copy_(values(r, s, c))

    def wrong_vs(t, expected_of):  # expected_of(start, count) -> int64 tensor
        w = 0
        for s in range(0, t.numel(), CHUNK):
            c = min(CHUNK, t.numel() - s)
            w += int((t[s:s + c].to(torch.float64) != expected_of(s, c).to(torch.float64)).sum())
        return w

    def sum_values(start, count):
        total = torch.zeros(count, dtype=torch.int64)
        for r in range(world):
            total += values(r, start, count)
        return total

    for op in cfg["ops"]:
        prev = 0
        for size in sweep_sizes(cfg["min_bytes"], cfg["max_bytes"]):
            nbytes = op_bytes(op, size, world, elt)
            if nbytes == prev:
                continue
            prev = nbytes
            warmup, iters = iteration_plan(nbytes, cfg["warmup"], cfg["iters"])
            total = nbytes // elt
            if op == "all_gather":
                inp = torch.zeros(total // world, dtype=tdtype)
                out = torch.zeros(total, dtype=tdtype)
                outs = list(out.chunk(world))

                def run():
                    dist.all_gather(outs, inp)
            elif op == "reduce_scatter":
                inp = torch.zeros(total, dtype=tdtype)
                chunk = total // world
                out = torch.zeros(chunk, dtype=tdtype)

                def run():
                    dist.all_reduce(inp)
                    out.copy_(inp.narrow(0, rank * chunk, chunk))
            elif op == "broadcast":
                inp = torch.zeros(total, dtype=tdtype)

                def run():
                    dist.broadcast(inp, src=0)
            else:
                inp = torch.zeros(total, dtype=tdtype)

                def run():
                    dist.all_reduce(inp)

            for _ in range(warmup):
                run()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                run()
            seconds = (time.perf_counter() - start) / iters

            fill(inp, rank)
            if op in ("all_gather", "reduce_scatter"):
                out.zero_()
            run()
            if op == "all_reduce":
                wrong = wrong_vs(inp, sum_values)
            elif op == "broadcast":
                wrong = wrong_vs(inp, lambda s, c: values(0, s, c))
            elif op == "all_gather":
                wrong = sum(wrong_vs(outs[r], lambda s, c, r=r: values(r, s, c)) for r in range(world))
            else:
                wrong = wrong_vs(out, lambda s, c: sum_values(rank * chunk + s, c))

            t = torch.tensor([seconds], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            w = torch.tensor([wrong], dtype=torch.int64)
            dist.all_reduce(w)
            if rank == 0:
                results.put(make_row(op, world, nbytes, float(t.item()), int(w.item())))
    dist.barrier()
    dist.destroy_process_group()


# ---- driver ----------------------------------------------------------------------------------------------------------

def run_world(world, cfg, on_row, deadline):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    procs = mp.start_processes(_rank_main, args=(world, free_port(), cfg, results), nprocs=world, join=False,
                               start_method="spawn")

    def drain():
        while not results.empty():
            on_row(results.get())

    try:
        while True:
            drain()
            if procs.join(timeout=0.2):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"torch peer: {world} ranks did not finish before the deadline (--timeout)")
        drain()
    finally:
        for p in procs.processes:
            if p.is_alive():
                p.terminate()
        for p in procs.processes:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()


def fmt_time(us):
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="2")
    ap.add_argument("--op", default=",".join(OPS))
    ap.add_argument("-b", "--min-bytes", default="8")
    ap.add_argument("-e", "--max-bytes", default="256M")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("-w", "--warmup", type=int)
    ap.add_argument("-n", "--iters", type=int)
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    def bad(flag, value, expected):
        print(f"torch_comm_bench: error: {flag} = {value}: expected {expected}", file=sys.stderr)
        sys.exit(2)

    try:
        ranks = [int(x) for x in args.ranks.split(",")]
        assert all(1 <= r <= 256 for r in ranks)
    except (ValueError, AssertionError):
        bad("--ranks", args.ranks, "a comma-separated list of rank counts from 1 to 256")
    ops = args.op.split(",")
    if any(o not in OPS for o in ops) or len(set(ops)) != len(ops):
        bad("--op", args.op, "a comma-separated list of " + ", ".join(OPS) + ", each once")
    lo, hi = parse_bytes(args.min_bytes), parse_bytes(args.max_bytes)
    if lo is None:
        bad("--min-bytes", args.min_bytes, "a size such as 8, 64K, 256M or 1G")
    if hi is None or hi < lo:
        bad("--max-bytes", args.max_bytes, "a size such as 8, 64K, 256M or 1G, at least --min-bytes")
    if args.dtype not in DTYPES:
        bad("--dtype", args.dtype, "one of " + ", ".join(DTYPES))
    if args.warmup is not None and args.warmup < 0:
        bad("--warmup", args.warmup, "an integer >= 0")
    if args.iters is not None and args.iters < 1:
        bad("--iters", args.iters, "an integer >= 1")
    cfg = {"ops": ops, "min_bytes": lo, "max_bytes": hi, "dtype": args.dtype, "warmup": args.warmup,
           "iters": args.iters, "timeout": args.timeout}

    rows = []
    deadline = time.monotonic() + args.timeout

    def on_row(row):
        rows.append(row)
        if args.json:
            print(f"torch_comm_bench: {row['ranks']} ranks {row['op']:<14} {row['bytes']:>12} B "
                  f"{row['time_us']:>10.2f} us {row['busbw_gbps']:>7.3f} GB/s busbw", file=sys.stderr, flush=True)
        else:
            print(f"{row['op']:>14} {row['ranks']:>5} {row['bytes']:>12} {fmt_time(row['time_us'])} "
                  f"{row['algbw_gbps']:7.3f} {row['busbw_gbps']:7.3f} {row['wrong']:>6}", flush=True)

    if not args.json:
        print(f"# torch {__import__('torch').__version__} gloo, {args.dtype}, ranks as processes on 127.0.0.1")
        print(f"#{'op':>13} {'ranks':>5} {'size (B)':>12} {'time us':>7} {'algbw':>7} {'busbw':>7} {'#wrong':>6}")
    status = 0
    try:
        for world in ranks:
            print(f"torch_comm_bench: {world} ranks, torch gloo (processes), {lo} .. {hi} B, {args.op}",
                  file=sys.stderr, flush=True)
            run_world(world, cfg, on_row, deadline)
    except Exception as e:  # a rank failed (ProcessRaisedException carries its traceback) or the deadline passed
        print(f"torch_comm_bench: error: {e}", file=sys.stderr)
        status = 1
    if args.json:
        print(json.dumps(rows))
    if any(r["wrong"] for r in rows):
        print("torch_comm_bench: error: some results were wrong (column wrong)", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
