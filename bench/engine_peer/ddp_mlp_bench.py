#!/usr/bin/python3
"""The PyTorch peer of `stretch-bench-engine`: the same MLP, batch and optimizer trained with
torch.nn.parallel.DistributedDataParallel over gloo (ranks as processes), or with a plain loop.

Model: `layers` x (Linear(hidden, hidden) + ReLU), then Linear(hidden, 10); Adam(lr=1e-4);
MSE against fixed random targets; fp32; torch.set_num_threads(1) per rank (torchrun's
OMP_NUM_THREADS=1). Global batch `batch`, each of R ranks training batch / R rows per step.
Warm-up steps, a barrier, `steps` timed steps, a barrier.

Prints one JSON object: {"mode", "ranks", "steps", "seconds", "steps_per_s", "peak_rss_mib",
"final_loss"}, peak RSS being the largest rank's (resource.getrusage ru_maxrss).
Exit status: 0 ok, 1 a rank failed, 2 bad arguments.
"""

import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from torch_peer import init_process_group, spawn_ranks  # noqa: E402 (bench/torch_peer.py)


def build(torch, layers, hidden):
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks, torch.nn.Linear(hidden, 10))


def run(rank, args, init, queue):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    ranks = args.ranks
    if ranks > 1 or args.mode == "ddp":
        init_process_group(dist, init, rank, ranks, args.timeout)
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = build(torch, args.layers, args.hidden).to(device)
    if args.mode == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    torch.manual_seed(1 + rank)
    micro = args.batch // ranks
    x = torch.randn(micro, args.hidden).to(device)
    y = torch.randn(micro, 10).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    # fp16/bf16: PyTorch's own mixed precision (autocast; GradScaler for fp16), fp32 weights.
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.dtype)
    scaler = torch.cuda.amp.GradScaler() if args.dtype == "fp16" else None

    def step():
        opt.zero_grad()
        if half is not None:
            with torch.autocast(device_type=device.type, dtype=half):
                out = model(x)
            loss = (out.float() - y).pow(2).mean()
        else:
            loss = (model(x) - y).pow(2).mean()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss.item()

    for _ in range(args.warmup):
        step()
    if args.mode == "ddp":
        dist.barrier()
    start = time.perf_counter()
    loss = 0.0
    for _ in range(args.steps):
        loss = step()
    if args.mode == "ddp":
        dist.barrier()
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    device_mib = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    if args.mode == "ddp":
        t = torch.tensor([rss], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rss = t.item()
        dist.destroy_process_group()
    if rank == 0:
        queue.put({"mode": args.mode, "ranks": ranks, "steps": args.steps, "seconds": seconds,
                   "steps_per_s": args.steps / seconds, "peak_rss_mib": rss, "final_loss": loss,
                   "device": str(device), "dtype": args.dtype, "peak_device_mib": device_mib})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["ddp", "plain"], default="ddp")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default="fp32",
                    help="fp16/bf16: torch.autocast mixed precision (GradScaler for fp16)")
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    if args.mode == "plain":
        args.ranks = 1
    if args.batch % args.ranks:
        print(f"ddp_mlp_bench: error: --batch {args.batch} is not divisible by {args.ranks} ranks", file=sys.stderr)
        return 2
    try:
        result = spawn_ranks(run, args.ranks, args, args.timeout, "ddp_mlp_bench")
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
