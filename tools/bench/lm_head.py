#!/usr/bin/env python3
"""The language-model head as written and fused with its loss (--fuse-head).

For decoders of several vocabularies and sequence lengths, prints the
liveness peak and the memory lower bound of both forms (memfit inspect),
the fused head's scratch chunk (its working memory beyond the head's input
and gradient), the predicted iteration time of both forms at the full
budget, and, where asked, both forms planned at a percentage of the head
as written's ideal peak with their overhead over its ideal time. Every
time is the cost model's prediction for --device, not a measurement.

Models: memfit's zoo (declared weights, fast to write) with --vocab and
--seq-len, and GPT decoders of tests/e2e/today_models.py exported by the
installed torch where the zoo has no such shape.

usage: tools/bench/lm_head.py [--memfit build/tools/memfit]
       [--device h100-sxm] [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# (label, source, batch, budgets): source ("zoo", name, vocab, seq) or
# ("gpt", vocab, T, d, heads, layers).
CASES = [
    ("GPT-2 124M, V 50,304, T 1024", ("zoo", "gpt2", 50304, 1024), 8,
     [50]),
    ("GPT d 256, 12 layers, V 50,304, T 256", ("gpt", 50304, 256, 256, 8, 12),
     8, [50]),
    ("GPT d 256, 24 layers, V 50,304, T 256", ("gpt", 50304, 256, 256, 8, 24),
     8, [50]),
    ("GPT-2 124M, V 32,000, T 1024", ("zoo", "gpt2", 32000, 1024), 8, []),
    ("GPT-2 124M, V 128,256, T 1024", ("zoo", "gpt2", 128256, 1024), 8, []),
    ("GPT-2 124M, V 256,000, T 1024", ("zoo", "gpt2", 256000, 1024), 8, []),
    ("GPT-2 124M, V 50,304, T 256", ("zoo", "gpt2", 50304, 256), 8, []),
    ("Llama-3-8B, V 128,256, T 4096", ("zoo", "llama3-8b", 0, 4096), 1, []),
    ("Llama-3-8B, V 128,256, T 8192", ("zoo", "llama3-8b", 0, 8192), 1, []),
]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr))
    return p.stdout


def export(memfit, source, path):
    if source[0] == "zoo":
        _, name, vocab, seq = source
        cmd = [memfit, "zoo", name, "-o", path, "--seq-len", str(seq), "--force"]
        if vocab:
            cmd += ["--vocab", str(vocab)]
        run(cmd)
        return
    _, vocab, T, d, heads, layers = source
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    import warnings
    import torch
    import today_models
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = today_models.GPT(vocab, T, d, heads, layers, tied=True)
    x = torch.zeros(1, T, dtype=torch.long)
    torch.onnx.export(model, x, path, opset_version=17, input_names=["x"],
                      output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def plan(memfit, onnx, batch, device, budget, fuse, out):
    policy = ["--policy", "ideal"] if budget == 100 else []
    run([memfit, "plan", onnx, "--batch", str(batch), "--device", device,
         "--optimizer", "adamw", "--budget", "%d%%" % budget,
         "--fuse-head=" + fuse, "--bound=false", "--quiet", "--force", "-o", out,
         *policy])
    j = json.load(open(os.path.join(out, "plan.json")))
    return j


def gib(b):
    return "%.2f GiB" % (b / 2**30) if b >= 2**30 else "%.1f MiB" % (b / 2**20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfit", default=os.path.join(ROOT, "build", "tools",
                                                      "memfit"))
    ap.add_argument("--device", default="h100-sxm")
    ap.add_argument("--quick", action="store_true",
                    help="the first case only")
    a = ap.parse_args()
    cases = CASES[:1] if a.quick else CASES
    memory, timing = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for label, source, batch, budgets in cases:
            print("lm_head: " + label, file=sys.stderr, flush=True)
            onnx = os.path.join(tmp, "m.onnx")
            export(a.memfit, source, onnx)
            ins = json.loads(run([a.memfit, "inspect", onnx, "--batch",
                                  str(batch), "--optimizer", "adamw",
                                  "--json"]))
            h = ins["head"]
            pw, pf = h["written_liveness_peak_bytes"], h["fused_liveness_peak_bytes"]
            lw, lf = h["written_lower_bound_bytes"], h["fused_lower_bound_bytes"]
            times = {}
            for fuse in ("false", "true"):
                j = plan(a.memfit, onnx, batch, a.device, 100, fuse,
                         os.path.join(tmp, "ideal-" + fuse))
                times[fuse] = j["summary"]["planned_seconds"]
                if fuse == "true":
                    scratch = j["fused_head"]["scratch_bytes"]
                    rows = j["fused_head"]["chunk_rows"]
            memory.append((label, batch, pw, pf, lw, lf, rows, scratch,
                           times["false"], times["true"]))
            for pct in budgets:
                # Auto plans both forms at the head as written's bytes.
                j = plan(a.memfit, onnx, batch, a.device, pct, "auto",
                         os.path.join(tmp, "auto"))
                jw = plan(a.memfit, onnx, batch, a.device, pct, "false",
                          os.path.join(tmp, "written"))
                ideal = times["false"]
                timing.append((label, pct, jw["summary"]["planned_seconds"],
                               j["summary"]["planned_seconds"], ideal,
                               "fused_head" in j))
    print("Memory and predicted time at batch B, AdamW (inspect; plan at "
          "100%%, --device %s):\n" % a.device)
    print("| model | B | liveness peak as written | fused | lower bound as "
          "written | fused | chunk rows | scratch | predicted ms as written "
          "| fused |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (label, b, pw, pf, lw, lf, rows, scratch, tw, tf) in memory:
        print("| %s | %d | %s | %s (-%.1f%%) | %s | %s | %d | %s | %.2f | "
              "%.2f |" % (label, b, gib(pw), gib(pf), 100 * (pw - pf) / pw,
                          gib(lw), gib(lf), rows, gib(scratch), tw * 1e3,
                          tf * 1e3))
    if timing:
        print("\nAt a percentage of the head as written's ideal peak "
              "(overhead over its ideal time):\n")
        print("| model | budget | as written | default (auto) | fused kept |")
        print("|---|---|---|---|---|")
        for (label, pct, tw, ta, ideal, fused) in timing:
            print("| %s | %d%% | %.2f ms (+%.1f%%) | %.2f ms (+%.1f%%) | %s |" %
                  (label, pct, tw * 1e3, 100 * (tw / ideal - 1), ta * 1e3,
                   100 * (ta / ideal - 1), "yes" if fused else "no"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
