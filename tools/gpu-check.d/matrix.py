"""Writes a pack's matrix.json: what tools/gpu-check's runner runs, with
each trainer's plan figures (report.py sets the measured ones beside them).

usage: matrix.py TRAINERS.tsv OUT.json MEMFIT_COMMIT DEVICE_MODEL DRY_RUN
TRAINERS.tsv: id, model, precision, budget %, batch, plan.json per line.
"""
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

# Training settings of the comparison with PyTorch.
STEPS = 4
LR = 0.01
PLAN = ("planned_bytes", "resident_bytes", "arena_bytes", "ideal_peak_bytes",
        "overhead", "planned_seconds", "ideal_seconds")


def main():
    tsv, out, commit, device, dry = sys.argv[1:6]
    trainers, used = [], {}
    with open(tsv) as f:
        for line in f:
            tid, model, prec, budget, batch, plan_path, *err = \
                line.rstrip("\n").split("\t")
            row = {"id": tid, "model": model, "precision": prec,
                   "budget_pct": int(budget), "batch": int(batch)}
            used[model] = int(batch)
            if plan_path == "-":
                # memfit planned none: the runner reports it, runs nothing
                trainers.append(dict(row, plan=None, error="not planned: " +
                                     (err[0].strip() if err else "?")))
                continue
            with open(plan_path) as pf:
                plan = json.load(pf)
            if plan.get("schema_version") != 1:
                sys.exit("matrix.py: %s: plan.json schema %s, expected 1" %
                         (plan_path, plan.get("schema_version")))
            p = {k: plan["summary"][k] for k in PLAN}
            # The device budget holds the libraries' reserve beside the
            # plan (docs/memory.md); older plans have none.
            p.update(budget_bytes=plan["budget_bytes"],
                     library_reserve_bytes=plan.get("library_reserve_bytes", 0),
                     sub_batch=plan["sub_batch"])
            trainers.append(dict(row, dir="trainers/" + tid, plan=p))
    m = {name: {"batch": b, "kind": models.MODELS[name][0],
                "tokens_per_sample": models.tokens_per_sample(name)}
         for name, b in used.items()}
    with open(out, "w") as f:
        json.dump({"schema": 1, "steps": STEPS, "lr": LR, "models": m,
                   "trainers": trainers,
                   "pack": {"memfit_commit": commit, "device_model": device,
                            "created": datetime.date.today().isoformat(),
                            "dry_run": dry == "1"}}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
