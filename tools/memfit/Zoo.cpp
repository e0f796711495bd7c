//===- Zoo.cpp - memfit zoo: write a model of the zoo as ONNX -------------===//
//
//   memfit zoo NAME -o FILE [--batch N] [--weights|--no-weights]
//              [--classes N] [--image-size N] [--seq-len T] [--vocab V]
//              [--layers L] [--force]
//   memfit zoo --list
//
// Tiny models are written with weights by default, others without (their
// weights would be hundreds of megabytes of random numbers). The file is
// written atomically and an existing one is kept unless --force is given.
//
//===----------------------------------------------------------------------===//
#include "models/Zoo.h"
#include "compiler/support/FileUtil.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/NumericOptions.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace llvm;
using memfit::tool::PositiveCount;

namespace {

cl::SubCommand ZooCmd("zoo", "Write a model of the built-in zoo as ONNX");

cl::opt<std::string> ModelName(cl::Positional, cl::desc("<model>"),
                               cl::sub(ZooCmd));
cl::opt<std::string> OutputPath("o", cl::desc("Output ONNX file"),
                                cl::value_desc("file"), cl::sub(ZooCmd));
cl::opt<bool> List("list", cl::desc("List the models and exit"),
                   cl::sub(ZooCmd));
cl::opt<PositiveCount>
    Batch("batch",
          cl::desc("Batch size of input and output (default: "
                   "symbolic 'N')"),
          cl::init(0), cl::sub(ZooCmd));
cl::opt<bool> Weights("weights",
                      cl::desc("Store deterministic initial weights (default "
                               "for tiny models)"),
                      cl::sub(ZooCmd));
cl::opt<bool> NoWeights("no-weights",
                        cl::desc("Declare weights as inputs without data "
                                 "(default for the others)"),
                        cl::sub(ZooCmd));
cl::opt<PositiveCount>
    Classes("classes",
            cl::desc("Number of classes (default: 1000, 10 for "
                     "tiny models)"),
            cl::init(0), cl::sub(ZooCmd));
cl::opt<PositiveCount>
    ImageSize("image-size",
              cl::desc("Input height and width (default: the "
                       "model's)"),
              cl::init(0), cl::sub(ZooCmd));
cl::opt<PositiveCount>
    SeqLen("seq-len",
           cl::desc("Tokens per sequence of a language model (default: "
                    "its context length)"),
           cl::value_desc("T"), cl::init(0), cl::sub(ZooCmd));
cl::opt<PositiveCount>
    Vocab("vocab",
          cl::desc("Tokens in a language model's vocabulary (default: its "
                   "own)"),
          cl::init(0), cl::sub(ZooCmd));
cl::opt<PositiveCount>
    Layers("layers",
           cl::desc("Decoder layers of a language model (default: its own; "
                    "the same blocks at another depth)"),
           cl::init(0), cl::sub(ZooCmd));
cl::opt<bool> Force("force", cl::desc("Overwrite an existing output file"),
                    cl::sub(ZooCmd));

int listModels() {
  size_t width = 0;
  for (const memfit::ZooEntry &e : memfit::zooModels())
    width = std::max(width, e.name.size());
  for (const memfit::ZooEntry &e : memfit::zooModels()) {
    outs() << "  " << e.name;
    outs().indent(width - e.name.size() + 2) << e.description << "\n";
  }
  return memfit::ExitOk;
}

int run() {
  using memfit::makeError;
  using memfit::tool::reportError;
  if (List) {
    if (!ModelName.empty() || !OutputPath.empty())
      return reportError(makeError("--list takes no model and no output file"));
    return listModels();
  }
  if (ModelName.empty())
    return reportError(makeError(
        "no model given; 'memfit zoo --list' shows the available models"));
  if (OutputPath.empty())
    return reportError(makeError("no output file given; use -o FILE"));
  if (Weights && NoWeights)
    return reportError(
        makeError("--weights and --no-weights are mutually exclusive"));

  memfit::ZooOptions opts;
  opts.batch = Batch;
  opts.numClasses = Classes;
  opts.imageSize = ImageSize;
  opts.seqLen = SeqLen;
  opts.vocab = Vocab;
  opts.layers = Layers;
  opts.withWeights =
      Weights || (!NoWeights && memfit::isTinyZooModel(ModelName));

  if (!Force && sys::fs::exists(OutputPath))
    return reportError(memfit::makeErrorF(
        "output file {0} exists; use --force to overwrite it",
        memfit::quoteName(OutputPath)));
  auto bytes = memfit::buildZooModel(ModelName, opts);
  if (!bytes)
    return reportError(bytes.takeError());
  if (Error err = memfit::writeFileAtomically(OutputPath, *bytes))
    return reportError(std::move(err));
  outs() << "wrote " << memfit::quoteName(ModelName) << " to "
         << memfit::quoteName(OutputPath) << " (" << bytes->size()
         << " bytes)\n";
  return memfit::ExitOk;
}

memfit::tool::RegisterCommand reg(ZooCmd, run);

} // namespace
