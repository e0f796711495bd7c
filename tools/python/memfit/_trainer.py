"""memfit.Trainer: a compiled trainer built as a library and stepped from
Python (runtime/Session.h is the other side)."""
import ctypes
import os
import shutil
import subprocess

from ._cli import flag_args
from ._errors import InternalError, UserError

_ERR_BYTES = 4096
# runtime/Session.h's MemfitSessionQuery.
(_Q_BATCH, _Q_INPUT, _Q_LABELS, _Q_INT_INPUT, _Q_MSE, _Q_VOCAB, _Q_CLASSES,
 _Q_WEIGHTS, _Q_STEPS, _Q_IGNORE) = range(10)


def _newest(paths):
    return max((os.path.getmtime(p) for p in paths if os.path.exists(p)), default=0)


def build_library(out_dir, backend="cpu", runtime_dir=None, jobs=None):
    """Builds the trainer in `out_dir` (what memfit.compile wrote) as a
    shared library for `backend` and returns its path; rebuilt only when a
    source is newer. The CMake project is the trainer's own (its
    trainer_module target)."""
    if backend not in ("cpu", "cuda"):
        raise UserError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    out_dir = os.fspath(out_dir)
    if not os.path.exists(os.path.join(out_dir, "CMakeLists.txt")):
        raise UserError(f"{out_dir}: not a trainer memfit.compile wrote "
                        "(no CMakeLists.txt)")
    build = os.path.join(out_dir, f"build-python-{backend}")
    lib = os.path.join(build, "trainer.so")
    src = os.path.join(out_dir, "src")
    sources = [os.path.join(src, f) for f in os.listdir(src)]
    sources.append(os.path.join(out_dir, "CMakeLists.txt"))
    if os.path.exists(lib) and os.path.getmtime(lib) >= _newest(sources):
        return lib
    cmake = shutil.which("cmake")
    if cmake is None:
        raise UserError("building the trainer needs cmake on PATH")
    configure = [cmake, "-S", out_dir, "-B", build, f"-DMEMFIT_BACKEND={backend}"]
    if runtime_dir is not None:
        configure.append(f"-DMEMFIT_RUNTIME_DIR={os.fspath(runtime_dir)}")
    for cmd in (configure, [cmake, "--build", build, "--target", "trainer_module",
                            "-j", str(jobs or os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-20:])
            raise UserError(f"building the trainer in {build} failed "
                            f"({' '.join(cmd[:2])} ...):\n{tail}")
    return lib


def _bind(lib):
    c = ctypes
    S = c.c_void_p
    sig = {
        "memfit_trainer_open": (S, [c.c_int, c.POINTER(c.c_char_p), c.c_char_p, c.c_size_t]),
        "memfit_session_query": (c.c_int64, [S, c.c_int]),
        "memfit_session_step": (c.c_int, [S, c.c_void_p, c.c_void_p, c.POINTER(c.c_float), c.c_char_p, c.c_size_t]),
        "memfit_session_evaluate": (c.c_int, [S, c.c_void_p, c.c_void_p, c.c_int64, c.POINTER(c.c_double), c.POINTER(c.c_double), c.c_char_p, c.c_size_t]),
        "memfit_session_weight_name": (c.c_char_p, [S, c.c_int32]),
        "memfit_session_weight_count": (c.c_int64, [S, c.c_int32]),
        "memfit_session_weight_trainable": (c.c_int, [S, c.c_int32]),
        "memfit_session_read_weight": (c.c_int, [S, c.c_int32, c.c_void_p, c.c_char_p, c.c_size_t]),
        "memfit_session_write_weight": (c.c_int, [S, c.c_int32, c.c_void_p, c.c_char_p, c.c_size_t]),
        "memfit_session_save": (c.c_int, [S, c.c_char_p, c.c_char_p, c.c_size_t]),
        "memfit_session_checkpoint": (c.c_int, [S, c.c_char_p, c.c_char_p, c.c_size_t]),
        "memfit_session_close": (None, [S]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _shapes(model_path):
    """Initializer shapes by name from the trainer's model.onnx, where the
    onnx package is installed (else the weights stay flat)."""
    try:
        import onnx
    except ImportError:
        return {}
    try:
        m = onnx.load(model_path, load_external_data=False)
    except Exception:
        return {}
    return {t.name: tuple(t.dims) for t in m.graph.initializer}


class Trainer:
    """The trainer `memfit.compile` wrote into `out_dir`, built as a shared
    library (`backend` "cpu": the CPU emulation, or "cuda") and trained a
    step at a time: `step(inputs, labels)` returns the loss. `options` are
    the trainer's flags (`lr=0.01, momentum=0.9, weight_decay=0.1,
    lr_schedule="cosine", warmup_steps=10, iterations=1000, seed=0, ...`).
    The plan, its arena and its budget are the CLI trainer's, and so is each
    step, bit for bit."""

    def __init__(self, out_dir, backend="cpu", *, runtime_dir=None, **options):
        import numpy as np
        self._np = np
        out_dir = getattr(out_dir, "out_dir", out_dir)  # a memfit.Compiled
        self.out_dir = os.fspath(out_dir)
        self.backend = backend
        for bad in ("data", "labels", "tokens", "save", "help"):
            if bad in options:
                raise UserError(f"{bad}= is the command-line trainer's flag: "
                                "a Trainer takes its batches from step() and "
                                "saves with save()")
        path = build_library(self.out_dir, backend, runtime_dir)
        self._lib = ctypes.CDLL(path, mode=os.RTLD_NOW | getattr(os, "RTLD_LOCAL", 0))
        _bind(self._lib)
        # The trainer reads "--flag value" (runtime/TrainerOptions.cpp).
        args = ["trainer"] + flag_args(options, joined=False)
        argv = (ctypes.c_char_p * len(args))(*[a.encode() for a in args])
        err = ctypes.create_string_buffer(_ERR_BYTES)
        self._s = self._lib.memfit_trainer_open(len(args), argv, err, _ERR_BYTES)
        if not self._s:
            raise UserError(err.value.decode(errors="replace"))
        q = lambda what: int(self._lib.memfit_session_query(self._s, what))
        self.batch = q(_Q_BATCH)
        self._input = q(_Q_INPUT)
        self._labels = q(_Q_LABELS)
        self._int_input = bool(q(_Q_INT_INPUT))
        self._mse = bool(q(_Q_MSE))
        self._vocab = q(_Q_VOCAB)
        self._classes = q(_Q_CLASSES)
        self._ignore = q(_Q_IGNORE)
        shapes = _shapes(os.path.join(self.out_dir, "model.onnx"))
        self._initializers = set(shapes) if shapes else None
        self._weights = []
        for i in range(q(_Q_WEIGHTS)):
            name = self._lib.memfit_session_weight_name(self._s, i).decode()
            count = int(self._lib.memfit_session_weight_count(self._s, i))
            shape = shapes.get(name)
            if shape is None or int(np.prod(shape)) != count:
                shape = (count,)
            self._weights.append((name, shape, count))

    # --- batches ---

    def _array(self, value):
        np = self._np
        if hasattr(value, "detach"):  # a torch tensor, on any device
            value = value.detach()
            if value.device.type != "cpu":
                value = value.cpu()
            value = value.numpy()
        elif not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
            value = np.from_dlpack(value)
        return np.asarray(value)

    def _samples(self, value, n, per, what, unit):
        """`value` as an array of n samples of `per` values (n None: as
        many as it holds)."""
        a = self._array(value)
        if a.ndim > 0 and n is None:
            n = a.shape[0]
        if a.ndim == 0 or a.shape[0] != n or a.size != n * per:
            raise UserError(f"{what} of shape {a.shape}: this trainer takes "
                            f"{n} samples of {per} {unit} each")
        return a

    def _inputs(self, x, n=None):
        np = self._np
        a = self._samples(x, n, self._input, "inputs", "values")
        if self._int_input:
            if a.dtype.kind not in "iu":
                raise UserError(f"inputs are token ids: an integer array, got {a.dtype}")
            if a.size and (a.min() < 0 or a.max() >= self._vocab):
                raise UserError(f"token ids must be in [0, {self._vocab}), got "
                                f"[{a.min()}, {a.max()}]")
            return np.ascontiguousarray(a, dtype=np.int32)
        return np.ascontiguousarray(a, dtype=np.float32)

    def _targets(self, y, n):
        np = self._np
        a = self._samples(y, n, self._labels, "labels", "labels")
        if self._mse:
            return np.ascontiguousarray(a, dtype=np.float32)
        if a.dtype.kind not in "iu":
            raise UserError(f"labels are class ids: an integer array, got {a.dtype}")
        bad = (a != self._ignore) & ((a < 0) | (a >= self._classes))
        if bad.any():
            raise UserError(f"class ids must be in [0, {self._classes}) (or "
                            f"{self._ignore}, ignored), got {a[bad].flat[0]}")
        return np.ascontiguousarray(a, dtype=np.int32)

    def _check(self, rc, err):
        if rc == 1:
            raise UserError(err.value.decode(errors="replace"))
        if rc != 0:
            raise InternalError(err.value.decode(errors="replace"), rc)

    def step(self, inputs, labels):
        """One training step on a batch (numpy arrays, torch tensors or any
        DLPack array: `batch` samples); returns the loss."""
        self._open()
        x = self._inputs(inputs, self.batch)
        y = self._targets(labels, self.batch)
        loss = ctypes.c_float()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        rc = self._lib.memfit_session_step(self._s, x.ctypes.data, y.ctypes.data,
                                           ctypes.byref(loss), err, _ERR_BYTES)
        self._check(rc, err)
        return float(loss.value)

    def evaluate(self, inputs, labels):
        """The evaluation program over every whole batch of the samples:
        {'loss': mean loss, 'accuracy': share right (cross-entropy)}."""
        self._open()
        x = self._inputs(inputs)
        n = int(x.shape[0])
        y = self._targets(labels, n)
        loss, acc = ctypes.c_double(), ctypes.c_double()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        rc = self._lib.memfit_session_evaluate(self._s, x.ctypes.data, y.ctypes.data,
                                               n, ctypes.byref(loss), ctypes.byref(acc),
                                               err, _ERR_BYTES)
        self._check(rc, err)
        return {"loss": loss.value, "accuracy": acc.value}

    @property
    def steps(self):
        """Updates applied so far."""
        self._open()
        return int(self._lib.memfit_session_query(self._s, _Q_STEPS))

    # --- weights and files ---

    def state_dict(self, as_torch=True):
        """Every weight (and BatchNorm's running statistics) by its name in
        the model, shaped as there: torch tensors, or numpy arrays. The
        constants the compiler folded out of the graph's nodes are left
        out (they are no initializer of the model)."""
        self._open()
        np = self._np
        out = {}
        err = ctypes.create_string_buffer(_ERR_BYTES)
        for i, (name, shape, count) in enumerate(self._weights):
            if self._initializers is not None and name not in self._initializers:
                continue
            a = np.empty(count, dtype=np.float32)
            self._check(self._lib.memfit_session_read_weight(
                self._s, i, a.ctypes.data, err, _ERR_BYTES), err)
            out[name] = a.reshape(shape)
        if as_torch:
            try:
                import torch
                return {k: torch.from_numpy(v) for k, v in out.items()}
            except ImportError:
                pass
        return out

    def load_state_dict(self, state, strict=True):
        """Writes the weights named in `state` (a torch or numpy state
        dict); with `strict`, every weight must be there with its size."""
        self._open()
        np = self._np
        err = ctypes.create_string_buffer(_ERR_BYTES)
        names = {name for name, _, _ in self._weights}
        unknown = [k for k in state if k not in names]
        if strict and unknown:
            raise UserError(f"not weights of this trainer: {', '.join(unknown[:5])}")
        for i, (name, shape, count) in enumerate(self._weights):
            if name not in state:
                if strict:
                    raise UserError(f"missing weight {name!r}")
                continue
            a = np.ascontiguousarray(self._array(state[name]), dtype=np.float32)
            if a.size != count:
                raise UserError(f"{name}: {a.size} values, the trainer holds {count}")
            self._check(self._lib.memfit_session_write_weight(
                self._s, i, a.ctypes.data, err, _ERR_BYTES), err)

    def save(self, path):
        """The model with the trained weights (the CLI trainer's --save)."""
        self._open()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        rc = self._lib.memfit_session_save(self._s, os.fspath(path).encode(), err, _ERR_BYTES)
        if rc != 0:
            raise UserError(err.value.decode(errors="replace"))

    def checkpoint(self, directory):
        """A checkpoint as the CLI trainer's --checkpoint writes it (resume
        with Trainer(..., checkpoint=DIR, resume=True))."""
        self._open()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        rc = self._lib.memfit_session_checkpoint(self._s, os.fspath(directory).encode(),
                                                 err, _ERR_BYTES)
        if rc != 0:
            raise UserError(err.value.decode(errors="replace"))

    def _open(self):
        if not getattr(self, "_s", None):
            raise UserError("this Trainer is closed")

    def close(self):
        if getattr(self, "_s", None):
            self._lib.memfit_session_close(self._s)
            self._s = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # the interpreter is shutting down
            pass

    def __repr__(self):
        return (f"<memfit.Trainer {self.out_dir} ({self.backend}): batch "
                f"{self.batch}, {len(self._weights)} weights>")
