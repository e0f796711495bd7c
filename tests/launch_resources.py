#!/usr/bin/python3
"""Every CUDA kernel launchable at the block size it declares, on every
architecture the build targets (docs/cuda-backend.md, "Launch sizes").

Code that compiles is not code that launches: a block of 1024 threads of a
kernel with 68 registers a thread asks for 69,632 registers, over the 65,536
of an SM, and fails at its first launch (cudaErrorLaunchOutOfResources). So
what ptxas made of each kernel of each .cu file given is judged against
each architecture's limits, with the launch bounds read from the PTX of
one. ptxas's report is the build's own (--reports: the build compiles
runtime/cuda through tools/cuda-report-launcher, which keeps it); a source
without a current report covering every architecture is compiled here
once for all of them, with the flags of memfit_runtime_cuda (through
ccache where the build uses it). A kernel fails when:

  - it declares no launch bound (no .maxntid in its PTX): ptxas then does
    not know the block size and may use more registers than it allows;
  - registers a thread x threads of its bound, allocated per warp in units
    of 256 registers, exceed the SM's register file (64K 32-bit registers
    on sm_75..sm_90), or it uses more than 255 registers a thread;
  - its static shared memory exceeds 48 KiB;
  - ptxas spilled registers (spill stores or loads above 0) while using
    every register its bound allows (64K / threads, whole warps, in steps
    of 8), where that is below the 255 a thread may have. Once a bound is
    declared ptxas fits the registers to it by spilling to local memory, so
    a launch size raised past what the kernel's live values allow shows up
    as exactly that: lower that kernel's `threads`;
  - its stack (ptxas's cumulative stack size: spills and arrays indexed at
    run time) exceeds the 1 KiB a thread that the CUDA context reserves:
    the driver then reserves the larger size for every thread the GPU can
    hold, once, for the rest of the process, memory no plan counts (4 KiB
    in attention's backward took 794 MiB on an H200). WIDE_STATE names the
    kernels allowed more, as notes with what they reserve.

Spills below that cap are ptxas's own trade (it spills a few bytes around
a slow path at 48 of 255 registers, and not at all with a smaller bound),
and spills at 255 registers are the kernel's state, which no block size
changes: both are listed as notes, within the stack rule.

The fixture file (--fixtures) holds kernels with a known verdict: the test
also fails unless the checker rejects `unboundedFixture` (no bound) and
`HungryFixture<1024>` (spills) and accepts `HungryFixture<256>`, for every
architecture, so a checker that accepts everything cannot pass.

Usage: launch_resources.py --nvcc NVCC --archs "75-real;80;..."
         [--flag FLAG]... [--include DIR]... [--launcher ccache]
         [--reports DIR] --fixtures FILE.cu FILE.cu...
Exit 1 with one line per violation.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

# Per SM architecture: 32-bit registers per SM (and per block), registers a
# thread at most, static shared memory a block at most, threads a block at
# most (CUDA C++ Programming Guide, "Compute capabilities").
LIMITS = {
    arch: {"regs": 65536, "regs_thread": 255, "smem": 48 * 1024,
           "threads": 1024}
    for arch in (70, 72, 75, 80, 86, 87, 89, 90)
}
REG_UNIT = 256  # registers are allocated to a warp in units of this many

# Bytes of local memory a thread that the CUDA context sets aside
# (cudaLimitStackSize's default).
LOCAL_DEFAULT = 1024
# Kernels whose per-thread state exceeds it, with the reason and the most
# the plan counts for them: attention's rows wider than 128 (heads of
# 129-256 values) keep their state in local memory (runtime/kernels/
# HostDevice.h, forLanes), planned as 2 KiB a thread (attentionLocalBytes
# in compiler/ops/Attention.cpp, added to the library reserve).
WIDE_STATE = {
    "AttentionKernel<256>": ("heads wider than 128", 2048),
    "AttentionGradQKernel<256>": ("heads wider than 128", 2048),
    "AttentionGradKVKernel<256>": ("heads wider than 128", 2048),
}
# Threads an SM holds at most and SMs of the largest GPU the notes size the
# reservation for (an H200).
NOTE_THREADS_PER_SM, NOTE_SMS = 2048, 132

FIXTURE_VERDICTS = {
    # demangled-name fragment: the reason the checker must give, or None
    "unboundedFixture": "no launch bound",
    "HungryFixture<1024>": "spill",
    "LocalArrayFixture": "local memory",
    "HungryFixture<256>": None,
}

ENTRY = re.compile(r"Compiling entry function '([^']+)' for 'sm_(\d+)'")
SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")
STACK = re.compile(r"(\d+) bytes cumulative stack size")
PTX_ENTRY = re.compile(r"\.entry\s+(\S+?)\s*\((.*?)\)([^{]*)\{", re.S)
MAXNTID = re.compile(r"\.maxntid\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)")
# An anonymous namespace's mangled name carries a hash of the compile's path
# (_GLOBAL__N__9e225349_8_Dense_cu_...): the cached report may come from a
# clone at another path than the PTX, so both sides drop it (same length,
# so the name still demangles).
ANON_HASH = re.compile(r"(_GLOBAL__N__)[0-9a-f]{8}_")


def unhashed(name):
    return ANON_HASH.sub(r"\g<1>00000000_", name)


def archs_of(spec):
    """CMAKE_CUDA_ARCHITECTURES ("75-real;90") as SM numbers. A virtual
    architecture is JIT-compiled for a GPU of that generation, so its
    kernels are checked as ptxas builds them for it."""
    out = []
    for item in spec.replace(",", ";").split(";"):
        item = item.strip()
        if not item:
            continue
        m = re.fullmatch(r"(\d+)(-real|-virtual)?", item)
        if not m:
            sys.exit(f"launch_resources: cannot check CMAKE_CUDA_ARCHITECTURES "
                     f"entry '{item}': give architecture numbers (75-real;90)")
        if int(m.group(1)) not in out:
            out.append(int(m.group(1)))
    return out


def build_report(args, archs, source):
    """The report the build kept of `source` (tools/cuda-report-launcher),
    or None where it has none that is current and covers every
    architecture."""
    if not args.reports:
        return None
    path = os.path.join(args.reports, os.path.basename(source) + ".o.ptxas")
    try:
        if os.path.getmtime(path) < os.path.getmtime(source):
            return None
        with open(path) as f:
            report = f.read()
    except OSError:
        return None
    built = {int(m.group(2)) for m in ENTRY.finditer(report)}
    return report if set(archs) <= built else None


def compile_one(args, archs, source, workdir):
    """ptxas's report of `source` for every architecture, and its kernels'
    launch bounds."""
    keep = tempfile.mkdtemp(dir=workdir)
    common = ["-x", "cu"] + [f"-I{d}" for d in args.include] + args.flag
    report = build_report(args, archs, source)
    if report is None:
        # The report from an object compile, as the build makes it: a
        # compiler cache (--launcher) keeps its output and replays ptxas's
        # report, so an unchanged source costs nothing the second time.
        cmd = args.launcher + [args.nvcc, "-c", "-o",
                               os.path.join(keep, "out.o"),
                               "-Xptxas", "-v"] + common
        for a in archs:
            cmd.append(
                f"--generate-code=arch=compute_{a},code=[compute_{a},sm_{a}]")
        cmd.append(source)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            return source, None, None, r.stdout + r.stderr
        report = r.stdout + r.stderr
    # The bounds from the PTX of one architecture: __launch_bounds__ is the
    # source's, the same .maxntid for every architecture.
    ptx_path = os.path.join(keep, "out.ptx")
    p = subprocess.run([args.nvcc, "--ptx", "-o", ptx_path] + common +
                       [f"-arch=compute_{archs[-1]}", source],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return source, None, None, p.stdout + p.stderr
    bounds = {}
    with open(ptx_path) as f:
        ptx = f.read()
    for e in PTX_ENTRY.finditer(ptx):
        n = MAXNTID.search(e.group(3))
        bound = (int(n.group(1)) * int(n.group(2)) * int(n.group(3))
                 if n else None)
        for arch in archs:
            bounds[(unhashed(e.group(1)), arch)] = bound
    return source, report, bounds, None


def parse_ptxas(report):
    """{(mangled name, sm): {regs, smem, spills}} of the entry functions."""
    out, cur, props = {}, None, None
    for line in report.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = (unhashed(m.group(1)), int(m.group(2)))
            out[cur] = {"regs": 0, "smem": 0, "spills": 0, "stack": 0}
            continue
        if cur is None:
            continue
        if "Function properties for" in line:
            # The entry's, or a device function's it calls (their spills
            # are the entry's too: they run in its registers).
            props = line.split("Function properties for", 1)[1].strip()
            continue
        m = SPILLS.search(line)
        if m and props:
            out[cur]["spills"] += int(m.group(1)) + int(m.group(2))
        m = USED.search(line)
        if m:
            out[cur]["regs"] = int(m.group(1))
            s = SMEM.search(line)
            out[cur]["smem"] = int(s.group(1)) if s else 0
            s = STACK.search(line)
            out[cur]["stack"] = int(s.group(1)) if s else 0
    return out


def demangle(names):
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names),
                           capture_output=True, text=True, check=True)
        return dict(zip(names, r.stdout.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def short(name):
    """kernelOf<memfit::rt::(anonymous namespace)::CrossEntropyKernel, ...>
    as CrossEntropyKernel; a plain kernel by its name."""
    head = "kernelOf<"
    if head in name:
        rest, depth, end = name[name.index(head) + len(head):], 0, 0
        for end, ch in enumerate(rest):
            depth += ch == "<"
            depth -= ch == ">"
            if depth < 0 or (ch == "," and depth == 0):
                break
        name = rest[:end]
    else:
        name = name.split("(")[0].split(" ")[-1]
    return name.replace("(anonymous namespace)::", "").split("::")[-1]


def verdict(res, threads, sm, name=""):
    """The first rule the kernel breaks, or None."""
    lim = LIMITS.get(sm)
    if lim is None:
        return f"no limits known for sm_{sm} (add them to LIMITS)"
    if threads is None:
        return "no launch bound (__launch_bounds__; launch it with cuda::launch)"
    if threads > lim["threads"]:
        return f"a bound of {threads} threads, over {lim['threads']}"
    if res["regs"] > lim["regs_thread"]:
        return f"{res['regs']} registers a thread, over {lim['regs_thread']}"
    per_warp = -(-res["regs"] * 32 // REG_UNIT) * REG_UNIT
    block = per_warp * -(-threads // 32)
    if block > lim["regs"]:
        return (f"{res['regs']} registers x {threads} threads = {block} "
                f"registers a block, over the SM's {lim['regs']}")
    if res["smem"] > lim["smem"]:
        return f"{res['smem']} bytes of static shared memory, over {lim['smem']}"
    cap = register_cap(threads, lim)
    if res["spills"] and res["regs"] >= cap and cap < lim["regs_thread"]:
        return (f"spills {res['spills']} bytes at {threads} threads with "
                f"all {res['regs']} registers its bound allows: its block "
                f"size is more than its registers allow")
    if res["stack"] > LOCAL_DEFAULT and name not in WIDE_STATE:
        return (f"{res['stack']} bytes of local memory a thread, over the "
                f"{LOCAL_DEFAULT} the context reserves: the driver would "
                f"reserve {reserved_mib(res['stack']):.0f} MiB more on an "
                f"H200; keep its state in registers (forLanes) or name it "
                f"in WIDE_STATE")
    if name in WIDE_STATE and res["stack"] > WIDE_STATE[name][1]:
        return (f"{res['stack']} bytes of local memory a thread, over the "
                f"{WIDE_STATE[name][1]} the plan counts for it")
    return None


def reserved_mib(stack):
    """What a kernel with `stack` bytes a thread adds on an H200."""
    return ((stack - LOCAL_DEFAULT) * NOTE_THREADS_PER_SM * NOTE_SMS /
            1048576.0)


def register_cap(threads, lim):
    """The registers a thread may have when `threads` make one block."""
    per_warp = lim["regs"] // -(-threads // 32)
    return min(lim["regs_thread"], per_warp // 32 // 8 * 8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--archs", required=True)
    ap.add_argument("--flag", action="append", default=[])
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reports", default="",
                    help="the build's ptxas reports (tools/"
                    "cuda-report-launcher); a source without a current one "
                    "is compiled here")
    ap.add_argument("--launcher", action="append", default=[],
                    help="a compiler launcher (ccache) for the object compile")
    ap.add_argument("--list", action="store_true",
                    help="print every kernel's registers, bound and spills")
    ap.add_argument("sources", nargs="+")
    args = ap.parse_args()
    archs = archs_of(args.archs)
    if not archs:
        sys.exit("launch_resources: no architectures to check")
    problems, notes, kernels = [], [], 0
    with tempfile.TemporaryDirectory() as work, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = [pool.submit(compile_one, args, archs, s, work)
                for s in [args.fixtures] + args.sources]
        results = [j.result() for j in jobs]
    for source, report, bounds, error in results:
        if error is not None:
            problems.append(f"{source}: does not compile:\n{error}")
            continue
        usage = parse_ptxas(report)
        names = demangle(sorted({n for n, _ in usage}))
        fixture = source == args.fixtures
        seen = set()
        for (name, sm), res in sorted(usage.items()):
            kernels += not fixture
            pretty = short(names.get(name, name))
            why = verdict(res, bounds.get((name, sm)), sm, pretty)
            if args.list:
                print(f"{os.path.basename(source)}: {pretty} sm_{sm}: "
                      f"{res['regs']} registers x {bounds.get((name, sm))} "
                      f"threads, {res['smem']} bytes smem, {res['spills']} "
                      f"bytes spilled")
            if not fixture:
                if why:
                    problems.append(f"{os.path.basename(source)}: {pretty} "
                                    f"on sm_{sm}: {why}")
                elif res["stack"] > LOCAL_DEFAULT:
                    notes.append(f"note: {os.path.basename(source)}: "
                                 f"{pretty} on sm_{sm}: {res['stack']} bytes "
                                 f"of local memory a thread "
                                 f"({WIDE_STATE[pretty][0]}): "
                                 f"{reserved_mib(res['stack']):.0f} MiB more "
                                 f"on an H200 when it runs")
                elif res["spills"]:
                    notes.append(f"note: {os.path.basename(source)}: "
                                 f"{pretty} on sm_{sm}: ptxas spills "
                                 f"{res['spills']} bytes at {res['regs']} "
                                 f"registers (its state, not its block "
                                 f"size)")
                continue
            for frag, want in FIXTURE_VERDICTS.items():
                if frag not in pretty:
                    continue
                seen.add((frag, sm))
                if (want is None) != (why is None) or (
                        want and want not in why):
                    problems.append(
                        f"checker: fixture {frag} on sm_{sm}: expected "
                        f"{'acceptance' if want is None else repr(want)}, "
                        f"got {why or 'acceptance'}")
        if fixture:
            for frag in FIXTURE_VERDICTS:
                for sm in archs:
                    if (frag, sm) not in seen:
                        problems.append(f"checker: fixture {frag} not found "
                                        f"for sm_{sm} in {source}")
    for line in notes + problems:
        print(line)
    if not kernels and not problems:
        problems.append("no kernels found")
        print("launch_resources: no kernels found in the sources")
    print(f"launch_resources: {kernels} kernel builds over "
          f"{', '.join(f'sm_{a}' for a in archs)}, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
