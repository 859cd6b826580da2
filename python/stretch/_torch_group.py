"""stretch.torch's process groups (private; stretch/torch.py is the module to read first): one
live generation's ``ProcessGroupGloo``, made torch.distributed's default group, rendezvoused
through Stretch's store (``StoreBridge``) and aborted by shutting its sockets down; what counts as
a peer's failure; and ``CannotContinueLive``, the error that leaves through the restart path."""

import datetime
import os
import socket

import torch
import torch.distributed as dist

from . import _stretch
from ._errors import StretchError

# Messages of the errors a dead or departed peer causes in a collective (Gloo's transport, torch's
# process group wrappers, this module's own aborts and supersessions).
_PEER_FAILURE_WORDS = (
    "gloo",
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "Timed out",
    "timed out",
    "stretch.torch:",
)


class CannotContinueLive(StretchError, RuntimeError):
    """A failure stretch.torch cannot recover from live (the worker withdrew its live/capable key:
    the launcher restarts every worker from the checkpoint)."""

    __module__ = "stretch.torch"  # where the documentation (and a traceback) names it


def _is_peer_failure(error):
    """Whether `error` is what a collective raises when a peer died, left or hung."""
    backend_error = getattr(dist, "DistBackendError", None)
    if backend_error is not None and isinstance(error, backend_error):
        return True
    if not isinstance(error, RuntimeError) or isinstance(error, StretchError):
        return False
    text = str(error)
    return any(word in text for word in _PEER_FAILURE_WORDS)


def _socket_fds():
    """This process's socket file descriptors: {fd: 'socket:[inode]'}."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link.startswith("socket:"):
            out[int(name)] = link
    return out


class StoreBridge(dist.Store):
    """A ``torch.distributed.Store`` over Stretch's store client (``stretch._stretch.StoreClient``):
    what ``ProcessGroupGloo`` rendezvouses through in a live generation. Waits give up as soon as
    the agent publishes a newer generation or the job finishes (the engine's SupersedableStore).
    Keep the object alive for the group's life: torch's trampoline calls back into it."""

    __module__ = "stretch.torch"

    def __init__(self, client, generation, timeout_s):
        super().__init__()
        self._client = client
        self._generation = generation
        self._timeout_s = timeout_s

    @staticmethod
    def _bytes(value):
        if isinstance(value, str):
            return value.encode()
        return bytes(value)

    def set(self, key, value):
        self._client.set(key, self._bytes(value))

    def get(self, key):
        self.wait([key])
        return self._client.get(key)

    def add(self, key, value):
        return self._client.add(key, int(value))

    def compare_set(self, key, expected, desired):
        return self._client.compare_set(key, self._bytes(expected), self._bytes(desired))

    def delete_key(self, key):
        return self._client.delete_key(key)

    def num_keys(self):
        return self._client.num_keys()

    def check(self, keys):
        return self._client.check(list(keys))

    def set_timeout(self, timeout):
        self._timeout_s = timeout.total_seconds()

    def wait(self, keys, timeout=None):
        seconds = self._timeout_s if timeout is None else timeout.total_seconds()
        status = _stretch.wait_unless_superseded(self._client, list(keys), self._generation,
                                                 max(seconds, 0.001))
        if status != "ready":
            raise RuntimeError(f"stretch.torch: live generation {self._generation} was "
                               f"{'superseded' if status == 'superseded' else 'ended'} before "
                               "its group formed")


def _gloo_group(store, rank, size, timeout_s):
    """A ProcessGroupGloo over `store` (torch 1.13: itself a ProcessGroup; torch 2.x: a backend,
    registered in a ProcessGroup of its own)."""
    timeout = datetime.timedelta(seconds=timeout_s)
    gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
    if isinstance(gloo, dist.ProcessGroup):
        return gloo
    try:  # torch 2.x
        group_type = dist.ProcessGroup
        try:
            group = group_type(store, rank, size)
        except TypeError:
            group = group_type(store, rank, size, group_type.Options(backend="gloo"))
        backend_type = group_type.BackendType.GLOO
        if hasattr(group, "_set_default_backend"):
            group._set_default_backend(backend_type)
        group._register_backend(torch.device("cpu"), backend_type, gloo)
        return group
    except Exception as e:  # noqa: BLE001  (any internal API change: say which torch)
        raise CannotContinueLive(
            f"torch {torch.__version__}: cannot wrap ProcessGroupGloo in a ProcessGroup ({e}); "
            "stretch.torch was tested with torch 1.13") from e


def _make_default(group, store, name):
    """`group` becomes torch.distributed's default (WORLD) group: dist.all_reduce(t),
    dist.get_rank() and DistributedDataParallel use it."""
    c10d = dist.distributed_c10d
    world = getattr(c10d, "_world", None)
    old = c10d.GroupMember.WORLD
    if world is not None:  # torch 2.x
        maps = (world.pg_map, world.pg_names, world.pg_group_ranks)
    else:
        maps = (c10d._pg_map, c10d._pg_names, c10d._pg_group_ranks)
    for table in maps:
        if old is not None:
            table.pop(old, None)
    maps[0][group] = (dist.Backend.GLOO, store)
    maps[1][group] = name
    maps[2][group] = {r: r for r in range(group.size())}
    if world is not None and hasattr(world, "pg_backend_config"):
        world.pg_backend_config.pop(old, None)
        world.pg_backend_config[group] = "cpu:gloo"
    c10d._update_default_pg(group)


class _Group:
    """One generation's process group and what keeps it alive and lets it be aborted."""

    def __init__(self, group, store, fds, generation):
        self.group = group
        self.store = store  # the Python store torch calls back into: alive as long as the group
        self.fds = fds
        self.generation = generation
        self.aborted = False

    def abort(self):
        """Closes the group's connections (shutdown, not close: Gloo's threads still own the
        descriptors), so that peers waiting in a collective with this rank fail at once instead of
        at their timeout, and this rank's own pending operations fail too. torch 1.13 has no
        abort of its own."""
        if self.aborted:
            return
        self.aborted = True
        now = _socket_fds()
        for fd, link in self.fds.items():
            if now.get(fd) != link:
                continue  # closed (and perhaps reused) since
            try:
                s = socket.socket(fileno=fd)
            except OSError:
                continue
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            finally:
                s.detach()
