"""Shared by the side-by-side scripts in bench/: finding a Python that can run the torch peers."""

import subprocess
import sys


def python_with_torch(explicit, tool):
    """The interpreter that runs a peer: `explicit` (--python), else this one if it imports torch,
    else Debian's /usr/bin/python3; exits with status 2 naming `tool` when none does."""
    if explicit:
        return explicit
    for candidate in (sys.executable, "/usr/bin/python3"):
        if candidate and subprocess.run([candidate, "-c", "import torch"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL).returncode == 0:
            return candidate
    print(f"{tool}: error: no python3 here imports torch; install python3-torch (Debian) or pass --python",
          file=sys.stderr)
    sys.exit(2)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ranks(target, ranks, args, timeout, tool):
    """Runs target(rank, args, port, queue) in `ranks` spawned processes (torch.multiprocessing)
    and returns what rank 0 put on the queue. Polls, so that a rank that fails does not leave the
    others waiting in a collective until the deadline, and reads the result while the ranks run so
    that no child blocks flushing the queue. On a failed rank or after `timeout` seconds every
    rank is killed and RuntimeError says which, prefixed with `tool`."""
    import time
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, args, port, queue)) for r in range(ranks)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    result = None
    while True:
        if result is None:
            try:
                result = queue.get(timeout=0.2)
            except Exception:  # noqa: BLE001 - queue.Empty
                pass
        else:
            time.sleep(0.05)
        codes = [p.exitcode for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed or time.monotonic() > deadline:
            for p in procs:
                if p.is_alive():
                    p.kill()
            what = (f"rank(s) {failed} exited with {[codes[r] for r in failed]}" if failed
                    else f"timed out after {timeout:g} s")
            raise RuntimeError(f"{tool}: error: {what}")
        if all(c == 0 for c in codes):
            break
    if result is None:
        try:
            result = queue.get(timeout=10)
        except Exception:  # noqa: BLE001
            raise RuntimeError(f"{tool}: error: rank 0 exited without a result") from None
    return result
