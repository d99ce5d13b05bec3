#!/usr/bin/env python3
"""Charts of nx_vulkan and peer benchmark figures.

Usage:

    python3 bench/plot.py --out DIR FILE.csv...

Reads any number of CSV files in the shared benchmark schema
(`impl,test,dtype,shape,metric,value`, see bench_schema.md) and writes two
PNG files (matplotlib, Agg backend, so no display is needed):

* `DIR/latency.png`: grouped bar chart, log y axis, of the per-op latency of
  tiny ops in microseconds, one group per test and one bar per
  implementation present (nx_vulkan_c, nx_vulkan_nif, nx_vulkan_nx, torch,
  jax): `chain` (dependent x = x + 1, us per op, to the value on the host),
  `independent` (independent ops to a device synchronize, us per op),
  `to_number` (one op and the read-back of its scalar, us per round trip)
  and `submit_wait` (one queue submission and host wait per op; C only)
  when present. Lower is better.
* `DIR/matmul.png`: TFLOP/s (2*M*N*K / time; higher is better) of the
  square `matmul` sizes against the size on a log2 axis, one line per
  implementation (colour) and dtype (marker and line style: f32, f16,
  bf16). When the files have them, a second panel shows the MLP layer
  shapes as grouped bars with the same colours: the forward products
  (`matmul` 128x784x512, 128x512x512, 128x512x10, and any other
  non-square `matmul` shape), the weight gradient (`matmul_tn`
  784x128x512) and the input gradient (`matmul_nt` 128x512x784).

A figure given more than once (several files) is plotted as its best (the
lowest latency, the highest throughput). The device is named in the
charts when a file has a device row, defined as:

    hw,device,-,<device name with commas replaced by spaces>,count,0

i.e. impl `hw`, test `device`, dtype `-`, the device name in the shape
column, metric `count` and value 0 (bench/peers.py writes one for the GPU
it ran on; other programs may add their own).

Needs matplotlib (Debian: `apt-get install python3-matplotlib`; else
`pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import os
import sys

IMPL_ORDER = ("nx_vulkan_c", "nx_vulkan_nif", "nx_vulkan_nx", "torch", "jax")
IMPL_COLORS = {
    "nx_vulkan_c": "#1b5e20",
    "nx_vulkan_nif": "#43a047",
    "nx_vulkan_nx": "#a5d6a7",
    "torch": "#e65100",
    "jax": "#1565c0",
    "hw": "#616161",
}
EXTRA_COLORS = ("#6a1b9a", "#00838f", "#ad1457", "#827717")
LATENCY_TESTS = ("chain", "independent", "to_number", "submit_wait")
LATENCY_LABELS = {
    "chain": "chain\n(us per op)",
    "independent": "independent\n(us per op)",
    "to_number": "to_number\n(us per round trip)",
    "submit_wait": "submit_wait\n(us per op)",
}
LATENCY_METRICS = ("us_per_op", "us")
MATMUL_DTYPES = ("f32", "f16", "bf16")
DTYPE_STYLE = {"f32": ("o", "-"), "f16": ("s", "--"), "bf16": ("^", ":")}
HATCHES = {"f32": "", "f16": "//", "bf16": ".."}
# MLP layer products: (test, shape, label), in the schema's order.
MLP_SHAPES = (
    ("matmul", "128x784x512", "fwd 128x784x512"),
    ("matmul", "128x512x512", "fwd 128x512x512"),
    ("matmul", "128x512x10", "fwd 128x512x10"),
    ("matmul_tn", "784x128x512", "dW (tn) 784x128x512"),
    ("matmul_nt", "128x512x784", "dX (nt) 128x512x784"),
)


def load_matplotlib():
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot.py needs matplotlib, which this Python "
                 f"({sys.executable}) does not have: install it with "
                 "`apt-get install python3-matplotlib` (then run "
                 "/usr/bin/python3) or `pip install matplotlib`")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------

def read_csvs(paths):
    """Returns (data, devices): data maps (impl, test, dtype, shape, metric)
    to the best value given; devices lists the `hw,device` names. The
    files are read by report.py's reader (same checks, same "best")."""
    import report  # bench/report.py, beside this script

    cells, devices = report.read_csvs(paths)
    data = {(impl,) + key: v for key, cell in cells.items()
            for impl, v in cell.items()}
    return data, devices


def ordered_impls(impls):
    known = [i for i in IMPL_ORDER if i in impls]
    return known + sorted(i for i in impls if i not in IMPL_ORDER)


def color_of(impl: str, extra: dict) -> str:
    if impl in IMPL_COLORS:
        return IMPL_COLORS[impl]
    if impl not in extra:
        extra[impl] = EXTRA_COLORS[len(extra) % len(EXTRA_COLORS)]
    return extra[impl]


def device_note(devices) -> str:
    return ("device: " + "; ".join(devices)) if devices else ""


def fmt(v: float) -> str:
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if v >= 0.01 else f"{v:.2g}"


def empty_chart(plt, path, title, note, message):
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12)
    if note:
        fig.text(0.5, 0.02, note, ha="center", fontsize=9, color="#444444")
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Latency chart
# ---------------------------------------------------------------------------

def latency_values(data):
    """{test: {impl: us}} over f32 (else any dtype) and any shape."""
    out: dict[str, dict[str, float]] = {}
    for (impl, test, dtype, _shape, metric), v in data.items():
        if test not in LATENCY_TESTS or metric not in LATENCY_METRICS \
                or impl == "hw":
            continue
        cur = out.setdefault(test, {})
        cur[impl] = min(v, cur.get(impl, v))
    return out


def plot_latency(plt, data, devices, path):
    title = "Latency of tiny ops (lower is better)"
    values = latency_values(data)
    tests = [t for t in LATENCY_TESTS if t in values]
    if not tests:
        empty_chart(plt, path, title, device_note(devices),
                    "no latency figures (chain, independent, to_number, "
                    "submit_wait) in the input")
        return
    impls = ordered_impls({i for t in tests for i in values[t]})
    extra: dict[str, str] = {}
    n = len(impls)
    fig, ax = plt.subplots(figsize=(max(7.5, 1.2 + 0.55 * n * len(tests)),
                                    5.2))
    positive = [v for t in tests for v in values[t].values() if v > 0]
    # One bar width throughout; each group's bars (the impls it has)
    # centred on its tick.
    width = 0.8 / n
    slots = {}
    for i, t in enumerate(tests):
        present = [im for im in impls if values[t].get(im, 0) > 0]
        left = i - width * len(present) / 2
        for j, im in enumerate(present):
            slots[(t, im)] = (left + width * (j + 0.5), width)
    for impl in impls:
        xs, ys, ws = [], [], []
        for t in tests:
            if (t, impl) in slots:
                x, w = slots[(t, impl)]
                xs.append(x)
                ws.append(w * 0.92)
                ys.append(values[t][impl])
        if not xs:
            continue
        bars = ax.bar(xs, ys, ws, label=impl, color=color_of(impl, extra),
                      edgecolor="#222222", linewidth=0.5)
        for bar, v in zip(bars, ys):
            ax.annotate(fmt(v), (bar.get_x() + bar.get_width() / 2, v),
                        xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    if positive:
        ax.set_ylim(min(positive) / 2, max(positive) * 6)
    ax.set_xlim(-0.6, len(tests) - 0.4)
    ax.set_xticks(range(len(tests)))
    ax.set_xticklabels([LATENCY_LABELS[t] for t in tests])
    ax.set_ylabel("microseconds (log scale)")
    ax.set_title(title)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper center", ncol=n)
    note = device_note(devices)
    if note:
        fig.text(0.5, 0.01, note, ha="center", fontsize=8, color="#444444")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Matmul chart
# ---------------------------------------------------------------------------

def square_size(shape: str):
    parts = shape.split("x")
    if len(parts) == 3 and all(p.isdigit() for p in parts) \
            and len(set(parts)) == 1:
        return int(parts[0])
    return None


def matmul_series(data):
    """{(impl, dtype): {size: TFLOP_s}} of the square `matmul` shapes."""
    out: dict[tuple, dict[int, float]] = {}
    for (impl, test, dtype, shape, metric), v in data.items():
        if test != "matmul" or metric != "TFLOP_s" or impl == "hw":
            continue
        n = square_size(shape)
        if n is not None:
            out.setdefault((impl, dtype), {})[n] = v
    return out


def mlp_groups(data):
    """[(label, {(impl, dtype): TFLOP_s})] of the MLP layer shapes."""
    groups = [(test, shape, label) for test, shape, label in MLP_SHAPES]
    known = {(t, s) for t, s, _ in MLP_SHAPES}
    extra = sorted({shape for (_i, t, _d, shape, m) in data
                    if t == "matmul" and m == "TFLOP_s"
                    and square_size(shape) is None
                    and ("matmul", shape) not in known})
    groups += [("matmul", s, f"fwd {s}") for s in extra]
    out = []
    for test, shape, label in groups:
        vals = {(impl, dtype): v
                for (impl, t, dtype, s, m), v in data.items()
                if t == test and s == shape and m == "TFLOP_s"
                and impl != "hw"}
        if vals:
            out.append((label, vals))
    return out


def dtype_key(d):
    return MATMUL_DTYPES.index(d) if d in MATMUL_DTYPES else len(MATMUL_DTYPES)


def series_order(keys):
    impls = ordered_impls({i for i, _ in keys})
    return sorted(keys, key=lambda k: (impls.index(k[0]), dtype_key(k[1]),
                                       k[1]))


def plot_matmul(plt, data, devices, path):
    title = "Matrix product throughput (higher is better)"
    series = matmul_series(data)
    groups = mlp_groups(data)
    if not series and not groups:
        empty_chart(plt, path, title, device_note(devices),
                    "no matmul figures in the input")
        return
    panels = (1 if series else 0) + (1 if groups else 0)
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 6.6),
                             squeeze=False)
    axes = list(axes[0])
    extra: dict[str, str] = {}

    if series:
        ax = axes.pop(0)
        sizes = sorted({n for s in series.values() for n in s})
        for key in series_order(series):
            impl, dtype = key
            pts = sorted(series[key].items())
            marker, style = DTYPE_STYLE.get(dtype, ("d", "-."))
            ax.plot([p[0] for p in pts], [p[1] for p in pts],
                    marker=marker, linestyle=style, linewidth=1.5,
                    color=color_of(impl, extra), label=f"{impl} {dtype}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(n) for n in sizes])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("N (square N x N x N product, log2 scale)")
        ax.set_ylabel("TFLOP/s (log scale)")
        ax.set_title("square matmul: C[N,N] = A[N,N] B[N,N]")
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=3, loc="upper center",
                  bbox_to_anchor=(0.5, -0.13))

    if groups:
        ax = axes.pop(0)
        keys = series_order({k for _, vals in groups for k in vals})
        width = 0.8 / len(keys)
        positive = []
        for j, key in enumerate(keys):
            impl, dtype = key
            xs, ys = [], []
            for i, (_label, vals) in enumerate(groups):
                v = vals.get(key)
                if v is not None and v > 0:
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(v)
                    positive.append(v)
            if xs:
                ax.bar(xs, ys, width * 0.92, color=color_of(impl, extra),
                       hatch=HATCHES.get(dtype, "xx"), edgecolor="#222222",
                       linewidth=0.5, label=f"{impl} {dtype}")
        ax.set_yscale("log")
        if positive:
            ax.set_ylim(min(positive) / 2, max(positive) * 2)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g[0].replace(" ", "\n", 1) for g in groups],
                           fontsize=8)
        ax.set_ylabel("TFLOP/s (log scale)")
        ax.set_title("MLP 784-512-512-10, batch 128: layer products (MxKxN)")
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.set_axisbelow(True)
        ax.legend(fontsize=7, ncol=3, loc="upper center",
                  bbox_to_anchor=(0.5, -0.16))

    fig.suptitle(title + " - f32 is full f32 (no TF32); f16/bf16 results "
                 "in the input type", fontsize=11)
    note = device_note(devices)
    if note:
        fig.text(0.5, 0.01, note, ha="center", fontsize=8, color="#444444")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="latency.png and matmul.png from benchmark CSVs in the "
                    "shared schema.")
    ap.add_argument("--out", required=True, metavar="DIR",
                    help="directory for latency.png and matmul.png "
                         "(created if missing)")
    ap.add_argument("csv", nargs="+", metavar="FILE.csv",
                    help="CSV files in the shared benchmark schema")
    args = ap.parse_args(argv)
    data, devices = read_csvs(args.csv)
    plt = load_matplotlib()
    os.makedirs(args.out, exist_ok=True)
    lat = os.path.join(args.out, "latency.png")
    mm = os.path.join(args.out, "matmul.png")
    plot_latency(plt, data, devices, lat)
    plot_matmul(plt, data, devices, mm)
    print(f"wrote {lat} and {mm}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
