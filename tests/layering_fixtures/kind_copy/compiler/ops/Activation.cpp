// May include the list, not the rest of runtime/.
#include "runtime/kernels/Activations.def"
#include "runtime/Kernels.h"

// A second copy of the runtime's kinds: refused.
enum class RuntimeAct { Relu, Tanh, Gelu = 7 };

// The graph's operators share a few names with the list: not a copy.
enum class OpKind { Conv, Relu, Tanh, Pool, Gemm, Add };
