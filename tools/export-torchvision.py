#!/usr/bin/python3
"""Export a torchvision model with random weights to ONNX for memfit.

Usage: export-torchvision.py MODEL OUTPUT [--opset N] [--batch N] [--train]
                             [--external-data]

MODEL is a classification model's name (resnet18) or segmentation.NAME
(segmentation.fcn_resnet50: its 'out' map is the output). The model is
built with weights=None (googlenet and inception_v3 without
auxiliary heads and without their slow init) and seeded, so the same
arguments give the same file. By default it is exported as model zoos ship
models: eval mode with TrainingMode.PRESERVE, which keeps BatchNormalization
nodes (TrainingMode.EVAL would fold them into the convolutions) and drops
Dropout. --train exports in training mode (training-form BatchNormalization
and Dropout nodes). The batch is dynamic ('N') unless --batch fixes it.

Beside OUTPUT it writes OUTPUT.json with what torch itself says about the
model, so tests compare the import against torch's numbers:
  parameters  number of trainable parameter elements
  exported_parameters  only where torch's export changed them: the
              parameter elements in the file. Eval-mode export folds
              computations on parameters into new initializers (Swin's
              relative position tables become one bias per block, each
              [1, heads, T, T]); an ONNX trainer trains what is in the file.
  bn_state    elements of BatchNorm running means and variances
  ops         per memfit op kind, how many the traced torch graph runs
              (only kinds that map one-to-one onto ONNX nodes)
  input       the input shape without the batch; classes: output width
  output      the output shape without the batch
"""
import argparse
import collections
import json
import os
import sys
import warnings


def count_ops(graph, train):
    """Counts traced aten calls for the op kinds that export one-to-one."""
    simple = {
        "aten::_convolution": "Conv",
        "aten::batch_norm": "BatchNormalization",
        "aten::relu": "Relu",
        "aten::relu_": "Relu",
        "aten::hardtanh": "Clip",
        "aten::hardtanh_": "Clip",
        "aten::max_pool2d": "MaxPool",
        "aten::linear": "Gemm",
        "aten::flatten": "Flatten",
        "aten::upsample_nearest2d": "Resize",
        "aten::upsample_bilinear2d": "Resize",
    }
    if train:
        simple["aten::dropout"] = "Dropout"
        simple["aten::dropout_"] = "Dropout"
    counts = collections.Counter()
    linear_nd = False
    for node in graph.nodes():
        kind = node.kind()
        if kind == "aten::linear":
            # On more than two axes a linear exports as MatMul and Add.
            t = list(node.inputs())[0].type()
            linear_nd = linear_nd or t.dim() != 2
        if kind in simple:
            counts[simple[kind]] += 1
        elif kind in ("aten::add", "aten::add_"):
            # Only tensor + tensor adds become ONNX Add nodes; the
            # num_batches_tracked counter update adds an integer scalar.
            other = list(node.inputs())[1].type()
            if other.kind() == "TensorType" and other.scalarType() == "Float":
                counts["Add"] += 1
    if linear_nd:
        counts.pop("Gemm", None)
        counts.pop("Add", None)
    return dict(sorted(counts.items()))


def exported_parameters(path, model, parameters):
    """Parameter elements in the exported file: torch's, less those the
    export dropped (folded away, or stored transposed under a new name),
    plus the float initializers it made (the transposed or folded forms).
    Aliases of a shared initializer (Identity outputs) count as their own
    parameters, as in torch."""
    import numpy
    import onnx
    proto = onnx.load(path, load_external_data=False)
    inits = {i.name: i for i in proto.graph.initializer}
    outputs = {o for n in proto.graph.node for o in n.output}
    torch_names = set(model.state_dict())
    dropped = sum(p.numel() for k, p in model.named_parameters()
                  if k not in inits and k not in outputs)
    made = sum(int(numpy.prod(i.dims)) for name, i in inits.items()
               if name not in torch_names and i.data_type == 1 and i.dims)
    return parameters - dropped + made


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("output")
    parser.add_argument("--opset", type=int, default=13)
    parser.add_argument("--batch", type=int, default=0,
                        help="fixed batch size (default: dynamic batch)")
    parser.add_argument("--train", action="store_true",
                        help="export in training mode")
    parser.add_argument("--external-data", action="store_true",
                        help="store the weights in OUTPUT.data beside it")
    args = parser.parse_args()

    warnings.filterwarnings("ignore")
    import torch
    import torchvision

    segmentation = args.model.startswith("segmentation.")
    name = args.model.split(".", 1)[-1]
    where = (torchvision.models.segmentation if segmentation
             else torchvision.models)
    if not hasattr(where, name):
        sys.exit("export-torchvision: no torchvision model named %r" % args.model)
    kwargs = {}
    if name in ("googlenet", "inception_v3"):
        kwargs = dict(aux_logits=False, init_weights=False)
    if segmentation:
        kwargs = dict(weights_backbone=None)
    torch.manual_seed(0)
    model = getattr(where, name)(weights=None, **kwargs)
    if segmentation:
        class Out(torch.nn.Module):
            """The segmentation map alone (the models return a dict)."""

            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x)["out"]

        model = Out(model)
    model.train(args.train)
    size = 299 if args.model == "inception_v3" else 224
    batch = args.batch if args.batch > 0 else 2
    example = torch.randn(batch, 3, size, size)

    parameters = sum(p.numel() for p in model.parameters())
    bn_state = sum(b.numel() for name, b in model.named_buffers()
                   if name.endswith("running_mean") or name.endswith("running_var"))
    with torch.no_grad():
        traced = torch.jit.trace(model, example, check_trace=False)
        output = list(traced(example).shape[1:])
        classes = output[0]
    ops = count_ops(traced.inlined_graph, args.train)
    mode = torch.onnx.TrainingMode.TRAINING if args.train else torch.onnx.TrainingMode.PRESERVE
    dynamic = None if args.batch > 0 else {"input": {0: "N"}, "output": {0: "N"}}
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    # torch 2.9 and later export with torch.export by default; these files
    # are the TorchScript exporter's, as the user guide's recipe writes them.
    import inspect
    legacy = ({"dynamo": False}
              if "dynamo" in inspect.signature(torch.onnx.export).parameters
              else {})
    torch.onnx.export(model, example, args.output, opset_version=args.opset,
                      training=mode, input_names=["input"],
                      output_names=["output"], dynamic_axes=dynamic, **legacy)
    if args.external_data:
        import onnx
        proto = onnx.load(args.output)
        data_name = os.path.basename(args.output) + ".data"
        if os.path.exists(os.path.join(out_dir, data_name)):
            os.remove(os.path.join(out_dir, data_name))
        onnx.save_model(proto, args.output, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data_name,
                        size_threshold=1024)
    exported = exported_parameters(args.output, model, parameters)
    facts = {
        "model": args.model,
        "opset": args.opset,
        "batch": args.batch if args.batch > 0 else None,
        "train": args.train,
        "input": [3, size, size],
        "classes": int(classes),
        "output": [int(d) for d in output],
        "parameters": int(parameters),
        "bn_state": int(bn_state),
        "ops": ops,
        "torch": torch.__version__,
    }
    if exported != parameters:
        facts["exported_parameters"] = exported
    with open(args.output + ".json", "w") as f:
        json.dump(facts, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
