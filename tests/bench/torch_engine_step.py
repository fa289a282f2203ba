#!/usr/bin/python3
"""The same training step as `lstream bench engine`, in PyTorch.

torch.nn.LSTM + nn.Linear + MSE + clip_grad_norm_ + Adam, zero initial
state, next-step targets of O = I features, on the CPU. Prints one line per
shape and thread count:
  torch device=cpu threads=N B=.. I=.. H=.. L=.. T=.. ms_per_step=<median>
"""
import argparse
import statistics
import time

import torch


def bench(shape, threads, steps, warmup):
    B, I, H, L, T = shape
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(I, H, L)
    head = torch.nn.Linear(H, I)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    x = torch.rand(T, B, I) * 2 - 1
    y = torch.rand(T, B, I) * 2 - 1
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        h0 = torch.zeros(L, B, H)
        c0 = torch.zeros(L, B, H)
        out, _ = lstm(x, (h0, c0))
        loss = torch.nn.functional.mse_loss(head(out), y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shape", action="append", help="B,I,H,L,T (repeatable)")
    ap.add_argument("--threads", default="1,2", help="thread counts to try")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    shapes = a.shape or ["256,8,128,2,32", "64,4,64,1,64", "1024,16,256,2,64"]
    for s in shapes:
        shape = tuple(int(v) for v in s.split(","))
        for th in (int(t) for t in a.threads.split(",")):
            sec = bench(shape, th, a.steps, a.warmup)
            B, I, H, L, T = shape
            print(f"torch device=cpu threads={th} B={B} I={I} H={H} L={L} T={T} "
                  f"ms_per_step={sec * 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
