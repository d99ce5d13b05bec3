#!/bin/sh
# run_all.sh [OUTDIR] - every benchmark of this project on the default
# Vulkan device, the PyTorch/JAX side when those are installed, then a
# comparison table with the targets and the charts.
#
#   bench/run_all.sh /tmp/nxv-bench        (default OUTDIR: bench-results)
#
# Steps (each skipped with a message when its tools are missing):
#   1. build/bench/nxv_bench --csv-out OUTDIR/c.csv        (make bench)
#   2. mix run bench/nx_bench.exs --csv-out OUTDIR/nx.csv  (needs Nx: Hex
#      or NX_PATH, see README.md)
#   3. python3 bench/peers.py --csv-out OUTDIR/peers.csv   (torch and/or jax)
#   4. python3 bench/report.py --targets OUTDIR/*.csv      (the table)
#   5. python3 bench/plot.py --out OUTDIR OUTDIR/*.csv     (needs matplotlib)
# Extra arguments for the C benchmark go in NXV_BENCH_ARGS (e.g. "--quick").
set -u
out=${1:-bench-results}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1

make -s bench || exit 1
# shellcheck disable=SC2086
build/bench/nxv_bench ${NXV_BENCH_ARGS:-} --csv-out "$out/c.csv" | tee "$out/c.txt" || exit 1

if command -v mix >/dev/null 2>&1; then
  quick=""
  case " ${NXV_BENCH_ARGS:-} " in *" --quick "*) quick="--quick" ;; esac
  mix run bench/nx_bench.exs $quick --csv-out "$out/nx.csv" | tee "$out/nx.txt" ||
    echo "run_all: the Elixir benchmark failed (is Nx available?)"
else
  echo "run_all: mix not found, Elixir figures skipped"
fi

py=python3
if $py -c "import torch" 2>/dev/null || $py -c "import jax" 2>/dev/null; then
  $py bench/peers.py --csv-out "$out/peers.csv" | tee "$out/peers.txt"
else
  echo "run_all: neither torch nor jax importable, peer figures skipped"
fi

$py bench/report.py --targets "$out"/*.csv | tee "$out/report.md"
if $py -c "import matplotlib" 2>/dev/null; then
  $py bench/plot.py --out "$out" "$out"/*.csv
elif [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 bench/plot.py --out "$out" "$out"/*.csv
else
  echo "run_all: matplotlib missing, charts skipped"
fi
