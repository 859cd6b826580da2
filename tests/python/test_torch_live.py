"""stretch.torch (docs/python.md, "Live recovery for PyTorch"): examples/python/train_ddp_live.py on
4 ranks under `stretch launch --elastic_training`, on loopback, with Debian's python3-torch.

- The bindings speak runtime/live's protocol (records, keys, the engine's waits) and a
  ProcessGroupGloo forms over the Python store bridged to Stretch's store client.
- kill -9 of a rank mid-run (rank 1; rank 0, which also served the start's rendezvous store):
  the launcher keeps the survivors (no restart from the checkpoint), they log the re-split batch
  (micro 16 x accumulation 1 x 3 for the global batch 48), the replacement joins with the state of
  a survivor and the job grows back to 4; every step 1..N is trained, at most the step in flight
  twice; the final loss is the undisturbed run's within floating-point summation order.
- With `--recovery restart` (live recovery off) the same script restarts from its DeepSpeed-layout
  checkpoint and ends with the same loss.
- Two local node agents: a node lost, then a new node joining (scale-up joiners), live.

Skipped when /usr/bin/python3 (this interpreter) cannot import torch. Every wait is bounded."""

import datetime
import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import CLI, SOURCE

try:
    import torch
    import torch.distributed as dist
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

pytestmark = pytest.mark.skipif(torch is None, reason="python3-torch is absent: torch is not "
                                "importable")

SCRIPT = SOURCE / "examples" / "python" / "train_ddp_live.py"
CONFIG = SOURCE / "examples" / "python" / "ds_config_elastic.json"
GLOBAL_BATCH = 48
# The elastic solver's (micro, accumulation) of CONFIG by world size (`stretch elastic`).
SOLVER = {1: (16, 3), 2: (8, 3), 3: (16, 1), 4: (4, 3)}
STEPS = 200
KILL_AFTER = 50
LIMIT_S = 300


def free_port():
    """A port P with P + 1 free as well (a multi-node job's store listens on P + 1), below the
    ephemeral range, where a host busy with short connections may hold every port in
    TIME_WAIT."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        try:
            for candidate in (port, port + 1):
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", candidate))
            return port
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports in [20000, 32000) on 127.0.0.1")


def launch(directory, recovery="live", steps=STEPS, step_sleep=0.03, options=()):
    if not CLI:
        pytest.skip("STRETCH_CLI is not set (run through ctest)")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    command = [CLI, "launch", "--num_gpus", "4", "--elastic_training", "--master_port",
               str(free_port()), "--config", str(CONFIG), "--recovery", recovery, *options,
               "--log_dir",
               str(directory / "logs"), "--event_log", str(directory / "events.jsonl"),
               sys.executable, "-u", str(SCRIPT), "--steps", str(steps), "--checkpoint_dir",
               str(directory / "ckpt"), "--checkpoint_every", "20", "--ds_config", str(CONFIG),
               "--step_sleep", str(step_sleep)]
    out = open(directory / "launch.out", "w")
    err = open(directory / "launch.err", "w")
    return subprocess.Popen(command, cwd=directory, env=env, stdout=out, stderr=err,
                            start_new_session=True)


def finish(process, directory):
    try:
        status = process.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        pytest.fail(f"the launch did not end within {LIMIT_S} s:\n{everything(directory)}")
    return status


def everything(directory):
    """The launcher's stderr and the tail of every worker log, for failure messages."""
    text = (directory / "launch.err").read_text(errors="replace")[-3000:]
    for log in sorted((directory / "logs").rglob("*.log")):
        body = log.read_text(errors="replace")
        text += f"\n--- {log.relative_to(directory)}:\n{body[-1500:]}"
    return text


def lines_of(directory):
    """The script's key=value lines of every worker log: dicts with 'kind' and 'file'."""
    out = []
    for log in sorted((directory / "logs").rglob("*.log")):
        for text in log.read_text(errors="replace").splitlines():
            fields = {}
            kind = None
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


def events_of(directory):
    path = directory / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(predicate, limit, what, directory, process=None):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if process is not None and process.poll() is not None:
            pytest.fail(f"{what}: the launch ended first (status {process.returncode})\n"
                        f"{everything(directory)}")
        time.sleep(0.02)
    pytest.fail(f"{what}: not within {limit} s\n{everything(directory)}")


def worker_with_rank(launcher, rank):
    """The launcher's child whose environment says RANK=rank."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != launcher.pid:
                continue
            env = pathlib.Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if f"RANK={rank}".encode() in env:
            return int(entry)
    return None


def done_line(lines):
    done = [l for l in lines if l["kind"] == "done"]
    return done[-1] if done else None


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    """The reference: the same job, never interrupted."""
    directory = tmp_path_factory.mktemp("undisturbed")
    status = finish(launch(directory), directory)
    assert status == 0, everything(directory)
    done = done_line(lines_of(directory))
    assert done is not None, everything(directory)
    assert int(done["steps"]) == STEPS
    return done


def test_bindings_speak_runtime_live_and_bridge_a_gloo_group():
    from stretch import CommError, _stretch
    from stretch.torch import StoreBridge

    record = _stretch.make_live_generation(3, 2, [("n1", 0), ("n1", 2), ("n2", 1)], 48, 16, 1)
    text = _stretch.format_live_generation(record)
    assert text.splitlines()[0] == "3 2 3 48 16 1"
    back = _stretch.parse_live_generation(text)
    assert back == record
    assert back.nodes == [("n1", 0, [0, 2]), ("n2", 2, [1])]
    assert (back.rank_of("n1", 2), back.rank_of("n2", 1), back.rank_of("n2", 0)) == (1, 2, -1)
    with pytest.raises(CommError, match="live generation record: line '3 2 0 48 16 1'"):
        _stretch.parse_live_generation("3 2 0 48 16 1\n")
    assert _stretch.live_keys.capable("n1", 42) == "live/capable/n1/42"
    assert _stretch.live_keys.group_prefix(3) == "live/pg/3"

    server = _stretch.StoreClient("127.0.0.1", 0, "secret-token-0123456789", 5.0, server=True)
    store = _stretch.StoreClient("127.0.0.1", server.port, "secret-token-0123456789", 5.0)
    assert _stretch.latest_live_generation(store) == 0
    assert _stretch.live_capability(store, "n1", 42) == "none"
    store.set(_stretch.live_keys.capable("n1", 42), b"1")
    assert _stretch.live_capability(store, "n1", 42) == "capable"
    _stretch.publish_live_generation(server, record)
    assert _stretch.latest_live_generation(store) == 3
    assert _stretch.wait_for_generation(store, 2, 1.0, "test") == record
    assert _stretch.supersession(store, 3) == ""
    assert _stretch.supersession(store, 2) == "superseded"
    assert _stretch.wait_unless_superseded(store, ["nothing"], 2, 5.0) == "superseded"
    with pytest.raises(TimeoutError, match="nothing"):
        _stretch.wait_unless_superseded(store, ["nothing"], 3, 0.1)

    # Two ranks (threads) of a ProcessGroupGloo over the bridge, under generation 3's prefix.
    groups = {}

    def rank(r):
        client = _stretch.StoreClient("127.0.0.1", server.port, "secret-token-0123456789", 5.0)
        bridge = StoreBridge(client, 3, 10.0)
        prefixed = dist.PrefixStore(_stretch.live_keys.group_prefix(3), bridge)
        groups[r] = (dist.ProcessGroupGloo(prefixed, r, 2, datetime.timedelta(seconds=10)),
                     bridge, prefixed)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(groups) == [0, 1]
    tensors = [torch.full((4,), float(r + 1)) for r in range(2)]
    works = [groups[r][0].allreduce([tensors[r]]) for r in range(2)]
    for w in works:
        w.wait()
    assert tensors[0].tolist() == [3.0] * 4 and tensors[1].tolist() == [3.0] * 4
    assert store.check(["live/pg/3/0"]) or store.num_keys() > 3  # the group's keys are there


def test_every_world_size_trains_the_same_samples_at_a_step():
    """The data position is the step: at every world size of the elastic plan the ranks' micro
    batches of step s are together the global batch s*B .. s*B+B-1 of the job's order (or of the
    epoch's permutation with a seed), so a generation of another size goes on where the last
    one stopped."""
    from stretch.torch import LiveJob

    def batches(world, rank, step, seed):
        job = LiveJob.__new__(LiveJob)  # the data layout only: no group
        micro, accum = SOLVER[world]
        job.rank, job.world_size = rank, world
        job.train_batch_size, job.micro_batch_size = GLOBAL_BATCH, micro
        job.gradient_accumulation_steps = accum
        out = job.micro_batches(step, 100, seed=seed)
        assert len(out) == accum and all(len(b) == micro for b in out)
        return [int(i) for b in out for i in b]

    for seed in (None, 5):
        for step in (0, 1, 2, 7):  # 48 * 2 = 96 < 100 < 144: step 2 crosses an epoch
            expected = None
            for world in sorted(SOLVER):
                samples = [i for r in range(world) for i in batches(world, r, step, seed)]
                if expected is None:
                    expected = samples
                    if seed is None:
                        assert samples == [(step * GLOBAL_BATCH + k) % 100
                                           for k in range(GLOBAL_BATCH)]
                assert samples == expected, (seed, step, world)


def test_what_counts_as_a_peer_failure():
    from stretch import ConfigError
    from stretch.torch import _is_peer_failure

    assert _is_peer_failure(RuntimeError("[./gloo/transport/tcp/pair.cc:598] Connection closed "
                                         "by peer [127.0.0.1]:62118"))
    assert _is_peer_failure(RuntimeError("[./gloo/transport/tcp/pair.cc:589] Read error "
                                         "[127.0.0.1]:1422: Connection reset by peer"))
    assert not _is_peer_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not _is_peer_failure(ValueError("Connection closed by peer"))
    assert not _is_peer_failure(ConfigError("gloo"))


@pytest.mark.parametrize("victim,how", [(1, signal.SIGKILL), (0, signal.SIGKILL),
                                        (2, signal.SIGSTOP)],
                         ids=["kill_rank1", "kill_rank0", "freeze_rank2"])
def test_kill_9_costs_at_most_the_step_in_flight(tmp_path, undisturbed, victim, how):
    """SIGKILL, or SIGSTOP: a frozen worker stops beating and the agent's hang detection
    (--hang_timeout 3) kills it; from there on it is a death like the others."""
    launcher = launch(tmp_path, options=["--hang_timeout", "3"] if how == signal.SIGSTOP else [])
    wait_for(lambda: any(l["kind"] == "step" and int(l["step"]) >= KILL_AFTER
                         for l in lines_of(tmp_path)), 180, f"step {KILL_AFTER}", tmp_path,
             launcher)
    pid = worker_with_rank(launcher, victim)
    assert pid is not None, f"no worker with RANK={victim}"
    killed_at = time.time()
    os.kill(pid, how)
    status = finish(launcher, tmp_path)
    assert status == 0, everything(tmp_path)
    lines = lines_of(tmp_path)
    events = events_of(tmp_path)
    if how == signal.SIGSTOP:  # the agent's own words
        said = (tmp_path / "launch.out").read_text(errors="replace")
        hung = f"worker rank {victim} (local rank {victim}, pid {pid}) is hung: no heartbeat"
        assert hung in said, said[-2000:]

    # Live, never from the checkpoint: one process per rank of the start, one replacement.
    assert not [e for e in events if e.get("recovery") == "checkpoint"], events
    plans = [e for e in events if e["event"] == "live_plan"]
    assert plans and plans[0]["world_size"] == 3, plans

    # Every step trained, at most the step in flight twice, the global batch always 48 split as
    # the solver says for the world size.
    steps = [l for l in lines if l["kind"] == "step"]
    done_steps = sorted(int(l["step"]) for l in steps)
    assert set(done_steps) == set(range(1, STEPS + 1)), everything(tmp_path)
    assert len(done_steps) - len(set(done_steps)) <= 1, [s for s in set(done_steps)
                                                         if done_steps.count(s) > 1]
    for l in steps:
        world = int(l["world_size"])
        assert int(l["global_batch"]) == GLOBAL_BATCH, l
        assert (int(l["micro"]), int(l["accum"])) == SOLVER[world], l
    worlds = [int(l["world_size"]) for l in steps]
    assert 3 in worlds and worlds[-1] == 4, worlds

    # The survivors' logs say what they did: the step abandoned (or, when the kill came between
    # steps, the generation left at the agent's announcement), the batch re-split.
    survivor_logs = "".join(p.read_text(errors="replace")
                            for p in (tmp_path / "logs" / "attempt_1").glob("rank_*.log"))
    assert ("abandoned in live generation 0" in survivor_logs or
            "leaves live generation 0 after step" in survivor_logs), survivor_logs[-3000:]
    assert ("live generation 1 continues at step" in survivor_logs and
            "train_batch_size 48 = micro 16 x accumulation 1 x 3 (elastic solver)"
            in survivor_logs), survivor_logs[-3000:]

    # The replacement took the state of a survivor and trained.
    joined = [l for l in lines if l["kind"] == "resumed_from" and l.get("joined") == "1"]
    assert len(joined) == 1, joined
    assert int(joined[0]["resumed_from"]) > KILL_AFTER
    assert int(joined[0]["world_size"]) == 4

    first_after = min((l for l in steps if int(l["generation"]) >= 1),
                      key=lambda l: float(l["time"]))
    grown = min((l for l in steps if int(l["generation"]) >= 2), key=lambda l: float(l["time"]))
    done = done_line(lines)
    assert done is not None and int(done["steps"]) == STEPS, everything(tmp_path)
    print(f"\n{signal.Signals(how).name} to rank {victim} after step >= {KILL_AFTER}: "
          f"signal -> survivors' next step "
          f"{float(first_after['time']) - killed_at:.3f} s (step {first_after['step']} at world "
          f"3); the replacement started {float(joined[0]['process_start']) - killed_at:.3f} s "
          f"after the kill, its generation's first step "
          f"{float(grown['time']) - float(joined[0]['process_start']):.3f} s after its start; "
          f"steps trained twice: {len(done_steps) - len(set(done_steps))}; final loss "
          f"{done['loss']} (undisturbed {undisturbed['loss']})")
    assert abs(float(done["loss"]) - float(undisturbed["loss"])) < 1e-4
    # The last generation's rank 0 (another process than the start's when rank 0 died) saved the
    # final checkpoint in DeepSpeed's layout.
    assert (tmp_path / "ckpt" / "latest").read_text() == f"global_step{STEPS}"
    state = torch.load(tmp_path / "ckpt" / f"global_step{STEPS}" / "mp_rank_00_model_states.pt")
    assert state["global_steps"] == STEPS and state["dp_world_size"] == 4


def test_recovery_restart_resumes_from_the_deepspeed_layout_checkpoint(tmp_path, undisturbed):
    launcher = launch(tmp_path, recovery="restart")
    wait_for(lambda: any(l["kind"] == "step" and int(l["step"]) >= KILL_AFTER
                         for l in lines_of(tmp_path)), 180, f"step {KILL_AFTER}", tmp_path,
             launcher)
    pid = worker_with_rank(launcher, 1)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    status = finish(launcher, tmp_path)
    assert status == 0, everything(tmp_path)
    lines = lines_of(tmp_path)
    starts = [l for l in lines if l["kind"] == "resumed_from" and "attempt_2" in l["file"]]
    assert starts and all(l["live"] == "0" for l in starts), starts
    resumed = int(starts[0]["resumed_from"])
    assert resumed >= 40 and resumed % 20 == 0, starts
    done = done_line(lines)
    assert done is not None and int(done["steps"]) == STEPS, everything(tmp_path)
    assert abs(float(done["loss"]) - float(undisturbed["loss"])) < 1e-4
    # DeepSpeed's layout, which torch.load opens.
    ckpt = tmp_path / "ckpt"
    assert (ckpt / "latest").read_text() == f"global_step{STEPS}"
    state = torch.load(ckpt / f"global_step{STEPS}" / "mp_rank_00_model_states.pt")
    assert state["global_steps"] == STEPS
    assert set(state["module"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert state["lr_scheduler"]["last_epoch"] == STEPS


def test_a_node_lost_and_a_new_node_joining_keep_the_job_training(tmp_path, undisturbed):
    """Two local node agents of 2 workers (`--launcher local`, elastic on 1 to 3 nodes): node n1
    is lost after step 30 (its agent stopped), n0's two workers train on alone with the solver's
    batch for 2 (micro 8 x accumulation 3), node n2 joins after step 60 (`stretch agent` by
    hand): its two workers receive the state live and the job grows back to 4. The workers pause
    at steps 30 and 60 (the example's fault script) until the node is gone or the new
    generation is published, so the schedule is exact: 1-30@4 31-60@2 61-200@4."""
    if not CLI:
        pytest.skip("STRETCH_CLI is not set (run through ctest)")
    faults = tmp_path / "faults"
    faults.mkdir()
    (tmp_path / "hostfile").write_text("n0 slots=2\nn1 slots=2\n")
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", STRETCH_FAULT_DIR=str(faults),
               STRETCH_FAULT_PAUSE_AT_STEPS="30,60")
    command = [CLI, "launch", "--hostfile", str(tmp_path / "hostfile"), "--launcher", "local",
               "--master_port", str(port), "--config", str(CONFIG), "--elastic", "1:3",
               "--last_call", "1", "--max_restarts", "10", "--monitor_interval", "0.1",
               "--keepalive_timeout", "5", "--log_dir", str(tmp_path / "logs"), "--event_log",
               str(tmp_path / "events.jsonl"), sys.executable, "-u", str(SCRIPT), "--steps",
               str(STEPS), "--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every",
               "20", "--ds_config", str(CONFIG)]
    out = open(tmp_path / "launch.out", "w")
    launcher = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out,
                                stderr=open(tmp_path / "launch.err", "w"), start_new_session=True)
    joiner = None
    try:
        wait_for(lambda: (faults / "pause_30.reached").exists(), 180, "the pause at step 30",
                 tmp_path, launcher)
        n1 = int((tmp_path / "logs" / "agent_n1.pid").read_text().split()[0])
        os.kill(n1, signal.SIGTERM)
        wait_for(lambda: any(e["event"] == "live_plan" and e.get("world_size") == 2
                             for e in events_of(tmp_path)), 60, "a live generation on n0 alone",
                 tmp_path, launcher)
        (faults / "pause_30.release").write_text("\n")
        wait_for(lambda: (faults / "pause_60.reached").exists(), 120, "the pause at step 60",
                 tmp_path, launcher)
        joiner = subprocess.Popen(
            [CLI, "agent", "--rdzv", f"127.0.0.1:{port + 1}", "--node_id", "n2", "--nproc", "2",
             "--token_file", str(tmp_path / "logs" / "job_token"), "--log_dir",
             str(tmp_path / "logs")], cwd=tmp_path, env=env,
            stdout=open(tmp_path / "n2.out", "w"), stderr=open(tmp_path / "n2.err", "w"),
            start_new_session=True)

        def told():
            text = (tmp_path / "launch.out").read_text(errors="replace")
            at = text.find("4 worker(s) on 2 node(s)")
            return at >= 0 and text.find("agent n0: told", at) >= 0

        wait_for(told, 120, "n2's workers ready and n0's told", tmp_path, launcher)
        (faults / "pause_60.release").write_text("\n")
        status = finish(launcher, tmp_path)
        assert status == 0, everything(tmp_path)
        assert joiner.wait(timeout=60) == 0, (tmp_path / "n2.err").read_text()
    finally:
        for p in (launcher, joiner):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    events = events_of(tmp_path)
    assert not [e for e in events if e.get("recovery") == "checkpoint"], events
    lines = lines_of(tmp_path)
    steps = {}
    for l in (l for l in lines if l["kind"] == "step"):
        assert int(l["step"]) not in steps, f"step {l['step']} trained twice"
        steps[int(l["step"])] = l
    assert sorted(steps) == list(range(1, STEPS + 1)), everything(tmp_path)
    schedule = []
    for step in sorted(steps):
        world = int(steps[step]["world_size"])
        assert (int(steps[step]["micro"]), int(steps[step]["accum"])) == SOLVER[world]
        if schedule and schedule[-1][2] == world:
            schedule[-1][1] = step
        else:
            schedule.append([step, step, world])
    assert schedule == [[1, 30, 4], [31, 60, 2], [61, STEPS, 4]], schedule
    joined = [l for l in lines if l["kind"] == "resumed_from" and l.get("joined") == "1"]
    assert sorted(int(l["rank"]) for l in joined) == [2, 3], joined
    assert all(int(l["resumed_from"]) == 60 for l in joined), joined
    done = done_line(lines)
    print(f"\nnode lost after step 30, a new node joined after step 60: schedule {schedule}; "
          f"final loss {done['loss']} (undisturbed {undisturbed['loss']})")
    assert abs(float(done["loss"]) - float(undisturbed["loss"])) < 1e-4
