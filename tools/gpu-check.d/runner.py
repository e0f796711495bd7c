"""The GPU side of tools/gpu-check: runs an unpacked pack and writes
results.json (report.py turns it into docs/benchmarks/gpu.md).

usage: runner.py PACK_DIR OUT_DIR [--iterations N] [--log-every N]
                 [--models A,B] [--precisions P,Q] [--timeout S]

--models and --precisions run only those trainers of the pack (a lease
too short for the whole matrix takes it in parts; report.py merges the
results files of different models).
--timeout bounds each trainer process, so one that hangs costs S seconds,
not the lease.

Needs the NVIDIA driver, and a Python with torch (CUDA), numpy and onnx.
cuDNN, cuBLAS and NCCL come from PyTorch's nvidia wheels; the pack's lib/
has the rest (protobuf, onnx_proto, OpenBLAS).
"""
import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parse  # noqa: E402


def library_path(pack):
    """The pack's lib/, then the nvidia wheels' library folders."""
    dirs = [os.path.join(pack, "lib")]
    try:
        import nvidia
        for root in nvidia.__path__:
            dirs += sorted(glob.glob(os.path.join(root, "*", "lib")))
    except ImportError:
        print("runner: no nvidia Python package; cuDNN and cuBLAS must be on "
              "the system's library path", file=sys.stderr)
    old = os.environ.get("LD_LIBRARY_PATH")
    return ":".join(dirs + ([old] if old else []))


class MemoryWatch:
    """The most device memory nvidia-smi shows for compute processes while
    a child runs (the trainer's context included, which its own count
    leaves out). None without nvidia-smi."""

    def __init__(self):
        self.peak = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        q = ["nvidia-smi", "--query-compute-apps=used_memory",
             "--format=csv,noheader,nounits"]
        while not self._stop.is_set():
            try:
                out = subprocess.run(q, capture_output=True, text=True,
                                     timeout=10).stdout
                used = sum(float(v) for v in out.split() if v.strip())
                self.peak = max(self.peak or 0.0, used)
            except (OSError, ValueError, subprocess.SubprocessError):
                return
            self._stop.wait(0.25)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run(cmd, env=None, timeout=900, log=None, watch=False):
    """(exit status, stdout, stderr, nvidia-smi peak MiB)."""
    t = time.time()
    with MemoryWatch() if watch else _Null() as w:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                               timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = 124, _text(e.stdout), _text(e.stderr) + "\ntimed out"
    if log:
        with open(log, "w") as f:
            f.write("$ %s\n%s\n--- stderr\n%s" % (" ".join(cmd), out, err))
    what = " ".join(os.path.basename(c) for c in cmd[:4])
    print("  %s: rc %d, %.0f s" % (what, rc, time.time() - t), flush=True)
    return rc, out, err, (w.peak if watch else None)


class _Null:
    peak = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def _text(b):
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def gpu_info():
    q = ["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
         "--format=csv,noheader,nounits"]
    try:
        line = subprocess.run(q, capture_output=True, text=True,
                              timeout=30).stdout.splitlines()[0]
        name, mem, driver = [s.strip() for s in line.split(",")]
        return {"name": name, "memory_mib": float(mem), "driver": driver}
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return {"name": "unknown", "memory_mib": None, "driver": None}


def torch_json(args, log):
    rc, out, err, _ = run([sys.executable, "-u",
                           os.path.join(HERE, "torch_side.py")] + args,
                          log=log, timeout=1800)
    lines = [s for s in out.splitlines() if s.startswith("{")]
    if rc or not lines:
        return {"error": (err.strip().splitlines() or ["rc %d" % rc])[-1]}
    return json.loads(lines[-1])


def weights_of(path, names):
    import numpy as np
    if path.endswith(".npz"):
        z = np.load(path)
        return {k: np.asarray(z[k], dtype=np.float64) for k in names if k in z}
    import onnx
    from onnx import numpy_helper
    return {i.name: numpy_helper.to_array(i).astype(np.float64)
            for i in onnx.load(path).graph.initializer if i.name in names}


def distance(a, b):
    """The L2 norm of the difference over every parameter both have."""
    import numpy as np
    keys = sorted(set(a) & set(b))
    if not keys:
        return None
    return float(np.sqrt(sum(float(np.sum((a[k] - b[k].reshape(a[k].shape))
                                          ** 2)) for k in keys)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pack")
    ap.add_argument("out")
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--models", default="")
    ap.add_argument("--precisions", default="")
    ap.add_argument("--timeout", type=int, default=900)
    a = ap.parse_args()
    import numpy as np
    import torch
    import models
    pack, out = os.path.abspath(a.pack), os.path.abspath(a.out)
    for d in ("logs", "data", "models", "trained"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    with open(os.path.join(pack, "matrix.json")) as f:
        matrix = json.load(f)
    if a.models:
        keep = a.models.split(",")
        unknown = [m for m in keep if m not in matrix["models"]]
        if unknown:
            sys.exit("runner: --models: %s not in the pack (it has %s)" %
                     (", ".join(unknown), ", ".join(matrix["models"])))
        matrix["models"] = {k: v for k, v in matrix["models"].items()
                            if k in keep}
        matrix["trainers"] = [t for t in matrix["trainers"]
                              if t["model"] in keep]
    if a.precisions:
        keep = a.precisions.split(",")
        matrix["trainers"] = [t for t in matrix["trainers"]
                              if t["precision"] in keep]
        if not matrix["trainers"]:
            sys.exit("runner: --precisions: no trainer of the pack is in %s"
                     % a.precisions)
    env = dict(os.environ, LD_LIBRARY_PATH=library_path(pack))
    steps, lr = matrix["steps"], matrix["lr"]
    res = {"schema": 1, "date": datetime.date.today().isoformat(),
           "gpu": gpu_info(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "pack": matrix["pack"],
           "iterations": a.iterations, "log_every": a.log_every,
           "steps": steps, "lr": lr, "models": {}, "trainers": []}
    log = lambda name: os.path.join(out, "logs", name + ".log")  # noqa: E731

    print("== selfcheck", flush=True)
    rc, so, se, _ = run([os.path.join(pack, "bin", "memfit_cuda_selfcheck")],
                        env=env, log=log("selfcheck"))
    res["selfcheck"] = dict(parse.selfcheck(so + se), rc=rc)
    # The recipes take seconds: before the models, so a short lease has them.
    print("== trainer recipes", flush=True)
    import recipes
    res["recipes"] = recipes.run_all(pack, out, env, min(a.timeout, 120))

    names = {}
    for name, m in matrix["models"].items():
        print("== %s: data, weights, PyTorch" % name, flush=True)
        B = m["batch"]
        x, y = models.example(name, B * steps, seed=1)
        xp = os.path.join(out, "data", name + "-x.npy")
        yp = os.path.join(out, "data", name + "-y.npy")
        np.save(xp, x)
        np.save(yp, y)
        filled = os.path.join(out, "models", name + ".onnx")
        skel = os.path.join(pack, "models", name + ".onnx")
        models.fill(name, skel, skel + ".params.json", filled)
        with open(skel + ".params.json") as f:
            names[name] = set(json.load(f)["parameters"])
        r = {"batch": B, "tokens_per_sample": m.get("tokens_per_sample"),
             "data": (xp, yp), "filled": filled, "torch": {}, "ref": {}}
        precs = sorted({t["precision"] for t in matrix["trainers"]
                        if t["model"] == name})
        for prec in precs:
            r["torch"][prec] = torch_json(
                ["speed", name, str(B), prec, str(a.iterations)],
                log("torch-speed-%s-%s" % (name, prec)))
            npz = os.path.join(out, "trained", "torch-%s-%s-cuda.npz" %
                               (name, prec))
            r["ref"][prec] = dict(torch_json(
                ["ref", name, filled, xp, yp, str(B), str(steps), str(lr),
                 prec, "cuda", npz], log("torch-ref-%s-%s" % (name, prec))),
                npz=npz)
        if "fp32" in precs:
            npz = os.path.join(out, "trained", "torch-%s-fp32-cpu.npz" % name)
            cpu = torch_json(["ref", name, filled, xp, yp, str(B), str(steps),
                              str(lr), "fp32", "cpu", npz],
                             log("torch-ref-%s-cpu" % name))
            gpu = r["ref"]["fp32"]
            if "error" not in cpu and "error" not in gpu:
                n = names[name]
                r["torch_cpu_gpu_weights"] = distance(
                    weights_of(npz, n), weights_of(gpu["npz"], n))
                r["torch_cpu_gpu_losses"] = parse.rel_diff(
                    cpu["losses"][:2], gpu["losses"][:2])
            r["ref"]["cpu"] = cpu
        res["models"][name] = r
        # Each model's trainers right after its PyTorch runs: a lease that
        # ends early loses the last models whole, not every trainer.
        for t in [t for t in matrix["trainers"] if t["model"] == name]:
            tid = t["id"]
            print("== %s" % tid, flush=True)
            row = {k: t[k] for k in ("id", "model", "precision", "budget_pct",
                                     "batch", "plan")}
            if t.get("error"):
                row["error"] = t["error"]
                res["trainers"].append(row)
                continue
            exe = os.path.join(pack, t["dir"], "trainer")
            missing = parse.missing_libraries(
                subprocess.run(["ldd", exe], capture_output=True, text=True,
                               env=env).stdout)
            if missing:
                row["error"] = "libraries not found: " + ", ".join(missing)
                res["trainers"].append(row)
                continue
            trained = os.path.join(out, "trained", tid + ".onnx")
            rc, so, se, _ = run([exe, "--model", r["filled"], "--data",
                                 r["data"][0], "--labels", r["data"][1],
                                 "--iterations", str(steps), "--log-every", "1",
                                 "--lr", str(lr), "--momentum", "0.9",
                                 "--save", trained, "--conv-algos",
                                 log(tid + "-conv-algos")[:-4] + ".json"],
                                env=env,
                                log=log(tid + "-ref"), timeout=a.timeout)
            got = parse.trainer(so, se)
            row["losses"] = [w["loss"] for w in got["windows"]]
            row["ref_rc"] = rc
            ref = r["ref"].get(t["precision"], {})
            if rc == 0 and "losses" in ref:
                row["loss_rel_diff"] = parse.rel_diff(row["losses"][:2],
                                                      ref["losses"][:2])
                n = names[name]
                row["weight_diff"] = distance(weights_of(trained, n),
                                              weights_of(ref["npz"], n))
            rc2, so, se, peak = run([exe, "--model", r["filled"], "--synthetic",
                                     "--iterations", str(a.iterations),
                                     "--log-every", str(a.log_every)], env=env,
                                    log=log(tid + "-speed"), watch=True,
                                    timeout=a.timeout)
            got = parse.trainer(so, se)
            row.update(rc=rc2, nvidia_smi_mib=peak,
                       samples_s=parse.steady_rate(got["windows"]),
                       measured_mib=got.get("measured_mib"),
                       planned_mib=got.get("planned_mib"),
                       peak_mib=got.get("peak_mib"),
                       library_mib=got.get("library_mib"),
                       allocated_mib=got.get("allocated_mib"),
                       iterations_added_mib=got.get("iterations_added_mib"),
                       context_mib=got.get("context_mib"),
                       trainer_within_budget=got.get("within_budget"),
                       algorithm_changes=got["algorithm_changes"],
                       algorithm_refused=got.get("algorithm_refused"),
                       algorithm_faster=got.get("algorithm_faster"),
                       graph_engines=got.get("graph_engines"))
            if rc or rc2:
                row["error"] = got.get("error") or "exit status %d" % (rc or rc2)
            res["trainers"].append(row)
            with open(os.path.join(out, "results.json"), "w") as f:
                json.dump(res, f, indent=1, sort_keys=True)

    for m in res["models"].values():
        for k in ("data", "filled"):
            m.pop(k, None)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
        f.write("\n")
    print("results: %s" % os.path.join(out, "results.json"))


if __name__ == "__main__":
    main()
