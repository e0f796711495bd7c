//===- Families.h - Network families of the zoo -----------------*- C++ -*-===//
//
// One function per network family. Each adds its operators to a fresh
// GraphBuilder (which carries the class count and image size) and returns
// the classifier output; Zoo.cpp maps names to families.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_MODELS_FAMILIES_H
#define MEMFIT_MODELS_FAMILIES_H

#include "models/GraphBuilder.h"

#include "llvm/ADT/ArrayRef.h"

#include <array>
#include <cstdint>

namespace memfit::zoo {

// VggAlexNet.cpp
Val buildAlexNet(GraphBuilder &b);
/// VGG with 3x3 convolutions in five groups of 64, 128, 256, 512, 512
/// channels, `convsPerGroup[g]` convolutions in group g, three FC layers.
Val buildVgg(GraphBuilder &b, llvm::ArrayRef<int64_t> convsPerGroup);
Val buildFcn(GraphBuilder &b);

// ResNet.cpp
/// torchvision ResNet: basic blocks (18, 34) or bottlenecks (50, 101, 152).
Val buildResNet(GraphBuilder &b, bool bottleneck,
                const std::array<int64_t, 4> &blocksPerStage);
/// Pre-activation bottleneck ResNet with `units` residual units.
Val buildPreActResNet(GraphBuilder &b, int64_t units);
/// How buildPreActResNet splits `units` (>= 4) over its four stages.
std::array<int64_t, 4> preActStageUnits(int64_t units);

// GoogLeNet.cpp, DenseNet.cpp
Val buildGoogLeNet(GraphBuilder &b);
Val buildDenseNet121(GraphBuilder &b);

// Transformers.cpp: decoders over GraphBuilder::seqLen() tokens; the
// output is the logits [N, T, vocab].
struct Gpt2Config {
  int64_t layers, width, heads;
  int64_t vocab = 50257;
  int64_t positions = 1024; // rows of the position embedding
};
/// GPT-2 (Radford et al. 2019, Hugging Face's GPT2LMHeadModel):
/// pre-LayerNorm blocks, causal self-attention, gelu_new MLP of 4x width,
/// learned positions, LM head tied to the token embedding.
Val buildGpt2(GraphBuilder &b, const Gpt2Config &c);

struct LlamaConfig {
  int64_t layers, width, heads, kvHeads, ffn;
  int64_t vocab = 32000;
  float ropeTheta = 10000.0f;
  float rmsEps = 1e-5f;
};
/// Llama (Hugging Face's LlamaForCausalLM): RMSNorm, rotary position
/// embeddings, grouped-query causal attention, SwiGLU MLP, no biases,
/// untied LM head.
Val buildLlama(GraphBuilder &b, const LlamaConfig &c);

// TinyModels.cpp
Val buildMlp(GraphBuilder &b);
Val buildTinyCnn(GraphBuilder &b);
Val buildTinyResidual(GraphBuilder &b);
Val buildTinyInception(GraphBuilder &b);
Val buildTinyBn(GraphBuilder &b);
Val buildTinyDropout(GraphBuilder &b);

} // namespace memfit::zoo

#endif
