#!/usr/bin/python3
"""Side-by-side communication benchmark: `stretch bench comm` (Stretch's Gloo backend) vs torch.distributed (gloo).

Runs the same sweep with both in the same run, ranks as processes on 127.0.0.1:
  (a) BUILD/bin/stretch bench comm --backend gloo --ranks R --op OPS --min-bytes B --max-bytes E --json
  (b) bench/comm_peer/torch_comm_bench.py with the same flags (Debian python3-torch, gloo process group)
Both print JSON arrays of {"op", "ranks", "bytes", "time_us", "algbw_gbps", "busbw_gbps", "wrong"} rows with the same
method (tools/comm_bench.hpp). With --repeat K the two alternate K times (ours first on odd rounds, torch first on
even ones) and each row keeps its fastest time, which damps the noise of a shared machine.

Targets, for every row: bytes >= 64 KiB: our busbw >= 1.0 x torch's; bytes < 64 KiB: our time <= 1.1 x torch's.
torch 1.13's gloo group has no reduce_scatter: its rows are all_reduce + taking the rank's chunk (marked "*").

Exit status: 0 every target met; 1 a target missed or a result wrong; 2 setup errors (binary missing, a run failed,
the two sweeps disagree on their rows).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

from bounded_run import Failed, Stalled, run_bounded
from torch_peer import python_with_torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEER = os.path.join(HERE, "comm_peer", "torch_comm_bench.py")
SMALL = 64 * 1024
BUSBW_TARGET = 1.0
LATENCY_TARGET = 1.1


def run_json(cmd, what, timeout):
    print(f"compare_comm: running {what}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    start = time.monotonic()
    # Raises Stalled (every process of the run killed) or Failed; main() reports which side.
    (returncode, stdout, stderr), = run_bounded([cmd], what, timeout, ok_codes=range(256))
    took = time.monotonic() - start
    try:
        rows = json.loads(stdout)
    except json.JSONDecodeError:
        rows = None
    if returncode not in (0, 1) or not isinstance(rows, list):
        sys.stderr.write(stderr[-4000:])
        raise Failed(f"{what} failed (exit {returncode})")
    if returncode == 1 and not any(r.get("wrong") for r in rows):
        sys.stderr.write(stderr[-4000:])
        raise Failed(f"{what} failed (exit 1)")
    print(f"compare_comm: {what}: {len(rows)} rows in {took:.1f} s", file=sys.stderr, flush=True)
    return rows


def key(row):
    return (row["op"], row["ranks"], row["bytes"])


def keep_fastest(best, rows):
    for r in rows:
        k = key(r)
        if k not in best or r["time_us"] < best[k]["time_us"]:
            best[k] = dict(r, wrong=max(r["wrong"], best.get(k, r)["wrong"]))


def fmt_bytes(b):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if b >= (1 << shift) and b % (1 << shift) == 0:
            return f"{b >> shift}{unit}"
    return str(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="build directory holding bin/stretch")
    ap.add_argument("--stretch", help="the stretch executable (default BUILD/bin/stretch)")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--op", default="all_reduce,all_gather,reduce_scatter,broadcast")
    ap.add_argument("--min-bytes", default="8")
    ap.add_argument("--max-bytes", default="256M")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--warmup", help="warm-up iterations for every size (default: per-size plan)")
    ap.add_argument("--iters", help="timed iterations for every size (default: per-size plan)")
    ap.add_argument("--repeat", type=int, default=1, help="alternate the two sweeps this many times, keep fastest")
    ap.add_argument("--quick", action="store_true", help="smaller sweep: 8 B .. 4M (same ranks and ops)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="limit per sweep, seconds")
    ap.add_argument("--python", help="interpreter with torch for the peer (default: this one, else /usr/bin/python3)")
    ap.add_argument("--json", metavar="FILE", help="also write the merged rows and ratios to FILE")
    args = ap.parse_args()
    if args.quick:
        args.max_bytes = "4M"

    stretch = args.stretch or os.path.join(args.build, "bin", "stretch")
    if not os.access(stretch, os.X_OK):
        print(f"compare_comm: error: {stretch} is not an executable (build the `stretch` target, or pass --stretch)",
              file=sys.stderr)
        return 2
    common = ["--ranks", args.ranks, "--op", args.op, "--min-bytes", args.min_bytes, "--max-bytes", args.max_bytes,
              "--dtype", args.dtype, "--timeout", str(args.timeout), "--json"]
    if args.warmup:
        common += ["--warmup", args.warmup]
    if args.iters:
        common += ["--iters", args.iters]
    ours_cmd = [stretch, "bench", "comm", "--backend", "gloo"] + common
    torch_cmd = [python_with_torch(args.python, "compare_comm"), PEER] + common

    load_before = os.getloadavg()
    ours, peer = {}, {}
    for round_ in range(max(args.repeat, 1)):
        order = [("ours", ours_cmd, ours), ("torch", torch_cmd, peer)]
        if round_ % 2 == 1:
            order.reverse()
        for what, cmd, best in order:
            try:
                keep_fastest(best, run_json(cmd, f"{what} (round {round_ + 1})", args.timeout + 60))
            except (Stalled, Failed) as e:
                print(f"compare_comm: error: {e}", file=sys.stderr)
                names = [w for w, _, _ in order]
                done = names[:names.index(what)]
                print(f"compare_comm: finished before it: {round_} full round(s) and, in round "
                      f"{round_ + 1}, {', '.join(done) or 'nothing'}; rows so far: ours {len(ours)}, "
                      f"torch {len(peer)}", file=sys.stderr)
                return 3
    load_after = os.getloadavg()

    if set(ours) != set(peer):
        print("compare_comm: error: the two sweeps measured different rows: "
              f"only ours {sorted(set(ours) - set(peer))[:5]}, only torch {sorted(set(peer) - set(ours))[:5]}",
              file=sys.stderr)
        return 2

    torch_version = subprocess.run([torch_cmd[0], "-c", "import torch; print(torch.__version__)"],
                                   stdout=subprocess.PIPE, text=True).stdout.strip()
    print(f"# stretch bench comm (gloo backend) vs torch {torch_version} gloo; {os.cpu_count()} CPUs "
          f"({platform.processor() or platform.machine()}), load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after; dtype {args.dtype}; best of {max(args.repeat, 1)}")
    print(f"# targets: busbw ratio (ours/torch) >= {BUSBW_TARGET} from 64K; latency ratio (ours/torch) <= "
          f"{LATENCY_TARGET} below 64K. * torch: all_reduce + own chunk (gloo has no reduce_scatter)")
    head = (f"{'op':<15} {'ranks':>5} {'bytes':>6} {'ours busbw':>11} {'torch busbw':>11} {'busbw x':>8} "
            f"{'ours us':>9} {'torch us':>9} {'latency x':>9}  status")
    print(head)
    print("-" * len(head))
    merged, misses = [], []
    order = {op: i for i, op in enumerate(args.op.split(","))}
    for k in sorted(ours, key=lambda k: (k[1], order.get(k[0], 99), k[2])):
        o, t = ours[k], peer[k]
        bw_ratio = o["busbw_gbps"] / t["busbw_gbps"] if t["busbw_gbps"] > 0 else float("inf")
        lat_ratio = o["time_us"] / t["time_us"] if t["time_us"] > 0 else float("inf")
        small = k[2] < SMALL
        if o["wrong"]:
            status = f"WRONG ({o['wrong']})"
        elif small:
            status = "ok" if lat_ratio <= LATENCY_TARGET else "MISS latency"
        else:
            status = "ok" if bw_ratio >= BUSBW_TARGET else "MISS busbw"
        if t["wrong"]:
            status += f" (torch wrong {t['wrong']})"
        if status != "ok":
            misses.append(k)
        op = k[0] + ("*" if k[0] == "reduce_scatter" else "")
        print(f"{op:<15} {k[1]:>5} {fmt_bytes(k[2]):>6} {o['busbw_gbps']:>11.3f} {t['busbw_gbps']:>11.3f} "
              f"{bw_ratio:>8.2f} {o['time_us']:>9.1f} {t['time_us']:>9.1f} {lat_ratio:>9.2f}  {status}")
        merged.append({"op": k[0], "ranks": k[1], "bytes": k[2], "ours": o, "torch": t, "busbw_ratio": bw_ratio,
                       "latency_ratio": lat_ratio, "target": "latency" if small else "busbw", "status": status})
    print()
    print(f"{len(merged) - len(misses)} of {len(merged)} rows meet their target; "
          f"{len(misses)} missed" + (": " + ", ".join(f"{op} {r} ranks {fmt_bytes(b)}" for op, r, b in misses)
                                      if misses else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_before": load_before, "load_after": load_after, "rows": merged}, f, indent=1)
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
