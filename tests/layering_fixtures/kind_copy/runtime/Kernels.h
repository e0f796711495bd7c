// Generated from the list: not a copy.
enum class ActKind : unsigned char {
#define MEMFIT_ACTIVATION(kind, reads) kind,
#include "runtime/kernels/Activations.def"
};
