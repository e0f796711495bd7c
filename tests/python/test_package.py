"""The memfit Python package (tools/python) against the memfit executable.

Run by ctest as `python_package` with PYTHONPATH at the build tree's
package and MEMFIT the executable. A plan made from Python must be the
CLI's byte for byte: both run the same commands, and a second call in the
same process must not see the first's options.
"""
import filecmp
import json
import os
import subprocess

import numpy as np
import pytest

import memfit

MEMFIT = os.environ.get("MEMFIT", "memfit")


def cli(*args, check=True):
    return subprocess.run([MEMFIT, *map(str, args)], capture_output=True,
                          text=True, check=check)


@pytest.fixture(scope="module")
def gpt2_tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "gpt2-tiny.onnx"
    cli("zoo", "gpt2-tiny", "-o", path)
    return path


def same_files(a, b, names=("plan.json", "trace.json", "report.html")):
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_plan_is_the_cli_plan_byte_for_byte(gpt2_tiny, tmp_path):
    cli("plan", gpt2_tiny, "--batch", 4, "--budget", "60%", "--optimizer",
        "adamw", "-o", tmp_path / "cli")
    plan = memfit.plan(gpt2_tiny, out_dir=tmp_path / "py", batch=4,
                       budget="60%", optimizer="adamw")
    same_files(tmp_path / "cli", tmp_path / "py")
    assert plan.feasible
    assert plan.summary.planned_bytes == plan.planned_bytes
    assert plan.planned_bytes <= plan.budget_bytes
    assert plan.batch == 4 and plan.sub_batch * plan.sub_batches >= 4


def test_a_second_call_starts_from_the_defaults(gpt2_tiny, tmp_path):
    # Options of an earlier call (another policy, a forced sub-batch) must
    # not carry over into a call that does not give them.
    # (a bool flag set once could not be unset in one process: each call
    # runs in a fork of it).
    first = memfit.plan(gpt2_tiny, batch=4, budget="60%", policy="chen-sqrt",
                        sub_batch=2, quiet=True)
    # Refinement off in both (each refined plan takes seconds): the
    # planner's search is not what this tests.
    assert first.text == "" and first.policy == "chen-sqrt"
    cli("plan", gpt2_tiny, "--batch", 4, "--budget", "60%", "--refine=false",
        "-o", tmp_path / "cli")
    second = memfit.plan(gpt2_tiny, out_dir=tmp_path / "py", batch=4,
                         budget="60%", refine=False)
    same_files(tmp_path / "cli", tmp_path / "py")
    assert "feasible: yes" in second.text
    assert second.policy.startswith("memfit")


def test_the_plan_in_memory(gpt2_tiny):
    plan = memfit.plan(gpt2_tiny, batch=4, budget="60%", refine=False)
    assert plan.path is not None and not os.path.exists(plan.path)
    assert "feasible: yes" in str(plan)
    decisions = plan.decisions()
    assert len(decisions) == len(plan.blocks) and "input" in decisions
    times, used = plan.memory_timeline()
    assert times == sorted(times)
    s = plan.summary
    assert max(used) <= s.resident_bytes + s.arena_bytes
    assert used[-1] == s.resident_bytes  # everything left the arena
    assert plan._repr_html_().startswith("<iframe srcdoc=")
    assert plan.trace["otherData"]["model"] == "gpt2-tiny"
    with pytest.raises(AttributeError, match="no field 'nonesuch'"):
        plan.nonesuch


def test_plot_memory(gpt2_tiny, tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    plan = memfit.plan(gpt2_tiny, batch=4, budget="60%", refine=False)
    ax = plan.plot_memory()
    ax.figure.savefig(tmp_path / "memory.png")
    assert (tmp_path / "memory.png").stat().st_size > 1000


def test_inspect_and_compare(gpt2_tiny):
    info = memfit.inspect(gpt2_tiny, batch=4)
    want = json.loads(cli("inspect", gpt2_tiny, "--batch", 4, "--json").stdout)
    assert info.to_dict() == want
    assert info.lower_bound_bytes <= info.liveness_peak_bytes
    table = memfit.compare(gpt2_tiny, batch=4, budgets=["100%", "60%"],
                           policies="memfit,chen-sqrt")
    assert [b.label for b in table.budgets] == ["100%", "60%"]
    assert len(table.cells) == 4
    memfit_cells = [c for c in table.cells if c.policy == "memfit"]
    assert all(c.feasible for c in memfit_cells)


def test_compile_writes_the_cli_trainer(gpt2_tiny, tmp_path):
    # Refinement off (test_plan_is_the_cli_plan_byte_for_byte refines).
    cli("compile", gpt2_tiny, "--batch", 4, "--budget", "60%",
        "--refine=false", "-o", tmp_path / "cli")
    out = memfit.compile(gpt2_tiny, tmp_path / "py", batch=4, budget="60%",
                         refine=False)
    assert out.plan.feasible and out.out_dir == str(tmp_path / "py")
    cmp = filecmp.dircmp(tmp_path / "cli", tmp_path / "py")
    assert not cmp.left_only and not cmp.right_only
    same_files(tmp_path / "cli", tmp_path / "py")
    for name in os.listdir(tmp_path / "cli" / "src"):
        assert filecmp.cmp(tmp_path / "cli" / "src" / name,
                           tmp_path / "py" / "src" / name, shallow=False), name


def test_errors_are_exceptions_with_the_cli_message(gpt2_tiny, tmp_path):
    with pytest.raises(memfit.Infeasible) as e:
        memfit.plan(gpt2_tiny, batch=4, budget="1KiB")
    want = cli("plan", gpt2_tiny, "--batch", 4, "--budget", "1KiB",
               check=False)
    assert want.returncode == 1
    assert want.stderr.strip() == "memfit: error: " + e.value.message
    assert isinstance(e.value, memfit.UserError)

    with pytest.raises(memfit.UserError, match="--budgett.*--budget"):
        memfit.plan(gpt2_tiny, batch=4, budgett="1GiB")
    with pytest.raises(memfit.UserError, match="no-such.onnx"):
        memfit.plan(tmp_path / "no-such.onnx", batch=4)
    with pytest.raises(memfit.UserError, match="compile needs out_dir"):
        memfit.compile(gpt2_tiny, batch=4)
    with pytest.raises(memfit.UserError, match="torch.nn.Module"):
        memfit.plan(42, batch=4)
    # A failed plan leaves no directory behind.
    with pytest.raises(memfit.Infeasible):
        memfit.plan(gpt2_tiny, out_dir=tmp_path / "bad", batch=4, budget="1KiB")
    assert not (tmp_path / "bad").exists()


torch = pytest.importorskip("torch")


class SmallNet(torch.nn.Module):
    """Convolution, BatchNorm, Dropout and a head: what the export must keep
    in its training form."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.drop = torch.nn.Dropout(0.1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        x = x.mean(dim=(2, 3))
        return self.fc(self.drop(x))


def test_a_torch_module(tmp_path):
    torch.manual_seed(0)
    model = SmallNet().eval()
    example = torch.randn(2, 3, 8, 8)
    info = memfit.inspect(model, example, batch=16)
    assert info.parameters == sum(p.numel() for p in model.parameters())
    assert info.batch == 16
    assert not model.training  # the caller's mode is restored
    # The example's batch when none is given.
    assert memfit.inspect(model, example).batch == 2
    plan = memfit.plan(model, example, batch=16, budget="60%")
    assert plan.feasible
    # The same export planned by the CLI gives the same plan.
    path = tmp_path / "small.onnx"
    memfit.export(model, example, path)
    cli("plan", path, "--batch", 16, "--budget", "60%", "-o", tmp_path / "cli")
    want = json.loads((tmp_path / "cli" / "plan.json").read_text())
    got = plan.to_dict()
    assert got.pop("model_file") != want.pop("model_file")
    assert got == want
    with pytest.raises(memfit.UserError, match="example_inputs"):
        memfit.plan(model, batch=16)
    # An error about the export names the module, not a temporary file.
    with pytest.raises(memfit.Infeasible) as e:
        memfit.plan(model, example, batch=16, budget="1KiB")
    assert "SmallNet (exported to ONNX)" in str(e.value)
    assert "memfit-" not in str(e.value)


def test_export_leaves_the_model_as_it_was(tmp_path):
    torch.manual_seed(0)
    model = SmallNet().train()
    example = torch.randn(4, 3, 8, 8)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.random.get_rng_state()
    memfit.export(model, example, tmp_path / "m.onnx")
    assert model.training
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert torch.equal(torch.random.get_rng_state(), rng)
    # The file holds the model's statistics, not the export's forward's.
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    inits = {i.name: numpy_helper.to_array(i)
             for i in onnx.load(str(tmp_path / "m.onnx")).graph.initializer}
    for name in ("bn.running_mean", "bn.running_var", "conv.weight"):
        assert np.array_equal(inits[name], before[name].numpy()), name


def test_a_hugging_face_model():
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    # Its forward returns an output object (logits, the cache): the logits
    # are what memfit trains on.
    model = tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=96, n_embd=32, n_layer=2, n_head=2, n_positions=16))
    ids = torch.randint(0, 96, (2, 16))
    info = memfit.inspect(model, ids, batch=8)
    assert info.parameters == sum(p.numel() for p in model.parameters())
    plan = memfit.plan(model, ids, batch=8, budget="60%", optimizer="adamw")
    assert plan.feasible and plan.batch == 8


def _parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            # "pid (comm) state ppid ...": comm may hold spaces.
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_ctrl_c_stops_the_command(tmp_path):
    # A long plan in a child interpreter, interrupted: KeyboardInterrupt
    # comes back at once and the fork running memfit is gone.
    import signal
    import sys
    import time
    model = tmp_path / "big.onnx"
    cli("zoo", "resnet50", "-o", model)
    script = tmp_path / "slow.py"
    script.write_text(
        "import memfit, os, sys\n"
        "print(os.getpid(), flush=True)\n"
        "try:\n"
        f"    memfit.plan({str(model)!r}, batch=512, budget='25%')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "    sys.exit(3)\n")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=os.environ)
    p.stdout.readline()
    time.sleep(1.0)  # inside the plan's fork by now
    children = [pid for pid in os.listdir("/proc") if pid.isdigit()
                and _parent_of(pid) == p.pid]
    p.send_signal(signal.SIGINT)
    t0 = time.time()
    rc = p.wait(timeout=30)
    assert rc == 3 and p.stdout.read().strip() == "interrupted"
    assert time.time() - t0 < 2.5  # the plan alone has seconds to go
    assert children, "no fork was running after a second"
    for pid in children:
        assert not os.path.exists(f"/proc/{pid}"), "the fork outlived the call"
