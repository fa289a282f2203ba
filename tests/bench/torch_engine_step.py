#!/usr/bin/python3
"""The same training step as `lstream bench engine`, in PyTorch.

torch.nn.LSTM + nn.Linear + MSE + clip_grad_norm_ + Adam, zero initial
state, next-step targets of O = I features. Prints one line per shape (and,
on the CPU, per thread count):
  torch device=cpu precision=fp32 threads=N B=.. I=.. H=.. L=.. T=.. ms_per_step=<median>
  torch device=cuda precision=P B=.. I=.. H=.. L=.. T=.. ms_per_step=<median>

On CUDA the LSTM runs through cuDNN and the head through cuBLAS.
--precision sets both of PyTorch's TF32 switches explicitly, since their
defaults differ (matmul: TF32 off since PyTorch 1.12; cuDNN: TF32 on):
fp32 turns TF32 off for both, tf32 on for both. A CUDA step is timed like
lstream's: the device is idle when the clock starts (synchronize), and the
clock stops after torch.cuda.synchronize() once the step is queued, so the
time holds the host's launches and all of the device's work. Exit status 77:
--device cuda and no CUDA device visible to PyTorch.
"""
import argparse
import statistics
import sys
import time

import torch


def set_tf32(enabled):
    """TF32 on or off for cuBLAS matmuls and for cuDNN (the LSTM), both set."""
    mode = "tf32" if enabled else "ieee"
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        # PyTorch >= 2.9: the per-backend settings; the old flags are
        # deprecated there, and mixing the two APIs is refused.
        matmul.fp32_precision = mode
        cudnn = torch.backends.cudnn
        target = getattr(cudnn, "rnn", cudnn)
        target.fp32_precision = mode
    else:
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def bench(shape, device, threads, steps, warmup):
    B, I, H, L, T = shape
    cuda = device.type == "cuda"
    if not cuda:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(I, H, L).to(device)
    head = torch.nn.Linear(H, I).to(device)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    x = (torch.rand(T, B, I) * 2 - 1).to(device)
    y = (torch.rand(T, B, I) * 2 - 1).to(device)
    times = []
    for i in range(warmup + steps):
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        h0 = torch.zeros(L, B, H, device=device)
        c0 = torch.zeros(L, B, H, device=device)
        out, _ = lstm(x, (h0, c0))
        loss = torch.nn.functional.mse_loss(head(out), y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if cuda:
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", action="append", help="B,I,H,L,T (repeatable)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", choices=("fp32", "tf32"), default="fp32",
                    help="fp32, or tf32 (cuda only: TF32 in cuBLAS and cuDNN)")
    ap.add_argument("--threads", default="1,2", help="CPU thread counts to try")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps must be >= 1 and --warmup >= 0")
    if a.device == "cpu" and a.precision != "fp32":
        ap.error("--precision tf32 needs --device cuda (TF32 is a GPU tensor-core mode)")
    if a.device == "cuda":
        if not torch.cuda.is_available():
            print("torch_engine_step: no CUDA GPU visible to PyTorch "
                  f"{torch.__version__} (torch.cuda.is_available() is False)",
                  file=sys.stderr)
            sys.exit(77)
        set_tf32(a.precision == "tf32")
        device = torch.device("cuda", torch.cuda.current_device())
        thread_counts = [None]
    else:
        device = torch.device("cpu")
        thread_counts = [int(t) for t in a.threads.split(",")]
    shapes = a.shape or ["256,8,128,2,32", "64,4,64,1,64", "1024,16,256,2,64"]
    for s in shapes:
        shape = tuple(int(v) for v in s.split(","))
        if len(shape) != 5 or min(shape) < 1:
            ap.error(f"--shape {s}: expected five positive integers B,I,H,L,T")
        B, I, H, L, T = shape
        for th in thread_counts:
            sec = bench(shape, device, th, a.steps, a.warmup)
            where = (f"device=cuda precision={a.precision}" if th is None
                     else f"device=cpu precision=fp32 threads={th}")
            print(f"torch {where} B={B} I={I} H={H} L={L} T={T} "
                  f"ms_per_step={sec * 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
