#!/usr/bin/python3
"""Small versions of the models people train today, exported to ONNX the way
PyTorch users export them, for the end-to-end tests (tests/cli/today.sh).

usage: today_models.py NAME OUT.onnx X.npy Y.npy [--batch N] [--opset N]
                       [--eval]

Writes the model (training-mode export unless --eval, which exports as model
zoos ship models: TrainingMode.PRESERVE) and a data set of 2 batches: token
ids or images, and labels (per token, per pixel or per image).
"""
import argparse
import math
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-LayerNorm decoder block: causal self-attention written with
    MatMul, Softmax and a masked fill, then a GELU MLP."""

    def __init__(self, d, heads, T, attn_dropout=0.0):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads, self.attn_dropout = heads, attn_dropout
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        shape = (B, T, self.heads, C // self.heads)
        q, k, v = (t.view(*shape).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        if self.attn_dropout:
            att = F.dropout(att, self.attn_dropout, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=61, T=16, d=32, heads=4, layers=2, tied=False,
                 attn_dropout=0.0):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.Sequential(*[Block(d, heads, T, attn_dropout)
                                      for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        if tied:  # GPT-2 shares the token embedding with the output layer
            self.head.weight = self.tok.weight

    def forward(self, idx):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        return self.head(self.ln(self.blocks(x)))


class ConvNeXtBlock(nn.Module):
    """Depthwise 7x7, LayerNorm over channels with permutes, inverted MLP
    with GELU, layer scale, residual."""

    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 0.5))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.gamma * self.fc2(F.gelu(self.fc1(self.ln(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 2, stride=2)
        self.blocks = nn.Sequential(ConvNeXtBlock(16), ConvNeXtBlock(16))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class NormBlock(nn.Module):
    """GroupNorm and InstanceNorm, then ConvNeXt V2's reductions: a
    channels-first LayerNorm written with
    mean(1) (ReduceMean over the channels of NCHW), global response
    normalization (torch.norm over H and W of NHWC: ReduceL2 over middle
    axes), Swin V2's cosine similarity (F.normalize over the last axis) and
    a sum over the channels."""

    def __init__(self, c):
        super().__init__()
        self.w = nn.Parameter(0.5 + torch.rand(c))
        self.b = nn.Parameter(0.1 * torch.randn(c))
        self.gamma = nn.Parameter(0.3 * torch.rand(c))
        self.beta = nn.Parameter(0.1 * torch.randn(c))
        self.fc = nn.Linear(c, c)
        # Exported as InstanceNormalization between reshapes, the affine
        # parameters after it.
        self.gn = nn.GroupNorm(4, c)

    def forward(self, x):
        x = self.gn(x)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + 1e-6)
        x = self.w[:, None, None] * x + self.b[:, None, None]
        y = x.permute(0, 2, 3, 1)
        g = torch.norm(y, p=2, dim=(1, 2), keepdim=True)
        n = g / (g.mean(dim=-1, keepdim=True) + 1e-6)
        y = self.gamma * (y * n) + self.beta + y
        q = F.normalize(self.fc(y), dim=-1)
        y = y + q * y.sum(dim=-1, keepdim=True)
        return y.permute(0, 3, 1, 2)


class NormNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 2, stride=2)
        self.blocks = nn.Sequential(NormBlock(16), NormBlock(16))
        self.inorm = nn.InstanceNorm2d(16)
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        x = self.inorm(self.stem(x))
        # Tile (x.repeat) of activations: channels repeated, and a pooled
        # gate spread over H and W.
        x = x + x[:, :8].repeat(1, 2, 1, 1)
        g = x.mean(dim=(2, 3), keepdim=True).repeat(1, 1, x.shape[2],
                                                     x.shape[3])
        x = self.blocks(x * torch.sigmoid(g))
        return self.head(x.mean(dim=(2, 3)))


class FourierPosition(nn.Module):
    """EdgeNeXt's position encoding: sine and cosine features of each
    position, counted on a mask made per sample (torch.zeros(N, H, W), so
    a constant filled over the batch), permuted to channels first and
    projected by a trained 1 x 1 convolution: the constant read as data."""

    def __init__(self, c=16, dim=8, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, stride=4)
        self.proj = nn.Conv2d(2 * dim, c, 1)
        self.head = nn.Linear(c, classes)
        self.dim = dim

    def forward(self, x):
        y = self.stem(x)
        n, c, h, w = y.shape
        on = ~torch.zeros(n, h, w, device=x.device).bool()
        rows = on.cumsum(1, dtype=torch.float32)[..., None]
        cols = on.cumsum(2, dtype=torch.float32)[..., None]
        t = 100.0 ** (2 * (torch.arange(self.dim) // 2) / self.dim)
        feats = []
        for p in (rows / t, cols / t):
            feats.append(torch.stack([p[..., 0::2].sin(), p[..., 1::2].cos()],
                                     dim=4).flatten(3))
        pos = torch.cat(feats, dim=3).permute(0, 3, 1, 2)
        y = y + self.proj(pos)
        return self.head(y.mean(dim=(2, 3)))


class RelativeLogits(nn.Module):
    """BoTNet's relative position logits (timm's rel_logits_1d): each
    query row against a table of the 2W - 1 offsets, [N * H, W, 2W - 1]
    (the batch the outer factor of axis 0), padded by a column, flattened,
    padded again and cut back to absolute positions, then attention over
    the row."""

    def __init__(self, c=16, w=4, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, stride=4)
        self.rel = nn.Parameter(0.1 * torch.randn(2 * w - 1, c))
        self.head = nn.Linear(c, classes)
        self.w = w

    def forward(self, x):
        q = self.stem(x).permute(0, 2, 3, 1)  # [N, H, W, C]
        n, h, w, c = q.shape
        r = self.rel.shape[0]
        s = (q @ self.rel.transpose(0, 1)).reshape(-1, w, r)
        s = F.pad(F.pad(s, [0, 1]).flatten(1), [0, r - w])
        s = s.reshape(-1, w + 1, r)[:, :w, (r + 1) // 2 - 1:]
        s = s.reshape(n, h, w, w)
        y = q + s.softmax(-1) @ q
        return self.head(y.mean(dim=(1, 2)))


class AttentionBias(nn.Module):
    """LeViT's and EfficientFormer's attention biases: per head, a table of
    the offsets of a 4 x 4 grid, looked up along axis 1 by each query-key
    pair's offset (table[:, idx], a Gather along axis 1 of a weight; a
    GatherND of its transpose from torch.export), added to the scores."""

    def __init__(self, c=16, heads=2, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, stride=4)
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.head = nn.Linear(c, classes)
        self.heads = heads
        self.bias_table = nn.Parameter(0.1 * torch.randn(heads, 16))
        pos = torch.stack(torch.meshgrid(torch.arange(4), torch.arange(4),
                                         indexing="ij")).flatten(1)
        off = (pos[:, :, None] - pos[:, None, :]).abs()
        self.register_buffer("bias_idx", off[0] * 4 + off[1],
                             persistent=False)

    def forward(self, x):
        y = self.stem(x).flatten(2).transpose(1, 2)  # [N, 16, C]
        n, t, c = y.shape
        q, k, v = (self.qkv(y).reshape(n, t, 3, self.heads, c // self.heads)
                   .permute(2, 0, 3, 1, 4))
        s = (q @ k.transpose(-1, -2) * (c // self.heads) ** -0.5
             + self.bias_table[:, self.bias_idx])
        y = y + self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(n, t, c))
        return self.head(y.mean(dim=1))


class VisionOps(nn.Module):
    """Vision models' operators beyond torchvision's: GroupNorm with 4
    groups and with 1, InstanceNorm2d, Tile of activations, maxima and
    minima over channels, space and features, a token mixer
    over axis 1 of [N, T, C], H and W of NHWC padded, F.normalize, a sum
    over the tokens,
    torch.logsumexp, an L1 norm, Abs and Log, a learned token repeated
    over the batch (Tile of a weight), BatchNorm1d over the tokens
    as [N * T, C] (Flatten merging the batch into axis 0) and a mean over
    the tokens."""

    def __init__(self, c=16, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 4, stride=4)
        self.gn4, self.gn1 = nn.GroupNorm(4, c), nn.GroupNorm(1, c)
        self.inorm = nn.InstanceNorm2d(c)
        self.mix = nn.Linear(16, 16)  # over the 4 x 4 tokens
        self.bn = nn.BatchNorm1d(c)
        self.head = nn.Linear(c, classes)
        # A learned token repeated over the batch (Tile of a weight).
        self.token = nn.Parameter(0.1 * torch.randn(1, 1, c))

    def forward(self, x):
        x = self.inorm(self.gn1(self.gn4(self.stem(x))))
        x = x + x[:, :8].repeat(1, 2, 1, 1)
        # CBAM-style maxima and minima (ReduceMax, ReduceMin).
        x = x + torch.max(x, dim=1, keepdim=True)[0] - x.amin(dim=(2, 3),
                                                             keepdim=True)
        # H and W of NHWC padded (as Swin's patch merging pads odd sides):
        # one Pad of two adjacent axes with the channels inside them.
        z = F.pad(x.permute(0, 2, 3, 1), (0, 0, 1, 0, 0, 1))
        x = x + z.mean(dim=(1, 2))[:, :, None, None]
        y = x.flatten(2).transpose(1, 2)
        y = y * torch.sigmoid(y.amax(dim=-1, keepdim=True))
        y = y + self.mix(y.transpose(1, 2)).transpose(1, 2)
        y = F.normalize(y, dim=-1) + 0.1 * y.sum(dim=1, keepdim=True)
        # ReduceLogSumExp over the features, ReduceL1 over the tokens, Abs
        # and Log on their own.
        y = (y + 0.1 * torch.logsumexp(y, dim=-1, keepdim=True)
             - 0.05 * y.norm(p=1, dim=1, keepdim=True)
             + 0.1 * torch.log(1 + y.abs()))
        y = y + self.token.repeat(y.shape[0], 1, 1)
        n, t, c = y.shape
        # torch.flatten(y, 0, 1) is ONNX's Flatten at axis 2.
        y = self.bn(torch.flatten(y, 0, 1)).reshape(n, t, c)
        return self.head(y.mean(dim=1))


class SE(nn.Module):
    def __init__(self, c, act):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)
        self.act = act

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.act(self.fc2(F.relu(self.fc1(s))))


class MBConv(nn.Module):
    """Inverted residual with squeeze-and-excitation: SiLU and sigmoid
    (EfficientNet) or HardSwish and HardSigmoid (MobileNetV3)."""

    def __init__(self, c, hard):
        super().__init__()
        act = nn.Hardswish() if hard else nn.SiLU()
        gate = nn.Hardsigmoid() if hard else nn.Sigmoid()
        self.expand = nn.Sequential(nn.Conv2d(c, 2 * c, 1), act)
        self.dw = nn.Sequential(nn.Conv2d(2 * c, 2 * c, 3, padding=1,
                                          groups=2 * c), act)
        self.se = SE(2 * c, gate)
        self.project = nn.Conv2d(2 * c, c, 1)

    def forward(self, x):
        return x + self.project(self.se(self.dw(self.expand(x))))


class MobileNet(nn.Module):
    def __init__(self, hard, classes=10):
        super().__init__()
        act = nn.Hardswish() if hard else nn.SiLU()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), act)
        self.blocks = nn.Sequential(MBConv(16, hard), MBConv(16, hard))
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class ViT(nn.Module):
    """Patch embedding by a strided convolution, a class token, learned
    positions, pre-LayerNorm encoder blocks (no causal mask)."""

    def __init__(self, classes=10, d=32, heads=4, layers=2, patch=4, size=16):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        n = (size // patch) ** 2
        self.pos = nn.Parameter(torch.randn(1, n, d) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.ln(self.blocks(x))[:, 0])


class EncoderBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.heads = heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        shape = (B, T, self.heads, C // self.heads)
        q, k, v = (t.reshape(shape).permute(0, 2, 1, 3) for t in (q, k, v))
        att = F.softmax(q @ k.transpose(-1, -2) / math.sqrt(C // self.heads), -1)
        y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class BERT(nn.Module):
    """An encoder built from torch.nn.TransformerEncoder (batch_first; its
    nn.MultiheadAttention works sequence-first inside), post-LayerNorm, GELU,
    per-token outputs."""

    def __init__(self, vocab=61, T=16, d=32, heads=4, layers=2, ffn=None):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        layer = nn.TransformerEncoderLayer(d, heads, ffn or 2 * d, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long, device=idx.device)
        return self.head(self.encoder(self.tok(idx) + self.pos(pos)))


class RelativeBlock(nn.Module):
    """Funnel's relative attention, written with einsum as Funnel writes it:
    content scores of biased queries against keys, position scores against
    a table computed from two weights ("td,dnh->tnh"), and token-type
    scores against a weight per type and head ("bind,snd->bnis"), chosen
    per key by torch.where between the two types' activations. Pre-LayerNorm,
    residual."""

    def __init__(self, d, heads, T, inplace=False):
        super().__init__()
        self.inplace = inplace
        self.ln = nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        dh = d // heads
        self.heads, self.dh = heads, dh
        self.r_w_bias = nn.Parameter(torch.randn(heads, dh) * 0.1)
        self.pos = nn.Parameter(torch.randn(T, d) * 0.1)
        self.w_r = nn.Parameter(torch.randn(d, heads, dh) * 0.1)
        self.seg = nn.Parameter(torch.randn(2, heads, dh) * 0.1)
        self.cls = (nn.Parameter(torch.randn(T, T // 2) * 0.5 + 1)
                    if inplace else None)

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln(x)
        q = self.q(h).view(B, T, self.heads, self.dh)
        k = self.k(h).view(B, T, self.heads, self.dh)
        v = self.v(h).view(B, T, self.heads, self.dh)
        content = torch.einsum("bind,bjnd->bnij", q + self.r_w_bias, k)
        r = torch.einsum("td,dnh->tnh", self.pos, self.w_r)
        position = torch.einsum("binh,tnh->bnit", q, r)
        if self.inplace:
            # Funnel's in-place product on a slice (torch.export writes it
            # as a ScatterND of the scores moved to the sliced axis first).
            position[..., : T // 2] *= self.cls
        types = torch.einsum("bind,snd->bnis", q, self.seg)
        diff, same = torch.split(types, 1, dim=-1)
        shape = (B, self.heads, T, T)
        typed = (torch.arange(T, device=x.device) % 3 == 0)[None, None, None]
        types = torch.where(typed.expand(shape), same.expand(shape),
                            diff.expand(shape))
        att = F.softmax((content + position + types) / math.sqrt(self.dh), -1)
        y = torch.einsum("bnij,bjnd->bind", att, v).reshape(B, T, C)
        return x + self.o(y)


class Relative(nn.Module):
    def __init__(self, vocab=61, T=16, d=32, heads=4, layers=2, inplace=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.T = T
        self.blocks = nn.Sequential(*[RelativeBlock(d, heads, T, inplace)
                                      for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.blocks(self.tok(idx)))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) \
            * self.weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    """Llama's decoder layer: RMSNorm, rotary position embeddings on q and
    k (tables computed in the graph from the positions), causal attention,
    a SwiGLU MLP, no biases."""

    def __init__(self, d, heads, T):
        super().__init__()
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False)
                                          for _ in range(4))
        self.gate, self.up = (nn.Linear(d, 2 * d, bias=False) for _ in range(2))
        self.down = nn.Linear(2 * d, d, bias=False)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        h = self.n1(x)
        shape = (B, T, self.heads, hd)
        q, k, v = (f(h).view(*shape).transpose(1, 2)
                   for f in (self.q, self.k, self.v))
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.o(y)
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, vocab=61, T=16, d=32, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.T = T
        self.blocks = nn.Sequential(*[LlamaBlock(d, heads, T)
                                      for _ in range(layers)])
        self.norm, self.head = RMSNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        return self.head(self.norm(self.blocks(self.tok(idx))))


class UNet(nn.Module):
    """An encoder-decoder for segmentation: strided-down features come back
    up by nearest and bilinear F.interpolate (Resize) and by transposed
    convolutions, join their skip connections by concatenation, and end in
    per-pixel class scores."""

    def __init__(self, classes=5, w=8):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(cout), nn.ReLU())

        self.enc1, self.enc2 = block(3, w), block(w, 2 * w)
        self.enc3 = block(2 * w, 4 * w)
        self.dec2, self.dec1 = block(10 * w, 2 * w), block(3 * w, w)
        # Learned upsampling: plain, and padded with output_padding, grouped.
        self.up = nn.ConvTranspose2d(4 * w, 4 * w, 2, stride=2)
        self.refine = nn.ConvTranspose2d(w, w, 3, stride=2, padding=1,
                                         output_padding=1, groups=2)
        self.head = nn.Conv2d(w, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up(e3),
                                  F.interpolate(e3, scale_factor=2.0), e2], 1))
        up = F.interpolate(d2, scale_factor=2.0, mode="bilinear",
                           align_corners=False)
        d1 = self.dec1(torch.cat([up, e1], 1))
        # A coarse map brought back to full size twice: learned, and by
        # bilinear interpolation with aligned corners (its gradient is the
        # sum of both).
        p = F.max_pool2d(d1, 2)
        fine = self.refine(p)
        coarse = F.interpolate(p, size=x.shape[2:], mode="bilinear",
                               align_corners=True)
        return self.head(d1 + coarse + fine)


class SmallCNN(nn.Module):
    """Two convolutions with BatchNorm, pooling and a linear head: the CNN
    the mixed-precision tests train (tests/cli/precision_train.sh)."""

    def __init__(self, classes=10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
            nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32),
            nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(32, classes))

    def forward(self, x):
        return self.body(x)


class Activations(nn.Module):
    """A convolution block per activation memfit added as the worked
    example of docs/architecture.md, exported as torch.onnx writes them:
    Softplus, Mish as Mul(x, Tanh(Softplus(x))), Celu, LogSigmoid as
    Log(Sigmoid(x))."""

    def __init__(self, classes=10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.Softplus(),
            nn.Conv2d(8, 8, 3, padding=1), nn.Mish(),
            nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.CELU(0.7),
            nn.Conv2d(16, 16, 3, padding=1), nn.LogSigmoid(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, classes))

    def forward(self, x):
        return self.body(x)


MODELS = {
    "activations": (lambda: Activations(), "image"),
    "cnn-bn": (lambda: SmallCNN(), "image"),
    "gpt": (lambda: GPT(), "tokens"),
    "gpt-tied": (lambda: GPT(tied=True), "tokens"),
    # Dropout on the attention probabilities (compared fused against
    # materialized: both draw the same counter-based masks).
    "gpt-drop": (lambda: GPT(attn_dropout=0.25), "tokens"),
    # Full-size models for docs/benchmarks/transformers.md.
    "gpt2-small": (lambda: GPT(50257, 1024, 768, 12, 12, tied=True), "tokens"),
    "bert-base": (lambda: BERT(30522, 512, 768, 12, 12, ffn=3072), "tokens"),
    "bert": (lambda: BERT(), "tokens"),
    "convnext": (lambda: ConvNeXt(), "image"),
    "norms": (lambda: NormNet(), "image"),
    "vision-ops": (lambda: VisionOps(), "image"),
    "attention-bias": (lambda: AttentionBias(), "image"),
    "fourier-position": (lambda: FourierPosition(), "image"),
    "relative-logits": (lambda: RelativeLogits(), "image"),
    "mobilenetv3": (lambda: MobileNet(hard=True), "image"),
    "efficientnet": (lambda: MobileNet(hard=False), "image"),
    "vit": (lambda: ViT(), "image"),
    "unet": (lambda: UNet(), "pixels"),
    "llama": (lambda: Llama(), "tokens"),
    "relative": (lambda: Relative(), "tokens"),
    "relative-slice": (lambda: Relative(inplace=True), "tokens"),
    # torchvision's own ViT (class token, nn.MultiheadAttention), small.
    "tv-vit": (lambda: __import__("torchvision").models.vision_transformer
               .VisionTransformer(image_size=16, patch_size=4, num_layers=2,
                                  num_heads=2, hidden_dim=16, mlp_dim=32,
                                  num_classes=10), "image"),
    # torchvision's Swin (shifted windows: a mask built by slice assignment,
    # torch.roll, strided patch merging, relative position tables), small.
    "tv-swin": (lambda: __import__("torchvision").models.swin_transformer
                .SwinTransformer(patch_size=[2, 2], embed_dim=16,
                                 depths=[2, 2], num_heads=[2, 4],
                                 window_size=[4, 4], stochastic_depth_prob=0.0,
                                 num_classes=10), "image"),
    # torchvision's MaxViT (einsum attention over blocks and grids,
    # MBConv with squeeze-and-excitation and BatchNorm), small.
    "tv-maxvit": (lambda: __import__("torchvision").models.maxvit.MaxVit(
        input_size=(16, 16), stem_channels=8, partition_size=2,
        block_channels=[16, 32], block_layers=[1, 1], head_dim=8,
        stochastic_depth_prob=0.0, num_classes=10), "image"),
}


def sequence_shape(model):
    """(vocabulary, length) of a token model of this file."""
    if not hasattr(model, "tok"):
        return None
    T = model.T if hasattr(model, "T") else model.pos.num_embeddings
    return model.tok.num_embeddings, T


def dataset(kind, count, tokens=None, size=16):
    """`count` samples and labels, seeded: token ids and per-token labels
    (tokens = (vocab, length)), or images with a label per image or, for
    "pixels", per pixel."""
    rng = np.random.default_rng(1)
    if kind == "tokens":
        vocab, T = tokens
        x = rng.integers(0, vocab, (count, T)).astype(np.int64)
        y = rng.integers(0, vocab, (count, T)).astype(np.int64)
        return x, y
    x = rng.standard_normal((count, 3, size, size)).astype(np.float32)
    y = rng.integers(0, 10, count).astype(np.int64)
    if kind == "pixels":
        y = rng.integers(0, 5, (count, size, size)).astype(np.int64)
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=sorted(MODELS))
    ap.add_argument("out")
    ap.add_argument("x")
    ap.add_argument("y")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--no-data", action="store_true",
                    help="write a one-sample data set (for planning only)")
    ap.add_argument("--ignore", type=int, default=None,
                    help="set a quarter of the labels (seeded) to this value, "
                    "the index cross_entropy ignores")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    make, kind = MODELS[args.name]
    model = make()
    count = 1 if args.no_data else 2 * args.batch
    size = 224 if args.name.startswith("vit-b") else 16
    x, y = dataset(kind, count, sequence_shape(model), size)
    if args.ignore is not None:
        y = y.copy()
        y[np.random.default_rng(2).random(y.shape) < 0.25] = args.ignore
    np.save(args.x, x)
    np.save(args.y, y)
    mode = (torch.onnx.TrainingMode.PRESERVE if args.eval
            else torch.onnx.TrainingMode.TRAINING)
    if args.eval:
        model.eval()
    torch.onnx.export(model, torch.tensor(x[:args.batch]), args.out,
                      opset_version=args.opset, input_names=["x"],
                      output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      training=mode, do_constant_folding=args.eval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
