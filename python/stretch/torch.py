"""stretch.torch: live recovery for PyTorch DDP programs under ``stretch launch`` (docs/python.md,
"Live recovery for PyTorch").

A plain DDP script changes a few lines::

    import stretch.torch

    job = stretch.torch.init(model, optimizer, scheduler, checkpoint_dir=args.checkpoint_dir)
    for step in job.steps(args.steps):          # was: for step in range(start, args.steps)
        with job.attempt():                      # a peer's death abandons the step, then goes on
            for j, index in enumerate(job.micro_batches(step, len(dataset))):
                with job.no_sync(j):             # DDP syncs on the last micro batch only
                    loss = loss_fn(job.model(x[index]), y[index]) / job.gradient_accumulation_steps
                    loss.backward()
            optimizer.step()                     # the step is done once the optimizer stepped
            scheduler.step()
    job.finish()

Under ``stretch launch --recovery live`` (the default) the job speaks the launcher's live-recovery
protocol exactly as the C++ engine does (runtime/live/generation.hpp, through the C++ bindings in
``stretch._stretch``): when a peer dies, the survivors' collective fails at once (Gloo), the job
abandons the step in flight, closes its group's connections (so that peers still waiting fail at
once too), waits for the agent's next live generation, builds a ``ProcessGroupGloo`` for it from
the agent's store (a ``torch.distributed.Store`` bridged to Stretch's store client, under the
generation's own prefix), takes the state of the rank that completed the most steps, re-splits
the global batch for the new world size with the elastic solver and continues from the same step
and the same position in the data order. A worker that joins (a replacement, a new node) receives
the model, optimizer, scheduler, step and RNG state from a survivor. Anything it cannot handle
live (another kind of error, a batch that does not split) leaves through the launcher's restart
path: the worker withdraws its ``live/capable`` key, logs why and raises.

Outside such a launcher (no ``STRETCH_AGENT_STORE``, or ``--recovery restart``) the same script
runs as plain DDP: a failure raises, and the agent restarts every worker from the checkpoint.
"""

import contextlib
import datetime
import functools
import io
import os
import random
import signal
import sys
import threading
import time
import warnings

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from . import _stretch
from ._errors import ConfigError, StretchError
from ._torch_files import load_latest_checkpoint, save_checkpoint, write_heartbeat
from ._torch_group import (CannotContinueLive, StoreBridge, _Group, _gloo_group,
                           _is_peer_failure, _make_default, _socket_fds)

__all__ = ["init", "LiveJob", "CannotContinueLive", "StoreBridge"]

#: How long the members of a generation's group, once all are present, may take to connect
#: (the engine's LiveRecovery::kRendezvousTimeout).
RENDEZVOUS_TIMEOUT_S = 20.0


class _Superseded(Exception):
    """The generation being joined was superseded (or the job finished)."""


def _say(message):
    print(f"stretch.torch: {message}", file=sys.stderr, flush=True)


def _env_int(name, default):
    value = os.environ.get(name, "")
    if value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name} = {value!r}: expected an integer") from None


class LiveJob:
    """A DDP training job with live recovery. Build it with :func:`init`.

    Attributes (of the current generation): ``rank``, ``world_size``, ``generation`` (the live
    generation: 0 until the first recovery), ``train_batch_size``, ``micro_batch_size``,
    ``gradient_accumulation_steps``, ``batch_source``, ``step`` (optimizer steps completed, the
    job's position), ``model`` (the DistributedDataParallel wrapper of this generation: use it,
    not a wrapper of your own, since every generation builds a new one), ``live`` (whether live
    recovery is on), ``joined`` (this worker was started into a running job and received the state
    from a survivor), ``resumed_from`` (the step the job started at in this process).
    """

    def __init__(self, model, optimizer, scheduler=None, *, checkpoint_dir=None, ds_config=None,
                 global_batch=None, timeout=60.0, ddp_options=None, extra_state=None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if isinstance(model, DistributedDataParallel):
            raise TypeError("model: give the module itself; stretch.torch wraps it in "
                            "DistributedDataParallel for every generation")
        if timeout <= 0:
            raise ConfigError(f"timeout = {timeout}: expected a positive number of seconds")
        self.module = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.checkpoint_dir = checkpoint_dir
        self.ds_config = ds_config  # the job's own config (its elasticity section)
        self.global_batch = global_batch
        self.timeout = float(timeout)
        self.ddp_options = dict(ddp_options or {})
        self.extra_state = extra_state  # (get, set) of the program's own state, or None
        self.model = None
        self.step = 0
        self.resumed_from = 0
        self.generation = 0
        self.rank = 0
        self.world_size = 1
        self.train_batch_size = self.micro_batch_size = self.gradient_accumulation_steps = 0
        self.batch_source = ""
        self.recoveries = 0
        self.last_recovery_s = None
        self._group = None
        self._retired = []  # every group this process made: torch must not destroy them
        self._announced = False
        self._heartbeat_stop = threading.Event()
        self._heartbeat_path = None
        self._completed = 0  # optimizer steps this process completed
        self._beaten = 0

        self._node = os.environ.get("STRETCH_NODE_ID") or "localhost"
        self._local_rank = _env_int("LOCAL_RANK", 0)
        self._live_timeout = float(_env_int("STRETCH_LIVE_TIMEOUT", 300))
        self._store = _stretch.StoreClient.from_environment(timeout=30.0)
        self.live = self._store is not None
        self._joining = self.live and os.environ.get("STRETCH_LIVE_JOIN") == "1"
        self.joined = self._joining  # started into a running job: took a survivor's state
        if self.live:
            self.generation = _env_int("STRETCH_LIVE_GENERATION", 0)
        self._wrap_optimizer_step()

        if self._joining:
            self._join_running_job()
        else:
            self._start()
        if self.live:
            self._say_capable()
        self._start_heartbeat()

    # ---- the public loop ----------------------------------------------------------------------

    def steps(self, total):
        """The steps left to train, one at a time: the job's position (``self.step``) before each;
        the same step again when a recovery abandoned it. Joins a newer generation at a step
        boundary when the agent announced one (SIGUSR1)."""
        while True:
            if self._completed != self._beaten:
                self._beaten = self._completed
                self._beat()
            if self._announced:
                self._announced = False
                if self.live and _stretch.latest_live_generation(self._store) > self.generation:
                    self._recover("the agent announced a new generation", abandon=False)
            if self.step >= total:
                return
            yield self.step

    @contextlib.contextmanager
    def attempt(self):
        """One training step. Every collective of the step belongs inside (the DDP backward, a
        loss all-reduce); the step counts as done once ``optimizer.step()`` returned. When a
        collective fails because a peer died, the step is abandoned and the job goes on in the
        next generation (the exception is swallowed; ``steps`` gives the step to train next)."""
        try:
            yield self
        except Exception as e:  # noqa: BLE001
            if not self.live or not _is_peer_failure(e):
                if self.live:
                    self._withdraw(f"step {self.step + 1} failed with {type(e).__name__}: "
                                   f"{str(e)[:200]}, not a peer's failure")
                raise
            self._recover(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}", abandon=True)

    def no_sync(self, micro_step):
        """DDP's no_sync() for every micro batch of a step but the last (``micro_step`` counts from
        0): gradients are all-reduced once per step."""
        if micro_step < self.gradient_accumulation_steps - 1:
            return self.model.no_sync()
        return contextlib.nullcontext()

    def micro_batches(self, step, dataset_size, seed=None):
        """This rank's micro batches of `step` (a list of ``gradient_accumulation_steps`` index
        tensors of ``micro_batch_size`` each): step s trains the samples s*B .. s*B+B-1 of the
        job's order (B the global batch), rank r its contiguous share. The position in the data
        is the step, whatever the world size: a new generation continues where the last one
        stopped. With `seed`, the order is a fresh permutation of the dataset every epoch."""
        if dataset_size < 1:
            raise ConfigError(f"dataset_size = {dataset_size}: expected a positive size")
        share = self.micro_batch_size * self.gradient_accumulation_steps
        first = step * self.train_batch_size + self.rank * share
        out = []
        for j in range(self.gradient_accumulation_steps):
            position = torch.arange(self.micro_batch_size) + first + j * self.micro_batch_size
            if seed is None:
                out.append(position % dataset_size)
                continue
            epochs = position // dataset_size
            index = position % dataset_size
            for epoch in epochs.unique().tolist():
                order = torch.randperm(dataset_size,
                                       generator=torch.Generator().manual_seed(seed + epoch))
                mask = epochs == epoch
                index[mask] = order[index[mask]]
            out.append(index)
        return out

    def finish(self):
        """After the last step: workers still waiting for a generation end (live/finished), and
        the ranks meet once more so that none leaves while another still saves."""
        if self.live:
            self._store.set(_stretch.live_keys.FINISHED, str(self.generation).encode())
        try:
            dist.barrier()
        except RuntimeError:
            pass  # a peer died after the last step: nothing is left to train
        # What a worker does after training is not a hang: the launcher stops watching.
        self._heartbeat_stop.set()
        if self._heartbeat_path:
            with contextlib.suppress(OSError):
                os.remove(self._heartbeat_path)

    # ---- checkpoints, in DeepSpeed's layout -------------------------------------------------

    def state_dict(self):
        """What a joiner receives and a checkpoint holds: model, optimizer, scheduler, step, RNG
        states and the program's extra state."""
        state = {
            "module": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "lr_scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "global_steps": self.step,
            "global_samples": self.step * self.train_batch_size,
            "dp_world_size": self.world_size,
            "mp_world_size": 1,
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
        }
        if self.extra_state is not None:
            state["client_state"] = self.extra_state[0]()
        return state

    def load_state_dict(self, state, rng=True):
        self.module.load_state_dict(state["module"])
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and state.get("lr_scheduler") is not None:
            self.scheduler.load_state_dict(state["lr_scheduler"])
        self.step = int(state["global_steps"])
        if rng and "rng" in state:
            torch.set_rng_state(state["rng"]["torch"])
            random.setstate(state["rng"]["python"])
        if self.extra_state is not None and "client_state" in state:
            self.extra_state[1](state["client_state"])

    def save_checkpoint(self, checkpoint_dir=None):
        """Rank 0 writes ``global_step{N}/mp_rank_00_model_states.pt`` (DeepSpeed's layout and
        keys: module, optimizer, lr_scheduler, global_steps, ...) and then ``latest``, both
        atomically; the two newest checkpoints are kept. Not collective: the other ranks return."""
        directory = checkpoint_dir or self.checkpoint_dir
        if directory is None:
            raise ConfigError("save_checkpoint: no checkpoint_dir (give one here or to init)")
        if self.rank != 0:
            return None
        return save_checkpoint(directory, self.step, self.state_dict())

    def load_checkpoint(self, checkpoint_dir=None):
        """Every rank loads ``latest``'s checkpoint (DeepSpeed's layout; a DeepSpeed checkpoint's
        module, optimizer and lr_scheduler entries too); the step it resumes from, or None when
        there is none."""
        directory = checkpoint_dir or self.checkpoint_dir
        state = load_latest_checkpoint(directory) if directory is not None else None
        if state is None:
            return None
        self.load_state_dict(state, rng=False)
        return self.step

    # ---- the protocol -----------------------------------------------------------------------

    def _wrap_optimizer_step(self):
        inner = self.optimizer.step

        @functools.wraps(inner)
        def step(*args, **kwargs):
            out = inner(*args, **kwargs)
            self.step += 1
            self._completed += 1
            return out

        self.optimizer.step = step

    def _start(self):
        """Generation 0: the launch's own rendezvous (MASTER_ADDR, MASTER_PORT), then the
        checkpoint."""
        self.rank = _env_int("RANK", 0)
        self.world_size = _env_int("WORLD_SIZE", 1)
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"RANK = {self.rank}: expected a rank below WORLD_SIZE = "
                              f"{self.world_size}")
        host = os.environ.get("MASTER_ADDR", "127.0.0.1")
        port = _env_int("MASTER_PORT", 29500)
        self._set_batch(self._start_batch())
        store = dist.TCPStore(host, port, self.world_size, self.rank == 0,
                              timeout=datetime.timedelta(seconds=self.timeout))
        # The group's sockets are those it opens (the store's, rank 0's server among them, are
        # not: an abort must leave them alone).
        before = _socket_fds()
        attempt = os.environ.get("STRETCH_GENERATION", "0")
        prefixed = dist.PrefixStore(f"stretch/generation/0/{attempt}", store)
        group = _gloo_group(prefixed, self.rank, self.world_size, self.timeout)
        fds = {fd: link for fd, link in _socket_fds().items() if before.get(fd) != link}
        self._use(_Group(group, prefixed, fds, 0), "stretch_generation_0")
        start = self.load_checkpoint()
        self.resumed_from = start or 0
        self.step = self.resumed_from
        self._build_ddp()

    def _start_batch(self):
        """(train, micro, accumulation, source) for generation 0: the launcher's contract, else
        the DeepSpeed config's batch for this world size, else the global batch split evenly."""
        from . import worker_batch, config

        batch = worker_batch()
        if batch is not None:
            return (batch.train_batch_size, batch.micro_batch_size,
                    batch.gradient_accumulation_steps, "env")
        start_config = self.ds_config or os.environ.get("STRETCH_DS_CONFIG")
        if start_config:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                resolved = config(start_config, world_size=self.world_size)
            return (resolved["train_batch_size"], resolved["train_micro_batch_size_per_gpu"],
                    resolved["gradient_accumulation_steps"], "ds_config")
        if self.global_batch is not None:
            if self.global_batch % self.world_size != 0:
                raise ConfigError(f"global_batch = {self.global_batch}: expected a multiple of "
                                  f"the world size {self.world_size} (no batch contract was "
                                  "given)")
            return self.global_batch, self.global_batch // self.world_size, 1, "global_batch"
        raise ConfigError("no batch: run under `stretch launch` (its batch contract), or give "
                          "ds_config (or STRETCH_DS_CONFIG) or global_batch")

    def _set_batch(self, batch):
        train, micro, accum, source = batch
        if min(train, micro, accum) < 1 or micro * accum * self.world_size != train:
            raise ConfigError(f"batch ({source}): micro {micro} x accumulation {accum} x world "
                              f"size {self.world_size} = {micro * accum * self.world_size}, but "
                              f"the train batch is {train}")
        if self.train_batch_size and train != self.train_batch_size:
            raise ConfigError(f"train_batch_size = {train} ({source}) in generation "
                              f"{self.generation}: expected the job's global batch "
                              f"{self.train_batch_size} (elasticity keeps it for every world size)")
        self.train_batch_size, self.micro_batch_size = train, micro
        self.gradient_accumulation_steps, self.batch_source = accum, source

    def _live_batch(self, record, world):
        """The batch of a live generation, as Engine::rejoin resolves it: the elastic solver's for
        the new world size over the job's config, the record's (the launcher's) checked against
        it; without a config, the record's."""
        text = source = None
        if self.ds_config:
            from . import _config_text

            text, source = _config_text(self.ds_config)
        elif os.environ.get("STRETCH_ELASTICITY_CONFIG"):
            # The launcher's elasticity section (STRETCH_DS_CONFIG is the start's generation's
            # config, its batch fixed for that world size).
            text = '{"elasticity": ' + os.environ["STRETCH_ELASTICITY_CONFIG"] + "}"
            source = "STRETCH_ELASTICITY_CONFIG"
        if text is not None:
            train, micro, accum = _stretch.live_batch(text, source, world, record)
            return train, micro, accum, "elastic solver"
        if record.train_batch_size > 0:
            return (record.train_batch_size, record.micro_batch, record.gradient_accumulation,
                    "live generation record")
        train = self.train_batch_size
        if train % world != 0:
            raise CannotContinueLive(f"train_batch_size {train} does not split over {world} "
                                     "rank(s) and the job has no elastic config")
        return train, train // world, 1, "even split"

    def _use(self, group, name):
        self._group = group
        self._retired.append(group)
        _make_default(group.group, group.store, name)
        self.rank = group.group.rank()
        self.world_size = group.group.size()

    def _build_ddp(self):
        options = {"broadcast_buffers": True, **self.ddp_options}
        self.model = DistributedDataParallel(self.module, **options)

    def _say_capable(self):
        # SIGUSR1 is the agent's announcement of a generation that grows the job; its default
        # action would end the process.
        signal.signal(signal.SIGUSR1, self._on_announcement)
        self._store.set(_stretch.live_keys.capable(self._node, _stretch.worker_process_id()), b"1")

    def _on_announcement(self, signum, frame):
        self._announced = True

    def _withdraw(self, reason):
        """Leaves through the restart path: the agent restarts every worker from the checkpoint
        at this worker's exit."""
        try:
            self._store.delete_key(_stretch.live_keys.capable(self._node, _stretch.worker_process_id()))
        except StretchError:
            pass
        _say(f"rank {self.rank}: cannot continue live ({reason}); it withdraws its live/capable "
             "key and exits: the launcher restarts the job from its checkpoint unless the "
             "other running workers can go on without it")

    def _start_heartbeat(self):
        """The launcher's hang detection (runtime/engine/heartbeat.hpp's file): "STEP COMPLETED"
        (the last completed step, and how many this process completed) after every step and
        every second, so that a long step or a recovery is not taken for a hang but a frozen
        process is."""
        self._heartbeat_path = os.environ.get("STRETCH_HEARTBEAT_FILE") or None
        if not self._heartbeat_path:
            return

        def beat():
            while not self._heartbeat_stop.wait(1.0):
                self._beat()

        self._beat()
        threading.Thread(target=beat, name="stretch.torch heartbeat", daemon=True).start()

    def _beat(self):
        if self._heartbeat_path and not self._heartbeat_stop.is_set():
            write_heartbeat(self._heartbeat_path, f"{self.step} {self._completed}")

    def _join_running_job(self):
        """A replacement or a new node's worker: says it is ready, joins the first generation that
        includes it and takes the job's state there."""
        began = time.monotonic()
        self._store.add(_stretch.live_keys.ready(self.generation), 1)
        after = self.generation - 1 if self.generation > 0 else 0
        self.step = -1  # no state: every member has more
        while True:
            record = self._wait_for_generation(after)
            after = record.generation
            try:
                if not self._join(record, joiner=True):
                    continue
            except _Superseded:
                continue
            break
        self.resumed_from = self.step
        _say(f"rank {self.rank}: joined live generation {self.generation} at step {self.step} "
             f"{time.monotonic() - began:.3f} s after its start")

    def _wait_for_generation(self, after):
        record = _stretch.wait_for_generation(
            self._store, after, self._live_timeout,
            f"worker {self._local_rank} of node {self._node}")
        if record is None:
            _say(f"worker {self._local_rank} of node {self._node}: the job finished while it "
                 "waited for a generation")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)  # nothing left to do; skip destructors that wait on dead peers
        return record

    def _connect(self, record, prefix, rank, size):
        """This worker's group in `record`'s generation: every member marks itself present and
        waits for the others (until the generation is superseded, the job finishes or
        STRETCH_LIVE_TIMEOUT), then they connect within RENDEZVOUS_TIMEOUT_S on a thread that is
        left behind if the generation is superseded meanwhile (Gloo's connect cannot be
        interrupted). Raises _Superseded."""
        generation = record.generation
        client = _stretch.StoreClient(self._store.host, self._store.port,
                                      os.environ.get("STRETCH_STORE_TOKEN", ""), 30.0)
        client.set(f"{prefix}/present/{rank}", b"1")
        status = _stretch.wait_unless_superseded(
            client, [f"{prefix}/present/{r}" for r in range(size)], generation,
            self._live_timeout)
        if status != "ready":
            raise _Superseded(status)
        bridge = StoreBridge(client, generation, RENDEZVOUS_TIMEOUT_S)
        prefixed = dist.PrefixStore(prefix, bridge)
        before = _socket_fds()
        result = {}

        def build():
            try:
                result["group"] = _gloo_group(prefixed, rank, size, self.timeout)
            except BaseException as e:  # noqa: BLE001
                result["error"] = e

        thread = threading.Thread(target=build, name=f"stretch.torch generation {generation}",
                                  daemon=True)
        thread.start()
        deadline = time.monotonic() + RENDEZVOUS_TIMEOUT_S + 1.0
        while thread.is_alive():
            thread.join(0.02)
            if not thread.is_alive():
                break
            why = _stretch.supersession(self._store, generation)
            if why:
                self._retired.append((bridge, prefixed))  # the thread still calls into them
                raise _Superseded(why)
            if time.monotonic() > deadline:
                self._retired.append((bridge, prefixed))
                raise _Superseded("timeout")
        if "error" in result:
            raise _Superseded(f"{result['error']}")
        fds = {fd: link for fd, link in _socket_fds().items() if before.get(fd) != link}
        return _Group(result["group"], prefixed, fds, generation)

    def _join(self, record, joiner):
        """Joins `record`'s generation: its group, the batch for its world size, the state of the
        rank with the most steps, a new DDP wrapper. False when this worker has no place in it."""
        rank = record.rank_of(self._node, self._local_rank)
        if rank < 0:
            _say(f"worker {self._local_rank} of node {self._node} waits out live generation "
                 f"{record.generation}")
            return False
        group = self._connect(record, _stretch.live_keys.group_prefix(record.generation), rank,
                              record.world_size)
        batch = self._live_batch(record, record.world_size)
        self.generation = record.generation
        self._use(group, f"stretch_live_{record.generation}")
        try:
            self._set_batch(batch)
        except ConfigError as e:
            raise CannotContinueLive(str(e)) from None
        try:
            self._take_state(joiner)
            self._build_ddp()
        except RuntimeError as e:
            if not _is_peer_failure(e):
                raise
            group.abort()
            raise _Superseded(f"the generation failed while taking the state ({e})") from None
        return True

    def _take_state(self, joiner):
        """Every member ends with the state of the lowest rank that completed the most steps (a
        rank may be one step ahead: it finished a step's last collective before a peer's
        connection broke), sent as one torch.save blob. Skipped when every member is a survivor
        at the same step: their replicas are equal already (DDP)."""
        mine = torch.tensor([self.step, 1 if joiner else 0], dtype=torch.int64)
        everyone = [torch.zeros(2, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(everyone, mine)
        steps = [int(t[0]) for t in everyone]
        if len(set(steps)) == 1 and not any(int(t[1]) for t in everyone):
            return
        source = steps.index(max(steps))
        if self.rank == source:
            buffer = io.BytesIO()
            torch.save(self.state_dict(), buffer)
            blob = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
            length = torch.tensor([blob.numel()], dtype=torch.int64)
        else:
            length = torch.zeros(1, dtype=torch.int64)
        dist.broadcast(length, source)
        if self.rank != source:
            blob = torch.empty(int(length[0]), dtype=torch.uint8)
        dist.broadcast(blob, source)
        if self.rank != source:
            state = torch.load(io.BytesIO(blob.numpy().tobytes()), map_location="cpu")
            # RNG: a joiner takes the source's; a survivor keeps its own stream.
            self.load_state_dict(state, rng=joiner)

    def _recover(self, reason, abandon):
        """Abandons the step in flight (when `abandon`), leaves the group, waits for the agent's
        next generation that has a place for this worker, joins it and continues there."""
        began = time.monotonic()
        if abandon:
            _say(f"rank {self.rank}: step {self.step + 1} abandoned in live generation "
                 f"{self.generation} ({reason})")
        else:
            _say(f"rank {self.rank}: leaves live generation {self.generation} after step "
                 f"{self.step} ({reason})")
        if self._group is not None:
            self._group.abort()
        self.model = None
        for p in self.module.parameters():
            p.grad = None
        after = self.generation
        while True:
            record = self._wait_for_generation(after)
            after = record.generation
            try:
                if not self._join(record, joiner=False):
                    continue
            except _Superseded as e:
                _say(f"live generation {record.generation}'s group did not form ({e}); waiting "
                     "for the next")
                continue
            except CannotContinueLive as e:
                # Every member decides alike: each withdraws its offer before any exits (a
                # barrier, as the engine's partitionsLost), so that the agent restarts the job
                # from its checkpoint at the first exit rather than going on with the others.
                self._withdraw(str(e))
                with contextlib.suppress(RuntimeError):
                    dist.barrier()
                raise
            break
        self.recoveries += 1
        self.last_recovery_s = time.monotonic() - began
        if self.rank == 0:
            _say(f"live generation {self.generation} continues at step {self.step} on "
                 f"{self.world_size} rank(s) after {self.last_recovery_s:.3f} s: train_batch_size "
                 f"{self.train_batch_size} = micro {self.micro_batch_size} x accumulation "
                 f"{self.gradient_accumulation_steps} x {self.world_size} "
                 f"({self.batch_source})")


def init(model, optimizer, scheduler=None, *, checkpoint_dir=None, ds_config=None,
         global_batch=None, timeout=60.0, ddp_options=None, extra_state=None):
    """Starts (or, for a worker started into a running job, joins) the job: the process group,
    the batch for its world size, the state (``checkpoint_dir``'s latest checkpoint, or a
    survivor's for a joiner) and the DDP wrapper (``job.model``). Replaces
    ``dist.init_process_group`` and ``DistributedDataParallel(model)``.

    - ``ds_config``: a DeepSpeed config (dict, JSON text or path; default STRETCH_DS_CONFIG) whose
      elastic solver gives the batch of every world size; without one, the launcher's batch.
    - ``global_batch``: the global batch when there is neither a batch contract nor a config
      (split evenly over the ranks).
    - ``timeout``: seconds a collective waits for a peer (a dead peer fails it at once).
    - ``extra_state``: ``(get, set)`` of the program's own state that a joiner receives and a
      checkpoint holds (``client_state``).
    """
    return LiveJob(model, optimizer, scheduler, checkpoint_dir=checkpoint_dir,
                   ds_config=ds_config, global_batch=global_batch, timeout=timeout,
                   ddp_options=ddp_options,
                   extra_state=extra_state)
