"""The peer of stretch-bench-store (bench/store/store_rendezvous_bench.cpp): the same rendezvous
barrier of N clients on PyTorch's TCPStore (torch.distributed.TCPStore), driven the same way.

Coordinator (default): runs the TCPStore master (is_master=True, wait_for_workers=False) in this
process and spawns ceil(N / per-proc) worker processes (this script with --worker), each holding
up to --per-proc clients, one TCPStore and one thread per client. When every client is connected
the coordinator takes t0 (time.monotonic(), CLOCK_MONOTONIC like the C++ side) and tells every
worker to go. Each client then
  add("count", 1); the one that reaches N sets "done"; wait(["done"]);
  set("v/<i>", "<i>"); get("v/<(i+1) % N>") (checked: "<(i+1) % N>");
and records when it finished. The barrier time is the last finish minus t0, and the master's CPU
time over it is this process's (its main thread only reads the workers' pipes). Afterwards the
coordinator reads "count" back (must be N).

PyTorch 1.13's client opens two connections (its own and a watchKey callback client with its own
thread), so N clients are 2N connections to the master. The master listens on every address;
clients connect to 127.0.0.1 .. 127.0.0.<--spread> in turn so that 2N connections from
127.0.0.1 do not run out of local ports (a connection is unique by its four-tuple).

Prints one JSON line like stretch-bench-store's, with "store": "torch"; --json FILE writes it
there too. Exit status: 0 done and every answer right, 1 a wrong answer, 2 setup error (no
torch, descriptors), 3 a worker failed.
"""

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import threading
import time


def raise_fd_limit(want):
    """Raises RLIMIT_NOFILE to `want` (the hard limit too when allowed); returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return soft
    if hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            return want
        except (ValueError, OSError):
            pass
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def run_worker(args):
    import torch.distributed as dist
    raise_fd_limit(2 * args.count + 64)
    threading.stack_size(256 << 10)
    timeout = datetime.timedelta(seconds=args.timeout)
    stores = [None] * args.count
    errors = []
    connected = threading.Barrier(args.count + 1)
    go = threading.Event()
    last_end = [0.0]
    wrong = [0]
    lock = threading.Lock()

    def client(k):
        rank = args.first + k
        try:
            host = f"127.0.0.{1 + rank % args.spread}"
            stores[k] = dist.TCPStore(host, args.port, args.clients, False, timeout,
                                      wait_for_workers=False)
        except Exception as e:  # noqa: BLE001 -- reported to the coordinator
            with lock:
                errors.append(f"client {rank}: {e}")
        connected.wait()
        go.wait()
        store = stores[k]
        if store is None:
            return
        try:
            if store.add("count", 1) == args.clients:
                store.set("done", "1")
            store.wait(["done"])
            store.set(f"v/{rank}", str(rank))
            nxt = (rank + 1) % args.clients
            ok = store.get(f"v/{nxt}") == str(nxt).encode()
            end = time.monotonic()
            with lock:
                last_end[0] = max(last_end[0], end)
                if not ok:
                    wrong[0] += 1
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(f"client {rank}: {e}")

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(args.count)]
    for t in threads:
        t.start()
    connected.wait()
    print(f"ready {len(errors)}", flush=True)
    line = sys.stdin.readline()
    if not line.startswith("go"):
        return 3
    go.set()
    for t in threads:
        t.join()
    print(f"done {last_end[0]!r} {wrong[0]} {len(errors)}", flush=True)
    if errors:
        print(f"worker {args.first}..{args.first + args.count - 1}: {len(errors)} client(s) "
              f"failed, first: {errors[0]}", file=sys.stderr)
    os._exit(3 if errors else 0)  # do not wait for every client's callback thread to wind down


def run_coordinator(args):
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"torch_store_bench.py: error: cannot import torch.distributed: {e}", file=sys.stderr)
        return 2
    need = 2 * args.clients + 256
    got = raise_fd_limit(need)
    if got < need:
        print(f"torch_store_bench.py: error: the master needs {need} descriptors, RLIMIT_NOFILE "
              f"allows {got} (raise `ulimit -Hn` or run as root)", file=sys.stderr)
        return 2
    timeout = datetime.timedelta(seconds=args.timeout)
    master = dist.TCPStore("127.0.0.1", 0, args.clients, True, timeout, wait_for_workers=False)
    spawn_start = time.monotonic()
    workers = []
    for first in range(0, args.clients, args.per_proc):
        count = min(args.per_proc, args.clients - first)
        argv = [sys.executable, os.path.abspath(__file__), "--worker", "--port", str(master.port),
                "--first", str(first), "--count", str(count), "--clients", str(args.clients),
                "--timeout", str(args.timeout), "--spread", str(args.spread)]
        workers.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True))

    def fail(why):
        print(f"torch_store_bench.py: {why}", file=sys.stderr)
        for w in workers:
            w.kill()
        for w in workers:
            w.wait()
        return 3

    for i, w in enumerate(workers):
        parts = w.stdout.readline().split()
        if len(parts) != 2 or parts[0] != "ready":
            return fail(f"worker {i} exited before its clients connected")
        if int(parts[1]) > 0:
            return fail(f"worker {i}: {parts[1]} client(s) could not connect")
    # The main thread only reads the workers' pipes from here on: the process's CPU is the master's.
    cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    t0 = time.monotonic()
    for w in workers:
        w.stdin.write("go\n")
        w.stdin.flush()
    last_end, wrong, failed = 0.0, 0, 0
    for i, w in enumerate(workers):
        parts = w.stdout.readline().split()
        if len(parts) != 4 or parts[0] != "done":
            return fail(f"worker {i} exited before its clients finished")
        last_end = max(last_end, float(parts[1]))
        wrong += int(parts[2])
        failed += int(parts[3])
    server_cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu0
    status = 0
    for w in workers:
        if w.wait() != 0:
            status = 3
    count = master.add("count", 0)
    if count != args.clients:
        wrong += 1
    result = {"store": "torch", "clients": args.clients, "workers": len(workers),
              "connect_s": t0 - spawn_start, "barrier_s": last_end - t0, "server_cpu_s": server_cpu,
              "wrong": wrong,
              "failed": failed, "count": count, "torch": torch.__version__}
    print(json.dumps(result), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    if status or failed:
        return 3
    return 1 if wrong else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", "--clients", type=int, default=1024)
    p.add_argument("--per-proc", type=int, default=1024, help="clients (threads) per worker process")
    p.add_argument("--timeout", type=float, default=120, help="store timeout of every client, s")
    p.add_argument("--spread", type=int, default=8,
                   help="clients connect to 127.0.0.1 .. 127.0.0.<spread> in turn")
    p.add_argument("--json", help="also write the result to FILE")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.clients < 1 or args.per_proc < 1 or not 1 <= args.spread <= 254:
        p.error("--clients and --per-proc must be positive, --spread 1 to 254")
    return run_worker(args) if args.worker else run_coordinator(args)


if __name__ == "__main__":
    sys.exit(main())
