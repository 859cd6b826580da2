#!/usr/bin/python3
"""The PyTorch peer of `stretch-train-gpt` (examples/gpt): the same GPT-style character model,
data, data order, optimizer, schedule and clipping, trained with plain PyTorch (Debian's
python3-torch) so that bench/compare_gpt.py can compare loss curves, throughput and memory.

What is the same as examples/gpt (read gpt_model.cpp, char_corpus.cpp and train_gpt.cpp):
  model     nanoGPT's layout with the same module and parameter names (wte, wpe, h.i.ln_1,
            h.i.attn.c_attn, h.i.attn.c_proj, h.i.ln_2, h.i.mlp.c_fc, h.i.mlp.c_proj, ln_f), the
            output head F.linear(x, wte.weight) (tied, no lm_head parameter); attention written
            out (q k^T / sqrt(d), masked_fill(-inf) of triu(1), softmax, dropout, @ v); GELU (erf);
            dropout after the embeddings, on the attention weights and after both residual
            projections. Modules are built in the C++ order with the same init (Linear weights and
            embeddings N(0, 0.02), c_proj weights N(0, 0.02 / sqrt(2 layers)), biases 0, LayerNorm
            1 / 0) after torch.manual_seed(--seed); --init-from loads the exact weights written
            by `stretch-train-gpt --export-init FILE` instead (strictly, by name).
  dropout   the generator is reseeded before every micro batch from (seed, step, micro batch,
            rank) with train_gpt.cpp's splitmix64 mix, so on CPU both draw the same masks.
  data      the bytes of --data (gzip or plain), vocabulary = the sorted distinct bytes, window i =
            tokens [i*ctx, i*ctx + ctx + 1), i % 10 == 9 held out; the training windows in
            DistributedSampler(shuffle=True, seed=--seed, drop_last=False) order, set_epoch each
            epoch, DataLoader(batch_size=micro, drop_last=False), the next epoch continuing when
            one ends (as the Stretch engine's DataLoader).
  config    the same DeepSpeed JSON (// and /* */ comments stripped): train_batch_size /
            train_micro_batch_size_per_gpu / gradient_accumulation_steps resolved as DeepSpeed
            does; optimizer Adam or AdamW -> torch.optim.AdamW(lr, betas, eps, weight_decay) over
            all parameters ("Adam" with "adam_w_mode": false -> torch.optim.Adam); scheduler
            WarmupCosineLR exactly as runtime/engine/lr_schedules.cpp (DeepSpeed HEAD's formulas,
            log warm-up by default): its initial lr (t = -1: 0) written before the first step,
            stepped after every optimizer step; gradient_clipping -> clip_grad_norm_;
            "activation_checkpointing" present -> torch.utils.checkpoint per block.
  training  loss = cross_entropy(logits, targets) in fp32; backward of loss / GAS; with R > 1
            ranks DistributedDataParallel over gloo with no_sync() on the non-boundary micro
            batches (one rank trains the bare model: no DDP, no process group); the step's loss
            is the mean of its micro-batch losses averaged over the ranks (all_reduce).
  timing    a step's time runs from fetching its first micro batch to the end of its optimizer
            and schedule step (the loss all_reduce after it is not timed), as train_gpt.cpp;
            the first --warmup of the --steps steps are not timed; the median is the upper
            median (sorted[n // 2]) as examples/common/job_support.cpp's median().

Device and precision: --device cuda trains rank r on GPU r mod the GPUs (NCCL when every rank
has a GPU, else Gloo, which stages CUDA tensors through host memory, as Stretch chooses); the
config's fp16 or bf16 section turns on autocast in that dtype (fp16 with a GradScaler, CUDA only);
the result then also has peak_device_reserved_bytes / peak_device_allocated_bytes
(torch.cuda.max_memory_reserved / max_memory_allocated, the largest rank's).

Ranks are processes (torch.multiprocessing spawn, gloo over loopback, a file:// rendezvous in a
temporary directory), each with torch.set_num_threads(1). One rank runs in this process.

--save-state FILE keeps the final weights and Adam moments by parameter name (for diagnosing a
loss-curve difference against a Stretch checkpoint). Prints a summary line, or with --json one JSON object: steps, warmup, ranks, losses (per step),
final_loss, tokens_per_second (train_batch_size * context / median timed step seconds),
step_seconds_median, step_seconds (every step, rank 0), peak_rss_bytes (the largest rank's
ru_maxrss * 1024), parameters, and the shapes and batch sizes used.
Exit status: 0 trained, 1 a rank failed, 2 bad arguments (options, config, data, init file).
"""

import argparse
import gzip
import json
import math
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_peer import init_process_group, spawn_ranks  # noqa: E402 (bench/torch_peer.py)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# train_gpt.cpp's kPresets: (config under fixtures/jobs/gpt, context, layers, heads, width, dropout)
PRESETS = {
    "small": {"config": "ds_config.json", "context": 64, "layers": 2, "heads": 4, "width": 64,
              "dropout": 0.0},
    "bench": {"config": "ds_config_bench.json", "context": 256, "layers": 6, "heads": 8,
              "width": 512, "dropout": 0.1},
}
MASK64 = (1 << 64) - 1


class BadInput(Exception):
    """Bad options, config, data or init file: exit status 2."""


# ---- config ------------------------------------------------------------------------------------

def strip_json_comments(text):
    """Removes // line and /* */ block comments outside strings."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise BadInput("unterminated /* comment")
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_config(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.loads(strip_json_comments(f.read()))
    except (OSError, ValueError, BadInput) as e:
        raise BadInput(f"{path}: cannot read the DeepSpeed config: {e}") from None


def resolve_batch(config, world):
    """DeepSpeed's rule: any two of train_batch_size, micro batch and accumulation give the third."""
    tbs = config.get("train_batch_size")
    micro = config.get("train_micro_batch_size_per_gpu")
    gas = config.get("gradient_accumulation_steps")
    if config.get("elasticity", {}).get("enabled"):
        raise BadInput("elastic configs are not supported by the peer; give the batch sizes")
    if tbs is not None and micro is not None and gas is not None:
        pass
    elif tbs is not None and micro is not None:
        gas = tbs // (micro * world)
    elif tbs is not None and gas is not None:
        micro = tbs // (gas * world)
    elif micro is not None and gas is not None:
        tbs = micro * gas * world
    elif tbs is not None:
        gas = 1
        micro = tbs // world
    elif micro is not None:
        gas = 1
        tbs = micro * world
    else:
        raise BadInput("the config sets neither train_batch_size nor train_micro_batch_size_per_gpu")
    if micro < 1 or gas < 1 or tbs != micro * gas * world:
        raise BadInput(f"train_batch_size {tbs} != micro batch {micro} x gradient accumulation {gas} "
                       f"x {world} rank(s)")
    return tbs, micro, gas


def optimizer_settings(config):
    opt = config.get("optimizer")
    if not opt:
        raise BadInput("the config has no \"optimizer\" section")
    kind = str(opt.get("type", "")).lower()
    p = opt.get("params", {})
    if kind not in ("adam", "adamw"):
        raise BadInput(f"optimizer type {opt.get('type')!r}: the peer supports Adam and AdamW")
    if p.get("amsgrad"):
        raise BadInput("amsgrad is not supported")
    betas = p.get("betas", [0.9, 0.999])
    decoupled = kind == "adamw" or p.get("adam_w_mode", True)
    return {"lr": float(p.get("lr", 1e-3)), "betas": (float(betas[0]), float(betas[1])),
            "eps": float(p.get("eps", 1e-8)), "weight_decay": float(p.get("weight_decay", 0.0)),
            "decoupled": bool(decoupled)}


class WarmupCosineLR:
    """runtime/engine/lr_schedules.cpp's WarmupCosineLr (DeepSpeed HEAD's formulas)."""

    def __init__(self, params, base_lr):
        self.base_lr = base_lr
        self.total = int(params["total_num_steps"])
        self.warmup_min_ratio = float(params.get("warmup_min_ratio", 0.0))
        requested = int(params.get("warmup_num_steps", 1000))
        if requested < 1:
            raise BadInput("warmup_num_steps must be a positive integer")
        self.warmup = max(2, requested)
        self.cos_min_ratio = float(params.get("cos_min_ratio", 0.0001))
        warmup_type = params.get("warmup_type", "log")
        self.log_warmup = warmup_type != "linear"  # an unknown string is DeepSpeed's 'log'
        self.inverse_log_warm_up = 1.0 / math.log(float(self.warmup))
        self.last_batch_iteration = int(params.get("last_batch_iteration", -1))

    def ratio(self):
        t = self.last_batch_iteration
        if t < 0:
            return 0.0
        w = self.warmup
        if t < w:
            r = (self.inverse_log_warm_up * math.log(float(t + 1)) if self.log_warmup
                 else float(t) / float(w))
            delta = 1. - self.warmup_min_ratio
            return self.warmup_min_ratio + r * delta
        real_last_step = t - w + 1
        delta = 1. - self.cos_min_ratio
        real_total_steps = max(1, self.total - w)
        progress = min(1.0, float(real_last_step) / float(real_total_steps))
        r = (1 + math.cos(math.pi * progress)) / 2
        return max(0.0, self.cos_min_ratio + delta * r)

    def lr(self):
        return self.base_lr * self.ratio()

    def step(self):
        self.last_batch_iteration += 1
        return self.lr()


def make_schedule(config, base_lr):
    s = config.get("scheduler")
    if not s:
        return None
    if s.get("type") != "WarmupCosineLR":
        raise BadInput(f"scheduler {s.get('type')!r}: the peer implements WarmupCosineLR only")
    if "total_num_steps" not in s.get("params", {}):
        raise BadInput("WarmupCosineLR needs total_num_steps")
    return WarmupCosineLR(s.get("params", {}), base_lr)


def precision(config):
    """"fp16", "bf16" or "fp32" from the config's fp16/bf16 sections (both on is refused)."""
    enabled = [key for key in ("fp16", "bf16") if config.get(key, {}).get("enabled")]
    if len(enabled) > 1:
        raise BadInput("fp16 and bf16 are both enabled in the config: expected at most one")
    return enabled[0] if enabled else "fp32"


def check_config(config, device):
    dtype = precision(config)
    if dtype == "fp16" and device != "cuda":
        raise BadInput("fp16 in the config: the peer's fp16 (autocast and a GradScaler) needs "
                       "--device cuda")


# ---- data --------------------------------------------------------------------------------------

def load_corpus(torch, path, context):
    """char_corpus.cpp's windows: (train inputs, train targets, vocabulary size, bytes)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":  # gzopen passes plain files through, so decide by content
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise BadInput(f"{path}: cannot read the text corpus: {e}") from None
    vocabulary = sorted(set(raw))
    lut = torch.full((256,), -1, dtype=torch.int64)
    lut[torch.tensor(vocabulary, dtype=torch.int64)] = torch.arange(len(vocabulary), dtype=torch.int64)
    tokens = lut[torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()] if raw else \
        torch.empty(0, dtype=torch.int64)
    windows = (tokens.numel() - 1) // context if raw else 0
    if windows < 10:
        raise BadInput(f"{path}: {len(raw)} bytes of text make {max(windows, 0)} windows of {context} + 1 "
                       "characters; at least 10 are needed")
    rows = tokens.unfold(0, context + 1, context)[:windows]
    keep = torch.tensor([i % 10 != 9 for i in range(windows)])
    train = rows[keep].contiguous()
    return (train[:, :context].contiguous(), train[:, 1:].contiguous(), len(vocabulary), len(raw))


# ---- model -------------------------------------------------------------------------------------

def build_model(torch, shape):
    import torch.utils.checkpoint  # noqa: F401 - torch.utils.checkpoint.checkpoint below
    nn = torch.nn
    F = torch.nn.functional
    residual_std = 0.02 / math.sqrt(2.0 * shape["layers"])

    def linear(i, o, std):
        layer = nn.Linear(i, o)
        with torch.no_grad():
            layer.weight.normal_(0.0, std)
            layer.bias.zero_()
        return layer

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = shape["heads"]
            self.c_attn = linear(shape["width"], 3 * shape["width"], 0.02)
            self.c_proj = linear(shape["width"], shape["width"], residual_std)
            self.attn_dropout = nn.Dropout(shape["dropout"])
            self.resid_dropout = nn.Dropout(shape["dropout"])

        def forward(self, x):
            b, t, c = x.shape
            d = c // self.heads
            q, k, v = self.c_attn(x).split(c, 2)
            q = q.view(b, t, self.heads, d).transpose(1, 2)
            k = k.view(b, t, self.heads, d).transpose(1, 2)
            v = v.view(b, t, self.heads, d).transpose(1, 2)
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(float(d)))
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            att = att.masked_fill(future, -math.inf)
            att = self.attn_dropout(torch.softmax(att, -1))
            y = torch.matmul(att, v).transpose(1, 2).contiguous().view(b, t, c)
            return self.resid_dropout(self.c_proj(y))

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = linear(shape["width"], 4 * shape["width"], 0.02)
            self.c_proj = linear(4 * shape["width"], shape["width"], residual_std)
            self.dropout = nn.Dropout(shape["dropout"])

        def forward(self, x):
            return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(shape["width"])
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(shape["width"])
            self.mlp = Mlp()

        def forward(self, x):
            y = x + self.attn(self.ln_1(x))
            return y + self.mlp(self.ln_2(y))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(shape["vocab"], shape["width"])
            self.wpe = nn.Embedding(shape["context"], shape["width"])
            with torch.no_grad():
                self.wte.weight.normal_(0.0, 0.02)
                self.wpe.weight.normal_(0.0, 0.02)
            self.drop = nn.Dropout(shape["dropout"])
            self.h = nn.ModuleList([Block() for _ in range(shape["layers"])])
            self.ln_f = nn.LayerNorm(shape["width"])
            self.checkpointing = shape["checkpointing"]

        def forward(self, tokens):
            t = tokens.size(1)
            positions = torch.arange(t, dtype=torch.int64, device=tokens.device)
            x = self.drop(self.wte(tokens) + self.wpe(positions))
            checkpoint = self.checkpointing and self.training and torch.is_grad_enabled()
            for block in self.h:
                if checkpoint and x.requires_grad:
                    x = torch.utils.checkpoint.checkpoint(block, x)
                else:
                    x = block(x)
            return F.linear(self.ln_f(x), self.wte.weight)

    return Gpt()


def expected_shapes(shape):
    """name -> shape of every parameter of build_model(shape), without building it."""
    w, v, c = shape["width"], shape["vocab"], shape["context"]
    out = {"wte.weight": (v, w), "wpe.weight": (c, w)}
    for i in range(shape["layers"]):
        for name, dims in (("ln_1.weight", (w,)), ("ln_1.bias", (w,)),
                           ("attn.c_attn.weight", (3 * w, w)), ("attn.c_attn.bias", (3 * w,)),
                           ("attn.c_proj.weight", (w, w)), ("attn.c_proj.bias", (w,)),
                           ("ln_2.weight", (w,)), ("ln_2.bias", (w,)),
                           ("mlp.c_fc.weight", (4 * w, w)), ("mlp.c_fc.bias", (4 * w,)),
                           ("mlp.c_proj.weight", (w, 4 * w)), ("mlp.c_proj.bias", (w,))):
            out[f"h.{i}.{name}"] = dims
    out["ln_f.weight"] = (w,)
    out["ln_f.bias"] = (w,)
    return out


def read_init(torch, path, shape):
    """The state file's tensors, checked strictly against the model's names and shapes."""
    try:
        state = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - any unreadable file is bad input
        raise BadInput(f"--init-from {path}: cannot load: {e}") from None
    if not isinstance(state, dict) or not all(torch.is_tensor(t) for t in state.values()):
        raise BadInput(f"--init-from {path}: not a dict of name -> tensor")
    expected = expected_shapes(shape)
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    wrong = [f"{k} {tuple(state[k].shape)} (the model's: {expected[k]})" for k in expected
             if k in state and tuple(state[k].shape) != expected[k]]
    problems = []
    for what, names in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
        if names:
            more = f" and {len(names) - 3} more" if len(names) > 3 else ""
            problems.append(f"{what}: {', '.join(names[:3])}{more}")
    if problems:
        raise BadInput(f"--init-from {path}: not this model's weights ({'; '.join(problems)}); "
                       "pass the same shape options as the run that exported it")
    return state


def load_init(torch, model, path, shape):
    model.load_state_dict(read_init(torch, path, shape), strict=True)


# ---- training ----------------------------------------------------------------------------------

def mix(x):  # train_gpt.cpp's splitmix64 finaliser
    x = (x + 0x9e3779b97f4a7c15) & MASK64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & MASK64
    return x ^ (x >> 31)


def dropout_seed(seed, step, micro, rank):
    return mix(mix(mix(seed & MASK64) ^ step) ^ (((micro << 20) | rank) & MASK64))


def upper_median(values):
    return sorted(values)[len(values) // 2] if values else 0.0


def train(rank, args, init, queue):
    """One rank's training; rank 0 puts the result (or an error string) on `queue`, or returns it."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    world = args.ranks
    cuda = args.device == "cuda"
    device = torch.device("cuda", rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    # As Stretch chooses (docs/comm.md): NCCL with a GPU per rank, else Gloo, which takes CUDA
    # tensors by staging them through host memory.
    backend = "nccl" if cuda and world <= torch.cuda.device_count() else "gloo"
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        init_process_group(dist, init, rank, world, args.timeout, backend)
    config = read_config(args.config)
    dtype = precision(config)
    autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype)
    scaler = torch.cuda.amp.GradScaler(enabled=dtype == "fp16")
    reduce_device = device if backend == "nccl" else torch.device("cpu")

    def forward_loss(x, y):
        with torch.autocast(device_type=device.type, dtype=autocast_dtype,
                            enabled=autocast_dtype is not None):
            logits = net(x)
        return logits, torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
    tbs, micro, gas = resolve_batch(config, world)
    inputs, targets, vocab, _ = load_corpus(torch, args.data, args.context)
    shape = {"vocab": vocab, "context": args.context, "layers": args.layers, "heads": args.heads,
             "width": args.width, "dropout": args.dropout,
             "checkpointing": "activation_checkpointing" in config}
    torch.manual_seed(args.seed)
    model = build_model(torch, shape)
    if args.init_from:
        load_init(torch, model, args.init_from, shape)
    parameters = sum(p.numel() for p in model.parameters())
    model.to(device)
    model.train()
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if cuda else None)
    else:
        net = model

    o = optimizer_settings(config)
    cls = torch.optim.AdamW if o["decoupled"] else torch.optim.Adam
    optimizer = cls(model.parameters(), lr=o["lr"], betas=o["betas"], eps=o["eps"],
                    weight_decay=o["weight_decay"])
    schedule = make_schedule(config, o["lr"])
    if schedule is not None:  # the schedule's initial lr, written when it is built
        for group in optimizer.param_groups:
            group["lr"] = schedule.lr()
    clip = float(config.get("gradient_clipping", 0.0))

    dataset = torch.utils.data.TensorDataset(inputs, targets)
    sampler = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=False)
    loader = torch.utils.data.DataLoader(dataset, batch_size=micro, sampler=sampler, drop_last=False)
    epoch = 0
    sampler.set_epoch(epoch)
    batches = iter(loader)

    def next_batch():
        nonlocal epoch, batches
        try:
            return next(batches)
        except StopIteration:
            epoch += 1
            sampler.set_epoch(epoch)
            batches = iter(loader)
            return next(batches)

    losses, step_seconds = [], []
    for step in range(args.steps):
        began = time.perf_counter()
        loss_sum = 0.0
        for m in range(gas):
            x, y = next_batch()
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            torch.manual_seed(dropout_seed(args.seed, step, m, rank))
            boundary = m == gas - 1
            if world > 1 and not boundary:
                with net.no_sync():
                    logits, loss = forward_loss(x, y)
                    scaler.scale(loss / gas if gas > 1 else loss).backward()
            else:
                logits, loss = forward_loss(x, y)
                scaler.scale(loss / gas if gas > 1 else loss).backward()
            loss_sum += loss.item()
            del logits, loss
        if clip > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        if schedule is not None:
            lr = schedule.step()
            for group in optimizer.param_groups:
                group["lr"] = lr
        if cuda:
            torch.cuda.synchronize(device)
        step_seconds.append(time.perf_counter() - began)
        step_loss = loss_sum / gas
        if world > 1:
            t = torch.tensor([step_loss], dtype=torch.float64, device=reduce_device)
            dist.all_reduce(t)
            step_loss = t.item() / world
        losses.append(step_loss)

    if args.save_state and rank == 0:
        names = {id(p): n for n, p in model.named_parameters()}
        state = {"module": {n: p.detach().clone() for n, p in model.named_parameters()}, "steps": args.steps}
        for key in ("exp_avg", "exp_avg_sq"):
            state[key] = {names[id(p)]: s[key].clone() for p, s in optimizer.state.items() if key in s}
        torch.save(state, args.save_state)
    rss = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    reserved = float(torch.cuda.max_memory_reserved(device)) if cuda else 0.0
    allocated = float(torch.cuda.max_memory_allocated(device)) if cuda else 0.0
    if world > 1:
        t = torch.tensor([rss, reserved, allocated], dtype=torch.float64, device=reduce_device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rss, reserved, allocated = t.tolist()
        dist.destroy_process_group()
    if rank != 0:
        return None
    timed = step_seconds[args.warmup:]
    median = upper_median(timed)
    result = {
        "steps": args.steps, "warmup": args.warmup, "ranks": world, "losses": losses,
        "final_loss": losses[-1] if losses else None,
        "tokens_per_second": tbs * args.context / median if median > 0 else 0.0,
        "step_seconds_median": median, "step_seconds": step_seconds,
        "peak_rss_bytes": int(rss), "peak_device_reserved_bytes": int(reserved),
        "peak_device_allocated_bytes": int(allocated), "device": args.device, "precision": dtype,
        "comm_backend": backend if world > 1 else None, "parameters": parameters,
        "train_batch_size": tbs, "micro_batch": micro, "gradient_accumulation_steps": gas,
        "layers": args.layers, "heads": args.heads, "width": args.width, "context": args.context,
        "vocabulary": vocab, "dropout": args.dropout, "activation_checkpointing": shape["checkpointing"],
        "learning_rate": optimizer.param_groups[0]["lr"], "gradient_clipping": clip,
        "torch_version": torch.__version__, "init_from": args.init_from or None,
    }
    if queue is not None:
        queue.put(result)
    return result


def spawned_rank(rank, args, init, queue):
    try:
        train(rank, args, init, queue)
    except BaseException as e:  # the parent reports it; exit non-zero so it stops waiting
        print(f"gpt_peer: rank {rank}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        raise


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="gpt_peer.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="DeepSpeed config (default: the preset's, fixtures/jobs/gpt)")
    ap.add_argument("--data", default=os.path.join(REPO, "fixtures/data/text/licenses.txt.gz"),
                    help="text corpus, plain or gzip (default: %(default)s)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small",
                    help="model size and default config, as stretch-train-gpt (default: %(default)s)")
    ap.add_argument("--layers", type=int, help="transformer blocks (default: the preset's)")
    ap.add_argument("--heads", type=int, help="attention heads (default: the preset's)")
    ap.add_argument("--width", type=int, help="embedding width, a multiple of --heads")
    ap.add_argument("--context", type=int, help="tokens per sample (default: the preset's)")
    ap.add_argument("--dropout", type=float, help="dropout probability (default: the preset's)")
    ap.add_argument("--ranks", type=int, default=1, help="data-parallel ranks (processes; default: 1)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where to train: cuda puts rank r on GPU r mod the GPUs, with NCCL when "
                         "every rank has a GPU and Gloo otherwise (default: %(default)s)")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps in all (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0,
                    help="init, data order and dropout seed, as stretch-train-gpt --seed (default: 0)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="the first N of the --steps steps are not timed (default: 0)")
    ap.add_argument("--init-from", metavar="FILE",
                    help="initial weights: a state file of `stretch-train-gpt --export-init FILE`")
    ap.add_argument("--save-state", metavar="FILE",
                    help="after training, rank 0 saves {module, exp_avg, exp_avg_sq: name -> tensor} "
                         "(torch.save) for comparing with a Stretch checkpoint")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds before the ranks are killed (exit 1; default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = ap.parse_args(argv)  # exits 2 on a malformed option
    preset = PRESETS[args.preset]
    for key in ("layers", "heads", "width", "context", "dropout"):
        if getattr(args, key) is None:
            setattr(args, key, preset[key])
    if args.config is None:
        args.config = os.path.join(REPO, "fixtures/jobs/gpt", preset["config"])
    problems = []
    for key in ("layers", "heads", "width", "context", "ranks", "steps"):
        if getattr(args, key) < 1:
            problems.append(f"--{key} {getattr(args, key)}: a positive integer")
    if args.width % max(args.heads, 1):
        problems.append(f"--width {args.width}: a multiple of --heads ({args.heads})")
    if not 0.0 <= args.dropout < 1.0:
        problems.append(f"--dropout {args.dropout}: in [0, 1)")
    if not 0 <= args.warmup < args.steps:
        problems.append(f"--warmup {args.warmup}: in [0, --steps) (at least one timed step)")
    if args.seed < 0:
        problems.append(f"--seed {args.seed}: an integer >= 0")
    if problems:
        ap.print_usage(sys.stderr)
        for p in problems:
            print(f"gpt_peer.py: error: {p}", file=sys.stderr)
        sys.exit(2)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import torch
    # Bad input is found here, before any rank starts, and exits 2.
    try:
        config = read_config(args.config)
        check_config(config, args.device)
        if args.device == "cuda" and not torch.cuda.is_available():
            raise BadInput("--device cuda: no CUDA device is visible to this PyTorch "
                           f"({torch.__version__})")
        resolve_batch(config, args.ranks)
        optimizer_settings(config)
        make_schedule(config, 1.0)
        vocab = load_corpus(torch, args.data, args.context)[2]
        if args.init_from and not os.path.isfile(args.init_from):
            raise BadInput(f"--init-from {args.init_from}: no such file")
        if args.init_from and args.ranks > 1:  # one rank checks it itself (no extra peak RSS here)
            read_init(torch, args.init_from, {"vocab": vocab, "context": args.context, "layers": args.layers,
                                              "width": args.width})
    except BadInput as e:
        print(f"gpt_peer.py: error: {e}", file=sys.stderr)
        return 2

    if args.ranks == 1:
        try:
            result = train(0, args, None, None)
        except BadInput as e:
            print(f"gpt_peer.py: error: {e}", file=sys.stderr)
            return 2
        except Exception as e:  # noqa: BLE001
            print(f"gpt_peer.py: error: rank 0 failed: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
    else:
        try:
            result = spawn_ranks(spawned_rank, args.ranks, args, args.timeout, "gpt_peer.py")
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1

    if args.json:
        print(json.dumps(result))
    else:
        print(f"gpt_peer: {result['steps']} steps on {result['ranks']} rank(s), {result['parameters']} "
              f"parameters; final loss {result['final_loss']:.4f}; {result['tokens_per_second']:.0f} "
              f"tokens/s (median step {result['step_seconds_median']:.3f} s); peak RSS "
              f"{result['peak_rss_bytes'] / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
