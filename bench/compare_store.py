"""Stretch's TCPStore against PyTorch's TCPStore: the rendezvous barrier of N clients (issue 43).

For each N (default 1,024 / 4,096 / 8,192 / 16,384; 8,192 is the most PyTorch 1.13's master can
serve under a 20,000-descriptor limit, its clients holding two connections each) runs
stretch-bench-store (bench/store/) and store_peer/torch_store_bench.py in the same run, one after
the other, --repeat times (the first side alternates from one round to the next), each under
bounded_run.py's time limit, and prints per N, from each side's run with the median barrier: the
time to connect every client, the barrier time (go -> every client has added, waited for the last
one's key, set its own key and read its neighbour's), the server's CPU time over the barrier per
client, and the ratio torch / stretch of the barrier times. Target: the ratio is at least 1 at
every N. Both sides check their answers (every get returns the neighbour's value and the counter
ends at N); a wrong answer fails the comparison.

Exit status: 0 every target met, 1 a target missed or a wrong answer, 2 setup error (missing
binary, no torch), 3 a run stalled or failed (the finished rows are still printed). A side that
cannot get the descriptors for an N says so in its row; when it is the peer, that row has no
ratio and does not change the status (PyTorch 1.13 needs 2N descriptors in its master).
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bounded_run import Failed, Stalled, run_bounded  # noqa: E402
from torch_peer import python_with_torch  # noqa: E402


def run_side(name, argv, timeout):
    """One side's JSON result, or a string saying why there is none."""
    try:
        [(rc, out, err)] = run_bounded([argv], f"{name}", timeout, ok_codes=(0, 1, 2))
    except Stalled as e:
        return f"stalled: {e}"
    except Failed as e:
        return f"failed: {e}"
    if rc == 2:
        reason = (err.strip().splitlines() or ["setup error"])[-1]
        reason = reason.split(": error: ", 1)[-1]
        return f"cannot run: {reason}"
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        return f"failed: {name} printed no result"
    return json.loads(lines[-1])


def median_run(runs):
    """The run with the median barrier time (the lower middle one of an even count), or the
    first failure's text when any run failed."""
    for r in runs:
        if not isinstance(r, dict):
            return r
    ordered = sorted(runs, key=lambda r: r["barrier_s"])
    return ordered[(len(ordered) - 1) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"),
                   help="build directory holding bin/stretch-bench-store (default <repo>/build)")
    p.add_argument("--python", help="interpreter for the torch peer (default: one that imports torch)")
    p.add_argument("--clients", default="1024,4096,8192,16384", help="comma-separated N")
    p.add_argument("--per-proc", type=int, default=1024, help="clients (threads) per process")
    p.add_argument("--timeout", type=float, default=600, help="limit per side and N, seconds")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per side and N, alternating which side goes first; the median "
                        "barrier is reported (default 3)")
    p.add_argument("--json", help="write every row (and every run) to FILE")
    args = p.parse_args()
    try:
        sizes = [int(n) for n in args.clients.split(",") if n]
    except ValueError:
        p.error(f"--clients {args.clients!r}: expected comma-separated integers")
    if not sizes or min(sizes) < 1:
        p.error(f"--clients {args.clients!r}: expected positive integers")
    if args.repeat < 1:
        p.error(f"--repeat {args.repeat}: expected a positive count")
    binary = os.path.join(args.build, "bin", "stretch-bench-store")
    if not os.access(binary, os.X_OK):
        print(f"compare_store.py: error: {binary} not found; build the stretch-bench-store target",
              file=sys.stderr)
        return 2
    python = python_with_torch(args.python, "compare_store.py")
    peer = os.path.join(HERE, "store_peer", "torch_store_bench.py")
    store_timeout = str(max(1.0, args.timeout - 5))

    rows = []
    status = 0
    header = (f"{'clients':>8}  {'stretch connect':>15}  {'stretch barrier':>15}  "
              f"{'server us/client':>16}  {'torch connect':>13}  {'torch barrier':>13}  "
              f"{'server us/client':>16}  {'torch/stretch':>13}  target")
    print(header, flush=True)
    for index, n in enumerate(sizes):
        common = ["--clients", str(n), "--per-proc", str(args.per_proc), "--timeout", store_timeout]
        sides = [("stretch", [binary] + common), ("torch", [python, peer] + common)]
        if index % 2 == 1:
            sides.reverse()
        runs = {"stretch": [], "torch": []}
        for repeat in range(args.repeat):
            for name, argv in (sides if repeat % 2 == 0 else sides[::-1]):
                if runs[name] and not isinstance(runs[name][-1], dict):
                    continue  # stalled or cannot run: once is enough
                runs[name].append(run_side(f"{name} N={n}", argv, args.timeout))
        ours, theirs = median_run(runs["stretch"]), median_run(runs["torch"])
        row = {"clients": n, "stretch": ours, "torch": theirs, "runs": runs}

        def cell(r, key, width):
            return f"{r[key]:>{width - 2}.3f} s" if isinstance(r, dict) else f"{'-':>{width}}"

        def per_client(r, width):
            # The server's CPU over the barrier per client: flat across N when its per-request
            # cost is O(1).
            if not isinstance(r, dict):
                return f"{'-':>{width}}"
            return f"{r['server_cpu_s'] / r['clients'] * 1e6:>{width}.1f}"

        verdict = ""
        if not isinstance(ours, dict):
            verdict = f"stretch {ours}"
            status = max(status, 3)
        elif ours["wrong"] or (isinstance(theirs, dict) and theirs["wrong"]):
            verdict = "WRONG ANSWERS"
            status = max(status, 1)
        if isinstance(ours, dict) and isinstance(theirs, dict):
            ratio = theirs["barrier_s"] / max(ours["barrier_s"], 1e-9)
            row["ratio"] = ratio
            ratio_text = f"{ratio:>12.2f}x"
            if not verdict:
                verdict = "met" if ratio >= 1 else "MISSED"
                if ratio < 1:
                    status = max(status, 1)
        elif isinstance(ours, dict) and str(theirs).startswith("stalled"):
            # The peer did not finish within the limit: a lower bound.
            row["ratio_at_least"] = args.timeout / max(ours["barrier_s"], 1e-9)
            ratio_text = f"{'>' + format(row['ratio_at_least'], '.0f') + 'x':>13}"
            verdict = verdict or f"met (torch: {theirs})"
        elif isinstance(ours, dict) and str(theirs).startswith("cannot run"):
            # The peer cannot be set up at this N on this machine (descriptors): nothing to
            # compare, which is said, not counted as a miss.
            ratio_text = f"{'-':>13}"
            verdict = verdict or f"no peer: torch {theirs}"
        else:
            ratio_text = f"{'-':>13}"
            verdict = verdict or f"torch {theirs}"
            status = max(status, 3)
        print(f"{n:>8}  {cell(ours, 'connect_s', 15)}  {cell(ours, 'barrier_s', 15)}  "
              f"{per_client(ours, 16)}  {cell(theirs, 'connect_s', 13)}  "
              f"{cell(theirs, 'barrier_s', 13)}  {per_client(theirs, 16)}  {ratio_text}  "
              f"{verdict}", flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "per_proc": args.per_proc, "repeat": args.repeat,
                       "timeout_s": args.timeout}, f, indent=2)
            f.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
