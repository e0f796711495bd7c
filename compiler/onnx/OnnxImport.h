//===- OnnxImport.h - ONNX model to forward Graph ---------------*- C++ -*-===//
//
// Loads an ONNX model (opsets 11 to 17, external data beside the model),
// runs the ONNX checker and shape inference, folds the shape arithmetic that
// exporters emit (Constant, Shape, Gather, Unsqueeze, Concat feeding
// Reshape), drops no-op Identity and inference Dropout nodes, and builds the
// forward Graph with a symbolic batch on axis 0.
//
// Every failure is an llvm::Error naming the file, and where it applies the
// node, its op type and what was expected. Nothing in a model can crash or
// hang the importer.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_ONNX_ONNXIMPORT_H
#define MEMFIT_COMPILER_ONNX_ONNXIMPORT_H

#include "compiler/ir/Graph.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace memfit {

/// What the importer noticed about a model that imports but may not be
/// what its author trains (memfit inspect prints it as warnings).
struct ImportNotes {
  /// Groups of trainable float initializers holding the same values, in
  /// any order (a transposed copy too), each group in the file's order:
  /// most likely copies of one tied or shared weight that an exporter's
  /// constant folding duplicated, which would then train apart. Tensors of
  /// one repeated value are left out (alike by initialization).
  std::vector<std::vector<std::string>> identicalWeights;
  /// BatchNormalization nodes written in inference form (training_mode 0,
  /// or one output before opset 14), which memfit trains with batch
  /// statistics as model.train() does.
  std::vector<std::string> inferenceBatchNorms;
  /// Float initializers, not marked as buffers, that an operator reads as
  /// a fixed scalar (a Clip bound, an exponent, a fill value): memfit does
  /// not train them, which differs from PyTorch where they are
  /// nn.Parameters. In the file's order of first use, once each.
  std::vector<std::string> scalarInitializers;
  /// The batch a graph with a symbolic batch was read at because it
  /// counts up to its batch (an arange over it, transformers' per-sample
  /// masks), as its fixed-batch export would be; 0 when not.
  int64_t tracedBatch = 0;
};

struct ImportOptions {
  /// Batch size to resolve the batch dimension with. 0 keeps the model's
  /// fixed first input dimension; a symbolic one then is an error.
  int64_t batch = 0;
  /// Keep weight data from initializers (false drops it after reading shapes,
  /// for planning-only commands on large models).
  bool keepWeightData = true;
  /// Plan scaled dot-product attention as one memory-efficient operator
  /// (fuseAttention).
  bool fuseAttention = false;
  /// A POSIX extended regular expression (searched in the name, as grep -E
  /// does): the initializers it matches are buffers, not parameters
  /// (memfit's --constants): constants with no gradient and no optimizer
  /// state, which the importer may fold. Empty: none beyond those the
  /// exporter marks. Must match at least one initializer or declared
  /// weight.
  std::string constants;
  /// Rows of embedding tables whose lookups add no gradient (memfit's
  /// --freeze-rows NAME:ROW; nn.Embedding's padding_idx, which the file
  /// does not record): the table's name and the row. Each must name a
  /// table a Gather looks up, and a row inside it.
  std::vector<std::pair<std::string, int64_t>> frozenRows;
  /// Filled with what the importer noticed, where given.
  ImportNotes *notes = nullptr;
};

/// `g` with every scaled dot-product attention subgraph replaced by one
/// Attention op (compiler/onnx/AttentionFusion.cpp says which); `g` itself
/// when there is none. A `limit` >= 0 fuses only the first `limit` of them
/// in op order (the planner's partial choice); -1 fuses all.
Graph fuseAttention(const Graph &g, int64_t limit = -1);
/// How many attention subgraphs fuseAttention would replace in `g`.
int64_t countAttention(const Graph &g);

/// `g` with every ReLU that alone reads a BatchNorm's output run inside
/// that BatchNorm (compiler/onnx/EpilogueFusion.cpp); `g` itself when there
/// is none. The same function and gradient, fewer passes over memory.
Graph fuseEpilogues(const Graph &g);
/// How many fused forms fuseEpilogues would make in `g`.
int64_t countEpilogues(const Graph &g);

llvm::Expected<Graph> importOnnxFile(const std::string &path,
                                     const ImportOptions &opts = {});
/// Same, from bytes in memory (`displayName` stands for the file in
/// messages; external data cannot be resolved without a directory).
llvm::Expected<Graph> importOnnxBytes(const std::string &bytes,
                                      const std::string &displayName,
                                      const ImportOptions &opts = {});

/// The distinct external-data files a model's initializers refer to, as
/// the relative locations the file names, sorted. Locations outside the
/// model's folder are an error, as on import.
llvm::Expected<std::vector<std::string>>
externalDataFiles(const std::string &path);

/// The ONNX op types the importer accepts, sorted (for error messages and
/// docs).
const std::vector<std::string> &supportedOnnxOps();

} // namespace memfit

#endif
