"""The models tools/gpu-check trains, defined once for both of its sides.

On the build machine `export` writes each model as ONNX for `memfit compile`,
with its parameters zeroed so that the pack compresses to almost nothing. On
the GPU machine `fill` puts the parameters of the same PyTorch module, built
there with seed 0, back into that file. memfit's trainer and PyTorch's
reference then both start from that filled file: PyTorch loads it by name
(`load_from_onnx`), so the two start from identical weights even where the
two machines' torch versions initialize differently.

The CNNs are torchvision's (VGG-16 with its dropout at 0, as an eval-mode
export drops Dropout and random masks could not be compared); the GPT is
the decoder of tests/e2e/today_models.py at a benchmark's size.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# In the repository today_models.py lives in tests/e2e; a pack carries a copy
# beside this file.
for _d in (HERE, os.path.join(HERE, "..", "..", "tests", "e2e")):
    if os.path.exists(os.path.join(_d, "today_models.py")):
        sys.path.insert(0, os.path.abspath(_d))
        break

# name: (input kind, default batch)
MODELS = {
    "resnet18": ("image", 64),
    "resnet50": ("image", 64),
    "vgg16": ("image", 64),
    "gpt": ("tokens", 16),
}
GPT_CONFIG = dict(vocab=8192, T=256, d=512, heads=8, layers=6)
IMAGE = (3, 224, 224)
CLASSES = 1000


def check_name(name):
    if name not in MODELS:
        sys.exit("gpu-check: no model %r (models: %s)" %
                 (name, ", ".join(MODELS)))


def build(name):
    """The PyTorch module, initialized with seed 0."""
    import torch
    check_name(name)
    torch.manual_seed(0)
    if name == "gpt":
        import today_models
        return today_models.GPT(**GPT_CONFIG)
    import torchvision
    model = getattr(torchvision.models, name)()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model


def sample_shape(name):
    """One sample's input shape."""
    return (GPT_CONFIG["T"],) if MODELS[name][0] == "tokens" else IMAGE


def tokens_per_sample(name):
    return GPT_CONFIG["T"] if MODELS[name][0] == "tokens" else None


def example(name, batch, seed=0):
    """A batch of inputs and labels (numpy), the same on every machine:
    numpy's PCG64 streams are fixed across versions."""
    import numpy as np
    rng = np.random.default_rng(seed)
    if MODELS[name][0] == "tokens":
        V, T = GPT_CONFIG["vocab"], GPT_CONFIG["T"]
        x = rng.integers(0, V, (batch, T)).astype(np.int64)
        y = rng.integers(0, V, (batch, T)).astype(np.int64)
        return x, y
    x = rng.standard_normal((batch,) + IMAGE, dtype=np.float32)
    y = rng.integers(0, CLASSES, batch).astype(np.int64)
    return x, y


def loss_fn(name, out, y):
    import torch.nn.functional as F
    if MODELS[name][0] == "tokens":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return F.cross_entropy(out, y)


def _export_once(name, model, path):
    import torch
    x, _ = example(name, 2)
    # Eval mode, PRESERVE: BatchNorm stays (memfit trains it with batch
    # statistics), Dropout goes. No constant folding, so every initializer
    # that comes from a parameter keeps the parameter's name.
    model.eval()
    gpt = name == "gpt"
    # torch 2.9 and later export with torch.export by default, which in
    # eval mode folds each BatchNorm into its convolution's weights: the
    # TorchScript exporter, as the user guide's recipe says.
    import inspect
    legacy = ({"dynamo": False}
              if "dynamo" in inspect.signature(torch.onnx.export).parameters
              else {})
    torch.onnx.export(model, torch.from_numpy(x), path,
                      opset_version=17 if gpt else 13,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                      **legacy)


def export(name, path):
    """Writes NAME as ONNX with its parameters zeroed, and PATH.params.json:
    the initializers that are parameters (what `fill` writes back). Fails
    when an initializer depends on the parameters without being one, which
    `fill` could not recreate."""
    import json
    import tempfile
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
    # torch's export shares initializers of equal value (every BatchNorm
    # scale is 1 at init) through Identity nodes, so the file is written
    # from parameters made distinct; which values do not matter, they are
    # zeroed. A second export with other values shows which initializers
    # the parameters make.
    def distinct(seed):
        model = build(name)
        with torch.no_grad():
            gen = torch.Generator().manual_seed(seed)
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))
        return model

    model = distinct(1)
    params = dict(model.named_parameters())
    _export_once(name, model, path)
    with tempfile.TemporaryDirectory() as tmp:
        _export_once(name, distinct(2), os.path.join(tmp, "probe.onnx"))
        other = {i.name: numpy_helper.to_array(i) for i in
                 onnx.load(os.path.join(tmp, "probe.onnx")).graph.initializer}
    proto = onnx.load(path)
    filled = []
    for i, init in enumerate(proto.graph.initializer):
        a = numpy_helper.to_array(init)
        if init.name in params:
            if tuple(a.shape) != tuple(params[init.name].shape):
                sys.exit("gpu-check: %s: initializer %s has shape %s, the "
                         "parameter %s" % (name, init.name, a.shape,
                                           tuple(params[init.name].shape)))
            proto.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(np.zeros_like(a), init.name))
            filled.append(init.name)
        elif init.name not in other or not np.array_equal(a, other[init.name]):
            sys.exit("gpu-check: %s: initializer %s is computed from the "
                     "parameters but is none of them; fill could not "
                     "recreate it" % (name, init.name))
    missing = sorted(set(params) - set(filled))
    if missing:
        sys.exit("gpu-check: %s: parameters not in the export: %s" %
                 (name, ", ".join(missing[:5])))
    onnx.save(proto, path)
    with open(path + ".params.json", "w") as f:
        json.dump({"model": name, "parameters": filled,
                   "torch": torch.__version__}, f, indent=1)
        f.write("\n")
    return len(filled)


def fill(name, skeleton, params_json, out):
    """Writes the seed-0 parameters of NAME into the zeroed SKELETON."""
    import json
    import onnx
    from onnx import numpy_helper
    with open(params_json) as f:
        names = set(json.load(f)["parameters"])
    state = {k: v.detach().numpy() for k, v in build(name).named_parameters()}
    proto = onnx.load(skeleton)
    n = 0
    for i, init in enumerate(proto.graph.initializer):
        if init.name not in names:
            continue
        want = numpy_helper.to_array(init)
        a = state[init.name].astype(want.dtype)
        if a.shape != want.shape:
            sys.exit("gpu-check: %s: this torch's %s has shape %s, the pack's "
                     "%s" % (name, init.name, a.shape, want.shape))
        proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, init.name))
        n += 1
    if n != len(names):
        sys.exit("gpu-check: %s: filled %d of %d parameters" %
                 (name, n, len(names)))
    onnx.save(proto, out)
    return n


def load_from_onnx(model, path):
    """Every parameter and buffer of MODEL that PATH has by name; returns
    how many were loaded."""
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
    inits = {i.name: numpy_helper.to_array(i)
             for i in onnx.load(path).graph.initializer}
    state = model.state_dict()
    n = 0
    for k, v in state.items():
        if k in inits and v.is_floating_point():
            state[k] = torch.from_numpy(np.array(inits[k])).reshape(v.shape)
            n += 1
    model.load_state_dict(state)
    return n


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "export":
        print("%s: %d parameters zeroed" % (a[1], export(a[1], a[2])))
    elif len(a) == 5 and a[0] == "fill":
        print("%s: %d parameters filled" % (a[1], fill(*a[1:])))
    else:
        sys.exit("usage: models.py export NAME OUT.onnx | "
                 "fill NAME SKELETON.onnx PARAMS.json OUT.onnx")
