//===- Plan.cpp - A static schedule of one training iteration -------------===//
#include "compiler/ir/Plan.h"

namespace memfit {

std::string_view streamName(Stream s) {
  switch (s) {
  case Stream::Compute:
    return "compute";
  case Stream::CopyOut:
    return "copy-out";
  case Stream::CopyIn:
    return "copy-in";
  }
  return "?";
}

} // namespace memfit
