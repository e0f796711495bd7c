#!/usr/bin/python3
"""Exports today's model families with the installed torch and transformers
(small configs, random weights, training mode, no download) and asks memfit
to import, plan and verify each: the table of docs/model-zoo.md. With
`--library timm`, the vision architectures of timm (PyTorch Image Models)
instead: CNNs beyond torchvision, vision transformers, hybrids and MLP
mixers, each at its smallest variant, 10 classes, random weights.

usage: model-suite.py MEMFIT OUT_DIR [--library transformers|timm]
                      [--families A,B,...] [--markdown FILE] [--json FILE]

Each family is exported with torch.onnx's TorchScript exporter (training
mode, do_constant_folding=False, as the user guide's recipe), and with the
dynamo exporter where torch has one (torch >= 2.5 with onnxscript): with a
dynamic batch, and at a fixed batch where torch.export cannot trace a
dynamic one or memfit says the graph counts up to the batch size (the
user guide's advice for transformers' masks). memfit
then runs `inspect` (parameters beside torch's count) and `plan` at batch
2 with the whole budget (every plan is verified before it is written).
Prints one row per family and exporter; exits 0 (the table is the result).
A family whose export fails is listed as such: that is torch's limit, not
memfit's.
"""
import argparse
import contextlib
import functools
import io
import logging
import json
import os
import re
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402

# torch.export logs every failed guard; the table keeps the first line.
logging.getLogger("torch").setLevel(logging.CRITICAL)

T = 8  # sequence length
IMAGE = 32  # image side


def tiny_text(cfg):
    """Shrinks a text config in place: 2 layers, width 32, vocab 96."""
    for k, v in dict(vocab_size=96, hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=64,
                     max_position_embeddings=64, n_embd=32, n_layer=2,
                     n_head=2, n_positions=64, d_model=32, num_layers=2,
                     num_heads=2, d_ff=64, d_kv=16, ffn_dim=64,
                     encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=2, decoder_attention_heads=2,
                     encoder_ffn_dim=64, decoder_ffn_dim=64,
                     num_key_value_heads=2, head_dim=16, embedding_size=32,
                     word_embed_proj_dim=32, use_cache=False,
                     pad_token_id=1, bos_token_id=2, eos_token_id=2,
                     decoder_start_token_id=2).items():
        if hasattr(cfg, k) or k in ("use_cache",):
            try:
                setattr(cfg, k, v)
            except Exception:
                pass
    return cfg


def families():
    import transformers as tf

    def text(name, cfg_cls, model_cls, kind, **extra):
        def build():
            cfg = tiny_text(getattr(tf, cfg_cls)())
            for k, v in extra.items():
                setattr(cfg, k, v)
            return getattr(tf, model_cls)(cfg), "tokens"
        return name, kind, build

    def vision(name, cfg_cls, model_cls, **extra):
        def build():
            cfg = getattr(tf, cfg_cls)(image_size=IMAGE, num_labels=10,
                                       **extra)
            return getattr(tf, model_cls)(cfg), "image"
        return name, "vision", build

    out = [
        text("BERT", "BertConfig", "BertForMaskedLM", "encoder"),
        text("RoBERTa", "RobertaConfig", "RobertaForMaskedLM", "encoder"),
        text("XLM-RoBERTa", "XLMRobertaConfig", "XLMRobertaForMaskedLM",
             "encoder"),
        text("CamemBERT", "CamembertConfig", "CamembertForMaskedLM",
             "encoder"),
        text("DeBERTa-v2", "DebertaV2Config", "DebertaV2ForMaskedLM",
             "encoder"),
        text("DeBERTa", "DebertaConfig", "DebertaForMaskedLM", "encoder"),
        text("ELECTRA", "ElectraConfig", "ElectraForMaskedLM", "encoder"),
        text("ALBERT", "AlbertConfig", "AlbertForMaskedLM", "encoder"),
        text("DistilBERT", "DistilBertConfig", "DistilBertForMaskedLM",
             "encoder", dim=32, n_layers=2, n_heads=2, hidden_dim=64),
        text("MPNet", "MPNetConfig", "MPNetForMaskedLM", "encoder"),
        text("MobileBERT", "MobileBertConfig", "MobileBertForMaskedLM",
             "encoder", embedding_size=16, intra_bottleneck_size=16,
             true_hidden_size=16, num_feedforward_networks=1),
        text("Funnel", "FunnelConfig", "FunnelForMaskedLM", "encoder",
             block_sizes=[1, 1], d_head=16, d_inner=64),
        text("ERNIE", "ErnieConfig", "ErnieForMaskedLM", "encoder"),
        text("RoFormer", "RoFormerConfig", "RoFormerForMaskedLM", "encoder"),
        text("Nystromformer", "NystromformerConfig",
             "NystromformerForMaskedLM", "encoder", num_landmarks=4,
             segment_means_seq_len=T),
        text("T5", "T5Config", "T5ForConditionalGeneration", "seq2seq"),
        text("BART", "BartConfig", "BartForConditionalGeneration", "seq2seq"),
        text("mBART", "MBartConfig", "MBartForConditionalGeneration",
             "seq2seq"),
        text("Pegasus", "PegasusConfig", "PegasusForConditionalGeneration",
             "seq2seq"),
        text("Marian", "MarianConfig", "MarianMTModel", "seq2seq"),
        text("GPT-2", "GPT2Config", "GPT2LMHeadModel", "decoder"),
        text("GPT-Neo", "GPTNeoConfig", "GPTNeoForCausalLM", "decoder",
             attention_types=[[["global", "local"], 1]], window_size=4),
        text("GPT-NeoX", "GPTNeoXConfig", "GPTNeoXForCausalLM", "decoder"),
        text("GPT-J", "GPTJConfig", "GPTJForCausalLM", "decoder",
             rotary_dim=8),
        text("OPT", "OPTConfig", "OPTForCausalLM", "decoder", ffn_dim=64),
        text("BLOOM", "BloomConfig", "BloomForCausalLM", "decoder"),
        text("CodeGen", "CodeGenConfig", "CodeGenForCausalLM", "decoder",
             rotary_dim=8, n_ctx=64),
        text("Llama", "LlamaConfig", "LlamaForCausalLM", "decoder"),
        text("Mistral", "MistralConfig", "MistralForCausalLM", "decoder"),
        text("Qwen2", "Qwen2Config", "Qwen2ForCausalLM", "decoder"),
        text("Gemma", "GemmaConfig", "GemmaForCausalLM", "decoder"),
        text("Phi", "PhiConfig", "PhiForCausalLM", "decoder"),
        text("StableLM", "StableLmConfig", "StableLmForCausalLM", "decoder"),
        text("Falcon", "FalconConfig", "FalconForCausalLM", "decoder"),
        text("MPT", "MptConfig", "MptForCausalLM", "decoder", d_model=32,
             n_heads=2, n_layers=2, expansion_ratio=2),
        text("XGLM", "XGLMConfig", "XGLMForCausalLM", "decoder",
             ffn_dim=64, attention_heads=2),
        # Sequence classification on a decoder: each sequence's score at
        # its last token before the padding (an ArgMax over the ids, then
        # one row per sample picked).
        text("GPT-2 classifier", "GPT2Config",
             "GPT2ForSequenceClassification", "classifier", num_labels=3),
        text("Llama classifier", "LlamaConfig",
             "LlamaForSequenceClassification", "classifier", num_labels=3),
        text("Qwen2 classifier", "Qwen2Config",
             "Qwen2ForSequenceClassification", "classifier", num_labels=3),
        vision("ViT", "ViTConfig", "ViTForImageClassification",
               hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, patch_size=8),
        vision("DeiT", "DeiTConfig", "DeiTForImageClassification",
               hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, patch_size=8),
        vision("BEiT", "BeitConfig", "BeitForImageClassification",
               hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, patch_size=8,
               use_relative_position_bias=True),
        vision("Swin", "SwinConfig", "SwinForImageClassification",
               embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=2,
               patch_size=4),
        vision("Swin V2", "Swinv2Config", "Swinv2ForImageClassification",
               embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=2,
               patch_size=4),
        vision("ConvNeXt", "ConvNextConfig", "ConvNextForImageClassification",
               hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
        vision("ConvNeXt V2", "ConvNextV2Config",
               "ConvNextV2ForImageClassification", hidden_sizes=[16, 32],
               depths=[1, 1], num_stages=2),
        vision("ResNet", "ResNetConfig", "ResNetForImageClassification",
               hidden_sizes=[16, 32], depths=[1, 1], embedding_size=16),
        vision("RegNet", "RegNetConfig", "RegNetForImageClassification",
               hidden_sizes=[16, 32], depths=[1, 1], embedding_size=16,
               groups_width=8),
        vision("MobileViT", "MobileViTConfig",
               "MobileViTForImageClassification", hidden_sizes=[16, 16, 16],
               neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32]),
        vision("LeViT", "LevitConfig", "LevitForImageClassification",
               hidden_sizes=[16, 32, 48], num_attention_heads=[1, 2, 3],
               depths=[1, 1, 1], key_dim=[8, 8, 8], patch_size=4),
        vision("PoolFormer", "PoolFormerConfig",
               "PoolFormerForImageClassification", hidden_sizes=[16, 16, 32,
                                                                 32],
               depths=[1, 1, 1, 1]),
    ]
    return out


# timm's architectures, grouped by kind (CNNs, mobile networks, modern
# CNNs, MetaFormers, transformers, hybrids, MLP mixers): (name, timm model
# name, image side, whether timm.create_model takes the side as img_size).
# 32 x 32 images where the architecture takes them (img_size for the
# transformers, whose position tables follow it); larger where its stem or
# windows need more. Not VGG: timm's reads
# a 7 x 7 map (224-pixel images, 530 MB of weights), and torchvision's
# VGG-16 is among the golden cases.
TIMM = [
    ("ResNet-10-T", "resnet10t", 32, False),
    ("SE-ResNeXt-26D", "seresnext26d_32x4d", 32, False),
    ("ECA-ResNet-26T", "ecaresnet26t", 32, False),
    ("SK-ResNet-18", "skresnet18", 32, False),
    ("Res2Net-50", "res2net50_14w_8s", 32, False),
    ("CSPResNet-50", "cspresnet50", 32, False),
    ("DLA-34", "dla34", 32, False),
    ("DenseNet-121", "densenet121", 32, False),
    ("RegNetX-200MF", "regnetx_002", 32, False),
    ("RegNetY-200MF", "regnety_002", 32, False),
    ("GENet-S", "gernet_s", 32, False),
    ("SelecSLS-42B", "selecsls42b", 32, False),
    ("HRNet-W18-S", "hrnet_w18_small", 64, False),
    ("NFNet-L0", "nfnet_l0", 32, False),
    ("Inception-v3", "inception_v3", 96, False),
    ("EfficientNet-B0", "efficientnet_b0", 32, False),
    ("MobileNetV3-S", "mobilenetv3_small_050", 32, False),
    ("MnasNet-S", "mnasnet_small", 32, False),
    ("FBNet-C", "fbnetc_100", 32, False),
    ("HardCoReNAS-A", "hardcorenas_a", 32, False),
    ("GhostNet", "ghostnet_050", 32, False),
    ("ReXNet", "rexnet_100", 32, False),
    ("LCNet", "lcnet_050", 32, False),
    ("TinyNet-E", "tinynet_e", 32, False),
    ("RepViT-M1", "repvit_m1", 32, False),
    ("ConvNeXt-Atto", "convnext_atto", 32, False),
    ("ConvNeXtV2-Atto", "convnextv2_atto", 32, False),
    ("EdgeNeXt-XXS", "edgenext_xx_small", 32, False),
    ("FastViT-T8", "fastvit_t8", 32, False),
    ("PoolFormer-S12", "poolformer_s12", 32, False),
    ("PoolFormerV2-S12", "poolformerv2_s12", 32, False),
    ("DeiT-Ti", "deit_tiny_patch16_224", 32, True),
    ("ViT-Ti", "vit_tiny_patch16_224", 32, True),
    ("CaiT-XXS24", "cait_xxs24_224", 32, True),
    ("XCiT-N12", "xcit_nano_12_p16_224", 32, True),
    ("PiT-Ti", "pit_ti_224", 32, True),
    ("Swin-T", "swin_tiny_patch4_window7_224", 56, True),
    ("Twins-PCPVT-S", "twins_pcpvt_small", 32, True),
    ("VOLO-D1", "volo_d1_224", 32, True),
    ("LeViT-128S", "levit_128s", 32, True),
    ("MobileViT-XXS", "mobilevit_xxs", 32, False),
    ("MobileViTv2-0.5", "mobilevitv2_050", 32, False),
    ("EfficientFormer-L1", "efficientformer_l1", 224, False),
    ("EfficientViT-B0", "efficientvit_b0", 32, False),
    ("CoaT-Lite-Ti", "coat_lite_tiny", 32, True),
    ("BoTNet-26T", "botnet26t_256", 64, True),
    ("HaloNet-26T", "halonet26t", 64, True),
    ("MLP-Mixer-S16", "mixer_s16_224", 32, True),
    ("gMLP-Ti16", "gmlp_ti16_224", 32, True),
    ("ResMLP-12", "resmlp_12_224", 32, True),
    ("Sequencer2D-S", "sequencer2d_s", 32, False),
]


def timm_families():
    import timm

    def image(arch, side, sized):
        def build():
            extra = {"img_size": side} if sized else {}
            m = timm.create_model(arch, pretrained=False, num_classes=10,
                                  **extra)
            return m, side
        return build
    return [(name, "image", image(arch, side, sized))
            for name, arch, side, sized in TIMM]


class Logits(torch.nn.Module):
    """The model's logits from its one data input (a seq2seq model reads the
    tokens as its decoder's input too)."""

    def __init__(self, m, kind):
        super().__init__()
        self.m, self.kind = m, kind

    def forward(self, x):
        if self.kind == "seq2seq":
            return self.m(input_ids=x, decoder_input_ids=x).logits
        if self.kind == "vision":
            return self.m(pixel_values=x).logits
        if self.kind == "image":  # timm: the logits themselves
            return self.m(x)
        return self.m(input_ids=x).logits


@functools.lru_cache(None)
def exporters():
    """The exporters the installed torch has: the dynamo exporter (torch.export
    and onnxscript) where torch.onnx.export takes `dynamo`."""
    import inspect
    names = ["torchscript"]
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        try:
            import onnxscript  # noqa: F401
            names.append("dynamo")
        except ImportError:
            print("model-suite: no onnxscript, the dynamo exporter is left out")
    return names


def export(name, kind, build, path, exporter):
    torch.manual_seed(0)
    model, side = build()
    model.train()
    # Traced at batch 3 (no other extent of these configs), the batch
    # symbolic as the user guide's recipes write it.
    if kind == "image":
        x = torch.randn(3, 3, side, side)
    else:
        x = (torch.randn(3, 3, IMAGE, IMAGE) if kind == "vision"
             else torch.randint(3, 96, (3, T)))
    params = sum(p.numel() for p in model.parameters())
    if exporter in ("dynamo", "dynamo-fixed"):
        # The user guide's recipe: the batch dynamic; at a fixed batch where
        # torch.export cannot trace a dynamic one (transformers 4.5x's
        # masks) or memfit cannot fold what it traced (transformers 5's
        # masks index each sample: arange over the batch), as a user
        # following memfit's message does.
        shapes = ({"dynamic_shapes": {"x": {0: torch.export.Dim("N", min=2)}}}
                  if exporter == "dynamo" else {})
        if exporter == "dynamo-fixed":
            x = x[:2]
        with contextlib.redirect_stdout(io.StringIO()):
            torch.onnx.export(Logits(model, kind), (x,), path, dynamo=True,
                              optimize=False, input_names=["x"],
                              output_names=["y"], external_data=False,
                              verbose=False, **shapes)
        return params
    extra = {"dynamo": False} if "dynamo" in exporters() else {}
    torch.onnx.export(Logits(model, kind), (x,), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x"],
                      output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, **extra)
    return params


def memfit(binary, path, params):
    r = subprocess.run([binary, "inspect", path, "--batch", "2", "--json"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return "import fails", first_error(r.stderr), None
    counted = json.loads(r.stdout)["parameters"]
    r = subprocess.run([binary, "plan", path, "--batch", "2", "--budget",
                        "100%", "-o", path + ".plan", "--force"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return "plan fails", first_error(r.stderr), counted
    note = "" if counted == params else \
        f"{counted} parameters, torch counts {params}"
    return "plans and verifies", note, counted


def first_error(text):
    """The first reason memfit gives, without the file's path."""
    lines = [l for l in text.splitlines() if l.strip()]
    nodes = [l.strip() for l in lines if l.strip().startswith("node '")]
    if nodes:  # the first node refused, past any headers
        return nodes[0]
    if len(lines) > 1 and lines[0].rstrip().endswith(":"):
        return lines[1].strip()
    if not lines:
        return "(no message)"
    line = lines[0].replace("memfit: error: ", "")
    return re.sub(r"^'[^']*': |^[^ ]*\.onnx: ", "", line)


def one(args, name, kind, build, exporter):
    row = attempt(args, name, kind, build, exporter)
    if exporter == "dynamo" and (
            row["status"] == "export fails" or
            "counts up to the batch size" in row["note"]):
        first = row["note"]
        row = attempt(args, name, kind, build, "dynamo-fixed")
        row["exporter"] = "dynamo"
        why = ("memfit refuses an arange over the dynamic batch"
               if "counts up to the batch size" in first else
               "torch.export fails on a dynamic one: " + first[:70])
        row["note"] = "; ".join(t for t in (
            f"batch fixed at export ({why})", row["note"]) if t)
    print(f"{name:14} {exporter:11} {row['status']}"
          f"{': ' + row['note'] if row['note'] else ''}", flush=True)
    return row


def attempt(args, name, kind, build, exporter):
    path = os.path.join(args.out, re.sub(r"[^a-z0-9]+", "-", name.lower()) +
                        f"-{exporter}.onnx")
    try:
        params = export(name, kind, build, path, exporter)
    except Exception as e:  # torch's limit, reported as such
        while e.__cause__ is not None:  # torch.onnx wraps torch.export's
            e = e.__cause__
        msg = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in
               str(e).strip().splitlines() if l.strip()]
        note = (msg[0] if msg else type(e).__name__)[:160]
        return dict(family=name, kind=kind, exporter=exporter,
                    status="export fails", note=note, params=None,
                    memfit_params=None)
    status, note, counted = memfit(args.memfit, path, params)
    return dict(family=name, kind=kind, exporter=exporter, status=status,
                note=note[:200], params=params, memfit_params=counted)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfit")
    ap.add_argument("out")
    ap.add_argument("--library", choices=("transformers", "timm"),
                    default="transformers")
    ap.add_argument("--families", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    try:
        library = __import__(args.library)
    except ImportError:
        print(f"model-suite: SKIPPED: {args.library} is not installed")
        return 0
    os.makedirs(args.out, exist_ok=True)
    wanted = set(args.families.split(",")) if args.families else None
    rows = []
    listed = families() if args.library == "transformers" else timm_families()
    for name, kind, build in listed:
        if wanted and name not in wanted:
            continue
        for exporter in exporters():
            rows.append(one(args, name, kind, build, exporter))
    ok = sum(r["status"] == "plans and verifies" for r in rows)
    exported = sum(r["status"] != "export fails" for r in rows)
    print(f"model-suite: {ok} of {exported} exported files plan and verify "
          f"(torch {torch.__version__}, {args.library} "
          f"{library.__version__})")
    if args.json:
        json.dump({"torch": torch.__version__,
                   args.library: library.__version__, "rows": rows},
                  open(args.json, "w"), indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| family | kind | exporter | memfit | note |\n"
                    "|---|---|---|---|---|\n")
            for r in rows:
                note = r["note"].replace("|", "\\|")
                f.write(f"| {r['family']} | {r['kind']} | {r['exporter']} | "
                        f"{r['status']} | {note} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
