#!/usr/bin/env python3
"""Independent reference for end-to-end tests: trains an ONNX model with
PyTorch (CPU) by interpreting its graph with torch ops, the way a framework
would, and compares the losses and trained weights with a memfit trainer's.

usage: torch_reference.py MODEL.onnx X.npy Y.npy --batch B --iterations N
         --lr F --momentum F --weight-decay F [--optimizer sgd|adam|adamw
         --beta1 F --beta2 F --eps F]
         --losses TRAINER_LOG --trained TRAINED.onnx [--rtol R]
         [--autocast bf16] [--update-tol T] [--freeze RE] [--train-only RE]
         [--val-x X --val-y Y [--val-every N] [--val-from-trained]]
Exit 0 when both agree within tolerance, 1 with a message when not.

By default the reference computes in float64. --autocast bf16 trains in
float32 under torch.autocast("cpu", dtype=torch.bfloat16), as a mixed
precision framework does. --update-tol compares what training changed
instead of the weights: for every weight, the norm of the difference of the
two updates (trained minus initial) over the norm of torch's update must be
at most T, and losses must agree within --rtol. --freeze and --train-only
choose the parameters that train as memfit's flags do (re.search in the
name; --train-only first, then --freeze takes out): the others get
requires_grad=False and stay out of the optimizer. --val-x and --val-y
compare the trainer's "validation after step" lines with torch's eval mode
(no_grad, running statistics, no dropout) over that set after the same
steps; --val-from-trained compares only the last, with the weights the
trainer saved, and trains nothing.
"""
import argparse
import re
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

# The reference's float type: float64, or float32 under autocast.
FLOAT = torch.float64


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def torch_buffers(graph):
    """Initializers the dynamo exporter marks as buffers or lifted constants
    (IR 10 value_info metadata, which this onnx library keeps as unknown
    fields)."""
    out = set()
    for vi in graph.value_info:
        for f in vi.UnknownFields():
            if f.field_number != 4:
                continue
            entry = onnx.StringStringEntryProto()
            entry.ParseFromString(f.data)
            if (entry.key == "pkg.torch.export.graph_signature.InputSpec.kind"
                    and entry.value in ("BUFFER", "CONSTANT_TENSOR")):
                out.add(vi.name)
    return out


def run_graph(model, params, consts, x, train=True):
    env = {model.graph.input[0].name: x}
    env.update(params)
    env.update(consts)
    for node in model.graph.node:
        a = attrs(node)
        i = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Conv":
            pads = a.get("pads", [0, 0, 0, 0])
            assert pads[0] == pads[2] and pads[1] == pads[3], "asymmetric pads"
            y = F.conv2d(i[0], i[1], i[2] if len(i) > 2 else None,
                         stride=a.get("strides", [1, 1]), padding=pads[:2],
                         dilation=a.get("dilations", [1, 1]),
                         groups=a.get("group", 1))
        elif op == "ConvTranspose":
            pads = a.get("pads", [0, 0, 0, 0])
            assert pads[0] == pads[2] and pads[1] == pads[3], "asymmetric pads"
            y = F.conv_transpose2d(
                i[0], i[1], i[2] if len(i) > 2 else None,
                stride=a.get("strides", [1, 1]), padding=pads[:2],
                output_padding=a.get("output_padding", [0, 0]),
                groups=a.get("group", 1), dilation=a.get("dilations", [1, 1]))
        elif op == "Relu":
            y = F.relu(i[0])
        elif op == "LeakyRelu":
            y = F.leaky_relu(i[0], a.get("alpha", 0.01))
        elif op == "Sigmoid":
            y = torch.sigmoid(i[0])
        elif op == "Tanh":
            y = torch.tanh(i[0])
        elif op == "Softplus":
            y = F.softplus(i[0])
        elif op == "Mish":
            y = F.mish(i[0])
        elif op == "Celu":
            y = F.celu(i[0], a.get("alpha", 1.0))
        elif op == "Log":
            y = torch.log(i[0])
        elif op == "Exp":
            y = torch.exp(i[0])
        elif op == "Clip":
            lo = float(i[1]) if len(i) > 1 and i[1] is not None else a.get("min")
            hi = float(i[2]) if len(i) > 2 and i[2] is not None else a.get("max")
            y = torch.clamp(i[0], lo, hi)
        elif op in ("MaxPool", "AveragePool"):
            pads = a.get("pads", [0, 0, 0, 0])
            assert pads[0] == pads[2] and pads[1] == pads[3], "asymmetric pads"
            k, s = a["kernel_shape"], a.get("strides", [1, 1])
            ceil = bool(a.get("ceil_mode", 0))
            if op == "MaxPool":
                y = F.max_pool2d(i[0], k, s, pads[:2], ceil_mode=ceil)
            else:
                y = F.avg_pool2d(i[0], k, s, pads[:2], ceil_mode=ceil,
                                 count_include_pad=bool(a.get("count_include_pad", 0)))
        elif op == "GlobalAveragePool":
            y = i[0].mean(dim=(2, 3), keepdim=True)
        elif op == "BatchNormalization":
            y = F.batch_norm(i[0], i[3], i[4], i[1], i[2], training=train,
                             momentum=1.0 - a.get("momentum", 0.9),
                             eps=a.get("epsilon", 1e-5))
        elif op == "LRN":
            y = F.local_response_norm(i[0], a["size"], a.get("alpha", 1e-4),
                                      a.get("beta", 0.75), a.get("bias", 1.0))
        elif op == "Gemm":
            A = i[0].t() if a.get("transA", 0) else i[0]
            B = i[1].t() if a.get("transB", 0) else i[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(i) > 2 and i[2] is not None:
                y = y + a.get("beta", 1.0) * i[2]
        elif op == "MatMul":
            y = i[0] @ i[1]
        elif op == "Add":
            y = i[0] + i[1]
        elif op == "Sub":
            y = i[0] - i[1]
        elif op == "Mul":
            y = i[0] * i[1]
        elif op == "Sum":
            y = sum(i)
        elif op == "Concat":
            y = torch.cat(i, dim=a["axis"])
        elif op == "Flatten":
            # ONNX's Flatten is 2-D: the axes before `axis`, then the rest.
            ax = a.get("axis", 1)
            ax = ax + i[0].dim() if ax < 0 else ax
            y = i[0].reshape(int(np.prod(i[0].shape[:ax])), -1)
        elif op == "Reshape":
            shape = [int(v) for v in i[1]]
            shape = [x.shape[0] if (k == 0 and v == 0) else v
                     for k, v in enumerate(shape)]
            y = i[0].reshape(shape)
        elif op == "Softmax":
            y = F.softmax(i[0], dim=a.get("axis", -1))
        elif op == "LogSoftmax":
            y = F.log_softmax(i[0], dim=a.get("axis", -1))
        elif op == "Identity":
            if node.output[0] in params or node.output[0] in consts:
                continue  # a weight of its own (see main)
            y = i[0]
        elif op == "Dropout":
            ratio = float(i[1]) if len(i) > 1 and i[1] is not None else 0.5
            training = len(i) > 2 and i[2] is not None and bool(i[2])
            if training and ratio != 0 and train:
                raise SystemExit("torch_reference: random dropout cannot be "
                                 "compared")
            y = i[0]
        elif op == "Constant":
            if "value" in a:
                y = torch.tensor(numpy_helper.to_array(a["value"]).copy())
            elif "value_float" in a or "value_floats" in a:
                y = torch.tensor(a.get("value_float", a.get("value_floats")),
                                 dtype=torch.float32)
            else:
                y = torch.tensor(a.get("value_int", a.get("value_ints")),
                                 dtype=torch.long)
            if y.dtype == torch.float32:
                y = y.to(FLOAT)
        elif op == "Shape":
            y = torch.tensor(list(i[0].shape), dtype=torch.long)
            y = y[a.get("start", 0):a.get("end", len(y))]
        elif op == "CastLike":
            y = i[0].to(i[1].dtype)
        elif op == "Gather":
            ax = a.get("axis", 0) % i[0].dim()
            y = torch.index_select(i[0], ax,
                                   i[1].reshape(-1).long() % i[0].shape[ax])
            y = y.reshape(list(i[0].shape[:ax]) + list(i[1].shape)
                          + list(i[0].shape[ax + 1:]))
        elif op == "Unsqueeze":
            axes = [int(v) for v in (i[1] if len(i) > 1 else a["axes"])]
            y = i[0]
            for ax in sorted(v % (y.dim() + len(axes)) for v in axes):
                y = y.unsqueeze(ax)
        elif op == "Squeeze":
            axes = [int(v) for v in (i[1] if len(i) > 1 else a.get("axes", []))]
            y = i[0]
            for ax in sorted((v % y.dim() for v in axes), reverse=True):
                y = y.squeeze(ax)
        elif op == "Cast":
            to = a["to"]
            y = (i[0].to(FLOAT) if to == onnx.TensorProto.FLOAT else
                 i[0].bool() if to == onnx.TensorProto.BOOL else i[0].long())
        elif op == "Range":
            y = torch.arange(int(i[0]), int(i[1]), int(i[2]), dtype=torch.long)
        elif op == "Transpose":
            y = i[0].permute(*a.get("perm", list(range(i[0].dim()))[::-1]))
        elif op == "Split":
            sizes = ([int(v) for v in i[1]] if len(i) > 1 and i[1] is not None
                     else a.get("split"))
            ax = a.get("axis", 0)
            if sizes is None:
                sizes = [i[0].shape[ax] // len(node.output)] * len(node.output)
            for name, t in zip(node.output, torch.split(i[0], sizes, dim=ax)):
                env[name] = t
            continue
        elif op == "Slice":
            starts, ends = [int(v) for v in i[1]], [int(v) for v in i[2]]
            axes = ([int(v) for v in i[3]] if len(i) > 3 and i[3] is not None
                    else list(range(len(starts))))
            steps = ([int(v) for v in i[4]] if len(i) > 4 and i[4] is not None
                     else [1] * len(starts))
            y = i[0]
            for s0, e0, ax, st in zip(starts, ends, axes, steps):
                # ONNX's clamping, then the positions taken (torch slices
                # refuse negative steps).
                size = y.shape[ax]
                s0, e0 = (v + size if v < 0 else v for v in (s0, e0))
                if st > 0:
                    s0, e0 = (max(0, min(size, v)) for v in (s0, e0))
                else:
                    s0, e0 = max(0, min(size - 1, s0)), max(-1, min(size - 1, e0))
                at = torch.tensor(list(range(s0, e0, st)), dtype=torch.long)
                y = y.index_select(ax if ax >= 0 else ax + y.dim(), at)
        elif op == "Equal":
            y = i[0] == i[1]
        elif op == "Not":
            y = ~i[0]
        elif op == "IsNaN":
            y = torch.isnan(i[0])
        elif op == "ScatterND":
            y = i[0].clone()
            k = i[1].shape[-1]
            upd = i[2].reshape((-1,) + tuple(i[0].shape[k:]))
            for t, at in enumerate(i[1].reshape(-1, k).tolist()):
                y[tuple(at)] = upd[t]
        elif op == "Einsum":
            y = torch.einsum(a["equation"].decode().replace(" ", ""), *i)
        elif op == "Where":
            y = torch.where(i[0].bool(), i[1], i[2])
        elif op == "Div":
            ints = not i[0].is_floating_point() and not i[1].is_floating_point()
            y = (torch.div(i[0], i[1], rounding_mode="trunc") if ints
                 else i[0] / i[1])
        elif op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                    "And", "Or", "Xor", "Min", "Max"):
            fn = {"Less": torch.lt, "LessOrEqual": torch.le,
                  "Greater": torch.gt, "GreaterOrEqual": torch.ge,
                  "And": torch.logical_and, "Or": torch.logical_or,
                  "Xor": torch.logical_xor, "Min": torch.minimum,
                  "Max": torch.maximum}[op]
            y = i[0]
            for other in i[1:]:
                y = fn(y, other)
        elif op == "Reciprocal":
            y = 1.0 / i[0]
        elif op in ("Cos", "Sin"):
            y = torch.cos(i[0]) if op == "Cos" else torch.sin(i[0])
        elif op == "Neg":
            y = -i[0]
        elif op == "Abs":
            y = i[0].abs()
        elif op == "Trilu":
            k = int(i[1]) if len(i) > 1 and i[1] is not None else 0
            y = (torch.triu(i[0], k) if a.get("upper", 1)
                 else torch.tril(i[0], k))
        elif op == "GatherElements":
            y = torch.gather(i[0], a.get("axis", 0), i[1].long())
        elif op == "GatherND":
            assert a.get("batch_dims", 0) == 0
            idx = i[1].long()
            y = i[0][tuple(idx[..., j] for j in range(idx.shape[-1]))]
        elif op == "CumSum":
            ax = int(i[1].reshape(-1)[0])
            x = i[0].flip(ax) if a.get("reverse", 0) else i[0]
            y = torch.cumsum(x, ax)
            if a.get("exclusive", 0):
                y = y - x
            if a.get("reverse", 0):
                y = y.flip(ax)
        elif op == "Mod":
            y = (torch.fmod(i[0], i[1]) if a.get("fmod", 0)
                 else torch.remainder(i[0], i[1]))
        elif op == "Erf":
            y = torch.erf(i[0])
        elif op == "Sqrt":
            y = torch.sqrt(i[0])
        elif op == "Pow":
            y = torch.pow(i[0], i[1])
        elif op == "HardSigmoid":
            y = torch.clamp(a.get("alpha", 0.2) * i[0] + a.get("beta", 0.5),
                            0, 1)
        elif op == "HardSwish":
            y = F.hardswish(i[0])
        elif op in ("ReduceMean", "ReduceSum", "ReduceSumSquare",
                    "ReduceL2", "ReduceMax", "ReduceMin", "ReduceL1",
                    "ReduceLogSumExp"):
            axes = a.get("axes") or [int(v) for v in i[1]]
            keep = bool(a.get("keepdims", 1))
            if op == "ReduceMean":
                y = i[0].mean(dim=axes, keepdim=keep)
            elif op == "ReduceSum":
                y = i[0].sum(dim=axes, keepdim=keep)
            elif op == "ReduceMax":
                y = i[0].amax(dim=axes, keepdim=keep)
            elif op == "ReduceMin":
                y = i[0].amin(dim=axes, keepdim=keep)
            elif op == "ReduceSumSquare":
                y = (i[0] * i[0]).sum(dim=axes, keepdim=keep)
            elif op == "ReduceL1":
                y = i[0].abs().sum(dim=axes, keepdim=keep)
            elif op == "ReduceLogSumExp":
                y = torch.logsumexp(i[0], dim=axes, keepdim=keep)
            else:
                y = torch.linalg.vector_norm(i[0], 2, dim=axes, keepdim=keep)
        elif op == "InstanceNormalization":
            y = F.instance_norm(i[0], weight=i[1], bias=i[2],
                                eps=a.get("epsilon", 1e-5))
        elif op == "LayerNormalization":
            ax = a.get("axis", -1) % i[0].dim()
            y = F.layer_norm(i[0], i[0].shape[ax:], i[1],
                             i[2] if len(i) > 2 else None,
                             a.get("epsilon", 1e-5))
        elif op == "Expand":
            shape = torch.broadcast_shapes(i[0].shape,
                                           tuple(int(v) for v in i[1]))
            y = i[0].expand(shape)
        elif op == "Tile":
            y = i[0].repeat(*[int(v) for v in i[1]])
        elif op == "ConstantOfShape":
            v = numpy_helper.to_array(a["value"]) if "value" in a else [0.0]
            y = torch.full([int(d) for d in i[0]], float(v[0]),
                           dtype=FLOAT)
        elif op == "SplitToSequence":
            sizes = [int(v) for v in i[1].reshape(-1)]
            y = list(torch.split(i[0], sizes[0] if i[1].dim() == 0 else sizes,
                                 dim=a.get("axis", 0)))
        elif op == "SequenceAt":
            y = i[0][int(i[1])]
        elif op == "Pad":
            pads = [int(v) for v in (i[1] if len(i) > 1 else a["pads"])]
            value = float(i[2]) if len(i) > 2 and i[2] is not None else 0.0
            assert a.get("mode", b"constant") == b"constant", "Pad mode"
            r = len(pads) // 2
            torch_pads = []
            for d in reversed(range(r)):
                torch_pads += [pads[d], pads[d + r]]
            y = F.pad(i[0], torch_pads, value=value)
        elif op == "Resize":
            # ONNX's modes as F.interpolate spells them; others are refused.
            mode = a.get("mode", b"nearest").decode()
            coord = a.get("coordinate_transformation_mode",
                          b"half_pixel").decode()
            if len(i) > 3 and i[3] is not None:
                size = [int(v) for v in i[3]][2:]
            else:
                size = [int(d * float(f)) for d, f in
                        zip(i[0].shape[2:], i[2][2:])]
            if mode == "nearest":
                assert coord == "asymmetric", coord
                assert a.get("nearest_mode", b"").decode() == "floor"
                y = F.interpolate(i[0], size=size, mode="nearest")
            else:
                assert mode == "linear", mode
                assert coord in ("half_pixel", "pytorch_half_pixel",
                                 "align_corners"), coord
                y = F.interpolate(i[0], size=size, mode="bilinear",
                                  align_corners=coord == "align_corners")
        else:
            raise SystemExit(f"torch_reference: unsupported op {op}")
        env[node.output[0]] = y
    return env[model.graph.output[0].name], model.graph.node[-1].op_type


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--iterations", type=int, required=True)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    # One pair per trainer run to compare: torch trains once for all of
    # them (the ideal and the tight plan of a model train the same).
    ap.add_argument("--losses", required=True, action="append")
    ap.add_argument("--trained", required=True, action="append")
    ap.add_argument("--optimizer", choices=["sgd", "adam", "adamw"],
                    default="sgd")
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--rtol", type=float, default=2e-4)
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none")
    ap.add_argument("--update-tol", type=float, default=None)
    ap.add_argument("--freeze", default=None)
    ap.add_argument("--train-only", default=None)
    # A PyTorch accumulation loop: each step's batch as N micro-batches,
    # each loss divided by N (BatchNorm statistics per micro-batch).
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--ignore-index", type=int, default=-100,
                    help="the label cross_entropy ignores (torch's default)")
    ap.add_argument("--val-x", default=None)
    ap.add_argument("--val-y", default=None)
    ap.add_argument("--val-every", type=int, default=0)
    ap.add_argument("--val-from-trained", action="store_true")
    args = ap.parse_args()
    global FLOAT
    if args.autocast != "none":
        FLOAT = torch.float32

    torch.manual_seed(0)
    model = onnx.load(args.model)
    bn_stats = set()
    for n in model.graph.node:
        if n.op_type == "BatchNormalization":
            bn_stats.update(n.input[3:5])
    params, consts = {}, {}
    buffers = torch_buffers(model.graph)
    for t in model.graph.initializer:
        arr = torch.tensor(numpy_helper.to_array(t).copy())
        if t.data_type != onnx.TensorProto.FLOAT:
            consts[t.name] = arr
        elif t.name in bn_stats or t.name in buffers:
            consts[t.name] = arr.to(FLOAT)
        else:
            params[t.name] = arr.to(FLOAT).requires_grad_(True)
    # Eval-mode exports store equal parameters once and recreate the others
    # with Identity; they are separate parameters (as memfit trains them).
    # (A running statistic may share its zeros with a bias.)
    for n in model.graph.node:
        if n.op_type != "Identity":
            continue
        src = params.get(n.input[0], consts.get(n.input[0]))
        if src is None or not src.is_floating_point():
            continue
        if n.output[0] in bn_stats:
            consts[n.output[0]] = src.detach().clone()
        else:
            params[n.output[0]] = src.detach().clone().requires_grad_(True)
    for name, p in params.items():
        if ((args.train_only and not re.search(args.train_only, name)) or
                (args.freeze and re.search(args.freeze, name))):
            p.requires_grad_(False)
    if args.val_from_trained:
        return validate_trained(args, model, params, consts)
    trained_params = [p for p in params.values() if p.requires_grad]
    X = torch.tensor(np.load(args.x))
    X = X.long() if X.dtype in (torch.int64, torch.int32) else X.to(FLOAT)
    Y = torch.tensor(np.load(args.y))
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(trained_params, lr=args.lr,
                              momentum=args.momentum,
                              weight_decay=args.weight_decay)
    else:
        cls = torch.optim.Adam if args.optimizer == "adam" else torch.optim.AdamW
        opt = cls(trained_params, lr=args.lr,
                  betas=(args.beta1, args.beta2), eps=args.eps,
                  weight_decay=args.weight_decay)
    losses, validations = [], []
    for it in range(args.iterations):
        s = (it * args.batch) % (X.shape[0] - X.shape[0] % args.batch)
        xb, yb = X[s:s + args.batch], Y[s:s + args.batch]
        opt.zero_grad()
        step_loss = 0.0
        for xm, ym in zip(xb.chunk(args.accumulate), yb.chunk(args.accumulate)):
            with torch.autocast("cpu", dtype=torch.bfloat16,
                                enabled=args.autocast == "bf16"):
                out, last = run_graph(model, params, consts, xm)
            out = out.to(FLOAT)  # the loss in full precision, as autocast does
            if Y.dtype in (torch.int64, torch.int32):
                # Classes on the last axis for token-id models, else axis 1
                # (memfit's default, --class-axis auto).
                if out.dim() > 2 and X.dtype == torch.int64:
                    out = out.reshape(-1, out.shape[-1])
                    ym = ym.reshape(-1)
                ig = args.ignore_index
                if last == "Softmax":
                    loss = F.nll_loss(torch.log(out), ym.long(),
                                      ignore_index=ig)
                elif last == "LogSoftmax":
                    loss = F.nll_loss(out, ym.long(), ignore_index=ig)
                else:
                    loss = F.cross_entropy(out, ym.long(), ignore_index=ig)
            else:
                loss = F.mse_loss(out, ym.to(FLOAT))
            loss = loss / args.accumulate
            loss.backward()
            step_loss += float(loss)
        opt.step()
        losses.append(step_loss)
        if args.val_x and ((args.val_every and (it + 1) % args.val_every == 0)
                           or it + 1 == args.iterations):
            validations.append(validate(args, model, params, consts))

    if len(args.losses) != len(args.trained):
        print(f"{len(args.losses)} --losses against {len(args.trained)} "
              "--trained: give one of each per run")
        return 2
    worst_rc = 0
    for log, trained in zip(args.losses, args.trained):
        prefix = f"{trained}: " if len(args.losses) > 1 else ""
        rc = compare_run(args, model, params, consts, bn_stats, losses, log,
                         trained, prefix)
        if rc == 0 and args.val_x:
            rc = compare_validations(args, validations, log, prefix)
        worst_rc = max(worst_rc, rc)
    return worst_rc


def validate(args, model, params, consts):
    """Eval mode under no_grad over the whole validation set: the mean loss
    over every position and the share of positions argmax gets right."""
    X = torch.tensor(np.load(args.val_x))
    X = X.long() if X.dtype in (torch.int64, torch.int32) else X.to(FLOAT)
    Y = torch.tensor(np.load(args.val_y))
    with torch.no_grad():
        out, last = run_graph(model, params, consts, X, train=False)
        out = out.to(FLOAT)
        if Y.dtype not in (torch.int64, torch.int32):
            return float(F.mse_loss(out, Y.to(FLOAT))), None
        if out.dim() > 2 and X.dtype == torch.int64:
            out = out.reshape(-1, out.shape[-1])
        Y = Y.reshape(-1).long() if out.dim() == 2 else Y.long()
        logp = (torch.log(out) if last == "Softmax" else
                out if last == "LogSoftmax" else F.log_softmax(out, 1))
        loss = float(F.nll_loss(logp, Y, ignore_index=args.ignore_index))
        counted = Y != args.ignore_index
        accuracy = float((out.argmax(1) == Y)[counted].to(FLOAT).mean())
    return loss, accuracy


def validate_trained(args, model, params, consts):
    """--val-from-trained: no training here (a model with dropout draws its
    own masks); the trainer's last validation against torch's eval mode of
    the weights the trainer saved."""
    trained = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(args.trained[0]).graph.initializer}
    for d in (params, consts):
        for name in d:
            if name in trained and trained[name].dtype == np.float32:
                d[name] = torch.tensor(trained[name].copy()).to(FLOAT)
    text = open(args.losses[0]).read()
    last = len(re.findall(r"^validation after step", text, re.M))
    ref = validate(args, model, params, consts)
    return compare_validations(args, [None] * (last - 1) + [ref],
                               args.losses[0], "")


def compare_validations(args, validations, log_path, prefix):
    """The trainer's "validation after step" lines against torch's eval."""
    got = re.findall(r"^validation after step \d+\s+val loss (\S+)"
                     r"(?:\s+accuracy (\S+)%)?", open(log_path).read(), re.M)
    if len(got) != len(validations):
        print(f"{prefix}trainer printed {len(got)} validations, expected "
              f"{len(validations)}")
        return 1
    n = len(np.load(args.val_y))
    for k, ((loss, acc), ref) in enumerate(zip(got, validations)):
        if ref is None:
            continue  # --val-from-trained: the last one only
        ref_loss, ref_acc = ref
        if abs(float(loss) - ref_loss) > args.rtol * max(1.0, abs(ref_loss)):
            print(f"{prefix}validation {k + 1}: trainer loss {loss}, torch "
                  f"{ref_loss!r}")
            return 1
        # A logit within rounding of another may flip one argmax.
        if ref_acc is not None and abs(float(acc) / 100 - ref_acc) > 1.01 / n:
            print(f"{prefix}validation {k + 1}: trainer accuracy {acc}%, "
                  f"torch {100 * ref_acc:.4f}%")
            return 1
    print(f"{prefix}validation agrees with torch's eval mode: "
          f"{len(validations)} evaluations of {n} samples")
    return 0


def compare_run(args, model, params, consts, bn_stats, losses, log_path,
                trained_path, prefix):
    """One trainer run (its log's losses, its saved model) against torch's."""
    got = [float(m.group(1)) for m in
           re.finditer(r"^iteration \d+\s+loss (\S+)", open(log_path).read(),
                       re.M)]
    if len(got) != len(losses):
        print(f"{prefix}trainer printed {len(got)} losses, expected "
              f"{len(losses)}")
        return 1
    for k, (a, b) in enumerate(zip(got, losses)):
        if abs(a - b) > args.rtol * max(1.0, abs(b)):
            print(f"{prefix}loss {k + 1}: trainer {a!r}, torch {b!r}")
            return 1
    trained = {t.name: numpy_helper.to_array(t)
               for t in onnx.load(trained_path).graph.initializer}
    if args.update_tol is not None:
        return compare_updates(model, params, consts, bn_stats, trained,
                               args.update_tol, len(losses), prefix)
    worst = 0.0
    for name, p in list(params.items()) + [(n, consts[n]) for n in bn_stats]:
        if p.requires_grad and p.grad is None:
            continue  # a buffer (a causal mask), not a parameter
        ref = p.detach().numpy()
        if name not in trained:
            print(f"{prefix}trained model lacks {name}")
            return 1
        err = np.max(np.abs(trained[name] - ref)) / max(1e-3, np.max(np.abs(ref)))
        worst = max(worst, err)
        if __import__("os").environ.get("REFDEBUG"): print(name, err)
        if err > args.rtol * 10:
            print(f"{prefix}weight {name}: relative difference {err:.3g}")
            return 1
    print(f"{prefix}agree with torch: {len(losses)} losses, worst weight "
          f"difference {worst:.2e}")
    return 0


def compare_updates(model, params, consts, bn_stats, trained, tol, steps,
                    prefix=""):
    """Each weight's update by the trainer against torch's, relative to
    torch's (running statistics count as weights)."""
    initial = {t.name: numpy_helper.to_array(t).astype(np.float64)
               for t in model.graph.initializer}
    worst, worst_name = 0.0, ""
    for name, p in list(params.items()) + [(n, consts[n]) for n in bn_stats]:
        if p.requires_grad and p.grad is None:
            continue  # a buffer, not a parameter
        if name not in trained or name not in initial:
            continue  # a weight recreated by Identity: its source is checked
        ref = p.detach().double().numpy() - initial[name]
        got = trained[name].astype(np.float64) - initial[name]
        scale = np.linalg.norm(ref)
        if scale == 0:
            continue
        err = np.linalg.norm(got - ref) / scale
        if __import__("os").environ.get("REFDEBUG"):
            print(name, err)
        if err > worst:
            worst, worst_name = err, name
    if worst > tol:
        print(f"{prefix}weight {worst_name}: update differs by {worst:.3g} of "
              f"torch's (tolerance {tol})")
        return 1
    print(f"{prefix}agree with torch: {steps} losses, worst weight update "
          f"difference {worst:.2e} ({worst_name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
