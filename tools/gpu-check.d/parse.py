"""What tools/gpu-check reads from the selfcheck's and the trainers' output.
Standard library only: the tests run it where torch is absent.

A trainer prints (runtime/Trainer.cpp)
  iteration N  loss L  images/s R  device memory M MiB     (every --log-every)
  done: N iterations, final loss L, R images/s, device memory P MiB planned,
        M MiB measured (arena A MiB)
  convolutions: C of N tasks changed algorithm (cuDNN V, GPU, sm_XY)...
                                              (start-up check, and after done:)
  memory: measured peak P MiB (libraries L MiB of a R MiB reserve, trainer
          T MiB) against the budget B MiB: within|OVER; the CUDA context
          (X MiB) is not in the budget          (stdout, or stderr when over)
  memory at start-up: libraries L MiB, the plan's D MiB allocated as A MiB;
          the iterations added G MiB                (stdout)
Trainers of older versions warned on stderr once per convolution and
direction ("cuDNN cannot run the planned DIR convolution algorithm K"):
those are counted too, so a pack of either kind reads.

usage: parse.py trainer STDOUT [STDERR]  |  parse.py selfcheck LOG
prints what it read as JSON (for the tests).
"""
import json
import re
import sys

NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)"
ITER = re.compile(r"^iteration (\d+)\s+loss " + NUM + r"\s+images/s " + NUM)
DONE = re.compile(r"^done: (\d+) iterations, final loss " + NUM + r", " + NUM
                  + r" images/s, device memory " + NUM + r" MiB planned, " +
                  NUM + r" MiB measured")
FALLBACK = re.compile(r"cannot run the planned ([\w-]+) convolution algorithm")
CHANGED = re.compile(r"convolutions: (\d+) of \d+ tasks changed algorithm")
# Since the trainers time cuDNN's algorithms: why they changed.
WHY = re.compile(r"tasks changed algorithm \([^)]*\): (\d+) refused, "
                 r"(\d+) measured faster")
# Since the trainers time cuDNN's graph-API engines: tasks that run one.
ENGINES = re.compile(r"convolution engines: (\d+) of \d+ tasks run cuDNN "
                     r"graph-API engines")
MEMORY = re.compile(r"memory: measured peak " + NUM + r" MiB \(libraries " +
                    NUM + r" MiB of a " + NUM + r" MiB reserve, trainer " +
                    NUM + r" MiB\) against the budget " + NUM +
                    r" MiB: (within|OVER); the CUDA context \(" + NUM +
                    r" MiB\)")
SETUP = re.compile(r"memory at start-up: libraries " + NUM + r" MiB, the "
                   r"plan's " + NUM + r" MiB allocated as " + NUM +
                   r" MiB; the iterations added " + NUM + r" MiB")
PEAK = re.compile(r"\bpeak\b[^\n]*?" + NUM + r" MiB", re.I)
SELF = re.compile(r"selfcheck: (\d+) checks, (\d+) mismatches")


def trainer(out, err=""):
    """windows: [{iteration, loss, samples_s}]; measured_mib, planned_mib,
    peak_mib, allocated_mib, iterations_added_mib where printed;
    algorithm_changes (algorithm_refused and algorithm_faster where the
    trainer says why); graph_engines (tasks on cuDNN's graph-API engines,
    where the trainer timed them); error (the first error)."""
    r = {"windows": [], "algorithm_changes": 0}
    for line in out.splitlines():
        m = ITER.match(line)
        if m:
            r["windows"].append({"iteration": int(m.group(1)),
                                 "loss": float(m.group(2)),
                                 "samples_s": float(m.group(3))})
            continue
        m = DONE.match(line)
        if m:
            r["planned_mib"] = float(m.group(4))
            r["measured_mib"] = float(m.group(5))
            continue
        m = SETUP.search(line)
        if m:
            r["allocated_mib"] = float(m.group(3))
            r["iterations_added_mib"] = float(m.group(4))
            continue
        m = MEMORY.search(line)
        if m:
            r["peak_mib"] = float(m.group(1))
            r["library_mib"] = float(m.group(2))
            r["reserve_mib"] = float(m.group(3))
            r["budget_mib"] = float(m.group(5))
            r["within_budget"] = m.group(6) == "within"
            r["context_mib"] = float(m.group(7))
            continue
        m = PEAK.search(line)
        if m:
            r["peak_mib"] = max(r.get("peak_mib", 0.0), float(m.group(1)))
    warned = 0
    for line in (out + "\n" + err).splitlines():
        if FALLBACK.search(line):
            warned += 1
        m = CHANGED.search(line)
        if m:
            r["algorithm_changes"] = max(r["algorithm_changes"],
                                         int(m.group(1)))
        m = WHY.search(line)
        if m:
            r["algorithm_refused"] = int(m.group(1))
            r["algorithm_faster"] = int(m.group(2))
        m = ENGINES.search(line)
        if m:
            r["graph_engines"] = int(m.group(1))
        m = MEMORY.search(line)
        if m and "peak_mib" not in r:
            r["peak_mib"] = float(m.group(1))
            r["library_mib"] = float(m.group(2))
            r["reserve_mib"] = float(m.group(3))
            r["budget_mib"] = float(m.group(5))
            r["within_budget"] = m.group(6) == "within"
            r["context_mib"] = float(m.group(7))
        if "error" not in r and line.startswith("trainer: error"):
            r["error"] = line[len("trainer: "):]
    r["algorithm_changes"] = max(r["algorithm_changes"], warned)
    return r


def steady_rate(windows):
    """Samples per second after the first logged window, which holds
    cuDNN's start-up; the only window's rate when there is one."""
    rates = [w["samples_s"] for w in windows]
    if not rates:
        return None
    later = rates[1:] or rates
    return sum(later) / len(later)


def rel_diff(got, want):
    """The largest |got - want| / |want| over the pairs; None when a side
    has fewer values than the other."""
    if not want or len(got) != len(want):
        return None
    return max(abs(g - w) / max(abs(w), 1e-30) for g, w in zip(got, want))


def selfcheck(log):
    m = SELF.search(log)
    return {"checks": int(m.group(1)) if m else None,
            "mismatches": int(m.group(2)) if m else None,
            "algorithm_fallbacks": len(FALLBACK.findall(log)) +
            len(re.findall(r"^NOT RUN ", log, re.M)),
            "no_device": "no CUDA device" in log}


def missing_libraries(ldd):
    return sorted({line.split()[0] for line in ldd.splitlines()
                   if "not found" in line})


if __name__ == "__main__":
    a = sys.argv[1:]
    read = lambda p: open(p, errors="replace").read()  # noqa: E731
    if len(a) in (2, 3) and a[0] == "trainer":
        r = trainer(read(a[1]), read(a[2]) if len(a) == 3 else "")
        r["steady_samples_s"] = steady_rate(r["windows"])
    elif len(a) == 2 and a[0] == "selfcheck":
        r = selfcheck(read(a[1]))
    else:
        sys.exit(__doc__)
    print(json.dumps(r, sort_keys=True))
