#!/usr/bin/env python3
"""Machine code of the runtime's pipelines on NVIDIA's Vulkan driver.

NVIDIA's driver keeps what it compiles in its shader disk cache: zstd
frames holding each pipeline's machine code in a container that nvdisasm
reads as a raw binary. Run a program with a fresh cache, then this:

    rm -rf /tmp/glc /tmp/pc
    __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glc \\
    __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 NX_VULKAN_CACHE_DIR=/tmp/pc \\
        build/bench/nxv_bench --suite matmul --dtypes f32 --reps 1
    python3 bench/sass.py /tmp/glc /tmp/sass

(a fresh NX_VULKAN_CACHE_DIR too: pipelines found in the runtime's own
cache are not compiled again). Each pipeline is written to OUT_DIR as
kNN_<FFMA+HMMA count>_<registers>.sass, and one line per pipeline
summarizes it: registers, FFMA and HMMA instructions, local-memory
spills (LDL/STL), and the instruction mix of its hottest loop (the
backward branch spanning the most FFMA/HMMA). Needs the zstd command and
nvdisasm (CUDA's, or the copy PyTorch's Triton ships).
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
INSN = re.compile(
    r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)([.\w]*)\s*([^;]*);")


def find_nvdisasm(given):
    if given:
        return given
    found = shutil.which("nvdisasm")
    if found:
        return found
    for root in ("/usr/local", "/opt"):
        for dirpath, _, files in os.walk(root):
            if "nvdisasm" in files:
                return os.path.join(dirpath, "nvdisasm")
    sys.exit("sass.py: nvdisasm not found (give --nvdisasm)")


def frames(blob):
    """The decompressed zstd frames of a cache file that hold pipelines."""
    i = 0
    while True:
        i = blob.find(ZSTD_MAGIC, i)
        if i < 0:
            return
        r = subprocess.run(["zstd", "-d", "-c", "-q"], input=blob[i:],
                           capture_output=True, check=False)
        i += 4
        if r.stdout.startswith(b"NVDANVVM"):
            yield r.stdout[8:]


def hottest_loop(insns):
    best = None
    for addr, op, arg in insns:
        if op != "BRA":
            continue
        t = re.search(r"0x([0-9a-f]+)", arg)
        if not t or int(t.group(1), 16) >= addr:
            continue
        lo = int(t.group(1), 16)
        mix = collections.Counter(o for a, o, _ in insns if lo <= a <= addr)
        score = mix["FFMA"] + mix["HMMA"]
        if best is None or score > best[0]:
            best = (score, lo, addr, mix)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache_dir", help="__GL_SHADER_DISK_CACHE_PATH of the run")
    ap.add_argument("out_dir", help="where the .sass files go")
    ap.add_argument("--nvdisasm", help="nvdisasm to use (default: searched)")
    ap.add_argument("--arch", default="SM90",
                    help="the GPU's architecture for nvdisasm -b (default SM90)")
    args = ap.parse_args()
    if not shutil.which("zstd"):
        sys.exit("sass.py: the zstd command is needed")
    nvdisasm = find_nvdisasm(args.nvdisasm)
    os.makedirs(args.out_dir, exist_ok=True)
    raw = os.path.join(args.out_dir, ".pipeline.bin")
    n = 0
    for dirpath, _, files in os.walk(args.cache_dir):
        for name in sorted(files):
            if not name.endswith(".bin"):
                continue
            with open(os.path.join(dirpath, name), "rb") as f:
                blob = f.read()
            for code in frames(blob):
                with open(raw, "wb") as f:
                    f.write(code)
                text = subprocess.run([nvdisasm, "-b", args.arch, raw],
                                      capture_output=True, text=True,
                                      check=False).stdout
                regs = re.search(r"Register count=(\d+)", text)
                if not regs:
                    continue
                insns = [(int(m[0], 16), m[2], m[4]) for m in INSN.findall(text)]
                ops = collections.Counter(op for _, op, _ in insns)
                mma = ops["FFMA"] + ops["HMMA"]
                label = "k%02d_%d_%s" % (n, mma, regs.group(1))
                n += 1
                with open(os.path.join(args.out_dir, label + ".sass"), "w") as f:
                    f.write(text)
                line = "%s registers %s FFMA %d HMMA %d LDL %d STL %d instructions %d" % (
                    label, regs.group(1), ops["FFMA"], ops["HMMA"], ops["LDL"],
                    ops["STL"], len(insns))
                loop = hottest_loop(insns)
                if loop:
                    _, lo, hi, mix = loop
                    line += " | loop %x-%x (%d): %s" % (
                        lo, hi, sum(mix.values()),
                        " ".join("%s %d" % kv for kv in mix.most_common(14)))
                print(line)
    if os.path.exists(raw):
        os.remove(raw)
    if n == 0:
        sys.exit("sass.py: no pipeline found under %s" % args.cache_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
