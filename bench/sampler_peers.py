#!/usr/bin/env python3
"""The cases of bench/sampler.exs on PyTorch and JAX (whichever is installed).

    python3 bench/sampler_peers.py [--reps N] [--dim N] [--leapfrog N]
                                   [--csv-out FILE] [--impls torch,jax]

On the default GPU, f32, each case after 3 unmeasured calls, the median
over --reps (default 50) calls:

  * random_normal: 1024 (or --dim) standard normal numbers from a key
    (`jax.random.normal` jitted, a new key split off each call;
    `torch.randn` on the GPU), each call followed by a synchronize;
  * hmc_step: one Hamiltonian Monte Carlo step on a standard normal target
    of --dim (default 64) dimensions: momentum from the generator,
    --leapfrog (default 10) leapfrog steps (gradients by `jax.grad` /
    `torch.autograd.grad`), the Metropolis test with a uniform number, and
    the accept flag read on the host (`bool(...)`, `.item()`), each step
    feeding the next. JAX's step is one jitted function (the leapfrog loop
    a `lax.fori_loop`); PyTorch's runs eagerly.

The rows have the shared schema (`impl,test,dtype,shape,metric,value`;
impl `torch` or `jax`, metric `e2e_us`) with --csv-out.
"""
import argparse
import csv
import statistics
import sys
import time


def median_us(step, state, done, reps):
    for _ in range(3):
        state = step(state)
        done(state)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        state = step(state)
        done(state)
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def run_jax(args, normal_dim):
    import jax
    import jax.numpy as jnp
    from jax import lax

    dev = jax.devices()[0]
    print(f"jax {jax.__version__} on {dev.device_kind}", file=sys.stderr)

    @jax.jit
    def normal(key):
        key, sub = jax.random.split(key)
        return key, jax.random.normal(sub, (normal_dim,), dtype=jnp.float32)

    def normal_step(state):
        return normal(state[0])

    def normal_done(state):
        state[1].block_until_ready()

    def logp(q):
        return -0.5 * jnp.sum(q * q)

    grad_logp = jax.grad(logp)
    steps = args.leapfrog

    @jax.jit
    def hmc(q, key, eps):
        key, k1, k2 = jax.random.split(key, 3)
        p = jax.random.normal(k1, q.shape, dtype=q.dtype)
        p1 = p + 0.5 * eps * grad_logp(q)

        def body(_, qp):
            q, p = qp
            q = q + eps * p
            return q, p + eps * grad_logp(q)

        qn, pn = lax.fori_loop(1, steps, body, (q, p1))
        qn = qn + eps * pn
        pn = pn + 0.5 * eps * grad_logp(qn)
        h0 = -logp(q) + 0.5 * jnp.sum(p * p)
        h1 = -logp(qn) + 0.5 * jnp.sum(pn * pn)
        u = jax.random.uniform(k2, dtype=q.dtype)
        accept = jnp.log(u) < h0 - h1
        return jnp.where(accept, qn, q), key, accept

    eps = jnp.float32(0.1)

    def hmc_step(state):
        q, key, _ = state
        return hmc(q, key, eps)

    def hmc_done(state):
        bool(state[2])

    key = jax.random.PRNGKey(42)
    q0 = jnp.zeros((args.dim,), dtype=jnp.float32)
    return [
        ("random_normal", f"{normal_dim}",
         median_us(normal_step, (key, None), normal_done, args.reps)),
        ("hmc_step", f"{args.dim}x{args.leapfrog}",
         median_us(hmc_step, (q0, key, None), hmc_done, args.reps)),
    ]


def run_torch(args, normal_dim):
    import torch

    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", file=sys.stderr)
    gen = torch.Generator(device=dev)
    gen.manual_seed(42)

    def normal_step(state):
        return torch.randn(normal_dim, device=dev, generator=gen)

    def normal_done(_state):
        torch.cuda.synchronize()

    def logp(q):
        return -0.5 * torch.sum(q * q)

    def grad_logp(q):
        q = q.detach().requires_grad_(True)
        return torch.autograd.grad(logp(q), q)[0]

    eps = 0.1

    def hmc_step(state):
        q, _ = state
        p = torch.randn(q.shape, device=dev, generator=gen)
        qn = q
        pn = p + 0.5 * eps * grad_logp(q)
        for _ in range(1, args.leapfrog):
            qn = qn + eps * pn
            pn = pn + eps * grad_logp(qn)
        qn = qn + eps * pn
        pn = pn + 0.5 * eps * grad_logp(qn)
        with torch.no_grad():
            h0 = -logp(q) + 0.5 * torch.sum(p * p)
            h1 = -logp(qn) + 0.5 * torch.sum(pn * pn)
            u = torch.rand((), device=dev, generator=gen)
            accept = torch.log(u) < h0 - h1
            return torch.where(accept, qn, q), accept

    def hmc_done(state):
        state[1].item()

    q0 = torch.zeros(args.dim, device=dev)
    return [
        ("random_normal", f"{normal_dim}", median_us(normal_step, None, normal_done, args.reps)),
        ("hmc_step", f"{args.dim}x{args.leapfrog}",
         median_us(hmc_step, (q0, None), hmc_done, args.reps)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--dim", type=int, default=None)
    ap.add_argument("--leapfrog", type=int, default=10)
    ap.add_argument("--csv-out")
    ap.add_argument("--impls", default="torch,jax")
    args = ap.parse_args()
    normal_dim = args.dim or 1024
    args.dim = args.dim or 64

    rows = []
    for impl in args.impls.split(","):
        runner = {"torch": run_torch, "jax": run_jax}.get(impl)
        if runner is None:
            sys.exit(f"unknown impl {impl}")
        try:
            for test, shape, us in runner(args, normal_dim):
                rows.append((impl, test, "f32", shape, "e2e_us", us))
        except ImportError as e:
            print(f"{impl}: not installed ({e})", file=sys.stderr)

    print("| impl | case | shape | e2e us |")
    print("| --- | --- | --- | --- |")
    for impl, test, _, shape, _, us in rows:
        print(f"| {impl} | {test} | {shape} | {us:.1f} |")

    if args.csv_out:
        with open(args.csv_out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["impl", "test", "dtype", "shape", "metric", "value"])
            w.writerows(rows)


if __name__ == "__main__":
    main()
