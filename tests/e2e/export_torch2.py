#!/usr/bin/env python3
"""Export today's test models with PyTorch 2 into tests/models/torch2/.

usage: export_torch2.py OUTDIR [--only FILE,...]
                         (run with a PyTorch 2 python; the test machines have
                         Debian's torch 1.13)

Each model of today_models.py in MODELS below is exported by both of torch
2's exporters: the TorchScript-based one (opset 17, dynamic batch) and the
dynamo-based one (torch.export, opset 18, batch dimension N). Beside each
model it writes a data set of two batches of four. onnxruntime runs every
export on the first batch and must agree with the torch module, so the
files are what torch means. manifest.json records the versions.

The files are committed: tests/cli/today_exporters.sh plans and trains them and
compares with tests/e2e/torch_reference.py, without torch 2.
"""
import json
import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import today_models  # noqa: E402

MODELS = ["gpt", "bert", "vit", "convnext", "mobilenetv3", "unet"]
# Exported by torch.export only: Funnel-style relative attention with an
# in-place product on a slice of the scores, which torch.export writes as
# ScatterND at contiguous rows (the TorchScript exporter indexes every
# element, counting over the batch).
DYNAMO_ONLY = ["relative-slice"]
# Hugging Face transformers models from their configs (random weights, no
# download), returning the logits; (name, attention implementation).
# The dynamo exports of sdpa attention guard the softmax with
# Where(IsNaN(p), 0, p). Llama uses grouped-query attention (2 key/value
# heads for 4 query heads), whose sdpa form TorchScript cannot export; its
# dynamo export computes the rotary tables from the inv_freq buffer.
HF_MODELS = [(name, attention, exporter)
             for name in ("hf-gpt2", "hf-bert", "hf-vit", "hf-llama")
             for attention in ("eager", "sdpa")
             for exporter in ("torchscript", "dynamo")
             if (name, attention, exporter) != ("hf-llama", "sdpa",
                                                 "torchscript")]
# transformers 5 builds its masks per sample (arange over the batch, the
# packed-sequence check on position ids): torch.export traces that only at
# a fixed batch, and a user exports at the batch they train with.
HF_MODELS += [("hf-gpt2", "sdpa", "dynamo-fixed"),
              ("hf-llama", "sdpa", "dynamo-fixed")]
# Without a cache (use_cache=False, as fine-tuning recipes set it) their
# masks count up to a dynamic batch: memfit reads such a graph at the batch
# it plans (onnx-import.md).
HF_MODELS += [("hf-gpt2", "sdpa", "dynamo-nocache"),
              ("hf-llama", "sdpa", "dynamo-nocache"),
              ("hf-mobilebert", "eager", "dynamo"),
              ("hf-bloom", "eager", "torchscript"),
              ("hf-bloom", "eager", "dynamo"),
              ("hf-beit", "eager", "torchscript"),
              ("hf-swinv2", "eager", "dynamo-fixed")]


class Logits(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x).logits


def hf_model(name, attention, use_cache=True):
    model, kind = hf_config_model(name, attention)
    model.inner.config.use_cache = use_cache
    return model, kind


def hf_config_model(name, attention):
    import transformers as T
    if name == "hf-gpt2":
        cfg = T.GPT2Config(vocab_size=61, n_positions=16, n_embd=32, n_layer=2,
                           n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                           attn_pdrop=0.0, attn_implementation=attention)
        return Logits(T.GPT2LMHeadModel(cfg)), "tokens"
    if name == "hf-bert":
        cfg = T.BertConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=64,
                           max_position_embeddings=16,
                           hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0,
                           attn_implementation=attention)
        return Logits(T.BertForMaskedLM(cfg)), "tokens"
    if name == "hf-vit":
        cfg = T.ViTConfig(image_size=16, patch_size=4, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=64, num_labels=10,
                          hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0,
                          attn_implementation=attention)
        return Logits(T.ViTForImageClassification(cfg)), "image"
    if name == "hf-llama":
        cfg = T.LlamaConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2,
                            intermediate_size=64, max_position_embeddings=16,
                            attn_implementation=attention)
        return Logits(T.LlamaForCausalLM(cfg)), "tokens"
    if name == "hf-mobilebert":
        # Its output table is a Concat of the tied embedding (transposed)
        # and a dense weight; its trigram embedding pads the tokens.
        cfg = T.MobileBertConfig(vocab_size=61, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, embedding_size=16,
                                 intra_bottleneck_size=16,
                                 true_hidden_size=16,
                                 num_feedforward_networks=1,
                                 max_position_embeddings=16,
                                 hidden_dropout_prob=0.0,
                                 attention_probs_dropout_prob=0.0,
                                 attn_implementation=attention)
        return Logits(T.MobileBertForMaskedLM(cfg)), "tokens"
    if name == "hf-bloom":
        # ALiBi: per-head slopes times positions, tiled to [N * heads, 1, T]
        # and added to the scores of [N * heads, T, T].
        cfg = T.BloomConfig(vocab_size=61, hidden_size=32, n_layer=2,
                            n_head=4, hidden_dropout=0.0,
                            attention_dropout=0.0,
                            attn_implementation=attention)
        return Logits(T.BloomForCausalLM(cfg)), "tokens"
    if name == "hf-beit":
        # Its relative position table is interpolated to the window
        # (F.interpolate of a weight, to the table's own size here).
        cfg = T.BeitConfig(image_size=16, patch_size=4, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, num_labels=10,
                           use_relative_position_bias=True,
                           hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0,
                           drop_path_rate=0.0, attn_implementation=attention)
        return Logits(T.BeitForImageClassification(cfg)), "image"
    if name == "hf-swinv2":
        # torch.export traces its window reshapes at a fixed batch only:
        # [N * windows, -1, heads, d] spelled with that batch; its pooler's
        # flatten becomes a gather of every element in order.
        cfg = T.Swinv2Config(image_size=16, patch_size=4, embed_dim=16,
                             depths=[1, 1], num_heads=[2, 2], window_size=2,
                             num_labels=10, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0,
                             drop_path_rate=0.0)
        return Logits(T.Swinv2ForImageClassification(cfg)), "image"
    raise SystemExit(f"no Hugging Face model {name}")
# The dynamo exporter's default graph optimization rewrites the parameters
# for inference: initializers with equal values are merged (tying the
# zero-initialized biases of different layers), weights are stored
# pre-transposed, BatchNorm is folded into the convolutions, and literals
# such as GELU's 0.5 become initializers, which memfit would train. For
# training the exports are written without it (optimize=False): the
# initializers are then exactly the module's parameters.
BATCH = 4


def export(name, exporter, out, attention=None):
    torch.manual_seed(0)
    if attention:
        model, kind = hf_model(name, attention,
                               use_cache=exporter != "dynamo-nocache")
        file = f"{name}-{attention}-{exporter}"
    else:
        make, kind = today_models.MODELS[name]
        model = make()
        file = f"{name}-{exporter}"
    # The Hugging Face configs use today_models' sizes.
    tokens = (61, 16) if attention else today_models.sequence_shape(model)
    x, y = today_models.dataset(kind, 2 * BATCH, tokens)
    example = torch.tensor(x[:BATCH])
    path = os.path.join(out, f"{file}.onnx")
    if exporter in ("dynamo", "dynamo-nocache"):
        arg = "idx" if kind == "tokens" and not attention else "x"
        torch.onnx.export(model, (example,), path, dynamo=True,
                          optimize=False,
                          opset_version=18, input_names=["x"],
                          output_names=["y"], external_data=False,
                          dynamic_shapes={arg: {0: torch.export.Dim("N", min=2)}})
    elif exporter == "dynamo-fixed":
        torch.onnx.export(model, (example,), path, dynamo=True,
                          optimize=False, opset_version=18, input_names=["x"],
                          output_names=["y"], external_data=False)
    else:
        torch.onnx.export(model, (example,), path, dynamo=False,
                          opset_version=17, input_names=["x"],
                          output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    np.save(os.path.join(out, f"{file}-x.npy"), x)
    np.save(os.path.join(out, f"{file}-y.npy"), y)
    # Training-mode BatchNorm (batch statistics) in the TorchScript export;
    # the dynamo export's inference form uses the running statistics.
    model.train(not exporter.startswith("dynamo"))
    with torch.no_grad():
        want = model(example).numpy()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x[:BATCH]})[0]
    err = float(np.max(np.abs(got - want)))
    proto = onnx.load(path)
    opset = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    print(f"{file}: opset {opset[0]}, IR {proto.ir_version}, "
          f"onnxruntime vs torch {err:.2e}")
    if err > 1e-4:
        sys.exit(f"{file}: onnxruntime disagrees with torch")
    return {"opset": opset[0], "ir_version": proto.ir_version,
            "onnxruntime_vs_torch": err}


def main():
    warnings.filterwarnings("ignore")
    out = sys.argv[1]
    # --only A,B: export those files alone, the others' manifest rows kept.
    only = (set(sys.argv[sys.argv.index("--only") + 1].split(","))
            if "--only" in sys.argv else None)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "manifest.json")
    old = json.load(open(path)) if only and os.path.exists(path) else {}
    manifest = {"torch": torch.__version__, "onnx": onnx.__version__,
                "onnxruntime": ort.__version__,
                "models": old.get("models", {})}
    import transformers
    manifest["transformers"] = transformers.__version__
    if only:  # the top-level versions are the full export's
        manifest.update({k: old[k] for k in ("torch", "onnx", "onnxruntime",
                                             "transformers") if k in old})
    for name in MODELS:
        for exporter in ("torchscript", "dynamo"):
            if only is None or f"{name}-{exporter}" in only:
                manifest["models"][f"{name}-{exporter}"] = export(
                    name, exporter, out)
    for name in DYNAMO_ONLY:
        if only is None or f"{name}-dynamo" in only:
            manifest["models"][f"{name}-dynamo"] = export(name, "dynamo", out)
    for name, attention, exporter in HF_MODELS:
        file = f"{name}-{attention}-{exporter}"
        if only is None or file in only:
            entry = export(name, exporter, out, attention)
            if only:  # the versions that wrote this file
                entry.update(torch=torch.__version__,
                             transformers=transformers.__version__)
            manifest["models"][file] = entry
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
