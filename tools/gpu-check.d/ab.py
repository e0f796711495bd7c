"""A change against its baseline in one run on one GPU: the trainers two
packs share, run alternately on synthetic data.

usage: ab.py PACK_A PACK_B OUT_DIR [--trainers ID,ID] [--iterations N]
             [--log-every N] [--repeats R] [--timeout S]

PACK_A and PACK_B are unpacked tools/gpu-check packs of the same matrix
built from two trees (the baseline and the change). Each trainer both have
runs R times from each, A then B, so that clocks and other tenants drift
over both alike; a rate is the samples per second after the first logged
window (cuDNN's start-up), the median over the repeats. Timings from
different GPUs do not compare: run both in one call. Writes OUT_DIR/ab.json
and ab.md (a table: both rates and the change) and prints the table; the
trainers' logs go to OUT_DIR/logs/.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parse  # noqa: E402


def trainers_of(pack):
    with open(os.path.join(pack, "matrix.json")) as f:
        m = json.load(f)
    return {t["id"]: t for t in m["trainers"] if not t.get("error")}


def model_for(pack, name, out):
    """The pack's model with PyTorch's seed-0 parameters where this Python
    has PyTorch and knows the model, else the pack's zeroed one (speed
    hardly depends on the values)."""
    skel = os.path.join(pack, "models", name + ".onnx")
    filled = os.path.join(out, "models", name + ".onnx")
    if os.path.exists(filled):
        return filled
    try:
        import models
        if name in models.MODELS:
            os.makedirs(os.path.dirname(filled), exist_ok=True)
            models.fill(name, skel, skel + ".params.json", filled)
            return filled
    except ImportError:
        pass
    return skel


def rate(exe, model, a, env, log):
    cmd = [exe, "--model", model, "--synthetic", "--iterations",
           str(a.iterations), "--log-every", str(a.log_every)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=a.timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out"
    with open(log, "w") as f:
        f.write("$ %s\n%s\n--- stderr\n%s" % (" ".join(cmd), out, err))
    if rc:
        return None
    return parse.steady_rate(parse.trainer(out, err)["windows"])


def table(rows):
    o = ["| trainer | A | B | change |", "|---|---|---|---|"]
    for r in rows:
        a, b = r["a"], r["b"]
        change = "%+.1f%%" % (100.0 * (b / a - 1)) if a and b else "-"
        o.append("| %s | %s | %s | %s |" % (
            r["id"], "%.1f" % a if a else "failed",
            "%.1f" % b if b else "failed", change))
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("out")
    ap.add_argument("--trainers", default="")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    ta, tb = trainers_of(a.a), trainers_of(a.b)
    ids = [i for i in tb if i in ta]
    if a.trainers:
        want = a.trainers.split(",")
        missing = [i for i in want if i not in ids]
        if missing:
            sys.exit("ab: --trainers: %s not in both packs (both have %s)" %
                     (", ".join(missing), ", ".join(ids) or "none"))
        ids = want
    if not ids:
        sys.exit("ab: the packs share no trainer")
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    import runner
    env = dict(os.environ, LD_LIBRARY_PATH=runner.library_path(a.b))
    rows = []
    for tid in ids:
        model = model_for(a.b, tb[tid]["model"], a.out)
        got = {"a": [], "b": []}
        for k in range(a.repeats):
            for side, pack in (("a", a.a), ("b", a.b)):
                exe = os.path.join(pack, tb[tid]["dir"], "trainer")
                log = os.path.join(a.out, "logs",
                                   "%s-%s-%d.log" % (side, tid, k))
                got[side].append(rate(exe, model, a, env, log))
        row = {"id": tid}
        for side in ("a", "b"):
            ok = [v for v in got[side] if v is not None]
            row[side] = statistics.median(ok) if len(ok) == a.repeats \
                else None
            row[side + "_runs"] = got[side]
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
    res = {"a": a.a, "b": a.b, "iterations": a.iterations,
           "repeats": a.repeats, "trainers": rows}
    with open(os.path.join(a.out, "ab.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(a.out, "ab.md"), "w") as f:
        f.write(table(rows))
    sys.stdout.write(table(rows))


if __name__ == "__main__":
    main()
