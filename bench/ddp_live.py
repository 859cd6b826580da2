#!/usr/bin/env python3
"""stretch.torch's live recovery, measured (docs/python.md, "Live recovery for PyTorch"):
examples/python/train_ddp_live.py on 4 ranks under `stretch launch --elastic_training`, loopback.

    PYTHONPATH=build/python /usr/bin/python3 bench/ddp_live.py --cli build/bin/stretch \\
        [--steps 200] [--kill_after 50] [--trials 20]

1. an undisturbed run (the reference loss and weights);
2. kill -9 of rank 1 after step --kill_after, live recovery (the default): time from the kill to
   the survivors' next completed step, steps trained twice, the replacement's start -> its
   generation's first step, the final loss;
3. the same kill with `--recovery restart`: time to the first step after the restart, steps
   trained again (back to the last checkpoint), the final loss;
4. --trials runs with a random victim rank killed after a random step in [2, steps/3]: each must
   end with status 0, every step trained, at most the step in flight twice, no restart.
Prints the figures; exits 1 when a trial breaks one of those rules. Not a test: a benchmark.
"""

import argparse
import json
import os
import pathlib
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = SOURCE / "examples" / "python" / "train_ddp_live.py"
CONFIG = SOURCE / "examples" / "python" / "ds_config_elastic.json"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, directory, recovery):
    command = [args.cli, "launch", "--num_gpus", "4", "--elastic_training", "--master_port",
               str(free_port()), "--config", str(CONFIG), "--recovery", recovery, "--log_dir",
               str(directory / "logs"), "--event_log", str(directory / "events.jsonl"),
               args.python, "-u", str(SCRIPT), "--steps", str(args.steps), "--checkpoint_dir",
               str(directory / "ckpt"), "--checkpoint_every", str(args.checkpoint_every),
               "--ds_config", str(CONFIG), "--step_sleep", str(args.step_sleep)]
    return subprocess.Popen(command, cwd=directory, stdout=open(directory / "out", "w"),
                            stderr=open(directory / "err", "w"), start_new_session=True)


def lines_of(directory):
    out = []
    for log in sorted((directory / "logs").rglob("*.log")):
        for text in log.read_text(errors="replace").splitlines():
            fields, kind = {}, None
            for word in text.split():
                key, eq, value = word.partition("=")
                if not eq:
                    kind = kind or word
                    continue
                kind = kind or key
                fields[key] = value
            if "time" in fields and "generation" in fields:
                fields["kind"] = kind
                fields["file"] = str(log.relative_to(directory))
                out.append(fields)
    return out


def worker_with_rank(launcher, rank):
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != launcher.pid:
                continue
            env = pathlib.Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if f"RANK={rank}".encode() in env:
            return int(entry)
    return None


def run(args, recovery="live", victim=None, kill_after=None):
    """One launch; with a victim, SIGKILLs it once a step >= kill_after was logged. A dict of
    what happened."""
    directory = pathlib.Path(tempfile.mkdtemp(prefix="stretch-ddp-live-"))
    began = time.time()
    launcher = launch(args, directory, recovery)
    killed_at = None
    if victim is not None:
        deadline = time.monotonic() + args.limit
        while time.monotonic() < deadline and launcher.poll() is None:
            if any(l["kind"] == "step" and int(l["step"]) >= kill_after
                   for l in lines_of(directory)):
                break
            time.sleep(0.01)
        pid = worker_with_rank(launcher, victim)
        if pid is not None:
            killed_at = time.time()
            os.kill(pid, signal.SIGKILL)
    try:
        status = launcher.wait(timeout=args.limit)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)
        status = launcher.wait()
    lines = lines_of(directory)
    steps = [l for l in lines if l["kind"] == "step"]
    numbers = [int(l["step"]) for l in steps]
    done = [l for l in lines if l["kind"] == "done"]
    events = [json.loads(t) for t in (directory / "events.jsonl").read_text().splitlines()
              if t.strip()] if (directory / "events.jsonl").exists() else []
    result = {"dir": str(directory), "status": status, "wall_s": time.time() - began,
              "steps_logged": len(numbers), "distinct": len(set(numbers)),
              "missing": sorted(set(range(1, args.steps + 1)) - set(numbers)),
              "redone": len(numbers) - len(set(numbers)),
              "loss": float(done[-1]["loss"]) if done else None,
              "sha": done[-1]["weights_sha256"] if done else None,
              "restarts": sum(1 for e in events if e.get("recovery") == "checkpoint"
                              and e["event"] == "start_workers")}
    if killed_at is not None:
        result["killed_at"] = killed_at
        after = [l for l in steps if float(l["time"]) > killed_at]
        if after:
            first = min(after, key=lambda l: float(l["time"]))
            result["kill_to_next_step_s"] = float(first["time"]) - killed_at
            result["kill_last_logged"] = max((int(l["step"]) for l in steps
                                              if float(l["time"]) <= killed_at), default=0)
            result["next_step"] = int(first["step"])
        joined = [l for l in lines if l["kind"] == "resumed_from" and l.get("joined") == "1"]
        if joined:
            start = float(joined[0]["process_start"])
            grown = [l for l in steps if int(l["generation"]) == int(joined[0]["generation"])]
            result["joiner_start_after_kill_s"] = start - killed_at
            if grown:
                result["joiner_start_to_step_s"] = min(float(l["time"]) for l in grown) - start
    return result


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cli", default=str(SOURCE / "build" / "bin" / "stretch"))
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--kill_after", type=int, default=50)
    p.add_argument("--checkpoint_every", type=int, default=20)
    p.add_argument("--step_sleep", type=float, default=0.03)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit", type=float, default=300.0, help="seconds per launch")
    args = p.parse_args(argv)
    args.cli = os.path.abspath(args.cli)
    rng = random.Random(args.seed)
    print(f"stretch bench ddp_live: 4 ranks, {args.steps} steps, global batch 48, step sleep "
          f"{args.step_sleep} s, checkpoint every {args.checkpoint_every}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    reference = run(args)
    print(f"undisturbed: status {reference['status']}, {reference['wall_s']:.1f} s, final loss "
          f"{reference['loss']}", flush=True)
    live = run(args, "live", victim=1, kill_after=args.kill_after)
    print(f"live, rank 1 killed after step {live.get('kill_last_logged')}: status "
          f"{live['status']}, kill -> survivors' next step "
          f"{live.get('kill_to_next_step_s', -1):.3f} s "
          f"(step {live.get('next_step')}), steps trained twice {live['redone']}, restarts "
          f"{live['restarts']}, replacement started "
          f"{live.get('joiner_start_after_kill_s', -1):.2f} s "
          f"after the kill and its generation's first step came "
          f"{live.get('joiner_start_to_step_s', -1):.2f} s after its start; final loss "
          f"{live['loss']} (undisturbed - live: {reference['loss'] - (live['loss'] or 0):+.2e})",
          flush=True)
    restart = run(args, "restart", victim=1, kill_after=args.kill_after)
    print(f"--recovery restart, rank 1 killed after step {restart.get('kill_last_logged')}: "
          f"status {restart['status']}, kill -> next step "
          f"{restart.get('kill_to_next_step_s', -1):.3f} s "
          f"(step {restart.get('next_step')}), steps trained twice {restart['redone']}; final loss "
          f"{restart['loss']} (undisturbed - restart: "
          f"{reference['loss'] - (restart['loss'] or 0):+.2e})", flush=True)
    broken = 0
    recoveries = []
    for trial in range(args.trials):
        victim = rng.randrange(4)
        after = rng.randint(2, max(2, args.steps // 3))
        r = run(args, "live", victim=victim, kill_after=after)
        ok = (r["status"] == 0 and not r["missing"] and r["redone"] <= 1 and r["restarts"] == 0
              and r["loss"] is not None and abs(r["loss"] - reference["loss"]) < 1e-4)
        broken += not ok
        if "kill_to_next_step_s" in r:
            recoveries.append(r["kill_to_next_step_s"])
        print(f"trial {trial + 1}: rank {victim} killed after step {r.get('kill_last_logged')}: "
              f"{'ok' if ok else 'BROKEN'} status {r['status']}, kill -> next step "
              f"{r.get('kill_to_next_step_s', -1):.3f} s, trained twice {r['redone']}, missing "
              f"{len(r['missing'])}, restarts {r['restarts']}, loss {r['loss']}"
              + ("" if ok else f" ({r['dir']})"), flush=True)
    if recoveries:
        print(f"trials: {args.trials - broken}/{args.trials} ok; kill -> survivors' next step "
              f"median {statistics.median(recoveries):.3f} s, max {max(recoveries):.3f} s",
              flush=True)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
