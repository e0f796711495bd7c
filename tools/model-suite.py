#!/usr/bin/python3
"""Exports today's model families with the installed torch and transformers
(small configs, random weights, training mode, no download) and asks memfit
to import, plan and verify each: the table of docs/model-zoo.md.

usage: model-suite.py MEMFIT OUT_DIR [--families A,B,...] [--markdown FILE]
                      [--json FILE]

Each family is exported with torch.onnx's TorchScript exporter (training
mode, do_constant_folding=False, as the user guide's recipe), and with the
dynamo exporter where torch has one (torch >= 2.1 with onnxscript). memfit
then runs `inspect` (parameters beside torch's count) and `plan` at batch
2 with the whole budget (every plan is verified before it is written).
Prints one row per family and exporter; exits 0 (the table is the result).
A family whose export fails is listed as such: that is torch's limit, not
memfit's.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402

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
        return self.m(input_ids=x).logits


def export(name, kind, build, path):
    torch.manual_seed(0)
    model, _ = build()
    model.train()
    # Traced at batch 3 (no other extent of these configs), the batch
    # symbolic as the user guide's recipe writes it.
    x = (torch.randn(3, 3, IMAGE, IMAGE) if kind == "vision"
         else torch.randint(3, 96, (3, T)))
    params = sum(p.numel() for p in model.parameters())
    torch.onnx.export(Logits(model, kind), (x,), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x"],
                      output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
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
    if len(lines) > 1 and ("cannot be imported" in lines[0] or
                           lines[0].rstrip().endswith(":")):
        return lines[1].strip()
    if not lines:
        return "(no message)"
    line = lines[0].replace("memfit: error: ", "")
    return re.sub(r"^'[^']*': |^[^ ]*\.onnx: ", "", line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfit")
    ap.add_argument("out")
    ap.add_argument("--families", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    try:
        import transformers
    except ImportError:
        print("model-suite: SKIPPED: transformers is not installed")
        return 0
    os.makedirs(args.out, exist_ok=True)
    wanted = set(args.families.split(",")) if args.families else None
    rows = []
    for name, kind, build in families():
        if wanted and name not in wanted:
            continue
        path = os.path.join(args.out,
                            re.sub(r"[^a-z0-9]+", "-", name.lower()) +
                            "-torchscript.onnx")
        try:
            params = export(name, kind, build, path)
        except Exception as e:  # torch's limit, reported as such
            msg = str(e).strip().splitlines()
            rows.append(dict(family=name, kind=kind, exporter="torchscript",
                             status="export fails",
                             note=(msg[0] if msg else type(e).__name__)[:160],
                             params=None, memfit_params=None))
            print(f"{name:14} export fails: {rows[-1]['note']}", flush=True)
            continue
        status, note, counted = memfit(args.memfit, path, params)
        rows.append(dict(family=name, kind=kind, exporter="torchscript",
                         status=status, note=note[:200], params=params,
                         memfit_params=counted))
        print(f"{name:14} {status}{': ' + note if note else ''}", flush=True)
    ok = sum(r["status"] == "plans and verifies" for r in rows)
    exported = sum(r["status"] != "export fails" for r in rows)
    print(f"model-suite: {ok} of {exported} exported files plan and verify "
          f"(torch {torch.__version__}, transformers "
          f"{transformers.__version__})")
    if args.json:
        json.dump(dict(torch=torch.__version__,
                       transformers=transformers.__version__, rows=rows),
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
