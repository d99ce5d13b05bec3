#!/usr/bin/env python3
"""The cases of bench/linalg.exs on PyTorch and JAX (whichever is installed).

    python3 bench/linalg_peers.py [--reps N] [--csv-out FILE] [--cholesky CASES]
                                  [--solve CASES] [--lu CASES] [--gesv CASES]
                                  [--det CASES] [--qr CASES] [--eigh CASES]
                                  [--svd CASES]
                                  [--impls torch,jax]

For each case (f32 and f64; Cholesky factors of a batch of symmetric
positive definite matrices, `torch.linalg.cholesky` and a jitted
`jnp.linalg.cholesky`; lower triangular solves, `torch.linalg.solve_triangular`
and a jitted `jax.scipy.linalg.solve_triangular`; on matrices with entries
in [-1, 1], LU factorizations with P, L and U, `torch.linalg.lu` and a
jitted `jax.scipy.linalg.lu`; general solves, `torch.linalg.solve` and a
jitted `jnp.linalg.solve`; determinants, `torch.linalg.det` and a jitted
`jnp.linalg.det`; on m x n matrices with entries in [-1, 1], reduced QR
factorizations, `torch.linalg.qr` and a jitted `jnp.linalg.qr`; on
symmetric matrices with eigenvalues 3 (-1/2)^k, `torch.linalg.eigh` and a
jitted `jnp.linalg.eigh`; on m x n matrices with singular values 3 (1/2)^k,
`torch.linalg.svd` and a jitted `jnp.linalg.svd`, full matrices, as
`Nx.LinAlg.svd/2`'s default), on the default GPU,
after 0.3 s of 2048^3 products (the GPU's clocks fall when it idles) and
3 unmeasured calls:

  * e2e us: the median over --reps (default 20) calls of one call followed
    by a synchronize (`torch.cuda.synchronize()`, `block_until_ready()`);
  * pipelined us: --reps calls back to back, then one synchronize, per call.

--cholesky, --lu and --det 1x256,4x512 (batch x order), --solve and
--gesv 1x1024x1 (batch x order x right-hand sides), --qr 1x1024x64
(batch x m x n), --eigh 1x16 (batch x order) and --svd 1x256x32 (batch x m
x n) replace the default cases, as in bench/linalg.exs; --impls picks the peers (default both).

The rows have bench/linalg.exs's columns and, with --csv-out, the shared
schema (`impl,test,dtype,shape,metric,value`; impl `torch` or `jax`).
"""
import argparse
import csv
import statistics
import sys
import time

CHOLESKY = [(1, 16), (1, 64), (1, 256), (1, 1024), (256, 16), (64, 64), (16, 256)]
SOLVE = [(1, 64, 1), (1, 256, 1), (1, 1024, 1), (1, 256, 256), (256, 64, 1), (16, 256, 16)]
LU = [(1, 16), (1, 64), (1, 256), (1, 1024), (256, 16), (64, 64)]
GESV = [(1, 16, 1), (1, 64, 1), (1, 256, 1), (1, 1024, 1), (256, 16, 1), (64, 64, 4)]
DET = [(1, 64), (256, 8)]
QR = [(1, 16, 16), (1, 64, 64), (1, 256, 256), (1, 1024, 1024), (1, 1024, 64), (256, 16, 16),
      (64, 64, 64)]
EIGH = [(1, 8), (1, 16), (1, 32), (1, 64), (64, 8), (16, 32)]
SVD = [(1, 8, 8), (1, 32, 32), (1, 64, 64), (1, 256, 32), (16, 16, 16)]


def measure(call, sync, reps, warm):
    warm()
    for _ in range(3):
        call()
    sync()
    e2e = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        sync()
        e2e.append((time.perf_counter() - t) * 1e6)
    t = time.perf_counter()
    for _ in range(reps):
        call()
    sync()
    return statistics.median(e2e), (time.perf_counter() - t) * 1e6 / reps


def torch_cases(reps, emit):
    import torch

    dev = "cuda"
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    big = torch.rand(2048, 2048, device=dev)

    def warm():
        t = time.perf_counter()
        while time.perf_counter() - t < 0.3:
            big @ big
            torch.cuda.synchronize()

    for dt, name in [(torch.float32, "f32"), (torch.float64, "f64")]:
        g = torch.Generator(device=dev).manual_seed(42)
        for batch, n in CHOLESKY:
            x = torch.rand(batch, n, n, device=dev, dtype=dt, generator=g) * 2 - 1
            a = x @ x.transpose(1, 2) / n + torch.eye(n, device=dev, dtype=dt)
            e2e, pipe = measure(lambda: torch.linalg.cholesky(a), torch.cuda.synchronize, reps,
                                warm)
            emit("torch", "cholesky", name, f"{batch}x{n}x{n}", e2e, pipe)
        for batch, n, cols in SOLVE:
            x = torch.rand(batch, n, n, device=dev, dtype=dt, generator=g) * 2 - 1
            eye = torch.eye(n, device=dev, dtype=dt)
            a = torch.tril(x / n * (1 - eye) + 1.5 * eye)
            b = torch.rand(batch, n, cols, device=dev, dtype=dt, generator=g) * 2 - 1
            e2e, pipe = measure(lambda: torch.linalg.solve_triangular(a, b, upper=False),
                                torch.cuda.synchronize, reps, warm)
            emit("torch", "triangular_solve", name, f"{batch}x{n}x{n} {cols}", e2e, pipe)
        for batch, n in LU:
            a = torch.rand(batch, n, n, device=dev, dtype=dt, generator=g) * 2 - 1
            e2e, pipe = measure(lambda: torch.linalg.lu(a), torch.cuda.synchronize, reps, warm)
            emit("torch", "lu", name, f"{batch}x{n}x{n}", e2e, pipe)
        for batch, n, cols in GESV:
            a = torch.rand(batch, n, n, device=dev, dtype=dt, generator=g) * 2 - 1
            b = torch.rand(batch, n, cols, device=dev, dtype=dt, generator=g) * 2 - 1
            e2e, pipe = measure(lambda: torch.linalg.solve(a, b), torch.cuda.synchronize, reps,
                                warm)
            emit("torch", "solve", name, f"{batch}x{n}x{n} {cols}", e2e, pipe)
        for batch, n in DET:
            a = torch.rand(batch, n, n, device=dev, dtype=dt, generator=g) * 2 - 1
            e2e, pipe = measure(lambda: torch.linalg.det(a), torch.cuda.synchronize, reps, warm)
            emit("torch", "determinant", name, f"{batch}x{n}x{n}", e2e, pipe)
        for batch, m, n in QR:
            a = torch.rand(batch, m, n, device=dev, dtype=dt, generator=g) * 2 - 1
            e2e, pipe = measure(lambda: torch.linalg.qr(a), torch.cuda.synchronize, reps, warm)
            emit("torch", "qr", name, f"{batch}x{m}x{n}", e2e, pipe)
        for batch, n in EIGH:
            g0 = torch.rand(batch, n, n, device=dev, dtype=dt, generator=g) * 2 - 1
            q, _ = torch.linalg.qr(g0)
            lam = torch.tensor([3.0 * (-0.5) ** k for k in range(n)], device=dev, dtype=dt)
            a = (q * lam) @ q.transpose(1, 2)
            e2e, pipe = measure(lambda: torch.linalg.eigh(a), torch.cuda.synchronize, reps, warm)
            emit("torch", "eigh", name, f"{batch}x{n}x{n}", e2e, pipe)
        for batch, m, n in SVD:
            k = min(m, n)
            u, _ = torch.linalg.qr(torch.rand(batch, m, k, device=dev, dtype=dt, generator=g) * 2 - 1)
            v, _ = torch.linalg.qr(torch.rand(batch, n, k, device=dev, dtype=dt, generator=g) * 2 - 1)
            lam = torch.tensor([3.0 * 0.5 ** i for i in range(k)], device=dev, dtype=dt)
            a = (u * lam) @ v.transpose(1, 2)
            e2e, pipe = measure(lambda: torch.linalg.svd(a), torch.cuda.synchronize, reps, warm)
            emit("torch", "svd", name, f"{batch}x{m}x{n}", e2e, pipe)


def jax_cases(reps, emit):
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    print(f"jax {jax.__version__} on {jax.devices()[0]}")
    chol = jax.jit(jnp.linalg.cholesky)
    big = jnp.ones((2048, 2048), jnp.float32)
    mm = jax.jit(lambda x: x @ x)

    def warm():
        t = time.perf_counter()
        while time.perf_counter() - t < 0.3:
            mm(big).block_until_ready()

    solve = jax.jit(lambda a, b: jsl.solve_triangular(a, b, lower=True))
    lu = jax.jit(jax.vmap(jsl.lu))
    gesv = jax.jit(jnp.linalg.solve)
    det = jax.jit(jnp.linalg.det)
    qr = jax.jit(jnp.linalg.qr)
    eigh = jax.jit(jnp.linalg.eigh)
    svd = jax.jit(jnp.linalg.svd)
    def run(fun, *args):
        out = [None]

        def call():
            out[0] = fun(*args)

        return measure(call, lambda: jax.block_until_ready(out[0]), reps, warm)

    for dt, name in [(jnp.float32, "f32"), (jnp.float64, "f64")]:
        key = jax.random.PRNGKey(42)
        for batch, n in CHOLESKY:
            x = jax.random.uniform(key, (batch, n, n), dt, -1.0, 1.0)
            a = x @ jnp.swapaxes(x, 1, 2) / n + jnp.eye(n, dtype=dt)
            emit("jax", "cholesky", name, f"{batch}x{n}x{n}", *run(chol, a))
        for batch, n, cols in SOLVE:
            x = jax.random.uniform(key, (batch, n, n), dt, -1.0, 1.0)
            eye = jnp.eye(n, dtype=dt)
            a = jnp.tril(x / n * (1 - eye) + 1.5 * eye)
            b = jax.random.uniform(key, (batch, n, cols), dt, -1.0, 1.0)
            emit("jax", "triangular_solve", name, f"{batch}x{n}x{n} {cols}", *run(solve, a, b))
        for op, cases, fun in (("lu", LU, lu), ("determinant", DET, det)):
            for batch, n in cases:
                a = jax.random.uniform(key, (batch, n, n), dt, -1.0, 1.0)
                emit("jax", op, name, f"{batch}x{n}x{n}", *run(fun, a))
        for batch, n, cols in GESV:
            a = jax.random.uniform(key, (batch, n, n), dt, -1.0, 1.0)
            b = jax.random.uniform(key, (batch, n, cols), dt, -1.0, 1.0)
            emit("jax", "solve", name, f"{batch}x{n}x{n} {cols}", *run(gesv, a, b))
        for batch, m, n in QR:
            a = jax.random.uniform(key, (batch, m, n), dt, -1.0, 1.0)
            emit("jax", "qr", name, f"{batch}x{m}x{n}", *run(qr, a))
        for batch, n in EIGH:
            q, _ = jnp.linalg.qr(jax.random.uniform(key, (batch, n, n), dt, -1.0, 1.0))
            lam = jnp.array([3.0 * (-0.5) ** k for k in range(n)], dt)
            a = (q * lam) @ jnp.swapaxes(q, 1, 2)
            emit("jax", "eigh", name, f"{batch}x{n}x{n}", *run(eigh, a))
        for batch, m, n in SVD:
            k = min(m, n)
            k1, k2 = jax.random.split(key)
            u, _ = jnp.linalg.qr(jax.random.uniform(k1, (batch, m, k), dt, -1.0, 1.0))
            v, _ = jnp.linalg.qr(jax.random.uniform(k2, (batch, n, k), dt, -1.0, 1.0))
            lam = jnp.array([3.0 * 0.5 ** i for i in range(k)], dt)
            a = (u * lam) @ jnp.swapaxes(v, 1, 2)
            emit("jax", "svd", name, f"{batch}x{m}x{n}", *run(svd, a))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--csv-out")
    p.add_argument("--cholesky", help="cases BxN,... (default: bench/linalg.exs's)")
    p.add_argument("--solve", help="cases BxNxC,... (default: bench/linalg.exs's)")
    p.add_argument("--lu", help="cases BxN,... (default: bench/linalg.exs's)")
    p.add_argument("--gesv", help="cases BxNxC,... (default: bench/linalg.exs's)")
    p.add_argument("--det", help="cases BxN,... (default: bench/linalg.exs's)")
    p.add_argument("--qr", help="cases BxMxN,... (default: bench/linalg.exs's)")
    p.add_argument("--eigh", help="cases BxN,... (default: bench/linalg.exs's)")
    p.add_argument("--svd", help="cases BxMxN,... (default: bench/linalg.exs's)")
    p.add_argument("--impls", default="torch,jax")
    args = p.parse_args()
    global CHOLESKY, SOLVE, LU, GESV, DET, QR, EIGH, SVD

    def cases(text, arity):
        out = []
        for c in filter(None, text.split(",")):
            parts = c.split("x")
            if len(parts) != arity or not all(x.isdigit() for x in parts):
                p.error(f"bad case {c!r}")
            out.append(tuple(int(x) for x in parts))
        return out

    if args.cholesky is not None:
        CHOLESKY = cases(args.cholesky, 2)
    if args.solve is not None:
        SOLVE = cases(args.solve, 3)
    if args.lu is not None:
        LU = cases(args.lu, 2)
    if args.gesv is not None:
        GESV = cases(args.gesv, 3)
    if args.det is not None:
        DET = cases(args.det, 2)
    if args.qr is not None:
        QR = cases(args.qr, 3)
    if args.eigh is not None:
        EIGH = cases(args.eigh, 2)
    if args.svd is not None:
        SVD = cases(args.svd, 3)
    impls = set(filter(None, args.impls.split(",")))
    rows = []
    print(f"{'impl':<6} {'op':<17} {'type':<5} {'shape':<18} {'e2e us':>10} {'pipelined us':>13}")

    def emit(impl, op, dtype, shape, e2e, pipe):
        print(f"{impl:<6} {op:<17} {dtype:<5} {shape:<18} {e2e:>10.1f} {pipe:>13.1f}", flush=True)
        rows.append((impl, op, dtype, shape, "us_per_call", e2e))
        rows.append((impl, op, dtype, shape, "us_per_call_pipelined", pipe))

    ran = False
    for name, runner in (("torch", torch_cases), ("jax", jax_cases)):
        if name not in impls:
            continue
        try:
            runner(args.reps, emit)
            ran = True
        except ImportError as e:
            print(f"skipped: {e}", file=sys.stderr)
    if args.csv_out:
        with open(args.csv_out, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["impl", "test", "dtype", "shape", "metric", "value"])
            for r in rows:
                w.writerow(list(r[:5]) + ["%.6g" % r[5]])
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
