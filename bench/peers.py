#!/usr/bin/env python3
"""PyTorch and JAX reference figures for the nx_vulkan benchmarks (CUDA).

Usage:

    python3 bench/peers.py [--csv-out FILE] [--quick] [--only torch|jax]
                           [--groups latency,bandwidth,matmul,steps]

Runs the canonical tests of the shared benchmark schema that apply to the
peers (PyTorch eager and JAX on an NVIDIA GPU), prints a table as it goes
and, with --csv-out, writes the rows

    impl,test,dtype,shape,metric,value

with impl `torch`, `jax` or `hw`. The file gets its header at once and each
row as soon as it is measured, so an interrupted run keeps what it had.
`--quick` is a smoke run (small sizes, few iterations, shapes in the shape
column are the ones actually used); `--only` restricts the run to one
framework and `--groups` to some of the test groups (tiny-op latency,
bandwidth, matmul, training steps). Either framework may be missing: its tests are then skipped with
a warning and the script still exits 0 (a CSV with the header only if
neither is there). Every test is wrapped: a failure (out of memory, an API
missing in this version, a wrong result) prints a warning and the run goes
on. Both frameworks run in one process: JAX is told not to preallocate GPU
memory (XLA_PYTHON_CLIENT_PREALLOCATE=false, set before it is imported),
the PyTorch suites run first and return their cached memory to the driver
(torch.cuda.empty_cache) before JAX starts.

What each figure means (see the schema for the exact definitions):

* Latency (16-element f32 tensors, N = 10000 ops; median of 5 runs):
  `chain` x = x + 1 N times, each op consuming the previous result, timed
  from the first op to the final value on the host (torch `.cpu()`, jax
  `np.asarray`), us_per_op. `independent` N ops y = x + 1 on the same input,
  results dropped, timed until the device is idle (torch
  `cuda.synchronize()`, jax `block_until_ready` on the last result, which
  runs last on the in-order stream), us_per_op. `to_number` `(x + 1).item()`
  on a 1-element f32 tensor / `float(x + 1)` on a rank-0 one (JAX's float()
  takes scalar arrays only), one per iteration, median of 1000 (us). JAX
  runs these eagerly (`x = x + 1` on a device array), as a user writing op
  by op would. `count` the number of positive elements of a 4096x4096 f32
  tensor read to the host (`(x > 0).sum().item()`; JAX: `jax.jit` of
  `jnp.sum(a > 0)`, then `int()`), median of 100 (us).
* Bandwidth (8192x8192 operands; f32, f16, f64): `copy`, `add`,
  `add_bcast` (b is 1x8192), `add_strided` (`a.t() + b` / `a.T + b` on
  row-major a and b: the layouts disagree, so one operand is read across
  the other's order; torch eager lays the output out like `a.t()`),
  `transpose` (`a.t().contiguous()` / `a.T`: the transposed copy),
  `sum_all`, `sum_rows` (sum over the last axis), `sum_cols` (over the
  first). GB_s counts logical bytes read + written once; best of 10 timed
  repetitions, each a run of back-to-back ops of at least ~1 ms (a few ops
  at 8192x8192). torch runs eagerly, jax through
  `jax.jit` of the single op (what XLA fuses for it, e.g. the transposed
  read of add_strided). The `hw` `copy` rows repeat the framework copy
  (torch's, else jax's) as the device's practical ceiling.
* Matmul: TFLOP_s = 2*M*N*K*batch / time, best repetition, on normal
  random data. f32 is true f32: torch with TF32 off
  (`torch.backends.cuda.matmul.allow_tf32 = False`, same for cuDNN,
  `set_float32_matmul_precision("highest")`), jax with
  `precision=jax.lax.Precision.HIGHEST`. f16 and bf16 produce results in
  the input type (torch's default reduced-precision reduction setting is
  left as it is: turned off, cuBLAS measured the same on an H200); f64
  runs the 1024 and 4096 squares, 128x784x512 and `matmul_tn`
  784x128x512 (cuBLAS takes f64 on FP64 tensor cores where the GPU has
  them). `matmul_tn` multiplies the transposed view of an operand
  stored [K,M] (`a.t() @ b`, `a.T @ b` under jit), `matmul_nt` the
  transposed view of one stored [N,K], `matmul_tt` both; `matmul_batched` is `bmm`/`matmul`
  on [B,M,K] x [B,K,N]. Timing: repetitions of back-to-back products, each
  at least ~10 ms (5 of them; 3 where one product takes longer), so small
  sizes include the launch cost of each product, as a user pays it.
* Training steps (ms per step: the lowest of 3 medians of 50 timed steps
  each, after 10 warm-up steps, each step feeding the next and
  synchronized; a slow spell of the GPU in one block does not inflate the
  peer's figure): `mlp_step`
  (784-512-512-10, batch 128) and `cnn_step` (conv 3x3x16, relu, max pool
  2x2, dense 2704->10, batch 128), both f32 with the schema's
  initialisation, loss (log_softmax written out as logits - max -
  log(sum(exp))) and SGD with lr 0.01. torch: eager autograd
  (`torch.autograd.grad`), `F.conv2d` with cuDNN autotuning on
  (`cudnn.benchmark = True`), `F.max_pool2d`, the update in place through
  `torch._foreach_add_` as torch.optim.SGD does. jax: one `jax.jit` of
  `jax.value_and_grad` plus the update, parameters donated,
  `lax.conv_general_dilated(..., ('NCHW','OIHW','NCHW'))` and
  `lax.reduce_window` max, every dot and conv at Precision.HIGHEST.
* `hw` `device` (dtype `-`, metric `count`, value 0): the GPU's name, with
  commas replaced, in the shape column.

Device-side times come from CUDA events for torch and from
`time.perf_counter_ns` around `block_until_ready` for jax (host-side
dispatch overlaps the GPU work of earlier repetitions). Results are checked
(chains and to_number against the exact value, sums and products for
finiteness) so that a broken run does not report fast garbage. The Python
garbage collector is paused during the latency loops.
"""

from __future__ import annotations

import argparse
import csv
import gc
import math
import os
import statistics
import sys
import time
import traceback

# Before JAX is imported anywhere: allocate GPU memory on demand, so that
# torch and JAX share the device in one process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

BANDWIDTH_TESTS = ("copy", "add", "add_bcast", "add_strided", "transpose",
                   "sum_all", "sum_rows", "sum_cols", "divide")
BANDWIDTH_DTYPES = ("f32", "f16", "f64")
MATMUL_DTYPES = ("f32", "f16", "bf16")
ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8}
MLP_SHAPE = "784-512-512-10/128"
CNN_SHAPE = "28x28x16/128"
LR = 0.01
BATCH = 128


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------

# Test groups, selectable with --groups.
GROUPS = ("latency", "bandwidth", "matmul", "steps")


class Config:
    """Sizes and iteration counts; --quick shrinks all of them. groups:
    the test groups to run."""

    def __init__(self, quick: bool, groups=GROUPS):
        self.quick = quick
        self.groups = set(groups)
        self.ops = 200 if quick else 10000          # chain / independent
        self.latency_runs = 3 if quick else 5        # median over runs
        self.to_number_iters = 100 if quick else 1000
        self.count_side = 256 if quick else 4096     # count's f32 input side
        self.count_iters = 10 if quick else 100
        self.bw_side = 1024 if quick else 8192       # bandwidth tensors side
        self.bw_reps = 3 if quick else 10
        self.bw_rep_s = 0.0002 if quick else 0.001   # min time per repetition
        self.mm_rep_s = 0.002 if quick else 0.010    # min time per repetition
        self.mm_reps = 3 if quick else 5
        self.mm_reps_slow = 3                        # when one product > rep
        self.step_warmup = 3 if quick else 10
        self.step_iters = 5 if quick else 50
        self.step_blocks = 1 if quick else 3        # blocks of step_iters: the lowest median
        squares = [256, 512] if quick else [256, 512, 1024, 2048, 4096, 8192]
        # (test, batch, M, K, N)
        cases = [("matmul", 1, n, n, n) for n in squares]
        cases += [("matmul", 1, 128, 784, 512), ("matmul", 1, 128, 512, 512),
                  ("matmul", 1, 128, 512, 10), ("matmul", 1, 128, 2704, 10)]
        cases += [("matmul_tn", 1, 784, 128, 512), ("matmul_tn", 1, 2704, 128, 10)]
        if not quick:
            cases += [("matmul_tn", 1, 4096, 4096, 4096)]
        cases += [("matmul_nt", 1, 128, 512, 784)]
        if not quick:
            cases += [("matmul_nt", 1, 4096, 4096, 4096),
                      ("matmul_tt", 1, 4096, 4096, 4096)]
        cases += [("matmul_batched", 32, 256, 256, 256)]
        if not quick:
            cases += [("matmul_batched", 8, 1024, 1024, 1024)]
        self.matmul_cases = cases
        # f64: the cases nxv_bench runs in f64 (--quick: the step shapes).
        self.matmul_f64_cases = [("matmul", 1, 128, 784, 512),
                                 ("matmul_tn", 1, 784, 128, 512)]
        if not quick:
            self.matmul_f64_cases += [("matmul", 1, 1024, 1024, 1024),
                                      ("matmul", 1, 4096, 4096, 4096)]


def matmul_shape(test: str, b: int, m: int, k: int, n: int) -> str:
    """Shape column of a matmul test: MxKxN, BxMxKxN when batched."""
    if test == "matmul_batched":
        return f"{b}x{m}x{k}x{n}"
    return f"{m}x{k}x{n}"


def bandwidth_bytes(test: str, side: int, elem: int) -> int:
    """Logical bytes read + written once by a bandwidth test."""
    n = side * side
    return elem * {
        "copy": 2 * n,
        "add": 3 * n,
        "add_bcast": 2 * n + side,
        "add_strided": 3 * n,
        "transpose": 2 * n,
        "sum_all": n + 1,
        "sum_rows": n + side,
        "sum_cols": n + side,
        "divide": 3 * n,
    }[test]


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr, flush=True)


def run_groups(suite) -> None:
    """Runs suite's tests (TorchSuite or JaxSuite) of the groups in its
    configuration, each through suite.attempt."""
    groups = suite.cfg.groups
    if "latency" in groups:
        suite.attempt("chain", suite.chain)
        suite.attempt("independent", suite.independent)
        suite.attempt("to_number", suite.to_number)
        suite.attempt("count", suite.count)
    if "bandwidth" in groups:
        for dt in BANDWIDTH_DTYPES:
            suite.attempt(f"bandwidth {dt}", suite.bandwidth, dt)
    if "matmul" in groups:
        for dt in MATMUL_DTYPES:
            for case in suite.cfg.matmul_cases:
                suite.attempt(f"{case[0]} {dt} {case[1:]}", suite.matmul, dt,
                              *case)
        for case in suite.cfg.matmul_f64_cases:
            suite.attempt(f"{case[0]} f64 {case[1:]}", suite.matmul, "f64",
                          *case)
    if "steps" in groups:
        suite.attempt("mlp_step", suite.mlp_step)
        suite.attempt("cnn_step", suite.cnn_step)


class Results:
    """Prints each figure as a table row and appends it to the CSV."""

    def __init__(self, csv_path: str | None):
        self._file = None
        self._writer = None
        self.devices: set[str] = set()
        self.hw_copy: set[str] = set()
        if csv_path:
            self._file = open(csv_path, "w", newline="")
            self._writer = csv.writer(self._file, lineterminator="\n")
            self._writer.writerow(["impl", "test", "dtype", "shape", "metric",
                                   "value"])
            self._file.flush()
        print(f"{'impl':<6} {'test':<15} {'dtype':<5} {'shape':<20} "
              f"{'value':>12}  metric", flush=True)

    def add(self, impl, test, dtype, shape, metric, value) -> None:
        value = float(value)
        print(f"{impl:<6} {test:<15} {dtype:<5} {shape:<20} {value:>12.6g}  "
              f"{metric}", flush=True)
        if self._writer:
            self._writer.writerow([impl, test, dtype, shape, metric,
                                   "%.6g" % value])
            self._file.flush()

    def device(self, name: str) -> None:
        """One `hw,device` row per distinct device name."""
        name = " ".join(name.replace(",", " ").split())
        if name and name not in self.devices:
            self.devices.add(name)
            self.add("hw", "device", "-", name, "count", 0)

    def close(self) -> None:
        if self._file:
            self._file.close()


def cleanup(torch_mod=None) -> None:
    gc.collect()
    if torch_mod is not None:
        try:
            torch_mod.cuda.synchronize()
            torch_mod.cuda.empty_cache()
        except Exception:  # a failed test may leave CUDA in a bad state
            pass


def attempt(label: str, fn, *args, torch_mod=None):
    """Runs one test; a failure prints a warning and returns None."""
    try:
        return fn(*args)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - every failure is reported
        first = (str(e).strip().splitlines() or [""])[0][:300]
        warn(f"{label} failed: {type(e).__name__}: {first}")
        if os.environ.get("PEERS_TRACEBACK"):
            traceback.print_exc()
        return None
    finally:
        cleanup(torch_mod)


# ---------------------------------------------------------------------------
# Timing helpers
# ---------------------------------------------------------------------------

def per_op_times(run_batch, reps: int, rep_s: float, slow_reps: int | None =
                 None, max_inner: int = 1 << 16) -> list[float]:
    """Seconds per op of `reps` repetitions of back-to-back ops.

    run_batch(k) runs k ops back to back and returns the seconds they took
    (device time). The number of ops per repetition is chosen so that one
    repetition takes at least about rep_s; when a single op already takes
    longer, only slow_reps repetitions are timed.
    """
    k = 1
    t = run_batch(1)
    while t < rep_s / 4 and k < max_inner:
        k = min(max_inner, k * 4)
        t = run_batch(k)
    per_op = max(t / k, 1e-9)
    inner = max(1, min(max_inner, math.ceil(rep_s / per_op)))
    if inner == 1 and slow_reps is not None:
        reps = min(reps, slow_reps)
    return [run_batch(inner) / inner for _ in range(reps)]


def cuda_batch_timer(torch, op):
    """run_batch(k) for per_op_times: k calls of op back to back, timed
    with CUDA events (seconds)."""
    def run_batch(k: int) -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            op()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3
    return run_batch


def median_run(fn, runs: int) -> float:
    """Median of `runs` calls of fn() (each returns seconds), gc paused."""
    was = gc.isenabled()
    gc.disable()
    try:
        return statistics.median(fn() for _ in range(runs))
    finally:
        if was:
            gc.enable()


# ---------------------------------------------------------------------------
# PyTorch
# ---------------------------------------------------------------------------

def round_trip_us(fn, expected: float, iters: int) -> float:
    """Median µs of `fn()` (an op plus reading its scalar result to the
    host) over iters calls, the garbage collector off; every result must
    equal expected."""
    times = []
    gc.disable()
    try:
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            v = fn()
            t1 = time.perf_counter_ns()
            times.append((t1 - t0) * 1e-3)
            if v != expected:
                raise RuntimeError(f"to_number result {v}")
    finally:
        gc.enable()
    return statistics.median(times)


class TorchSuite:
    impl = "torch"

    def __init__(self, cfg: Config, out: Results):
        import torch  # noqa: F401 - ImportError handled by the caller
        self.torch = torch
        self.cfg = cfg
        self.out = out
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        self.dev = torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        torch.backends.cudnn.benchmark = True
        props = torch.cuda.get_device_properties(0)
        print(f"# torch {torch.__version__}, CUDA {torch.version.cuda}, "
              f"device {props.name}, {props.multi_processor_count} SMs, "
              f"{props.total_memory / 2**30:.1f} GiB", flush=True)
        out.device(props.name)
        self.dtypes = {"f32": torch.float32, "f16": torch.float16,
                       "bf16": torch.bfloat16, "f64": torch.float64}

    def attempt(self, label, fn, *args):
        return attempt(f"torch {label}", fn, *args, torch_mod=self.torch)

    def run(self) -> None:
        run_groups(self)

    # -- timing ------------------------------------------------------------

    def batch_timer(self, op):
        """run_batch(k) for per_op_times, timed with CUDA events."""
        return cuda_batch_timer(self.torch, op)

    # -- latency -----------------------------------------------------------

    def chain(self) -> None:
        torch, n = self.torch, self.cfg.ops
        x0 = torch.zeros(16, dtype=torch.float32, device=self.dev)

        def run(count: int) -> float:
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            x = x0
            for _ in range(count):
                x = x + 1
            host = x.cpu()
            t1 = time.perf_counter_ns()
            if host[0].item() != count or host[15].item() != count:
                raise RuntimeError(f"chain result {host[0].item()}, "
                                   f"expected {count}")
            return (t1 - t0) * 1e-9

        run(min(n, 1000))
        t = median_run(lambda: run(n), self.cfg.latency_runs)
        self.out.add(self.impl, "chain", "f32", "-", "us_per_op", t / n * 1e6)

    def independent(self) -> None:
        torch, n = self.torch, self.cfg.ops
        x = torch.zeros(16, dtype=torch.float32, device=self.dev)

        def run(count: int) -> float:
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(count):
                x + 1  # the result is dropped at once
            torch.cuda.synchronize()
            t1 = time.perf_counter_ns()
            return (t1 - t0) * 1e-9

        run(min(n, 1000))
        t = median_run(lambda: run(n), self.cfg.latency_runs)
        y = x + 1
        if y[0].item() != 1.0:
            raise RuntimeError(f"independent result {y[0].item()}")
        self.out.add(self.impl, "independent", "f32", "-", "us_per_op",
                     t / n * 1e6)

    def to_number(self) -> None:
        torch = self.torch
        x = torch.full((1,), 2.0, dtype=torch.float32, device=self.dev)
        for _ in range(100):
            (x + 1).item()
        self.out.add(self.impl, "to_number", "f32", "-", "us",
                     round_trip_us(lambda: (x + 1).item(), 3.0,
                                   self.cfg.to_number_iters))

    def count(self) -> None:
        torch, side = self.torch, self.cfg.count_side
        n = side * side
        x = torch.arange(n, dtype=torch.float32, device=self.dev) - n // 2
        x = x.reshape(side, side)
        for _ in range(3):
            (x > 0).sum().item()
        self.out.add(self.impl, "count", "f32", f"{side}x{side}", "us",
                     round_trip_us(lambda: (x > 0).sum().item(), n // 2 - 1,
                                   self.cfg.count_iters))

    # -- bandwidth ---------------------------------------------------------

    def bandwidth(self, dt: str) -> None:
        torch, side = self.torch, self.cfg.bw_side
        dtype = self.dtypes[dt]
        shape = f"{side}x{side}"
        g = torch.Generator(device=self.dev).manual_seed(1)
        a = torch.randn(side, side, dtype=dtype, device=self.dev, generator=g)
        b = torch.randn(side, side, dtype=dtype, device=self.dev, generator=g)
        brow = torch.randn(1, side, dtype=dtype, device=self.dev, generator=g)
        c = torch.empty_like(a)
        ops = {
            "copy": lambda: c.copy_(a),
            "add": lambda: a + b,
            "add_bcast": lambda: a + brow,
            "add_strided": lambda: a.t() + b,
            "transpose": lambda: a.t().contiguous(),
            "sum_all": lambda: a.sum(),
            "sum_rows": lambda: a.sum(1),
            "sum_cols": lambda: a.sum(0),
            "divide": lambda: a / b,
        }
        for test in BANDWIDTH_TESTS:
            self.attempt(f"{test} {dt}", self._bandwidth_one, test, dt,
                         shape, ops[test])

    def _bandwidth_one(self, test, dt, shape, op) -> None:
        r = op()
        self.torch.cuda.synchronize()
        if test.startswith("sum") and not bool(self.torch.isfinite(r).all()):
            raise RuntimeError(f"{test} result not finite")
        del r
        times = per_op_times(self.batch_timer(op), self.cfg.bw_reps,
                             self.cfg.bw_rep_s)
        nbytes = bandwidth_bytes(test, self.cfg.bw_side, ELEM_BYTES[dt])
        gbs = nbytes / min(times) / 1e9
        self.out.add(self.impl, test, dt, shape, "GB_s", gbs)
        if test == "copy" and dt not in self.out.hw_copy:
            self.out.hw_copy.add(dt)
            self.out.add("hw", "copy", dt, shape, "GB_s", gbs)

    # -- matmul ------------------------------------------------------------

    def matmul(self, dt, test, bsz, m, k, n) -> None:
        torch = self.torch
        dtype = self.dtypes[dt]
        g = torch.Generator(device=self.dev).manual_seed(2)

        def rnd(*shape):
            return torch.randn(*shape, dtype=dtype, device=self.dev,
                               generator=g)
        if test == "matmul":
            a, b = rnd(m, k), rnd(k, n)
            op = lambda: a @ b  # noqa: E731
        elif test == "matmul_tn":
            a_stored, b = rnd(k, m), rnd(k, n)   # A stored [K,M]
            op = lambda: a_stored.t() @ b  # noqa: E731
        elif test == "matmul_nt":
            a, b_stored = rnd(m, k), rnd(n, k)   # B stored [N,K]
            op = lambda: a @ b_stored.t()  # noqa: E731
        elif test == "matmul_tt":
            a_stored, b_stored = rnd(k, m), rnd(n, k)   # both transposed
            op = lambda: a_stored.t() @ b_stored.t()  # noqa: E731
        elif test == "matmul_batched":
            a, b = rnd(bsz, m, k), rnd(bsz, k, n)
            op = lambda: torch.bmm(a, b)  # noqa: E731
        else:
            raise ValueError(test)
        r = op()
        if r.dtype != dtype or not bool(torch.isfinite(r).all()):
            raise RuntimeError(f"{test} result {r.dtype} or not finite")
        del r
        times = per_op_times(self.batch_timer(op), self.cfg.mm_reps,
                             self.cfg.mm_rep_s, self.cfg.mm_reps_slow)
        tflops = 2.0 * bsz * m * n * k / min(times) / 1e12
        self.out.add(self.impl, test, dt, matmul_shape(test, bsz, m, k, n),
                     "TFLOP_s", tflops)

    # -- training steps ----------------------------------------------------

    def _time_steps(self, step) -> float:
        torch = self.torch
        for _ in range(self.cfg.step_warmup):
            step()
        torch.cuda.synchronize()
        medians = []
        loss = None
        for _ in range(self.cfg.step_blocks):
            times = []
            for _ in range(self.cfg.step_iters):
                t0 = time.perf_counter_ns()
                loss = step()
                torch.cuda.synchronize()
                times.append((time.perf_counter_ns() - t0) * 1e-6)
            medians.append(statistics.median(times))
        if not math.isfinite(loss.item()):
            raise RuntimeError("loss is not finite")
        return min(medians)

    @staticmethod
    def _loss(torch, logits, y):
        m = logits.max(dim=1, keepdim=True).values
        z = logits - m
        lsm = z - torch.log(torch.exp(z).sum(dim=1, keepdim=True))
        return (-(y * lsm).sum(dim=1)).mean()

    def _sgd(self, params, grads) -> None:
        torch = self.torch
        with torch.no_grad():
            if hasattr(torch, "_foreach_add_"):
                torch._foreach_add_(params, grads, alpha=-LR)
            else:
                for p, gr in zip(params, grads):
                    p.add_(gr, alpha=-LR)

    def _data(self, g, x_shape):
        torch = self.torch
        x = torch.rand(*x_shape, dtype=torch.float32, device=self.dev,
                       generator=g)
        labels = torch.randint(0, 10, (BATCH,), device=self.dev, generator=g)
        y = torch.nn.functional.one_hot(labels, 10).to(torch.float32)
        return x, y

    def mlp_step(self) -> None:
        torch = self.torch
        g = torch.Generator(device=self.dev).manual_seed(3)

        def normal(*shape, scale):
            return (torch.randn(*shape, device=self.dev, generator=g)
                    * scale).requires_grad_()

        def zeros(n):
            return torch.zeros(n, device=self.dev).requires_grad_()
        params = [normal(784, 512, scale=0.05), zeros(512),
                  normal(512, 512, scale=0.05), zeros(512),
                  normal(512, 10, scale=0.05), zeros(10)]
        x, y = self._data(g, (BATCH, 784))

        def step():
            w1, b1, w2, b2, w3, b3 = params
            h1 = torch.relu(x @ w1 + b1)
            h2 = torch.relu(h1 @ w2 + b2)
            logits = h2 @ w3 + b3
            loss = self._loss(torch, logits, y)
            grads = torch.autograd.grad(loss, params)
            self._sgd(params, grads)
            return loss.detach()

        self.out.add(self.impl, "mlp_step", "f32", MLP_SHAPE, "ms",
                     self._time_steps(step))

    def cnn_step(self) -> None:
        torch = self.torch
        F = torch.nn.functional
        g = torch.Generator(device=self.dev).manual_seed(4)
        k = (torch.randn(16, 1, 3, 3, device=self.dev, generator=g)
             * 0.1).requires_grad_()
        kb = torch.zeros(16, device=self.dev).requires_grad_()
        w = (torch.randn(2704, 10, device=self.dev, generator=g)
             * 0.02).requires_grad_()
        b = torch.zeros(10, device=self.dev).requires_grad_()
        params = [k, kb, w, b]
        x, y = self._data(g, (BATCH, 1, 28, 28))

        def step():
            h = torch.relu(F.conv2d(x, k, kb))           # [128,16,26,26]
            h = F.max_pool2d(h, kernel_size=2, stride=2)  # [128,16,13,13]
            logits = h.reshape(BATCH, -1) @ w + b         # [128,10]
            loss = self._loss(torch, logits, y)
            grads = torch.autograd.grad(loss, params)
            self._sgd(params, grads)
            return loss.detach()

        self.out.add(self.impl, "cnn_step", "f32", CNN_SHAPE, "ms",
                     self._time_steps(step))


# ---------------------------------------------------------------------------
# JAX
# ---------------------------------------------------------------------------

class JaxSuite:
    impl = "jax"

    def __init__(self, cfg: Config, out: Results):
        import jax  # ImportError handled by the caller
        # f64 needs x64 mode; every array below is created with an explicit
        # dtype and Python scalars stay weakly typed, so f32 stays f32.
        # Without it only the f64 tests fail.
        try:
            jax.config.update("jax_enable_x64", True)
        except Exception as e:  # noqa: BLE001 - option renamed or removed
            warn(f"jax: x64 mode not available ({e}): f64 tests will fail")
        import jax.numpy as jnp
        import numpy as np
        self.jax, self.jnp, self.np, self.lax = jax, jnp, np, jax.lax
        self.cfg = cfg
        self.out = out
        backend = jax.default_backend()
        if backend not in ("gpu", "cuda", "rocm"):
            raise RuntimeError(f"jax default backend is {backend!r}, not a "
                               "GPU (is the CUDA plugin installed?)")
        self.device = jax.devices()[0]
        print(f"# jax {jax.__version__}, backend {backend}, device "
              f"{self.device.device_kind}", flush=True)
        out.device(self.device.device_kind)
        self.dtypes = {"f32": jnp.float32, "f16": jnp.float16,
                       "bf16": jnp.bfloat16, "f64": jnp.float64}
        self.highest = jax.lax.Precision.HIGHEST

    def attempt(self, label, fn, *args):
        return attempt(f"jax {label}", fn, *args)

    def run(self, hw_copy: bool) -> None:
        self.emit_hw_copy = hw_copy
        run_groups(self)

    # -- timing ------------------------------------------------------------

    def batch_timer(self, fn, args):
        """run_batch(k): k calls of fn back to back, host-timed to the end
        of the last (the GPU runs them in order on one stream)."""
        def run_batch(k: int) -> float:
            t0 = time.perf_counter_ns()
            r = None
            for _ in range(k):
                r = fn(*args)
            self.jax.block_until_ready(r)
            return (time.perf_counter_ns() - t0) * 1e-9
        return run_batch

    def key(self, seed: int):
        random = self.jax.random
        make = random.key if hasattr(random, "key") else random.PRNGKey
        return make(seed)

    # -- latency -----------------------------------------------------------

    def chain(self) -> None:
        jnp, np, n = self.jnp, self.np, self.cfg.ops
        x0 = jnp.zeros((16,), dtype=jnp.float32).block_until_ready()

        def run(count: int) -> float:
            t0 = time.perf_counter_ns()
            x = x0
            for _ in range(count):
                x = x + 1
            host = np.asarray(x)
            t1 = time.perf_counter_ns()
            if host.dtype != np.float32 or host[0] != count \
                    or host[15] != count:
                raise RuntimeError(f"chain result {host[0]} ({host.dtype}), "
                                   f"expected {count}")
            return (t1 - t0) * 1e-9

        run(min(n, 1000))
        t = median_run(lambda: run(n), self.cfg.latency_runs)
        self.out.add(self.impl, "chain", "f32", "-", "us_per_op", t / n * 1e6)

    def independent(self) -> None:
        jnp, n = self.jnp, self.cfg.ops
        x = jnp.zeros((16,), dtype=jnp.float32).block_until_ready()

        def run(count: int) -> float:
            t0 = time.perf_counter_ns()
            y = None
            for _ in range(count):
                y = x + 1
            y.block_until_ready()
            t1 = time.perf_counter_ns()
            return (t1 - t0) * 1e-9

        run(min(n, 1000))
        t = median_run(lambda: run(n), self.cfg.latency_runs)
        v = float((x + 1)[0])
        if v != 1.0:
            raise RuntimeError(f"independent result {v}")
        self.out.add(self.impl, "independent", "f32", "-", "us_per_op",
                     t / n * 1e6)

    def to_number(self) -> None:
        jnp = self.jnp
        # Rank 0 (one element): float() takes only scalar arrays in JAX.
        x = jnp.full((), 2.0, dtype=jnp.float32).block_until_ready()
        for _ in range(100):
            float(x + 1)
        self.out.add(self.impl, "to_number", "f32", "-", "us",
                     round_trip_us(lambda: float(x + 1), 3.0,
                                   self.cfg.to_number_iters))

    def count(self) -> None:
        jax, jnp, side = self.jax, self.jnp, self.cfg.count_side
        n = side * side
        x = (jnp.arange(n, dtype=jnp.float32) - n // 2).reshape(side, side)
        count = jax.jit(lambda a: jnp.sum(a > 0))
        for _ in range(3):
            int(count(x))
        self.out.add(self.impl, "count", "f32", f"{side}x{side}", "us",
                     round_trip_us(lambda: int(count(x)), n // 2 - 1,
                                   self.cfg.count_iters))

    # -- bandwidth ---------------------------------------------------------

    def bandwidth(self, dt: str) -> None:
        jax, jnp, side = self.jax, self.jnp, self.cfg.bw_side
        dtype = self.dtypes[dt]
        shape = f"{side}x{side}"
        ka, kb, kr = jax.random.split(self.key(1), 3)
        a = jax.random.normal(ka, (side, side), dtype=dtype)
        b = jax.random.normal(kb, (side, side), dtype=dtype)
        brow = jax.random.normal(kr, (1, side), dtype=dtype)
        jax.block_until_ready((a, b, brow))
        cases = {
            "copy": (jax.jit(lambda a: jnp.copy(a)), (a,)),
            "add": (jax.jit(lambda a, b: a + b), (a, b)),
            "add_bcast": (jax.jit(lambda a, b: a + b), (a, brow)),
            "add_strided": (jax.jit(lambda a, b: a.T + b), (a, b)),
            "transpose": (jax.jit(lambda a: a.T), (a,)),
            "sum_all": (jax.jit(lambda a: jnp.sum(a)), (a,)),
            "sum_rows": (jax.jit(lambda a: jnp.sum(a, axis=1)), (a,)),
            "sum_cols": (jax.jit(lambda a: jnp.sum(a, axis=0)), (a,)),
            "divide": (jax.jit(lambda a, b: a / b), (a, b)),
        }
        for test in BANDWIDTH_TESTS:
            fn, args = cases[test]
            self.attempt(f"{test} {dt}", self._bandwidth_one, test, dt,
                         shape, fn, args)

    def _bandwidth_one(self, test, dt, shape, fn, args) -> None:
        jnp = self.jnp
        r = fn(*args).block_until_ready()
        if r.dtype != self.dtypes[dt]:
            raise RuntimeError(f"{test} result dtype {r.dtype}")
        if test == "copy":
            try:
                same = (r.unsafe_buffer_pointer()
                        == args[0].unsafe_buffer_pointer())
            except Exception:  # noqa: BLE001 - pointer not available
                same = False
            if same:
                raise RuntimeError("jit copy returned its input buffer")
        if test.startswith("sum") and not bool(jnp.isfinite(r).all()):
            raise RuntimeError(f"{test} result not finite")
        del r
        times = per_op_times(self.batch_timer(fn, args), self.cfg.bw_reps,
                             self.cfg.bw_rep_s)
        nbytes = bandwidth_bytes(test, self.cfg.bw_side, ELEM_BYTES[dt])
        gbs = nbytes / min(times) / 1e9
        self.out.add(self.impl, test, dt, shape, "GB_s", gbs)
        if test == "copy" and self.emit_hw_copy \
                and dt not in self.out.hw_copy:
            self.out.hw_copy.add(dt)
            self.out.add("hw", "copy", dt, shape, "GB_s", gbs)

    # -- matmul ------------------------------------------------------------

    def matmul(self, dt, test, bsz, m, k, n) -> None:
        jax, jnp = self.jax, self.jnp
        dtype = self.dtypes[dt]
        # HIGHEST only matters (and is only asked) for f32: no TF32.
        prec = self.highest if dt == "f32" else None
        ka, kb = jax.random.split(self.key(2))

        def mm(x, y):
            return jnp.matmul(x, y, precision=prec)
        if test == "matmul":
            args = (jax.random.normal(ka, (m, k), dtype=dtype),
                    jax.random.normal(kb, (k, n), dtype=dtype))
            fn = jax.jit(mm)
        elif test == "matmul_tn":   # A stored [K,M]
            args = (jax.random.normal(ka, (k, m), dtype=dtype),
                    jax.random.normal(kb, (k, n), dtype=dtype))
            fn = jax.jit(lambda at, b: mm(at.T, b))
        elif test == "matmul_nt":   # B stored [N,K]
            args = (jax.random.normal(ka, (m, k), dtype=dtype),
                    jax.random.normal(kb, (n, k), dtype=dtype))
            fn = jax.jit(lambda a, bt: mm(a, bt.T))
        elif test == "matmul_tt":   # A stored [K,M], B stored [N,K]
            args = (jax.random.normal(ka, (k, m), dtype=dtype),
                    jax.random.normal(kb, (n, k), dtype=dtype))
            fn = jax.jit(lambda at, bt: mm(at.T, bt.T))
        elif test == "matmul_batched":
            args = (jax.random.normal(ka, (bsz, m, k), dtype=dtype),
                    jax.random.normal(kb, (bsz, k, n), dtype=dtype))
            fn = jax.jit(mm)
        else:
            raise ValueError(test)
        r = fn(*args).block_until_ready()
        if r.dtype != dtype or not bool(jnp.isfinite(r).all()):
            raise RuntimeError(f"{test} result {r.dtype} or not finite")
        del r
        times = per_op_times(self.batch_timer(fn, args), self.cfg.mm_reps,
                             self.cfg.mm_rep_s, self.cfg.mm_reps_slow)
        tflops = 2.0 * bsz * m * n * k / min(times) / 1e12
        self.out.add(self.impl, test, dt, matmul_shape(test, bsz, m, k, n),
                     "TFLOP_s", tflops)

    # -- training steps ----------------------------------------------------

    def _loss(self, logits, y):
        jnp = self.jnp
        m = jnp.max(logits, axis=1, keepdims=True)
        z = logits - m
        lsm = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
        return jnp.mean(-jnp.sum(y * lsm, axis=1))

    def _make_step(self, loss_fn):
        jax = self.jax

        def step(params, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            tree_map = getattr(getattr(jax, "tree", None), "map", None) \
                or jax.tree_util.tree_map
            new = tree_map(lambda p, g: p - LR * g, params, grads)
            return new, loss
        return jax.jit(step, donate_argnums=0)

    def _time_steps(self, step, params, x, y) -> float:
        jax = self.jax
        loss = None
        for _ in range(self.cfg.step_warmup):
            params, loss = step(params, x, y)
        jax.block_until_ready((params, loss))
        medians = []
        for _ in range(self.cfg.step_blocks):
            times = []
            for _ in range(self.cfg.step_iters):
                t0 = time.perf_counter_ns()
                params, loss = step(params, x, y)
                jax.block_until_ready((params, loss))
                times.append((time.perf_counter_ns() - t0) * 1e-6)
            medians.append(statistics.median(times))
        if not math.isfinite(float(loss)):
            raise RuntimeError("loss is not finite")
        return min(medians)

    def _data(self, key, x_shape):
        jax, jnp = self.jax, self.jnp
        kx, ky = jax.random.split(key)
        x = jax.random.uniform(kx, x_shape, dtype=jnp.float32)
        labels = jax.random.randint(ky, (BATCH,), 0, 10)
        y = jax.nn.one_hot(labels, 10, dtype=jnp.float32)
        return x, y

    def mlp_step(self) -> None:
        jax, jnp, hi = self.jax, self.jnp, self.highest
        k = jax.random.split(self.key(3), 4)
        f32 = jnp.float32
        params = (jax.random.normal(k[0], (784, 512), f32) * 0.05,
                  jnp.zeros((512,), f32),
                  jax.random.normal(k[1], (512, 512), f32) * 0.05,
                  jnp.zeros((512,), f32),
                  jax.random.normal(k[2], (512, 10), f32) * 0.05,
                  jnp.zeros((10,), f32))
        x, y = self._data(k[3], (BATCH, 784))

        def loss_fn(params, x, y):
            w1, b1, w2, b2, w3, b3 = params
            h1 = jax.nn.relu(jnp.dot(x, w1, precision=hi) + b1)
            h2 = jax.nn.relu(jnp.dot(h1, w2, precision=hi) + b2)
            logits = jnp.dot(h2, w3, precision=hi) + b3
            return self._loss(logits, y)

        ms = self._time_steps(self._make_step(loss_fn), params, x, y)
        self.out.add(self.impl, "mlp_step", "f32", MLP_SHAPE, "ms", ms)

    def cnn_step(self) -> None:
        jax, jnp, lax, hi = self.jax, self.jnp, self.lax, self.highest
        k = jax.random.split(self.key(4), 3)
        f32 = jnp.float32
        params = (jax.random.normal(k[0], (16, 1, 3, 3), f32) * 0.1,
                  jnp.zeros((16,), f32),
                  jax.random.normal(k[1], (2704, 10), f32) * 0.02,
                  jnp.zeros((10,), f32))
        x, y = self._data(k[2], (BATCH, 1, 28, 28))

        def loss_fn(params, x, y):
            kern, kb, w, b = params
            h = lax.conv_general_dilated(
                x, kern, window_strides=(1, 1), padding="VALID",
                dimension_numbers=("NCHW", "OIHW", "NCHW"), precision=hi)
            h = jax.nn.relu(h + kb[None, :, None, None])     # [128,16,26,26]
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2),
                                  (1, 1, 2, 2), "VALID")    # [128,16,13,13]
            logits = jnp.dot(h.reshape(h.shape[0], -1), w, precision=hi) + b
            return self._loss(logits, y)

        ms = self._time_steps(self._make_step(loss_fn), params, x, y)
        self.out.add(self.impl, "cnn_step", "f32", CNN_SHAPE, "ms", ms)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="PyTorch / JAX reference figures for the nx_vulkan "
                    "benchmarks (CSV schema impl,test,dtype,shape,metric,"
                    "value).")
    ap.add_argument("--csv-out", metavar="FILE",
                    help="write the figures to FILE as CSV")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: small sizes, few iterations")
    ap.add_argument("--only", choices=("torch", "jax"),
                    help="run one framework only")
    ap.add_argument("--groups", default=",".join(GROUPS),
                    help="comma-separated test groups among "
                         f"{', '.join(GROUPS)} (default: all)")
    args = ap.parse_args(argv)
    groups = set(args.groups.split(","))
    if not groups <= set(GROUPS):
        ap.error(f"--groups: unknown group in {args.groups!r}")
    cfg = Config(args.quick, groups)
    out = Results(args.csv_out)
    t_start = time.perf_counter()
    ran = []
    try:
        torch_mod = None
        if args.only in (None, "torch"):
            try:
                suite = TorchSuite(cfg, out)
            except Exception as e:  # noqa: BLE001 - ImportError included
                warn(f"torch suite skipped: {type(e).__name__}: {e}")
            else:
                torch_mod = suite.torch
                suite.run()
                ran.append("torch")
                del suite
                cleanup(torch_mod)
        if args.only in (None, "jax"):
            try:
                jsuite = JaxSuite(cfg, out)
            except Exception as e:  # noqa: BLE001 - ImportError included
                warn(f"jax suite skipped: {type(e).__name__}: {e}")
            else:
                jsuite.run(hw_copy="torch" not in ran)
                ran.append("jax")
                del jsuite
                cleanup(torch_mod)
    finally:
        out.close()
    elapsed = time.perf_counter() - t_start
    if ran:
        print(f"# done: {', '.join(ran)} in {elapsed:.1f} s", flush=True)
    else:
        print("# neither torch nor jax could run on a GPU: no figures",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
