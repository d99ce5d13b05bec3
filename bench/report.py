#!/usr/bin/env python3
"""Side-by-side markdown report of nx_vulkan and peer benchmark figures.

Usage:

    python3 bench/report.py [--targets] FILE.csv...

Reads any number of CSV files in the shared benchmark schema
(`impl,test,dtype,shape,metric,value`, see bench_schema.md) and prints a
markdown table with one row per (test, dtype, shape, metric) and one column
per implementation: nx_vulkan_c, nx_vulkan_nif, nx_vulkan_nx, torch, jax
(and hw, the device ceiling, when a file has such figures). A figure given
more than once (several files) is reported as its best: the lowest for
latencies and counts, the highest for throughputs.

The `ratio` column compares nx_vulkan with its peers:

* latency metrics (us, us_per_op, ms): best peer / best nx_vulkan, i.e. how
  many times faster the fastest nx_vulkan layer is than the fastest of
  torch and jax (> 1: nx_vulkan faster);
* throughput metrics (GB_s, TFLOP_s): best nx_vulkan / best peer (> 1:
  nx_vulkan faster);
* `-` where either side is missing, and for counts.

For the bandwidth tests other than `copy` (add, add_bcast, add_strided,
transpose, sum_all, sum_rows, sum_cols, mul_u8, convert_u8, compare,
select, and, shown for comparison and not targets, mul_u8_two_step, the two ops
mul_u8 took before, and divide, what correctly rounded division costs) each
figure is followed by its percentage of
the same implementation's `copy` of the same dtype and shape, e.g.
`2905 (97%)`: how close the op gets to the memory speed a copy reaches.

Rows with impl `hw` and test `device` name the GPUs (in the shape column);
they are listed above the table. Missing values print as `-`.

`--targets` adds a second table checking the project's performance targets.
Each row gives the figure, the reference it is compared with, their ratio,
the ratio needed and the status (met / not met / not measured). Targets on
"nx_vulkan" use the most user-facing layer that has the figure: nx_vulkan_nx,
else nx_vulkan_nif, else nx_vulkan_c (the figure column names it); the
chain, mlp_step and cnn_step targets are on nx_vulkan_nx only.

* chain <= 3 us/op (nx_vulkan_nx), and >= 3x faster than torch's chain;
  the same chain with a tensor operand (chain_tensor) <= 3 us/op;
* independent <= 1.5 us/op;
* each bandwidth test (`mul_u8_two_step`, a reference, excepted) >= 90%
  of the same layer's copy of the same dtype;
* f32 matmul (every matmul test and shape) >= 90% of torch;
  f16 / bf16 matmul >= 50% of torch;
* to_number <= 20 us; pool_alloc <= 1 us; pool_steady_device_allocs == 0
  for every model (the worst model's count; repeated rows keep the
  largest);
* pipeline_warm <= 10% of pipeline_cold: the first ops' time (shape
  "ops": the device's opening left out) where the run has it, else the
  totals;
* mlp_step and cnn_step (nx_vulkan_nx; also their *_aot and *_compiled
  variants) <= 2x jax.
"""

from __future__ import annotations

import argparse
import csv
import re
import signal
import sys

NXV_IMPLS = ("nx_vulkan_nx", "nx_vulkan_nif", "nx_vulkan_c")  # preference
PEER_IMPLS = ("torch", "jax")
COLUMNS = ("nx_vulkan_c", "nx_vulkan_nif", "nx_vulkan_nx", "torch", "jax")
LOWER_BETTER = {"us", "us_per_op", "ms", "count"}
HIGHER_BETTER = {"GB_s", "TFLOP_s"}
# Tests whose repeated rows keep the largest value (a count that must stay
# 0 in every run).
WORST_KEPT = {"pool_steady_device_allocs"}
BANDWIDTH_OPS = ("add", "add_bcast", "add_strided", "transpose", "sum_all",
                 "sum_rows", "sum_cols", "mul_u8", "convert_u8", "compare",
                 "select")
# Bandwidth rows shown with their % of copy but not held to the target.
BANDWIDTH_REFERENCE_OPS = ("mul_u8_two_step", "divide")
MATMUL_TESTS = ("matmul", "matmul_tn", "matmul_nt", "matmul_tt",
                "matmul_batched")
TEST_ORDER = ("chain", "chain_tensor", "independent", "to_number", "count",
              "submit_wait", "copy",
              *BANDWIDTH_OPS, *BANDWIDTH_REFERENCE_OPS, *MATMUL_TESTS,
              "mlp_step", "cnn_step",
              "mlp_step_aot", "cnn_step_aot",
              "mlp_step_compiled", "cnn_step_compiled",
              "mlp_step_compiled_gc", "cnn_step_compiled_gc",
              "pool_alloc", "pool_steady_device_allocs", "pipeline_cold",
              "pipeline_warm", "pipeline_cold_sync", "pipeline_cold_threads")
DTYPE_ORDER = ("f32", "f16", "bf16", "f64", "-")
# Shapes in the order the schema lists them.
CANONICAL_SHAPES = {
    "matmul": tuple(f"{n}x{n}x{n}" for n in (256, 512, 1024, 2048, 4096,
                                             8192))
    + ("128x784x512", "128x512x512", "128x512x10", "128x2704x10"),
    "matmul_tn": ("784x128x512", "2704x128x10", "4096x4096x4096"),
    "matmul_nt": ("128x512x784", "4096x4096x4096"),
    "matmul_tt": ("4096x4096x4096",),
    "matmul_batched": ("32x256x256x256", "8x1024x1024x1024"),
}
HEADER = ["impl", "test", "dtype", "shape", "metric", "value"]


# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------

def read_csvs(paths):
    """Returns (data, devices).

    data maps (test, dtype, shape, metric) -> {impl: best value};
    devices lists the device names of `hw,device` rows in input order.
    """
    data: dict[tuple, dict[str, float]] = {}
    devices: list[str] = []
    for path in paths:
        try:
            f = open(path, newline="")
        except OSError as e:
            sys.exit(f"report.py: cannot read {path}: {e.strerror}")
        with f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                continue
            if [h.strip() for h in header] != HEADER:
                sys.exit(f"report.py: {path}: header is {header}, expected "
                         f"{','.join(HEADER)}")
            for lineno, row in enumerate(reader, start=2):
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != 6:
                    print(f"report.py: {path}:{lineno}: skipped (expected 6 "
                          f"fields, got {len(row)})", file=sys.stderr)
                    continue
                impl, test, dtype, shape, metric, value = \
                    (c.strip() for c in row)
                if impl == "hw" and test == "device":
                    if shape not in devices:
                        devices.append(shape)
                    continue
                try:
                    v = float(value)
                except ValueError:
                    print(f"report.py: {path}:{lineno}: skipped (value "
                          f"{value!r})", file=sys.stderr)
                    continue
                cell = data.setdefault((test, dtype, shape, metric), {})
                if impl in cell:
                    v = max(cell[impl], v) if test in WORST_KEPT \
                        else better(metric, cell[impl], v)
                cell[impl] = v
    return data, devices


def better(metric: str, a: float, b: float) -> float:
    return max(a, b) if metric in HIGHER_BETTER else min(a, b)


def best_of(metric: str, values) -> float | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return max(values) if metric in HIGHER_BETTER else min(values)


def shape_key(test: str, shape: str):
    """Sort key of a shape: the schema's order where it lists the shape,
    else squares first, then by the numbers in it."""
    canon = CANONICAL_SHAPES.get(test, ())
    if shape in canon:
        return (0, canon.index(shape), [], shape)
    nums = [int(n) for n in re.findall(r"\d+", shape)]
    square = len(set(nums)) == 1 and len(nums) > 1
    return (1 if square else 2, len(nums), nums, shape)


def row_key(key):
    test, dtype, shape, metric = key
    t = TEST_ORDER.index(test) if test in TEST_ORDER else len(TEST_ORDER)
    d = DTYPE_ORDER.index(dtype) if dtype in DTYPE_ORDER else len(DTYPE_ORDER)
    return (t, test, d, dtype, shape_key(test, shape), metric)


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

def fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 10000:
        return f"{v:.0f}"
    if a >= 0.001:
        return f"{v:.4g}"
    return f"{v:.3g}"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.3g}"


def markdown(header, rows, right=()) -> str:
    """An aligned markdown table; columns named in `right` align right."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    right = [i for i, h in enumerate(header) if h in right]

    def line(cells):
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            out.append(str(c).rjust(w) if i in right else str(c).ljust(w))
        return "| " + " | ".join(out) + " |"
    sep = "|" + "|".join(("-" * (w + 1) + ":") if i in right
                         else ("-" * (w + 2))
                         for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


# ---------------------------------------------------------------------------
# Comparison table
# ---------------------------------------------------------------------------

def ratio(metric: str, cell: dict) -> float | None:
    nxv = best_of(metric, (cell.get(i) for i in NXV_IMPLS))
    peer = best_of(metric, (cell.get(i) for i in PEER_IMPLS))
    if nxv is None or peer is None or nxv <= 0 or peer <= 0:
        return None
    if metric in LOWER_BETTER - {"count"}:
        return peer / nxv
    if metric in HIGHER_BETTER:
        return nxv / peer
    return None


def copy_of(data, impl, dtype, shape, metric):
    cell = data.get(("copy", dtype, shape, metric))
    return cell.get(impl) if cell else None


def comparison(data) -> str:
    has_hw = any("hw" in cell for cell in data.values())
    cols = list(COLUMNS) + (["hw"] if has_hw else [])
    header = ["test", "dtype", "shape", "metric"] + cols + ["ratio"]
    rows = []
    for key in sorted(data, key=row_key):
        test, dtype, shape, metric = key
        cell = data[key]
        cells = []
        for impl in cols:
            v = cell.get(impl)
            text = fmt(v)
            if v is not None and test in BANDWIDTH_OPS + BANDWIDTH_REFERENCE_OPS:
                c = copy_of(data, impl, dtype, shape, metric)
                if c:
                    text += f" ({100 * v / c:.0f}%)"
            cells.append(text)
        rows.append([test, dtype, shape, metric] + cells
                    + [fmt_ratio(ratio(metric, cell))])
    if not rows:
        return "(no figures in the input)"
    return markdown(header, rows, right=cols + ["ratio"])


# ---------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------

class Target:
    """One row of the targets table."""

    def __init__(self, name, fig=None, fig_impl=None, ref=None,
                 ref_label=None, ratio=None, need="", ok=None, unit=""):
        self.name, self.fig, self.fig_impl = name, fig, fig_impl
        self.ref, self.ref_label, self.ratio = ref, ref_label, ratio
        self.need, self.ok, self.unit = need, ok, unit

    def row(self):
        fig = "-" if self.fig is None else \
            f"{fmt(self.fig)} {self.unit}".strip() + \
            (f" ({self.fig_impl})" if self.fig_impl else "")
        if self.ref_label is not None:
            ref = self.ref_label
        else:
            ref = "-" if self.ref is None else f"{fmt(self.ref)} {self.unit}"
        if self.ok is None:
            status = "not measured"
        else:
            status = "met" if self.ok else "not met"
        return [self.name, fig, ref.strip(), fmt_ratio(self.ratio),
                self.need, status]


def lookup(data, impls, test, dtype, shape=None, metric=None):
    """First (impl, value, shape) among impls having the figure."""
    for impl in impls:
        for (t, d, s, m), cell in data.items():
            if t == test and d == dtype and impl in cell \
                    and (shape is None or s == shape) \
                    and (metric is None or m == metric):
                return impl, cell[impl], s
    return None, None, None


def dtype_of(data, test):
    """The dtype a test's rows use (f32 preferred), or f32."""
    dts = {d for (t, d, _s, _m) in data if t == test}
    for d in ("f32", "-"):
        if d in dts:
            return d
    return sorted(dts)[0] if dts else "f32"


def absolute(data, name, impls, test, limit, unit, dtype=None):
    """Target figure <= limit."""
    dtype = dtype or dtype_of(data, test)
    impl, v, _ = lookup(data, impls, test, dtype)
    if v is None:
        return Target(name, ref=limit, unit=unit, need="<= 1")
    r = v / limit if limit else None
    return Target(name, v, impl, ref=limit, unit=unit, ratio=r, need="<= 1",
                  ok=(v <= limit))


def steady_allocs(data):
    """pool_steady_device_allocs == 0: the largest count over the models
    (the shape column), named in the figure."""
    name = "pool_steady_device_allocs == 0"
    worst = None
    for (t, _d, s, _m), cell in data.items():
        if t != "pool_steady_device_allocs":
            continue
        for impl in NXV_IMPLS:
            if impl in cell and (worst is None or cell[impl] > worst[1]):
                worst = (impl, cell[impl], s)
    if worst is None:
        return Target(name, ref=0.0, unit="count", need="= 0")
    impl, v, model = worst
    return Target(name, v, f"{impl}, {model}" if v else impl, ref=0.0,
                  unit="count", need="= 0", ok=(v == 0))


def relative(name, fig_impl, fig, ref_label, ref, r, need, ok, unit):
    if fig is None or ref is None or r is None:
        return Target(name, fig, fig_impl, ref, ref_label, need=need,
                      unit=unit)
    return Target(name, fig, fig_impl, ref, ref_label, r, need, ok, unit)


def targets(data) -> str:
    rows: list[Target] = []
    nx_only = ("nx_vulkan_nx",)

    # Latency.
    rows.append(absolute(data, "chain <= 3 us/op", nx_only, "chain", 3.0,
                         "us_per_op", "f32"))
    impl, nx, _ = lookup(data, nx_only, "chain", "f32")
    _, tv, _ = lookup(data, ("torch",), "chain", "f32")
    r = tv / nx if (nx and tv) else None
    rows.append(relative("chain >= 3x faster than torch", impl, nx,
                         None if tv is None else f"{fmt(tv)} us_per_op "
                         "(torch)", tv, r, ">= 3",
                         r is not None and r >= 3, "us_per_op"))
    rows.append(absolute(data, "chain, tensor operand <= 3 us/op", nx_only,
                         "chain_tensor", 3.0, "us_per_op", "f32"))
    rows.append(absolute(data, "independent <= 1.5 us/op", NXV_IMPLS,
                         "independent", 1.5, "us_per_op", "f32"))
    rows.append(absolute(data, "to_number <= 20 us", NXV_IMPLS, "to_number",
                         20.0, "us", "f32"))

    # Bandwidth: every op against the same layer's copy.
    bw_keys = sorted({(t, d, s, m) for (t, d, s, m) in data
                      if t in BANDWIDTH_OPS
                      and any(i in data[(t, d, s, m)] for i in NXV_IMPLS)},
                     key=row_key)
    for (t, d, s, m) in bw_keys:
        cell = data[(t, d, s, m)]
        impl = next((i for i in NXV_IMPLS if i in cell
                     and copy_of(data, i, d, s, m)), None)
        impl = impl or next(i for i in NXV_IMPLS if i in cell)
        v = cell[impl]
        c = copy_of(data, impl, d, s, m)
        r = v / c if c else None
        rows.append(relative(f"{t} {d} {s} >= 90% of copy", impl, v,
                             None if c is None else f"{fmt(c)} {m} (copy)",
                             c, r, ">= 0.9", r is not None and r >= 0.9, m))
    if not bw_keys:
        rows.append(Target("bandwidth tests >= 90% of copy", need=">= 0.9"))

    # Matmul against torch.
    for dtypes, share in ((("f32",), 0.9), (("f16", "bf16"), 0.5)):
        keys = sorted({k for k in data if k[0] in MATMUL_TESTS
                       and k[1] in dtypes and k[3] == "TFLOP_s"
                       and (any(i in data[k] for i in NXV_IMPLS)
                            or "torch" in data[k])}, key=row_key)
        for (t, d, s, m) in keys:
            cell = data[(t, d, s, m)]
            impl = next((i for i in NXV_IMPLS if i in cell), None)
            v = cell.get(impl) if impl else None
            tv = cell.get("torch")
            r = v / tv if (v is not None and tv) else None
            rows.append(relative(
                f"{t} {d} {s} >= {share:.0%} of torch", impl, v,
                None if tv is None else f"{fmt(tv)} {m} (torch)", tv, r,
                f">= {share}", r is not None and r >= share, m))
        if not keys:
            rows.append(Target(f"matmul {'/'.join(dtypes)} >= {share:.0%} "
                               "of torch", need=f">= {share}"))

    # Runtime internals.
    rows.append(absolute(data, "pool_alloc <= 1 us", NXV_IMPLS, "pool_alloc",
                         1.0, "us"))
    rows.append(steady_allocs(data))
    # The time the first ops take (where the pipelines are created), the
    # device's opening left out; the totals where a run has no such rows.
    shape = "ops" if lookup(data, NXV_IMPLS, "pipeline_warm",
                            dtype_of(data, "pipeline_warm"), "ops",
                            "ms")[0] else "-"
    warm_impl, warm, _ = lookup(data, NXV_IMPLS, "pipeline_warm",
                                dtype_of(data, "pipeline_warm"), shape, "ms")
    cold = None
    if warm_impl:
        _, cold, _ = lookup(data, (warm_impl,), "pipeline_cold",
                            dtype_of(data, "pipeline_cold"), shape, "ms")
    r = warm / cold if (warm is not None and cold) else None
    what = " (first ops)" if shape == "ops" else ""
    rows.append(relative(f"pipeline_warm <= 10% of pipeline_cold{what}",
                         warm_impl, warm, None if cold is None
                         else f"{fmt(cold)} ms (pipeline_cold{what})", cold, r,
                         "<= 0.1", r is not None and r <= 0.1, "ms"))

    # Training steps against jax.
    # The *_aot rows are the same steps through Nx.Defn.Evaluator compiled
    # ahead of time, the *_compiled rows through Nx.Vulkan.Compiler.
    for test in ("mlp_step", "cnn_step", "mlp_step_aot", "cnn_step_aot",
                 "mlp_step_compiled", "cnn_step_compiled"):
        impl, v, shape = lookup(data, nx_only, test, "f32")
        peer = test.removesuffix("_compiled").removesuffix("_aot")
        _, jv, _ = lookup(data, ("jax",), peer, "f32", shape)
        r = v / jv if (v is not None and jv) else None
        rows.append(relative(f"{test} <= 2x jax", impl, v,
                             None if jv is None else f"{fmt(jv)} ms (jax)",
                             jv, r, "<= 2", r is not None and r <= 2, "ms"))

    header = ["target", "figure", "reference", "ratio", "need", "status"]
    return markdown(header, [t.row() for t in rows], right=("ratio",))


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Markdown comparison of nx_vulkan benchmark CSVs with "
                    "their torch / jax peers.")
    ap.add_argument("csv", nargs="+", metavar="FILE.csv",
                    help="CSV files in the shared benchmark schema")
    ap.add_argument("--targets", action="store_true",
                    help="also print the table of performance targets")
    args = ap.parse_args(argv)
    if hasattr(signal, "SIGPIPE"):  # quiet when piped into head
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    data, devices = read_csvs(args.csv)
    print("## Benchmark comparison\n")
    if devices:
        print("Devices: " + "; ".join(devices) + "\n")
    print("ratio: latencies best peer / best nx_vulkan, throughputs best "
          "nx_vulkan / best peer (> 1: nx_vulkan faster); (n%): share of "
          "the same implementation's copy of the same dtype.\n")
    print(comparison(data))
    if args.targets:
        print("\n## Targets\n")
        print(targets(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
