//===- DataLoad.h - The trainer's data, mapped and checked ------*- C++ -*-===//
//
// What the trainer trains on: --data and --labels (.npy files mapped, not
// read: any size, any of MappedArray's element types), --tokens (a flat
// token file, TokenStream), or --synthetic. Everything the files say is
// checked before the first step: shapes against the model's input and
// output, every token id and class id against the vocabulary and the
// classes, a normalization against the channels. Each error names the
// file and where. The validation set is loaded the same way.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_DATALOAD_H
#define MEMFIT_RUNTIME_DATALOAD_H

#include "runtime/BatchFeeder.h"

namespace memfit::rt {

struct Options;
Dataset loadData(const Options &o, const ProgramInfo &p);
/// --val-data and --val-labels, or --val-tokens (windows in file order),
/// checked as the training data; normalized as it, never augmented; at
/// least one sample.
Dataset loadValidation(const Options &o, const ProgramInfo &p);

} // namespace memfit::rt

#endif
