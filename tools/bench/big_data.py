#!/usr/bin/env python3
"""A data set larger than the memory the trainer may use, streamed from a
memory-mapped file (docs/benchmarks/training.md, "Data larger than memory").

Writes --gib GiB of uint8 images (3 x 64 x 64, 12 KiB a sample) and their
labels as .npy into --dir (kept for the next run when the size matches),
compiles a linear classifier over them (exported by PyTorch) for the CPU
emulation, and trains it over the whole set once, in file order or
--shuffle'd, with --normalize, inside a memory cgroup of --limit-gib (cgroup
v1's memory controller; the run says so where it cannot make one). Samples
the trainer's resident memory (anonymous: its own buffers; file-backed: the
mapped data's pages the kernel keeps) and the cgroup's usage twice a second,
and prints them as a markdown table: flat anonymous memory over a set several
times larger than the limit is the claim.

usage: tools/bench/big_data.py --dir DIR [--gib 20] [--limit-gib 8]
           [--memfit build/tools/memfit] [--batch 1024] [--shuffle]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

SHAPE = (3, 64, 64)
PER = int(np.prod(SHAPE))


def write_data(d, gib):
    n = int(gib * 2**30) // PER
    x, y = os.path.join(d, "big.npy"), os.path.join(d, "big_labels.npy")
    if os.path.exists(x) and np.load(x, mmap_mode="r").shape[0] == n:
        return x, y, n
    arr = np.lib.format.open_memmap(x, mode="w+", dtype=np.uint8,
                                    shape=(n,) + SHAPE)
    rng = np.random.default_rng(3)
    step = 2**30 // PER
    for at in range(0, n, step):
        k = min(step, n - at)
        arr[at:at + k] = rng.integers(0, 256, (k,) + SHAPE, dtype=np.uint8)
    arr.flush()
    del arr
    np.save(y, (np.arange(n) % 10).astype(np.int64))
    return x, y, n


def export_model(path):
    import torch
    model = torch.nn.Sequential(torch.nn.Flatten(),
                                torch.nn.Linear(PER, 10))
    torch.onnx.export(model, torch.zeros(2, *SHAPE), path,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})


def cgroup(limit):
    """A cgroup v1 memory group of `limit` bytes, or None."""
    root = "/sys/fs/cgroup/memory"
    g = os.path.join(root, f"memfit_big_data_{os.getpid()}")
    try:
        os.mkdir(g)
        with open(os.path.join(g, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        return g
    except OSError:
        return None


def status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gib", type=float, default=20)
    ap.add_argument("--limit-gib", type=float, default=8)
    ap.add_argument("--memfit", default="build/tools/memfit")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--shuffle", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    t0 = time.time()
    x, y, n = write_data(args.dir, args.gib)
    print(f"data: {n} samples, {os.path.getsize(x) / 2**30:.2f} GiB "
          f"({time.time() - t0:.0f} s to write or check)", file=sys.stderr)
    model = os.path.join(args.dir, "linear.onnx")
    export_model(model)
    out = os.path.join(args.dir, "trainer")
    subprocess.run([args.memfit, "compile", model, "--batch", str(args.batch),
                    "--budget", "100%", "-o", out, "--force", "--quiet"],
                   check=True)
    subprocess.run(["cmake", "-S", out, "-B", out + "/build",
                    "-DMEMFIT_BACKEND=cpu"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", out + "/build", "-j", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    steps = n // args.batch
    limit = int(args.limit_gib * 2**30)
    g = cgroup(limit)
    cmd = [out + "/build/trainer", "--data", x, "--labels", y, "--normalize",
           "0.485,0.456,0.406/0.229,0.224,0.225", "--iterations", str(steps),
           "--lr", "0.001", "--log-every", str(max(1, steps // 10))]
    if args.shuffle:
        cmd.append("--shuffle")
    # Start inside the group: the data's page cache is charged to it too.
    wrapped = (["sh", "-c", f'echo $$ > {g}/cgroup.procs && exec "$@"', "sh"]
               + cmd) if g else cmd
    start = time.time()
    p = subprocess.Popen(wrapped, stdout=subprocess.PIPE, text=True)
    samples = []
    while p.poll() is None:
        s = status(p.pid)
        if g:
            with open(os.path.join(g, "memory.usage_in_bytes")) as f:
                s["cgroup"] = int(f.read())
        if s:
            samples.append((time.time() - start, s))
        time.sleep(0.5)
    log = p.stdout.read()
    secs = time.time() - start
    if g:
        with open(os.path.join(g, "memory.max_usage_in_bytes")) as f:
            peak_cgroup = int(f.read())
        os.rmdir(g)
    if p.returncode != 0:
        print(log)
        sys.exit(f"trainer failed ({p.returncode})")
    mib = lambda b: f"{b / 2**20:,.0f} MiB"
    print(f"| data set | {os.path.getsize(x) / 2**30:.1f} GiB uint8, {n:,} "
          f"samples of 3 x 64 x 64, {'shuffled' if args.shuffle else 'in file order'} |")
    print(f"| memory limit | {'cgroup v1 ' + mib(limit) if g else 'none (no cgroup could be made)'} |")
    print(f"| steps | {steps} of batch {args.batch} (one epoch), "
          f"{secs:.0f} s, {steps * args.batch / secs:,.0f} samples/s |")
    print()
    print("| time (s) | resident | anonymous | file-backed (mapped data) |"
          + (" cgroup usage |" if g else ""))
    print("|---|---|---|---|" + ("---|" if g else ""))
    picks = sorted({int(i * (len(samples) - 1) / 8) for i in range(9)})
    for i in picks:
        t, s = samples[i]
        row = (f"| {t:.1f} | {mib(s.get('VmRSS', 0))} | "
               f"{mib(s.get('RssAnon', 0))} | {mib(s.get('RssFile', 0))} |")
        if g:
            row += f" {mib(s.get('cgroup', 0))} |"
        print(row)
    anon = [s.get("RssAnon", 0) for _, s in samples[len(samples) // 10:]]
    print()
    print(f"anonymous memory after the first tenth: {mib(min(anon))} to "
          f"{mib(max(anon))}" + (f"; cgroup peak {mib(peak_cgroup)}" if g else ""))
    print(log.strip().splitlines()[-5], file=sys.stderr)


if __name__ == "__main__":
    main()
