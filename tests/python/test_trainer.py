"""memfit.Trainer (tools/python/memfit/_trainer.py, runtime/Session.h): a
compiled trainer stepped from Python against PyTorch's own training on the
same DataLoader, and bit for bit against the command-line trainer."""
import copy
import inspect
import os
import subprocess

import numpy as np
import pytest

import memfit

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

BATCH, STEPS, LR, MOMENTUM = 8, 3, 0.05, 0.9
MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


class Net(torch.nn.Module):
    """Convolution, BatchNorm (running statistics trained too) and a head;
    no dropout, whose draws differ between the two."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


class Images(torch.utils.data.Dataset):
    """uint8 HWC images through a transform, as torchvision datasets are."""

    def __init__(self, n, transform):
        rng = np.random.default_rng(0)
        self.x = rng.integers(0, 256, (n, 6, 6, 3), dtype=np.uint8)
        self.y = rng.integers(0, 4, n)
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.transform(self.x[i]), int(self.y[i])


def transform(img):
    try:
        import torchvision.transforms as T
        return T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])(img)
    except ImportError:
        t = torch.from_numpy(img).permute(2, 0, 1).float() / 255
        return (t - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    torch.manual_seed(0)
    model = Net()
    loader = torch.utils.data.DataLoader(Images(BATCH * STEPS, transform),
                                         batch_size=BATCH, drop_last=True)
    out = tmp_path_factory.mktemp("trainer") / "net"
    compiled = memfit.compile(model, torch.randn(2, 3, 6, 6), out, batch=BATCH,
                              budget="60%", optimizer="sgd", quiet=True)
    return model, loader, compiled


def torch_training(model, loader):
    ref = copy.deepcopy(model).train()
    opt = torch.optim.SGD(ref.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ref(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return ref, losses


def worst_relative(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-12))


def test_trains_as_pytorch_from_a_dataloader(setup):
    model, loader, compiled = setup
    ref, want = torch_training(model, loader)
    with memfit.Trainer(compiled, backend="cpu", lr=LR, momentum=MOMENTUM) as t:
        assert t.batch == BATCH
        got = [t.step(x, y) for x, y in loader]
        assert t.steps == STEPS
        state = t.state_dict()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    ref_state = ref.state_dict()
    for name, value in state.items():
        assert value.shape == ref_state[name].shape, name
        assert worst_relative(value.numpy(), ref_state[name].numpy()) <= 1e-5, name
    # BatchNorm's running statistics moved as torch's did.
    assert "bn.running_mean" in state
    # The weights load into the torch model, which then computes what the
    # trained reference does.
    fresh = Net()
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"bn.num_batches_tracked"}
    x, _ = next(iter(loader))
    with torch.no_grad():
        np.testing.assert_allclose(fresh.eval()(x), ref.eval()(x), rtol=1e-4,
                                   atol=1e-6)


def test_bit_for_bit_the_command_line_trainer(setup, tmp_path):
    model, loader, compiled = setup
    xs, ys = zip(*loader)
    np.save(tmp_path / "x.npy", torch.cat(xs).numpy())
    np.save(tmp_path / "y.npy", torch.cat(ys).numpy())
    build = tmp_path / "cli-build"
    subprocess.run(["cmake", "-S", compiled.out_dir, "-B", build,
                    "-DMEMFIT_BACKEND=cpu"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", build, "--target", "trainer", "-j2"],
                   check=True, capture_output=True)
    subprocess.run([str(a) for a in (
        build / "trainer", "--data", tmp_path / "x.npy", "--labels",
        tmp_path / "y.npy", "--iterations", STEPS, "--lr", LR, "--momentum",
        MOMENTUM, "--save", tmp_path / "cli.onnx", "--quiet")],
        check=True, capture_output=True)
    with memfit.Trainer(compiled, lr=LR, momentum=MOMENTUM) as t:
        for x, y in loader:
            t.step(x, y)
        t.save(tmp_path / "py.onnx")

    def weights(path):
        return {i.name: numpy_helper.to_array(i)
                for i in onnx.load(str(path)).graph.initializer}
    cli, py = weights(tmp_path / "cli.onnx"), weights(tmp_path / "py.onnx")
    assert cli.keys() == py.keys()
    for name in cli:
        assert cli[name].tobytes() == py[name].tobytes(), name


def test_checkpoint_and_resume(setup, tmp_path):
    model, loader, compiled = setup
    batches = list(loader)
    with memfit.Trainer(compiled, lr=LR, momentum=MOMENTUM) as t:
        for x, y in batches:
            t.step(x, y)
        whole = t.state_dict(as_torch=False)
    with memfit.Trainer(compiled, lr=LR, momentum=MOMENTUM) as t:
        for x, y in batches[:2]:
            t.step(x, y)
        t.checkpoint(tmp_path / "ck")
    with memfit.Trainer(compiled, lr=LR, momentum=MOMENTUM,
                        checkpoint=tmp_path / "ck", resume=True) as t:
        assert t.steps == 2
        t.step(*batches[2])
        resumed = t.state_dict(as_torch=False)
    for name in whole:
        assert whole[name].tobytes() == resumed[name].tobytes(), name


def test_state_dict_round_trip_and_evaluate(setup):
    model, loader, compiled = setup
    x, y = next(iter(loader))
    with memfit.Trainer(compiled, lr=LR) as t:
        before = t.evaluate(x, y)
        state = t.state_dict()
        t.step(x, y)
        assert t.evaluate(x, y)["loss"] != before["loss"]
        t.load_state_dict(state)
        again = t.evaluate(x, y)
    assert again == before
    # The untrained model's own loss on the batch, in evaluation form.
    with torch.no_grad():
        ref = copy.deepcopy(model).eval()
        want = torch.nn.functional.cross_entropy(ref(x), y).item()
    assert before["loss"] == pytest.approx(want, rel=1e-5)
    assert 0.0 <= before["accuracy"] <= 1.0


def test_bad_arguments_raise(setup, tmp_path):
    model, loader, compiled = setup
    x, y = next(iter(loader))
    with memfit.Trainer(compiled) as t:
        with pytest.raises(memfit.UserError, match="takes 8 samples"):
            t.step(x[:4], y[:4])
        with pytest.raises(memfit.UserError, match=r"class ids must be in \[0, 4\)"):
            t.step(x, torch.full((BATCH,), 7))
        with pytest.raises(memfit.UserError, match="integer array"):
            t.step(x, y.float())
        with pytest.raises(memfit.UserError, match="missing weight"):
            t.load_state_dict({})
        t.step(x, y)  # the errors above left it usable
    with pytest.raises(memfit.UserError, match="closed"):
        t.step(x, y)
    with pytest.raises(memfit.UserError, match="--lr"):
        memfit.Trainer(compiled, lr=-1)
    with pytest.raises(memfit.UserError, match="data= is the command-line"):
        memfit.Trainer(compiled, data="x.npy")
    with pytest.raises(memfit.UserError, match="not a trainer"):
        memfit.Trainer(tmp_path)
    with pytest.raises(memfit.UserError, match="backend must be"):
        memfit.Trainer(compiled, backend="tpu")


def train_language_model(model, batches, vocab):
    """PyTorch's own training of a copy of a transformers language model:
    SGD (lr 0.1, MOMENTUM) on next-token cross-entropy; the trained copy
    and its losses."""
    ref = copy.deepcopy(model).train()
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=MOMENTUM)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            ref(input_ids=x).logits.reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return ref, losses


def test_a_hugging_face_language_model(tmp_path):
    """Token ids in, the next tokens as labels: a transformers GPT-2 (its
    forward returns an output object; tied input and output embeddings)
    trained as PyTorch trains it. SGD: Adam would turn the key bias's
    rounding noise (its true gradient is zero) into full steps."""
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    V, T, B = 96, 16, 4
    model = tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=V, n_embd=32, n_layer=2, n_head=2, n_positions=T,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    ids = torch.randint(0, V, (B * STEPS, T + 1))
    batches = [(ids[k * B:(k + 1) * B, :T], ids[k * B:(k + 1) * B, 1:])
               for k in range(STEPS)]
    out = memfit.compile(model, batches[0][0], tmp_path / "gpt", batch=B,
                         budget="60%", optimizer="sgd", quiet=True)
    ref, want = train_language_model(model, batches, V)
    with memfit.Trainer(out, lr=0.1, momentum=MOMENTUM) as t:
        got = [t.step(x, y) for x, y in batches]
        state = t.state_dict()
        with pytest.raises(memfit.UserError, match=r"token ids must be in \[0, 96\)"):
            t.step(torch.full((B, T), V), batches[0][1])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    ref_state = ref.state_dict()
    assert "transformer.wte.weight" in state
    for name, value in state.items():
        assert worst_relative(value.numpy(), ref_state[name].numpy()) <= 1e-5, name


def test_a_model_exported_by_torch_export(tmp_path):
    """torch 2.5 and later: a transformers Llama (grouped-query attention,
    rotary tables from its inv_freq buffer, RMSNorm) exported by
    torch.export at a fixed batch, as memfit.compile falls back to where
    the TorchScript exporter fails, and planned at twice that batch:
    losses and weights as PyTorch's. transformers 5 builds its causal mask
    per sample, which torch.export traces only at a fixed batch; memfit
    reads that batch's mask and reshapes and plans another."""
    tf = pytest.importorskip("transformers")
    if "dynamo" not in inspect.signature(torch.onnx.export).parameters:
        pytest.skip(f"torch {torch.__version__} has no dynamo exporter")
    pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    V, T, B = 61, 16, 4
    model = tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
        max_position_embeddings=T))
    ids = torch.randint(0, V, (B * STEPS, T + 1))
    batches = [(ids[k * B:(k + 1) * B, :T], ids[k * B:(k + 1) * B, 1:])
               for k in range(STEPS)]
    out = memfit.compile(model, batches[0][0][:B // 2], tmp_path / "llama",
                         exporter="dynamo", batch=B, budget="60%",
                         optimizer="sgd", quiet=True)
    ref, want = train_language_model(model, batches, V)
    with memfit.Trainer(out, lr=0.1, momentum=MOMENTUM) as t:
        got = [t.step(x, y) for x, y in batches]
        state = t.state_dict()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    ref_state = ref.state_dict()
    assert "model.embed_tokens.weight" in state
    for name, value in state.items():
        assert worst_relative(value.numpy(), ref_state[name].numpy()) <= 1e-5, name
