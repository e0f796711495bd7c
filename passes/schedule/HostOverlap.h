//===- HostOverlap.h - Host updates started inside the last round -*- C++
//-*-===//
//
// A weight homed on the host is updated by the host's cores. Its update may
// start as soon as the last round has put its final gradient at home and
// read its last copy of the weight, long before the round ends: the host's
// Adam then runs beside the rest of the backward pass (Fuyou's and LoHan's
// overlap), and the semantics stay torch.optim's, since nothing of this
// iteration reads the weight's home after that point.
//
// overlapHostUpdates marks that point. Guarantees: for each host update it
// overlaps, a Record of a new event sits on the copy-out stream directly
// after the weight's final gradient copy-out, every copy of the weight's
// blocks in the round happens before that copy-out (or is it), and the
// update's Instr::event names the event; every other host update keeps
// event -1 and starts once the rounds are over. Host updates move to the end
// of the update list, in the order they become ready. Plans without host
// homes, fp16 programs (whose loss scaling decides only after the whole
// backward pass whether any update runs) and programs that clip gradients
// (whose every update scales by the norm over all of them) are left
// unchanged.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SCHEDULE_HOSTOVERLAP_H
#define MEMFIT_PASSES_SCHEDULE_HOSTOVERLAP_H

#include "compiler/ir/Plan.h"

namespace memfit {

/// Starts each host update of `plan` at its weight's ready point in the last
/// round where the round allows it (see the file comment); returns how many.
int32_t overlapHostUpdates(const TaskGraph &tg, Plan &plan);

} // namespace memfit

#endif
