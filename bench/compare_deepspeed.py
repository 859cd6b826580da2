#!/usr/bin/python3
"""Side-by-side benchmark: DeepSpeed's Python elasticity solver vs Stretch's C++ solver.

For every config in CONFIGS below:
  (a) times one in-process call of DeepSpeed's compute_elastic_config (restored at run time from the shared seed by
      bench/deepspeed_peer/restore.py into a temp dir; seed + PR #8237 rule): time.perf_counter around the call,
      minimum of 5 runs, or a single run when the first call takes more than 0.5 s;
  (b) runs BUILD/bin/stretch-solver-timer --config FILE [--world-size N] [--min-seconds S], which prints one JSON line
      {"ns_per_call": float, "final_batch_size": int, "valid_gpus": [int], "micro_batch": int|null}
      or {"error": "...", "message": "..."}; env WORLD_SIZE is set (or unset) exactly as for the Python call;
  (c) checks both give the same answer: final batch size and valid GPU list (micro batch too when DeepSpeed returned
      one, i.e. a 3-tuple); for errors, the same error class;
  (d) prints config | python s | stretch ns | ratio (python/stretch) | same answer, and the minimum ratio over the
      configs with max_train_batch_size >= 100000.

Exit status: 0 ok; 1 when an answer differs or a cap >= 100000 ratio is below --target (default 1000);
2 on setup errors (peer cannot be restored, timer binary missing or misbehaving).
Run with Debian's /usr/bin/python3 (numpy).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "deepspeed_peer"))

import peerlib  # noqa: E402
import restore  # noqa: E402

TIMER_NAME = "stretch-solver-timer"
BIG_CAP = 100000
MB6 = [2, 4, 6, 8, 12, 16]


def el(cap, mbs, version, **kw):
    d = {"enabled": True, "max_train_batch_size": cap, "micro_batch_sizes": mbs}
    d.update(kw)
    d["version"] = version
    return {"elasticity": d}


def cfg(name, config, world_size=0, env=None):
    return {"name": name, "config": config, "world_size": world_size, "env_WORLD_SIZE": env}


# The first eight are the reference timing table (reference section 2.2); the rest add more cap >= 100000 configs.
CONFIGS = [
    cfg("fixture cap10000 [8,12,16,17] 32..1500 v0.1",
        el(10000, [8, 12, 16, 17], 0.1, min_gpus=32, max_gpus=1500, min_time=20)),
    cfg("cap100000 mb6 v0.1", el(100000, MB6, 0.1)),
    cfg("cap720720 mb6 v0.1", el(720720, MB6, 0.1)),
    cfg("cap1e7 mb6 v0.1", el(10000000, MB6, 0.1)),
    cfg("cap1e7 mb6 v0.1 max_gpus1e6", el(10000000, MB6, 0.1, max_gpus=1000000)),
    cfg("cap1e7 mb6 v0.1 max_gpus1e7", el(10000000, MB6, 0.1, max_gpus=10000000)),
    cfg("cap720720 mb6 v0.2 gpn8 mp2 WORLD_SIZE=64",
        el(720720, MB6, 0.2, num_gpus_per_node=8, model_parallel_size=2), env="64"),
    cfg("cap1e7 mb6 v0.2 gpn8 mp4 WORLD_SIZE=64",
        el(10000000, MB6, 0.2, num_gpus_per_node=8, model_parallel_size=4), env="64"),
    # more configs with cap >= 100000
    cfg("cap1e6 mb6 v0.1 max_gpus1e6", el(1000000, MB6, 0.1, max_gpus=1000000)),
    cfg("cap1e7 mb[1..10] v0.1 max_gpus1e6", el(10000000, list(range(1, 11)), 0.1, max_gpus=1000000)),
    cfg("cap1e7 mb6 v0.1 max_gpus1e6 ws7", el(10000000, MB6, 0.1, max_gpus=1000000), world_size=7),
    cfg("cap250000 mb[24,1,9,32,7,18,5,64,3] v0.1", el(250000, [24, 1, 9, 32, 7, 18, 5, 64, 3], 0.1)),
    cfg("cap1e6 primes2..29 v0.1", el(1000000, [2, 3, 5, 7, 11, 13, 17, 19, 23, 29], 0.1)),
    cfg("cap5e6 mb6 v0.1 prefer_smaller", el(5000000, MB6, 0.1, prefer_larger_batch=False)),
    cfg("cap123456 mb6 v0.1 min1000 max1e5", el(123456, MB6, 0.1, min_gpus=1000, max_gpus=100000)),
    cfg("cap1e7 mb6 v0.2 gpn8 mp1 max_gpus1e6 WORLD_SIZE=64",
        el(10000000, MB6, 0.2, num_gpus_per_node=8, model_parallel_size=1, max_gpus=1000000), env="64"),
    cfg("cap100000 mb6 v0.2 gpn8 mp2 WORLD_SIZE=12 (fallback)",
        el(100000, MB6, 0.2, num_gpus_per_node=8, model_parallel_size=2), env="12"),
    # With model parallelism DeepSpeed reads a world_size argument as GPUs in one place and as the
    # data-parallel size in another (docs/compatibility.md, row 8), so the world-size case uses mp 1.
    cfg("cap720720 mb6 v0.2 gpn8 mp1 ws64", el(720720, MB6, 0.2, num_gpus_per_node=8),
        world_size=64),
]


class SetupError(Exception):
    pass


def time_python(mod, c):
    """(seconds, runs, answer) for one compute_elastic_config call; min of 5 runs, 1 run if the first is > 0.5 s."""
    times = []
    answer = None
    with peerlib.world_size_env(c["env_WORLD_SIZE"]):
        for _ in range(5):
            t0 = time.perf_counter()
            try:
                ret = mod.compute_elastic_config(c["config"], peerlib.TARGET_DEEPSPEED_VERSION,
                                                 world_size=c["world_size"])
            except Exception as e:  # DeepSpeed's answer can be an exception
                dt = time.perf_counter() - t0
                answer = {"error": peerlib.error_class_name(e, mod), "message": str(e)}
            else:
                dt = time.perf_counter() - t0
                answer = peerlib.normalize_result(ret)
            times.append(dt)
            if dt > 0.5:
                break
    return min(times), len(times), answer


def find_timer(build_dir):
    path = os.path.join(build_dir, "bin", TIMER_NAME)
    if not os.path.isfile(path):
        raise SetupError(f"C++ timer not found: {path}\n"
                         f"  build it first (e.g. cmake -S . -B {build_dir} && cmake --build {build_dir} --target "
                         f"{TIMER_NAME}), point --build at the build directory, or use --python-only")
    if not os.access(path, os.X_OK):
        raise SetupError(f"C++ timer is not executable: {path}")
    return path


def run_timer(timer, c, tmpdir, min_seconds, timeout):
    cfg_path = os.path.join(tmpdir, "config.json")
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(c["config"], f)
    cmd = [timer, "--config", cfg_path]
    if c["world_size"]:
        cmd += ["--world-size", str(c["world_size"])]
    if min_seconds is not None:
        cmd += ["--min-seconds", str(min_seconds)]
    env = dict(os.environ)
    env.pop("WORLD_SIZE", None)
    if c["env_WORLD_SIZE"] is not None:
        env["WORLD_SIZE"] = c["env_WORLD_SIZE"]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{TIMER_NAME} did not finish within {timeout} s for config {c['name']!r}: {' '.join(cmd)}")
    except OSError as e:
        raise SetupError(f"cannot run {timer}: {e}")
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    if len(lines) != 1:
        raise SetupError(f"{TIMER_NAME} must print exactly one JSON line, printed {len(lines)} for config "
                         f"{c['name']!r} (exit {p.returncode}).\n  command: {' '.join(cmd)}\n  stdout: "
                         f"{p.stdout[-2000:]!r}\n  stderr: {p.stderr[-2000:]!r}")
    try:
        out = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise SetupError(f"{TIMER_NAME} printed invalid JSON for config {c['name']!r}: {e}: {lines[0][:500]!r}")
    if not isinstance(out, dict) or ("error" not in out and not {"ns_per_call", "final_batch_size",
                                                                  "valid_gpus"} <= set(out)):
        raise SetupError(f"{TIMER_NAME} output lacks ns_per_call/final_batch_size/valid_gpus (or error) for config "
                         f"{c['name']!r}: {lines[0][:500]!r}")
    return out


def same_answer(py, cpp):
    """(bool, reason) - compare DeepSpeed's answer with the C++ timer's."""
    if "error" in py or "error" in cpp:
        if py.get("error") == cpp.get("error"):
            return True, ""
        return False, f"python {py.get('error', 'answer')} vs stretch {cpp.get('error', 'answer')}"
    if py["final_batch_size"] != cpp["final_batch_size"]:
        return False, f"final batch {py['final_batch_size']} vs {cpp['final_batch_size']}"
    if py["valid_gpus"] != cpp["valid_gpus"]:
        n_py = None if py["valid_gpus"] is None else len(py["valid_gpus"])
        n_cpp = None if cpp["valid_gpus"] is None else len(cpp["valid_gpus"])
        return False, f"valid_gpus differ ({n_py} vs {n_cpp} entries)"
    if "micro_batch" in py and cpp.get("micro_batch") is not None and py["micro_batch"] != cpp["micro_batch"]:
        return False, f"micro batch {py['micro_batch']} vs {cpp['micro_batch']}"
    return True, ""


def fmt_s(x):
    return f"{x:.6f}" if x < 1 else f"{x:.3f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="C++ build directory holding bin/stretch-solver-timer "
                    "(default: %(default)s, relative to the current directory)")
    ap.add_argument("--seed", default=restore.DEFAULT_SEED, help="DeepSpeed seed text (default: %(default)s)")
    ap.add_argument("--target", type=float, default=1000.0,
                    help="required python/stretch speed ratio for every config with cap >= 100000; exit 1 if any "
                         "is below it (default: %(default)g; 0 disables the ratio check). Any differing answer "
                         "exits 1 regardless.")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    ap.add_argument("--min-seconds", type=float, default=None,
                    help="passed to the timer as --min-seconds (default: the timer's own default)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per timer run (default: %(default)s)")
    ap.add_argument("--python-only", action="store_true", help="only time DeepSpeed's Python (no C++ timer needed)")
    ap.add_argument("--filter", help="only configs whose name contains this text")
    args = ap.parse_args(argv)

    configs = [c for c in CONFIGS if not args.filter or args.filter in c["name"]]
    if not configs:
        print(f"compare_deepspeed.py: error: no config name contains {args.filter!r}", file=sys.stderr)
        return 2
    try:
        timer = None if args.python_only else find_timer(args.build)
        mod, _, info = peerlib.restore_and_load(args.seed)
    except (SetupError, peerlib.PeerError) as e:
        print(f"compare_deepspeed.py: error: {e}", file=sys.stderr)
        return 2

    rows = []
    width = max(len(c["name"]) for c in configs)
    header = f"{'config':<{width}} | {'python s':>10} | {'stretch ns':>12} | {'ratio':>10} | same answer"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="stretch-bench-") as tmpdir:
        for c in configs:
            py_s, runs, py_ans = time_python(mod, c)
            row = {"name": c["name"], "cap": c["config"]["elasticity"]["max_train_batch_size"],
                   "config": c["config"], "world_size": c["world_size"], "env_WORLD_SIZE": c["env_WORLD_SIZE"],
                   "python_seconds": py_s, "python_runs": runs, "python_answer": py_ans}
            if timer:
                try:
                    cpp = run_timer(timer, c, tmpdir, args.min_seconds, args.timeout)
                except SetupError as e:
                    print(f"compare_deepspeed.py: error: {e}", file=sys.stderr)
                    return 2
                ok, why = same_answer(py_ans, cpp)
                ns = cpp.get("ns_per_call")
                ratio = (py_s * 1e9 / ns) if isinstance(ns, (int, float)) and ns > 0 else None
                row.update(stretch_ns_per_call=ns, ratio=ratio, stretch_answer=cpp, same_answer=ok, difference=why)
                ns_txt = f"{ns:.1f}" if isinstance(ns, (int, float)) else "-"
                ratio_txt = f"{ratio:.0f}" if ratio is not None else "-"
                same_txt = "yes" if ok else f"NO: {why}"
            else:
                ns_txt, ratio_txt, same_txt = "-", "-", "(python only)"
            runs_txt = "" if runs == 5 else f" ({runs} run)"
            print(f"{c['name']:<{width}} | {fmt_s(py_s):>10} | {ns_txt:>12} | {ratio_txt:>10} | {same_txt}{runs_txt}")
            rows.append(row)

    status = 0
    big = [r for r in rows if isinstance(r["cap"], (int, float)) and r["cap"] >= BIG_CAP]
    if timer:
        diffs = [r["name"] for r in rows if not r["same_answer"]]
        ratios = [r["ratio"] for r in big if r["ratio"] is not None]
        if ratios:
            worst = min(big, key=lambda r: r["ratio"] if r["ratio"] is not None else float("inf"))
            print(f"summary: minimum python/stretch ratio over {len(ratios)} configs with cap >= {BIG_CAP}: "
                  f"{worst['ratio']:.0f} ({worst['name']})")
        else:
            print(f"summary: no ratio available for configs with cap >= {BIG_CAP}")
        if diffs:
            print(f"FAIL: {len(diffs)} config(s) with a different answer: {', '.join(diffs)}")
            status = 1
        if args.target > 0:
            below = [r["name"] for r in big if r["ratio"] is None or r["ratio"] < args.target]
            if below:
                print(f"FAIL: ratio below target {args.target:g} for: {', '.join(below)}")
                status = 1
    else:
        print(f"summary: python only ({len(rows)} configs, {len(big)} with cap >= {BIG_CAP}); no C++ timing")

    if args.json:
        doc = {"python": platform.python_version(), "numpy": __import__("numpy").__version__,
               "machine": platform.machine(), "seed_fingerprint_sha256": info["seed_fingerprint_sha256"],
               "target": args.target, "timer": timer, "results": rows}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
