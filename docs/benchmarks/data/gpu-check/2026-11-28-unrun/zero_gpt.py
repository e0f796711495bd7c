import sys
import numpy as np
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
for i, t in enumerate(m.graph.initializer):
    if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) >= 2:
        a = np.zeros(tuple(t.dims), np.float32)
        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
onnx.save(m, sys.argv[2])
