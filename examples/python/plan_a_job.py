#!/usr/bin/env python3
"""Plan an elastic job from Python, then compare two checkpoint intervals and two recovery modes
by simulation (docs/python.md).

    PYTHONPATH=build/python python3 examples/python/plan_a_job.py [--seeds N] [--png FILE]

Prints the planner's recommendation for fixtures/plans/example.json, then the effective training
time ratio (ETTR) of the Llama 3-like scenario (fixtures/scenarios/llama3_like.json) at the
planner's checkpoint interval and at four times it, each with restarts from checkpoints and with
live recovery (assumed to take the survivors 30 s). With matplotlib installed (Debian's python3-matplotlib) it also saves a bar chart.
"""

import argparse
import copy
import json
import pathlib
import sys
import time

import stretch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="replicas per simulation")
    parser.add_argument("--png", default="plan_a_job.png", help="where to save the chart")
    args = parser.parse_args()

    started = time.monotonic()
    plan = stretch.plan(ROOT / "fixtures" / "plans" / "example.json", seeds=0)
    rec = plan["recommendation"]
    print(f"plan: {rec['gpus']} GPUs, batch {rec['batch']} = micro {rec['micro_batch']} x "
          f"accumulation {rec['gradient_accumulation']}, checkpoint every "
          f"{rec['interval_minutes']:.1f} min, ETTR {rec['ettr']:.3f}, "
          f"{rec['time_to_train_hours']:.1f} h to train")

    scenarios = ROOT / "fixtures" / "scenarios"
    scenario = json.loads((scenarios / "llama3_like.json").read_text())
    base_interval = scenario["job"]["checkpoint"]["interval_minutes"]
    rows = []
    for interval in (base_interval, 4 * base_interval):
        for mode in ("checkpoint", "live"):
            s = copy.deepcopy(scenario)
            s["job"]["checkpoint"]["interval_minutes"] = interval
            if mode == "live":  # the survivors regroup and train on: assume 30 s to do so
                s["job"]["recovery"] = {"mode": "live", "reconfigure_seconds": 30}
            result = stretch.simulate(s, seeds=args.seeds, base_dir=scenarios)
            ettr = result["ettr"]["mean"] if isinstance(result["ettr"], dict) else result["ettr"]
            rows.append((interval, mode, ettr))
            print(f"checkpoint every {interval:6.1f} min, recovery {mode:10s}: ETTR {ettr:.4f}")
    print(f"took {time.monotonic() - started:.2f} s")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (python3-matplotlib): no chart")
        return 0
    labels = [f"{i:.0f} min\n{m}" for i, m, _ in rows]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(labels, [e for _, _, e in rows], color=["#4c72b0", "#55a868"] * 2)
    ax.set_ylim(min(e for _, _, e in rows) - 0.02, 1.0)
    ax.set_ylabel("ETTR")
    ax.set_title(f"{scenario['name']}: checkpoint interval and recovery ({args.seeds} seeds)")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"chart: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
