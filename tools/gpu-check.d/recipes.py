"""Trainer recipes on the GPU against the CPU emulation.

usage: recipes.py prepare MEMFIT WORK STAGE [--dry-run]
       recipes.py compare CPU.log GPU.log

The model matrix times whole networks; these run what a training recipe
adds around them (tests/cli/train_recipe.sh holds each to PyTorch on the
CPU emulation): AdamW with a cosine schedule and clipping over a token
stream with validation, gradient accumulation, BatchNorm accumulated and
validated through the evaluation program on uint8 images normalized as
they are read, Dropout's evaluation pass-through, random resized crops
with flips. `prepare` (where memfit builds) writes the data, compiles the
zoo models, runs each recipe on a CPU-emulation trainer for its reference
log, and builds the CUDA trainer (not with --dry-run) into STAGE, which the
pack carries as recipes/. `runner.py` runs the CUDA trainers there with the
same flags and `compare`s their losses, gradient norms and validation
losses with the emulation's: the same arithmetic in another order, so
they agree to about float rounding.
"""
import os
import re
import shutil
import subprocess
import sys

IMAGENET = "0.485,0.456,0.406/0.229,0.224,0.225"
LM = ["--tokens", "train.bin", "--seq-len", "16", "--lr", "0.01", "--eps",
      "1e-3", "--weight-decay", "0.1", "--no-decay", "auto", "--lr-schedule",
      "cosine", "--warmup-steps", "2", "--min-lr", "0.001",
      "--clip-grad-norm", "1", "--iterations", "8", "--log-every", "1"]
IMG = ["--data", "img_u8.npy", "--labels", "lab.npy", "--normalize", IMAGENET,
       "--iterations", "4", "--lr", "0.05", "--log-every", "1"]

# name: (zoo model, memfit compile flags, trainer flags)
RECIPES = {
    "lm-val": ("gpt2-tiny", ["--batch", "4", "--optimizer", "adamw",
                             "--clip-grad-norm", "1"],
               LM + ["--val-tokens", "val.bin", "--val-every", "4"]),
    "lm-accumulate": ("gpt2-tiny", ["--batch", "2", "--accumulate", "2",
                                    "--optimizer", "adamw",
                                    "--clip-grad-norm", "1"], LM),
    "bn-accumulate": ("tiny-bn", ["--batch", "4", "--accumulate", "2"], IMG),
    "bn-val": ("tiny-bn", ["--batch", "16", "--budget", "70%"],
               IMG + ["--val-data", "val_u8.npy", "--val-labels",
                      "val_lab.npy", "--val-every", "2"]),
    "dropout-val": ("tiny-dropout", ["--batch", "8"],
                    ["--data", "mlp_x.npy", "--labels", "mlp_y.npy",
                     "--val-data", "mlp_vx.npy", "--val-labels",
                     "mlp_vy.npy", "--iterations", "5", "--lr", "0.1",
                     "--log-every", "1"]),
    "resized-crop": ("tiny-cnn", ["--batch", "8"],
                     ["--data", "img12.npy", "--labels", "lab.npy",
                      "--normalize", IMAGENET, "--random-resized-crop",
                      "--hflip", "--iterations", "6", "--lr", "0.05",
                      "--log-every", "1"]),
}


def write_data(d):
    import numpy as np
    r = np.random.default_rng(35)
    for name, count in (("train.bin", 3000), ("val.bin", 700)):
        r.integers(0, 61, count).astype(np.uint16).tofile(
            os.path.join(d, name))
    save = lambda n, a: np.save(os.path.join(d, n), a)  # noqa: E731
    save("img_u8.npy", r.integers(0, 256, (32, 3, 8, 8)).astype(np.uint8))
    save("img12.npy", r.integers(0, 256, (32, 3, 12, 12)).astype(np.uint8))
    save("lab.npy", r.integers(0, 10, 32).astype(np.int64))
    save("val_u8.npy", r.integers(0, 256, (21, 3, 8, 8)).astype(np.uint8))
    save("val_lab.npy", r.integers(0, 10, 21).astype(np.int64))
    save("mlp_x.npy", r.standard_normal((40, 16)).astype(np.float32))
    save("mlp_y.npy", r.integers(0, 10, 40).astype(np.int64))
    save("mlp_vx.npy", r.standard_normal((13, 16)).astype(np.float32))
    save("mlp_vy.npy", r.integers(0, 10, 13).astype(np.int64))


def sh(cmd, log, cwd=None):
    with open(log, "w") as f:
        if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT,
                          cwd=cwd).returncode:
            f.flush()
            sys.stderr.write(open(log).read()[-3000:])
            sys.exit("recipes: failed: %s (%s)" % (" ".join(cmd), log))


def build(src, out, backend, log):
    jobs = os.environ.get("MEMFIT_JOBS", "2")
    sh(["cmake", "-S", src, "-B", out, "-DMEMFIT_BACKEND=" + backend], log)
    sh(["cmake", "--build", out, "-j", jobs], log + ".build")
    return os.path.join(out, "trainer")


def prepare(memfit, work, stage, dry):
    for d in (work, stage):
        os.makedirs(d, exist_ok=True)
    for sub in ("bin", "cpu"):
        os.makedirs(os.path.join(stage, sub), exist_ok=True)
    write_data(stage)
    for name, (zoo, flags, args) in RECIPES.items():
        print("== recipe %s" % name, file=sys.stderr, flush=True)
        model = os.path.join(stage, name + ".onnx")
        src = os.path.join(work, name)
        sh([memfit, "zoo", zoo, "-o", model],
           os.path.join(work, name + ".zoo"))
        sh([memfit, "compile", model, "-o", src, "--quiet", "--force",
            "--refine=false"] + (["--budget", "100%"]
                                 if "--budget" not in flags else []) + flags,
           os.path.join(work, name + ".compile"))
        cpu = build(src, os.path.join(work, name + "-cpu"), "cpu",
                    os.path.join(work, name + ".cpu"))
        sh([cpu, "--model", name + ".onnx"] + args,
           os.path.join(stage, "cpu", name + ".log"), cwd=stage)
        if not dry:
            cuda = build(src, os.path.join(work, name + "-cuda"), "cuda",
                         os.path.join(work, name + ".cuda"))
            shutil.copy(cuda, os.path.join(stage, "bin", name))
            subprocess.run(["strip", "--strip-debug",
                            os.path.join(stage, "bin", name)])


def parse(text):
    """{step: loss}, {step: grad norm}, {step: validation loss}."""
    def grab(pat):
        return {int(m.group(1)): float(m.group(2))
                for m in re.finditer(pat, text, re.M)}
    return (grab(r"^iteration (\d+)\s+loss (\S+)"),
            grab(r"^iteration (\d+)\s.*grad norm (\S+)"),
            grab(r"^validation after step (\d+)\s+val loss (\S+)"))


def compare(cpu_text, gpu_text):
    """The largest relative difference of each series over the steps both
    logged (None where neither has it), and whether the GPU logged every
    step the CPU did."""
    out, complete = {}, True
    for key, c, g in zip(("loss", "grad_norm", "val_loss"), parse(cpu_text),
                         parse(gpu_text)):
        if not c:
            out[key] = None
            continue
        complete = complete and set(c) <= set(g)
        both = sorted(set(c) & set(g))
        out[key] = max((abs(g[k] - c[k]) / max(abs(c[k]), 1e-30)
                        for k in both), default=None)
    out["complete"] = complete
    return out


def run_all(pack, out, env, timeout):
    """Runs each recipe's CUDA trainer in pack/recipes; rows for
    results.json."""
    d = os.path.join(pack, "recipes")
    rows = []
    if not os.path.isdir(d):
        return rows
    for name, (_, _, args) in RECIPES.items():
        exe = os.path.join(d, "bin", name)
        if not os.path.exists(exe):
            continue
        log = os.path.join(out, "logs", "recipe-%s.log" % name)
        with open(log, "w") as f:
            try:
                rc = subprocess.run([exe, "--model", name + ".onnx"] + args,
                                    stdout=f, stderr=subprocess.STDOUT,
                                    cwd=d, env=env, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                rc = -1
        row = dict(name=name, rc=rc)
        row.update(compare(open(os.path.join(d, "cpu", name + ".log")).read(),
                           open(log).read()))
        rows.append(row)
        print("  recipe %s: rc %d, loss %s" % (name, rc, row.get("loss")),
              flush=True)
    return rows


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "prepare":
        prepare(a[1], a[2], a[3], "--dry-run" in a[4:])
    elif len(a) == 3 and a[0] == "compare":
        print(compare(open(a[1]).read(), open(a[2]).read()))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
