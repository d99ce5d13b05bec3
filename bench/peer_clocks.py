#!/usr/bin/env python3
"""cuBLAS's 16-bit products in rounds, with the GPU's clock sampled.

Usage:

    python3 bench/peer_clocks.py [--rounds N] [--interval S] [--rep-ms MS]
                                 [--reduced-precision on|off|both]

PyTorch on an NVIDIA GPU, TF32 off. Each round times, for f16 then
bf16, the products 1024³, 2048³, 4096³, 8 x 1024³ (`torch.bmm`) and
8192³ one after another: 10 untimed products, then the best of 5
repetitions of back-to-back products lasting at least MS milliseconds
each (default 10), timed with CUDA events as `bench/peers.py` times its
products (its `per_op_times` and `cuda_batch_timer`). Meanwhile a
thread runs `nvidia-smi` every S seconds (default 0.15) and the script
prints, after the rounds,
how many samples saw each SM clock and throttle-reason mask (0x4: the
software power cap) while products ran. `--reduced-precision` sets
PyTorch's `allow_fp16_reduced_precision_reduction` and
`allow_bf16_reduced_precision_reduction` for every round (on, PyTorch's
default; off) or alternates them round by round (both).

`bench/peers.py` reports each product's best repetition; this shows
what cuBLAS's rate does once the GPU has drawn power for a while, as
docs/benchmarks.md ("cuBLAS's f16 rate under the GPU's power cap")
records. Run `nxv_bench --suite matmul --dtypes f16` the same way under
`nvidia-smi` sampling for the runtime's side.
"""
import argparse
import collections
import subprocess
import threading
import time

import peers

SHAPES = [(1, 1024, 1024, 1024), (1, 2048, 2048, 2048), (1, 4096, 4096, 4096),
          (8, 1024, 1024, 1024), (1, 8192, 8192, 8192)]


def rate(torch, dev, dtype, b, m, k, n, rep_s):
    """Best TFLOP/s of 5 repetitions of back-to-back products, timed as
    peers.py times its products."""
    a = torch.randn(b, m, k, device=dev, dtype=dtype)
    w = torch.randn(b, k, n, device=dev, dtype=dtype)
    if b == 1:
        a, w = a[0], w[0]
        fn = lambda: a @ w  # noqa: E731
    else:
        fn = lambda: torch.bmm(a, w)  # noqa: E731
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = peers.per_op_times(peers.cuda_batch_timer(torch, fn), 5, rep_s, 3)
    return 2 * b * m * n * k / min(times) / 1e12


def sampler(interval, stop, samples):
    """Appends (sm clock, throttle reasons) from nvidia-smi until stop."""
    query = ["nvidia-smi", "--query-gpu=clocks.sm,clocks_throttle_reasons.active",
             "--format=csv,noheader"]
    while not stop.is_set():
        try:
            out = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            return
        parts = [p.strip() for p in out.splitlines()[0].split(",")] if out else []
        if len(parts) == 2:
            samples.append((parts[0], parts[1]))
        time.sleep(interval)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4, help="rounds of every product (4)")
    ap.add_argument("--interval", type=float, default=0.15,
                    help="seconds between nvidia-smi samples (0.15)")
    ap.add_argument("--rep-ms", type=float, default=10.0,
                    help="least milliseconds per timed repetition (10, as peers.py)")
    ap.add_argument("--reduced-precision", choices=("on", "off", "both"), default="on",
                    help="PyTorch's 16-bit reduced-precision reductions (on, its default)")
    args = ap.parse_args()

    import torch
    if not torch.cuda.is_available():
        raise SystemExit("peer_clocks.py: torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"# torch {torch.__version__}, device {torch.cuda.get_device_name(0)}", flush=True)

    samples, stop = [], threading.Event()
    thread = threading.Thread(target=sampler, args=(args.interval, stop, samples), daemon=True)
    thread.start()
    t0 = time.monotonic()
    for rnd in range(args.rounds):
        allow = {"on": True, "off": False}.get(args.reduced_precision, rnd % 2 == 0)
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = allow
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = allow
        for name, dtype in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            figures = []
            for s in SHAPES:
                test = "matmul_batched" if s[0] > 1 else "matmul"
                tflops = rate(torch, dev, dtype, *s, args.rep_ms / 1e3)
                figures.append(f"{peers.matmul_shape(test, *s)} {tflops:.1f}")
            print(f"{time.monotonic() - t0:6.2f} s round {rnd + 1} reduced-precision "
                  f"{'on' if allow else 'off'} {name} TFLOP/s: {' '.join(figures)}", flush=True)
    stop.set()
    thread.join()

    counts = collections.Counter(samples)
    print(f"# {len(samples)} nvidia-smi samples: count, SM clock, throttle reasons")
    for (clock, reasons), count in sorted(counts.items()):
        print(f"{count:5d}  {clock:>9}  {reasons}")


if __name__ == "__main__":
    main()
