"""Running the two sides of a side-by-side benchmark so that no run can hang the comparison.

Every command runs in its own process session; a run that outlives its time limit has its whole
process group killed (a torch.multiprocessing peer's spawned ranks included) and raises Stalled
naming the run and how many of its processes were still running, so the caller can say which
side stalled and still print the rounds it finished.
"""

import os
import signal
import subprocess
import time


class Stalled(Exception):
    """A run did not finish within its time limit; its processes were killed."""


class Failed(Exception):
    """A run's process exited with a non-zero status."""


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_bounded(commands, label, timeout, env=None, ok_codes=(0,)):
    """Runs the commands at once and waits for all of them, at most `timeout` seconds in all.

    commands: a list of argv lists, or of (argv, env) pairs (env overrides `env`). Returns the
    list of (returncode, stdout, stderr). Raises Stalled when the limit passes (every process
    group is killed first) and Failed when a process exits with a code outside ok_codes (the
    others are killed).
    """
    procs = []
    try:
        for c in commands:
            argv, own_env = (c if isinstance(c, tuple) else (c, None))
            procs.append(subprocess.Popen(argv, env=own_env or env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, start_new_session=True))
        deadline = time.monotonic() + timeout
        results = []
        for i, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                running = sum(1 for q in procs if q.poll() is None)
                raise Stalled(f"{label}: {running} of {len(procs)} process(es) still running after "
                              f"{timeout:g} s; killed") from None
            if p.returncode not in ok_codes:
                raise Failed(f"{label}: process {i} exited with status {p.returncode}: "
                             f"{err.strip()[-6000:]}")
            results.append((p.returncode, out, err))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                _kill_group(p)
            else:
                # The leader ended; children it left in its group (spawned ranks) go too.
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
