"""A torch.nn.Module to the ONNX file memfit plans: exported for training."""
import inspect as _inspect

from ._errors import UserError


def example_tuple(example_inputs):
    if example_inputs is None:
        raise UserError("a torch.nn.Module needs example_inputs: a tensor, "
                        "or a tuple of tensors, with the batch on axis 0")
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs)
    return (example_inputs,)


def _first_tensor(out, torch):
    """The tensor memfit trains on in a forward's output: the output itself,
    a Hugging Face output's `logits`, or the first tensor of a tuple or
    mapping."""
    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    values = out.values() if hasattr(out, "values") else out
    if isinstance(values, (list, tuple)) or hasattr(out, "values"):
        for v in values:
            if isinstance(v, torch.Tensor):
                return v
    return None


def _single_output(model, inputs, torch):
    """None where `model`'s forward returns a tensor; else the forward to
    export in its place, which returns only the tensor memfit trains on (a
    Hugging Face model's output object with its cache, a tuple). It is set
    on the instance for the export, so the parameters keep their names."""
    training = model.training
    model.eval()  # no batch statistics updated, no dropout drawn
    try:
        with torch.no_grad():
            out = model(*inputs)
    finally:
        model.train(training)
    if isinstance(out, torch.Tensor):
        return None
    if _first_tensor(out, torch) is None:
        raise UserError(f"{type(model).__name__}'s forward returns "
                        f"{type(out).__name__}, which holds no tensor to train on")
    forward = model.forward

    def single(*xs):
        return _first_tensor(forward(*xs), torch)

    # One named parameter per input: torch.export matches its inputs to
    # the forward's signature, which *xs would make one tuple.
    single.__signature__ = _inspect.Signature([
        _inspect.Parameter(f"x{i}", _inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for i in range(len(inputs))])
    return single


def _first_line(e):
    while e.__cause__ is not None:  # torch.onnx wraps torch.export's error
        e = e.__cause__
    lines = [l for l in str(e).splitlines() if l.strip()]
    return (lines[0] if lines else type(e).__name__)[:300]


def _torch_export(torch, model, inputs, path, exporter, names, opset, params):
    if exporter == "dynamo":
        if "dynamo" not in params:
            raise UserError("exporter='dynamo' needs torch 2.5 or later; "
                            f"this torch is {torch.__version__}")
        torch.onnx.export(model, inputs, path, dynamo=True, optimize=False,
                          opset_version=max(opset, 18), input_names=names,
                          output_names=["y"], external_data=False)
        return
    kwargs = {}
    if "dynamo" in params:
        kwargs["dynamo"] = False
    axes = {n: {0: "N"} for n in names}
    axes["y"] = {0: "N"}
    torch.onnx.export(model, inputs, path, opset_version=opset,
                      input_names=names, output_names=["y"],
                      dynamic_axes=axes,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, **kwargs)


def _restore_initializers(path, values):
    """Sets the initializers of the ONNX file at `path` named in `values`
    (torch tensors) to them; warns about names the file does not hold."""
    import warnings

    import onnx
    from onnx import numpy_helper

    path = str(path)
    model = onnx.load(path)
    found = set()
    for init in model.graph.initializer:
        if init.name in values:
            init.CopyFrom(numpy_helper.from_array(
                values[init.name].cpu().numpy().astype(
                    numpy_helper.to_array(init).dtype), init.name))
            found.add(init.name)
    missing = sorted(set(values) - found)
    if missing:
        warnings.warn("the export's forward changed buffers the file does not "
                      "name (" + ", ".join(missing) + "); the file holds them "
                      "as the export left them")
    onnx.save(model, path)


def export(model, example_inputs, path, exporter=None, opset=17):
    """Writes `model` to `path` as memfit needs it: in training mode
    (Dropout and BatchNormalization in their training form), constants not
    folded into the weights. `exporter` is "torchscript" (torch.onnx's
    TorchScript exporter, the batch axis of every input and output
    dynamic), "dynamo" (torch.export, traced at the example's batch: the
    masks of transformers 5 index each sample, which torch.export traces
    only at a fixed batch; memfit reads the batch from the file and plans
    any other), or None: TorchScript, and dynamo with a warning where the
    TorchScript exporter fails and torch has the other."""
    import torch

    inputs = example_tuple(example_inputs)
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            raise UserError(f"example input {i} must be a tensor with the "
                            "batch on axis 0")
    names = ["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))]
    params = _inspect.signature(torch.onnx.export).parameters
    if exporter not in (None, "torchscript", "dynamo"):
        raise UserError(f"exporter must be 'torchscript' or 'dynamo', got {exporter!r}")
    # Exporting runs the forward in training mode: BatchNorm's running
    # statistics move and dropout draws from torch's generator. The caller's
    # model and generator are left as they were.
    was_training = model.training
    original, single, own = model, None, None
    buffers = [(n, b, b.detach().clone()) for n, b in model.named_buffers()]
    rng = torch.random.get_rng_state()
    model.train()
    try:
        single = _single_output(model, inputs, torch)
        own = vars(model).get("forward")  # a forward set on the instance
        if single is not None:
            model.forward = single
        try:
            _torch_export(torch, model, inputs, path, exporter or "torchscript",
                          names, opset, params)
        except UserError:
            raise
        except Exception as first:
            # torch's TorchScript exporter cannot write some of today's
            # models (grouped-query sdpa, torch.diff in transformers 5's
            # masks); the dynamo exporter can, where torch has it.
            if exporter is not None or "dynamo" not in params:
                raise UserError(f"torch.onnx.export ({exporter or 'torchscript'}) "
                                f"failed: {_first_line(first)}") from first
            try:
                _torch_export(torch, model, inputs, path, "dynamo", names,
                              opset, params)
            except Exception as second:
                raise UserError(
                    "torch.onnx.export failed with both exporters: "
                    f"torchscript: {_first_line(first)}; dynamo: "
                    f"{_first_line(second)}") from second
            import warnings
            warnings.warn("torch's TorchScript exporter failed "
                          f"({_first_line(first)}); exported with torch.export "
                          f"(exporter='dynamo') at batch {inputs[0].shape[0]}")
    finally:
        if single is not None:
            if own is None:
                del original.forward
            else:
                original.forward = own
        original.train(was_training)
        moved = {}
        with torch.no_grad():
            for name, b, saved in buffers:
                if not torch.equal(b, saved):
                    moved[name] = saved
                b.copy_(saved)
        torch.random.set_rng_state(rng)
    # The file holds the buffers as the export's forward left them: write
    # back the model's own.
    if moved:
        _restore_initializers(path, moved)
    return int(inputs[0].shape[0])
