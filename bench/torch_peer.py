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


def _spawned(target, rank, args, init, queue, dump_after):
    """A spawned rank: prints every thread's stack to stderr if it is still running after
    `dump_after` seconds (just before the parent's deadline), so a hang says where it hangs."""
    import faulthandler
    faulthandler.dump_traceback_later(dump_after, exit=False)
    target(rank, args, init, queue)


def init_process_group(dist, init, rank, world, timeout, backend="gloo"):
    """Joins the `backend` group (gloo by default) through `init` (spawn_ranks's file://
    rendezvous) over loopback; a collective that waits longer than `timeout` seconds raises
    instead of hanging."""
    import datetime
    import os
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=max(timeout, 1)))


def spawn_ranks(target, ranks, args, timeout, tool):
    """Runs target(rank, args, init, queue) in `ranks` spawned processes (torch.multiprocessing)
    and returns what rank 0 put on the queue. `init` is a file:// rendezvous in a fresh temporary
    directory (for init_process_group above): no TCP port is picked and released, so no other
    process can take it in between. Polls, so that a rank that fails does not leave the others
    waiting in a collective until the deadline, and reads the result while the ranks run so that
    no child blocks flushing the queue. On a failed rank or after `timeout` seconds every rank is
    killed (a rank still running prints its stacks first) and RuntimeError says which, prefixed
    with `tool`."""
    import os
    import tempfile
    import time
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="stretch-peer-") as tmp:
        init = "file://" + os.path.join(tmp, "rendezvous")
        dump_after = max(timeout - 5, timeout * 0.9)
        procs = [ctx.Process(target=_spawned, args=(target, r, args, init, queue, dump_after))
                 for r in range(ranks)]
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
                alive = [r for r, p in enumerate(procs) if p.is_alive()]
                for p in procs:
                    if p.is_alive():
                        p.kill()
                what = (f"rank(s) {failed} exited with {[codes[r] for r in failed]}" if failed
                        else f"timed out after {timeout:g} s with rank(s) {alive} still running")
                raise RuntimeError(f"{tool}: error: {what}")
            if all(c == 0 for c in codes):
                break
    if result is None:
        try:
            result = queue.get(timeout=10)
        except Exception:  # noqa: BLE001
            raise RuntimeError(f"{tool}: error: rank 0 exited without a result") from None
    return result
