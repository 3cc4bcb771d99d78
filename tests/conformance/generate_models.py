#!/usr/bin/env python3
"""Build the gexec conformance models with a real TVM (relay + graph executor).

Usage: generate_models.py OUT_DIR [--target x86_64|aarch64|armv7a] [--models a,b,...]
                                  [--system-lib a,b,...]

--target picks the machine the kernels are compiled for (default x86_64, every model).
For an ARM target the kernels are compiled with TVM's LLVM for that triple and linked
with Debian's cross compiler (aarch64-linux-gnu-g++, arm-linux-gnueabihf-g++); TVM
cannot run that code here, so outputs.bin holds what TVM computes for the same relay
graph and inputs compiled for x86-64, and info.json says how close an ARM run must
come to it ("tolerance", per model, with the reason). --models picks a subset (the
ARM sets are subsets, to keep their build short). --system-lib names models that
also get OUT_DIR/<model>/static/: graph.json, params.bin and kernels.tar, the same
graph built with the system-lib runtime option and exported as object files, for a
program that links its kernels in (gexec_add_model).

For every model, OUT_DIR/<model>/ receives:
  graph.json    graph-executor JSON (lib.get_graph_json())
  lib.so        kernels only (lib.get_lib().export_library), no embedded graph
  params.bin    tvm.runtime.save_param_dict(lib.get_params())
  model.so      single-file export (graph + params in __tvm_dev_mblob)
  kernels.tar   the kernels as export_library leaves objects (lib0.o): what
                `gexec-run --write-library` links with the graph and its weights written
                aligned into a single-file library whose weights are read in place
  inputs.bin    save_param_dict of the fixed inputs, keyed by input name
  outputs.bin   save_param_dict of TVM's outputs, keyed "0", "1", ...
  info.json     shapes, dtypes, timing and facts about the compiled code
and OUT_DIR/manifest.json lists the models.

Everything is deterministic: weights and inputs come from seeded
numpy.random.RandomState generators.
"""

import ctypes
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import time

import numpy as np

# TVM looks for pre-tuned schedules on the network when it compiles for ARM; the
# build must not depend on the network (and the default schedules are what it uses).
os.environ.setdefault("TOPHUB_LOCATION", "NONE")

import tvm  # noqa: E402
from tvm import relay  # noqa: E402
from tvm.contrib import cc as tvm_cc  # noqa: E402
from tvm.contrib import graph_executor  # noqa: E402
from tvm.relay.backend import Runtime  # noqa: E402

try:
    import tvm.relay.testing  # noqa: F401  (resnet / mobilenet workloads)

    HAVE_RELAY_TESTING = True
except Exception:  # pragma: no cover - depends on the wheel
    HAVE_RELAY_TESTING = False

# Plain "llvm" would do on a stock build, but some wheels ship an LLVM whose
# default triple is not the host's. Naming the x86-64 triple and a baseline
# CPU keeps the kernels portable to any x86-64 Linux machine.
TARGET = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64"

# The machines a set of models is compiled for: TVM's target and the compiler that links
# the kernels (None: TVM's default, the host's g++).
TARGETS = {
    "x86_64": {"target": TARGET, "cc": None, "nm": "nm"},
    # NEON is part of every aarch64 CPU.
    "aarch64": {"target": "llvm -mtriple=aarch64-linux-gnu -mattr=+neon", "cc": "aarch64-linux-gnu-g++",
                "nm": "aarch64-linux-gnu-nm"},
    # 32-bit ARM, hard-float ABI (Debian armhf) with NEON, as on Cortex-A boards.
    "armv7a": {"target": "llvm -mtriple=armv7a-linux-gnueabihf -mattr=+neon -mfloat-abi=hard", "cc": "arm-linux-gnueabihf-g++",
               "nm": "arm-linux-gnueabihf-nm"},
}

# How close a run of the ARM build must come to TVM's outputs of the x86-64 build, per
# model; "exact" where both compute the same operations in the same order (integer
# arithmetic, copies, sorting, reshapes and the dense layers TVM schedules alike on both).
# Otherwise TVM picks other schedules on ARM (arm_cpu conv2d, its own dense and softmax
# tilings, NEON's fused multiply-add), so float sums are reassociated and rounded
# differently: within atol 1e-6 + rtol 1e-5 (measured on aarch64 under qemu: at most
# 9e-8 absolute for mlp, reshape_split and resnet, 2.4e-6 for opt3_parallel's softmax over
# two 3x3 convolutions; on armv7a mlp and reshape_split are bit for bit, opt3_parallel
# within 3.3e-6).
ARM_TOLERANCE = {
    "int_scalar": ("exact", "integer arithmetic"),
    "extern_call": ("exact", "argsort: positions of input values, no arithmetic"),
    "sort_float32": ("exact", "sort, argsort and topk: copies and positions of input values"),
    "reshape_split": ("close", "dense reduced in another order by the ARM schedule"),
    "mlp": ("close", "dense and softmax reduced in another order, fused multiply-add"),
    "opt3_parallel": ("close", "conv2d and softmax scheduled for arm_cpu: other reduction order"),
    "resnet": ("close", "arm_cpu conv2d schedules (spatial pack), fused multiply-add"),
    "mobilenet": ("close", "arm_cpu depthwise conv2d schedules, fused multiply-add"),
}

CONTEXT_SYMBOLS = [
    "__tvm_module_ctx",
    "__TVMBackendAllocWorkspace",
    "__TVMBackendFreeWorkspace",
    "__TVMBackendParallelLaunch",
    "__TVMBackendParallelBarrier",
    "__TVMAPISetLastError",
    "__TVMBackendGetFuncFromEnv",
    "__TVMFuncCall",
    "__tvm_main__",
    "__tvm_dev_mblob",
]


def log(msg):
    print("[generate] " + msg, flush=True)


def rand(rng, shape, dtype="float32", scale=1.0):
    if dtype.startswith("int"):
        return rng.randint(-8, 9, size=shape).astype(dtype)
    return (rng.standard_normal(size=shape) * scale).astype(dtype)


def const_params(rng, specs):
    """specs: {name: shape} -> {name: tvm.nd.array} with small random floats."""
    return {k: tvm.nd.array(rand(rng, s, scale=0.2)) for k, s in specs.items()}


# ---------------------------------------------------------------------------
# Model definitions: each returns (mod, params, {input_name: np.ndarray}, opt)
# ---------------------------------------------------------------------------


def model_mlp(opt_level=3):
    rng = np.random.RandomState(1)
    data = relay.var("data", shape=(2, 64), dtype="float32")
    w1 = relay.var("fc1_weight", shape=(32, 64), dtype="float32")
    b1 = relay.var("fc1_bias", shape=(32,), dtype="float32")
    w2 = relay.var("fc2_weight", shape=(10, 32), dtype="float32")
    b2 = relay.var("fc2_bias", shape=(10,), dtype="float32")
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(data, w1), b1))
    out = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, w2), b2))
    mod = tvm.IRModule.from_expr(relay.Function([data, w1, b1, w2, b2], out))
    params = const_params(
        rng,
        {"fc1_weight": (32, 64), "fc1_bias": (32,), "fc2_weight": (10, 32), "fc2_bias": (10,)},
    )
    inputs = {"data": rand(rng, (2, 64))}
    return mod, params, inputs, opt_level


def model_mlp_opt0():
    return model_mlp(opt_level=0)


def randomize_batchnorm(params, seed):
    """relay.testing initialises BN to the identity; give it real statistics."""
    rng = np.random.RandomState(seed)
    out = {}
    for k, v in params.items():
        shape = v.shape
        if k.endswith("_gamma"):
            v = tvm.nd.array((1.0 + 0.1 * rng.standard_normal(shape)).astype("float32"))
        elif k.endswith("_beta") or k.endswith("_moving_mean"):
            v = tvm.nd.array((0.1 * rng.standard_normal(shape)).astype("float32"))
        elif k.endswith("_moving_var"):
            v = tvm.nd.array((0.5 + rng.uniform(size=shape)).astype("float32"))
        out[k] = v
    return out


def hand_convnet(depthwise):
    """Small conv net used when relay.testing is not in the wheel."""
    rng = np.random.RandomState(3)
    data = relay.var("data", shape=(1, 3, 32, 32), dtype="float32")
    params = {}

    def var(name, shape):
        params[name] = tvm.nd.array(rand(rng, shape, scale=0.2))
        return relay.var(name, shape=shape, dtype="float32")

    def conv_bn_relu(x, name, cin, cout, stride, groups=1):
        w = var(name + "_weight", (cout, cin // groups, 3, 3))
        x = relay.nn.conv2d(x, w, strides=(stride, stride), padding=(1, 1), groups=groups,
                            channels=cout, kernel_size=(3, 3))
        bn = relay.nn.batch_norm(x, var(name + "_bn_gamma", (cout,)), var(name + "_bn_beta", (cout,)),
                                 var(name + "_bn_moving_mean", (cout,)),
                                 var(name + "_bn_moving_var", (cout,)))
        return relay.nn.relu(bn[0])

    x = conv_bn_relu(data, "conv0", 3, 16, 1)
    x = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2))
    if depthwise:
        x = conv_bn_relu(x, "dw1", 16, 16, 1, groups=16)
    x = conv_bn_relu(x, "conv1", 16, 32, 2)
    x = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(x))
    x = relay.nn.dense(x, var("fc_weight", (10, 32)))
    x = relay.nn.softmax(relay.nn.bias_add(x, var("fc_bias", (10,))))
    free = relay.analysis.free_vars(x)
    mod = tvm.IRModule.from_expr(relay.Function(free, x))
    return mod, randomize_batchnorm(params, 4)


def model_resnet():
    if HAVE_RELAY_TESTING:
        mod, params = relay.testing.resnet.get_workload(
            num_layers=18, batch_size=1, image_shape=(3, 32, 32), num_classes=10
        )
        params = randomize_batchnorm(params, 11)
    else:
        mod, params = hand_convnet(depthwise=False)
    inputs = {"data": rand(np.random.RandomState(12), (1, 3, 32, 32))}
    return mod, params, inputs, 3


def model_resnet18_224():
    """ResNet-18 at ImageNet's 224x224 and 1000 classes: the size start-up and memory are
    measured at (benchmarks/startup, benchmarks/footprint); asked for by name only."""
    mod, params = relay.testing.resnet.get_workload(num_layers=18, batch_size=1, image_shape=(3, 224, 224), num_classes=1000)
    params = randomize_batchnorm(params, 13)
    inputs = {"data": rand(np.random.RandomState(14), (1, 3, 224, 224))}
    return mod, params, inputs, 3


def model_mobilenet():
    if HAVE_RELAY_TESTING:
        mod, params = relay.testing.mobilenet.get_workload(
            batch_size=1, image_shape=(3, 32, 32), num_classes=10
        )
        params = randomize_batchnorm(params, 21)
    else:
        mod, params = hand_convnet(depthwise=True)
    inputs = {"data": rand(np.random.RandomState(22), (1, 3, 32, 32))}
    return mod, params, inputs, 3


def model_reshape_split():
    """Reshape-only groups (compiled to __nop) and a kernel with several outputs.

    x -> reshape -> reshape feeds a dense, so the two reshapes form a fused
    group of their own, which the graph executor codegen emits as "__nop".
    The split after the dense is fused into one kernel with four outputs, and
    all four are graph heads. A second input goes through reshape -> add.
    """
    rng = np.random.RandomState(31)
    x = relay.var("x", shape=(2, 12), dtype="float32")
    y = relay.var("y", shape=(4, 6), dtype="float32")
    w = relay.var("weight", shape=(8, 4), dtype="float32")
    xr = relay.reshape(relay.reshape(x, (4, 6)), (6, 4))
    d = relay.nn.dense(xr, w)
    parts = relay.split(d, indices_or_sections=4, axis=1)
    z = relay.add(relay.reshape(relay.reshape(y, (24,)), (4, 6)), relay.const(1.0))
    out = relay.Tuple([parts[0], parts[1], parts[2], parts[3], z])
    mod = tvm.IRModule.from_expr(relay.Function([x, y, w], out))
    params = const_params(rng, {"weight": (8, 4)})
    inputs = {"x": rand(rng, (2, 12)), "y": rand(rng, (4, 6))}
    return mod, params, inputs, 3


def model_int_scalar():
    rng = np.random.RandomState(41)
    x = relay.var("x", shape=(4,), dtype="int32")
    y = relay.var("y", shape=(), dtype="int32")
    out0 = relay.add(relay.multiply(x, y), relay.const(1, "int32"))
    out1 = relay.sum(x)
    mod = tvm.IRModule.from_expr(relay.Function([x, y], relay.Tuple([out0, out1])))
    inputs = {"x": rand(rng, (4,), "int32"), "y": np.array(3, dtype="int32")}
    return mod, {}, inputs, 3


def model_opt3_parallel():
    """Conv layers large enough for the x86 schedules to emit parallel loops,
    with padding and softmax intermediates big enough to need workspace."""
    rng = np.random.RandomState(51)
    data = relay.var("data", shape=(1, 16, 32, 32), dtype="float32")
    w1 = relay.var("conv1_weight", shape=(32, 16, 3, 3), dtype="float32")
    b1 = relay.var("conv1_bias", shape=(32,), dtype="float32")
    w2 = relay.var("conv2_weight", shape=(32, 32, 3, 3), dtype="float32")
    x = relay.nn.conv2d(data, w1, padding=(1, 1), channels=32, kernel_size=(3, 3))
    x = relay.nn.relu(relay.nn.bias_add(x, b1))
    x = relay.nn.conv2d(x, w2, padding=(1, 1), channels=32, kernel_size=(3, 3))
    x = relay.reshape(x, (32, 32 * 32))
    x = relay.nn.softmax(x, axis=1)
    mod = tvm.IRModule.from_expr(relay.Function([data, w1, b1, w2], x))
    params = const_params(
        rng, {"conv1_weight": (32, 16, 3, 3), "conv1_bias": (32,), "conv2_weight": (32, 32, 3, 3)}
    )
    inputs = {"data": rand(rng, (1, 16, 32, 32))}
    return mod, params, inputs, 3


def model_extern_call():
    """A kernel that calls a runtime-registered global function.

    relay.argsort on the CPU is lowered to a call of the packed function
    "tvm.contrib.sort.argsort", looked up through __TVMBackendGetFuncFromEnv
    and called through __TVMFuncCall with __tvm_module_ctx. A runtime that
    does not provide that function should fail cleanly on this model.
    """
    rng = np.random.RandomState(61)
    x = relay.var("x", shape=(8,), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.argsort(x, dtype="int32")))
    # Distinct values, so the reference order has no ties.
    inputs = {"x": (rng.permutation(8).astype("float32") - 3.5) * 0.25}
    return mod, {}, inputs, 3


def tied(rng, shape, dtype, low=-3, high=4, scale=0.5):
    """Small values with many repeats, so that the sort order of ties shows."""
    values = rng.randint(low, high, size=shape)
    if dtype.startswith("float"):
        return (values * scale).astype(dtype)
    return values.astype(dtype)


def tuple_of(outs):
    """One relay tuple of every output (topk "both" contributes two)."""
    return relay.Tuple([o for out in outs for o in (out if isinstance(out, (list, tuple)) else [out])])


def topk_outputs(*args, **kwargs):
    out = relay.topk(*args, **kwargs)
    return [out[0], out[1]] if kwargs.get("ret_type", "both") == "both" else [out]


def model_sort_float32():
    """tvm.contrib.sort.topk / .sort / .argsort on float32 with ties.

    Every ret_type of topk, k = 0 (all), both directions, the first, middle and last
    axis, and argsort to int64 and float32 indices. Each op is an extern call of its
    own kernel. relay passes topk the output's extent along the axis as k, so the
    call sees k = 9 for k = 0 here; the unit tests cover k < 1 in the call itself.
    """
    rng = np.random.RandomState(71)
    x = relay.var("x", shape=(4, 9), dtype="float32")
    y = relay.var("y", shape=(2, 5, 3), dtype="float32")
    outs = [
        topk_outputs(x, k=3, axis=-1, ret_type="both", is_ascend=False, dtype="int32"),
        topk_outputs(x, k=2, axis=0, ret_type="values", is_ascend=True),
        topk_outputs(x, k=0, axis=1, ret_type="indices", is_ascend=False, dtype="int64"),
        topk_outputs(y, k=2, axis=1, ret_type="both", is_ascend=True, dtype="int64"),
        relay.sort(x, axis=0, is_ascend=False),
        relay.sort(y, axis=1, is_ascend=True),
        relay.argsort(y, axis=-2, is_ascend=False, dtype="int64"),
        relay.argsort(x, axis=-1, is_ascend=True, dtype="float32"),
    ]
    mod = tvm.IRModule.from_expr(relay.Function([x, y], tuple_of(outs)))
    inputs = {"x": tied(rng, (4, 9), "float32"), "y": tied(rng, (2, 5, 3), "float32")}
    return mod, {}, inputs, 3


def model_sort_int32():
    """The same functions on int32 data: topk with ret_type both (int32 and int64
    indices), sort and argsort."""
    rng = np.random.RandomState(72)
    x = relay.var("x", shape=(3, 4, 6), dtype="int32")
    outs = [
        topk_outputs(x, k=2, axis=1, ret_type="both", is_ascend=False, dtype="int32"),
        topk_outputs(x, k=4, axis=-1, ret_type="both", is_ascend=True, dtype="int64"),
        relay.sort(x, axis=-1, is_ascend=False),
        relay.argsort(x, axis=0, is_ascend=True, dtype="int32"),
    ]
    mod = tvm.IRModule.from_expr(relay.Function([x], tuple_of(outs)))
    inputs = {"x": tied(rng, (3, 4, 6), "int32")}
    return mod, {}, inputs, 3


def model_sort_dtypes():
    """The other data dtypes TVM's sort functions take: float16 (compared as float),
    float64, int64, and int8/uint8 for topk (whose indices may have the data's dtype)."""
    rng = np.random.RandomState(73)
    h = relay.var("h", shape=(3, 7), dtype="float16")
    d = relay.var("d", shape=(5, 4), dtype="float64")
    q = relay.var("q", shape=(2, 9), dtype="int64")
    s8 = relay.var("s8", shape=(4, 6), dtype="int8")
    u8 = relay.var("u8", shape=(6, 4), dtype="uint8")
    outs = [
        relay.argsort(h, axis=-1, is_ascend=True, dtype="int64"),
        relay.sort(h, axis=0, is_ascend=False),
        topk_outputs(h, k=3, axis=1, ret_type="both", is_ascend=False, dtype="int32"),
        relay.argsort(d, axis=0, is_ascend=False, dtype="int32"),
        topk_outputs(d, k=2, axis=-1, ret_type="both", is_ascend=True, dtype="float64"),
        relay.sort(q, axis=1, is_ascend=True),
        topk_outputs(q, k=5, axis=1, ret_type="both", is_ascend=False, dtype="int64"),
        topk_outputs(s8, k=3, axis=1, ret_type="both", is_ascend=False, dtype="int8"),
        topk_outputs(u8, k=2, axis=0, ret_type="both", is_ascend=True, dtype="uint8"),
        topk_outputs(u8, k=0, axis=1, ret_type="indices", is_ascend=False, dtype="int32"),
    ]
    mod = tvm.IRModule.from_expr(relay.Function([h, d, q, s8, u8], tuple_of(outs)))
    hv = tied(rng, (3, 7), "float16")
    hv[0, 0], hv[0, 1], hv[1, 2] = np.float16(-0.0), np.float16(np.inf), np.float16(6e-8)  # -0 ties 0; a subnormal
    inputs = {
        "h": hv,
        "d": tied(rng, (5, 4), "float64", scale=0.125),
        "q": tied(rng, (2, 9), "int64") * np.int64(2**40),  # beyond int32
        "s8": tied(rng, (4, 6), "int8", low=-4, high=4) * np.int8(32),  # -128 .. 96
        "u8": tied(rng, (6, 4), "uint8", low=0, high=5) * np.uint8(60),  # 0 .. 240
    }
    return mod, {}, inputs, 3


def model_sort_nan():
    """NaN among the values: TVM compares with < and >, which NaN defeats, so the
    order is what its std::stable_sort and heap steps make of that; gexec must take
    the same steps to produce the same bytes."""
    x = relay.var("x", shape=(2, 14), dtype="float32")
    outs = [
        relay.argsort(x, axis=-1, is_ascend=True, dtype="int32"),
        relay.argsort(x, axis=-1, is_ascend=False, dtype="int32"),
        relay.sort(x, axis=1, is_ascend=True),
        topk_outputs(x, k=5, axis=1, ret_type="both", is_ascend=False, dtype="int32"),
        topk_outputs(x, k=0, axis=1, ret_type="indices", is_ascend=True, dtype="int32"),
    ]
    mod = tvm.IRModule.from_expr(relay.Function([x], tuple_of(outs)))
    nan = np.nan
    inputs = {
        "x": np.array(
            [
                [3, nan, 1, nan, 2, 0, 5, -1, nan, 4, 7, 2.5, 1, 1],
                [nan, 0, -0.0, nan, nan, 1, np.inf, -np.inf, 2, nan, 0, 1, nan, -2],
            ],
            dtype="float32",
        )
    }
    return mod, {}, inputs, 3


MODELS = [
    ("mlp", model_mlp),
    ("mlp_opt0", model_mlp_opt0),
    ("resnet", model_resnet),
    ("mobilenet", model_mobilenet),
    ("reshape_split", model_reshape_split),
    ("int_scalar", model_int_scalar),
    ("opt3_parallel", model_opt3_parallel),
    ("extern_call", model_extern_call),
    ("sort_float32", model_sort_float32),
    ("sort_int32", model_sort_int32),
    ("sort_dtypes", model_sort_dtypes),
    ("sort_nan", model_sort_nan),
]

# Made only when named in --models: too slow to compile and run for every test run.
EXTRA_MODELS = [
    ("resnet18_224", model_resnet18_224),
]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def dynamic_symbols(path, nm_name="nm"):
    """Names from `nm -D --defined-only`, or None when nm is missing."""
    nm = shutil.which(nm_name)
    if nm is None:
        return None
    res = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True)
    if res.returncode != 0:
        return None
    names = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            names.add(parts[2])
    return names


def read_mblob(path):
    """Describe the __tvm_dev_mblob of a single-file export.

    The symbol holds a uint64 payload size followed by the payload: a uint64
    module count, then per module a length-prefixed type key (uint64 length +
    bytes) and that module's serialised data. "_lib" stands for the host
    library itself and has no data; "_import_tree" holds two uint64 vectors
    (CSR row pointers and child indices). The walk understands the
    GraphExecutorFactory payload as well; any other key stops it and the
    result says so ("complete": false). Returns None when the blob cannot be
    read at all.
    """
    try:
        handle = ctypes.CDLL(os.path.abspath(path), mode=getattr(os, "RTLD_LAZY", 1))
        addr = ctypes.addressof(ctypes.c_char.in_dll(handle, "__tvm_dev_mblob"))
        size = struct.unpack("<Q", ctypes.string_at(addr, 8))[0]
        blob = ctypes.string_at(addr + 8, size)
    except Exception:
        return None
    return parse_mblob(blob)


NDARRAY_MAGIC = 0xDD5E40F096B4A13F


def parse_mblob(blob):
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, blob, pos)
        pos += struct.calcsize(fmt)
        return vals

    def u64():
        return take("<Q")[0]

    def string():
        nonlocal pos
        n = u64()
        if pos + n > len(blob):
            raise ValueError("string runs past the blob")
        s = blob[pos : pos + n]
        pos += n
        return s.decode("utf-8")

    def u64_vec():
        return [u64() for _ in range(u64())]

    def skip_ndarray():
        nonlocal pos
        magic, _reserved = take("<QQ")
        if magic != NDARRAY_MAGIC:
            raise ValueError("bad NDArray magic")
        take("<ii")  # device type, device id
        (ndim,) = take("<i")
        code, bits, lanes = take("<BBH")
        shape = take("<%dq" % ndim) if ndim else ()
        (nbytes,) = take("<q")
        pos += nbytes
        return {"dtype": [code, bits, lanes], "shape": list(shape), "nbytes": nbytes}

    result = {"type_keys": [], "complete": False, "payload_bytes": len(blob)}
    try:
        count = u64()
        for _ in range(count):
            key = string()
            result["type_keys"].append(key)
            if key == "_lib":
                continue
            if key == "_import_tree":
                result["import_tree_row_ptr"] = u64_vec()
                result["import_tree_child_indices"] = u64_vec()
                continue
            if key == "GraphExecutorFactory":
                # graph JSON string, uint64 param count, the names as a
                # vector of strings, that many NDArrays, the module name.
                graph_len = len(string())
                num_params = u64()
                names = [string() for _ in range(u64())]
                if len(names) != num_params:
                    raise ValueError("param name count mismatch")
                arrays = [skip_ndarray() for _ in range(num_params)]
                result["factory"] = {
                    "graph_json_bytes": graph_len,
                    "param_names": names,
                    "num_param_arrays": len(arrays),
                    "module_name": string(),
                }
                continue
            return result
        result["complete"] = pos == len(blob)
    except (struct.error, ValueError, UnicodeDecodeError):
        result["error_at"] = pos
    return result


def graph_facts(graph):
    nodes = graph["nodes"]
    facts = {
        "num_nodes": len(nodes),
        "graph_attrs_keys": sorted(graph.get("attrs", {}).keys()),
        "has_nop": any(n.get("attrs", {}).get("func_name") == "__nop" for n in nodes),
        "multi_output_nodes": [
            n["name"]
            for n in nodes
            if n["op"] == "tvm_op" and int(n.get("attrs", {}).get("num_outputs", "1")) > 1
        ],
        "num_heads": len(graph["heads"]),
        "kernel_names": sorted(
            {
                n["attrs"]["func_name"]
                for n in nodes
                if n["op"] == "tvm_op" and n["attrs"].get("func_name") != "__nop"
            }
        ),
    }
    return facts


def input_info(gmod, graph, param_names):
    """Inputs from the graph executor itself when it can tell, else from JSON."""
    info = {}
    if hasattr(gmod, "get_input_info"):
        shapes, dtypes = gmod.get_input_info()
        for name in shapes.keys():
            name = str(name)
            if name in param_names:
                continue
            info[name] = {
                "shape": [int(d) for d in shapes[name]],
                "dtype": str(dtypes[name]),
            }
        return info
    nodes = graph["nodes"]
    shapes = graph["attrs"]["shape"][1]
    dtypes = graph["attrs"]["dltype"][1]
    for nid in graph["arg_nodes"]:
        name = nodes[nid]["name"]
        if name in param_names:
            continue
        eid = graph["node_row_ptr"][nid]
        info[name] = {"shape": shapes[eid], "dtype": dtypes[eid]}
    return info


def kernel_source(llvm_mod):
    for fmt in ("ll", "asm"):
        try:
            src = llvm_mod.get_source(fmt)
        except Exception:
            src = ""
        if src:
            return src
    return ""


def code_uses(src):
    """Whether kernels call the parallel launcher / workspace allocator."""
    if not src:
        return None, None
    return "__TVMBackendParallelLaunch" in src, "__TVMBackendAllocWorkspace" in src


def env_funcs(src):
    """Global function names the kernels look up through
    __TVMBackendGetFuncFromEnv: dotted names in the LLVM string constants."""
    if "__TVMBackendGetFuncFromEnv" not in src:
        return []
    names = re.findall(r'c"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)+)\\00"', src)
    return sorted(set(names))


def build_static(mdir, mod, params, opt_level, machine):
    """The same graph with the system-lib runtime option, its kernels as object files."""
    sdir = os.path.join(mdir, "static")
    os.makedirs(sdir, exist_ok=True)
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target=machine["target"], params=params, runtime=Runtime("cpp", {"system-lib": True}))
    with open(os.path.join(sdir, "graph.json"), "w") as f:
        f.write(lib.get_graph_json())
    with open(os.path.join(sdir, "params.bin"), "wb") as f:
        f.write(tvm.runtime.save_param_dict(lib.get_params()))
    lib.get_lib().export_library(os.path.join(sdir, "kernels.tar"))


def build_one(out_dir, name, factory, machine_name="x86_64", system_lib=False):
    machine = TARGETS[machine_name]
    cross = machine_name != "x86_64"
    t0 = time.time()
    mod, params, inputs, opt_level = factory()
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target=machine["target"], params=params)
    build_s = time.time() - t0
    export = {"fcompile": tvm_cc.cross_compiler(machine["cc"])} if machine["cc"] else {}

    mdir = os.path.join(out_dir, name)
    os.makedirs(mdir, exist_ok=True)
    graph_json = lib.get_graph_json()
    with open(os.path.join(mdir, "graph.json"), "w") as f:
        f.write(graph_json)
    lib_params = lib.get_params()
    with open(os.path.join(mdir, "params.bin"), "wb") as f:
        f.write(tvm.runtime.save_param_dict(lib_params))
    kernels = lib.get_lib()
    kernels.export_library(os.path.join(mdir, "lib.so"), **export)
    kernels.export_library(os.path.join(mdir, "kernels.tar"))
    lib.export_library(os.path.join(mdir, "model.so"), **export)
    with open(os.path.join(mdir, "inputs.bin"), "wb") as f:
        f.write(tvm.runtime.save_param_dict({k: tvm.nd.array(v) for k, v in inputs.items()}))
    if system_lib:
        build_static(mdir, mod, params, opt_level, machine)

    # Run with TVM's own graph executor, loaded back from the single-file
    # export so the reference outputs come from what was written to disk. TVM cannot
    # run ARM code here: it runs the same relay graph compiled for x86-64 instead.
    dev = tvm.cpu(0)
    if cross:
        with tvm.transform.PassContext(opt_level=opt_level):
            reference = relay.build(mod, target=TARGET, params=params)
        gmod = graph_executor.GraphModule(reference["default"](dev))
    else:
        loaded = tvm.runtime.load_module(os.path.join(mdir, "model.so"))
        gmod = graph_executor.GraphModule(loaded["default"](dev))
    for k, v in inputs.items():
        gmod.set_input(k, v)
    gmod.run()
    n_out = gmod.get_num_outputs()
    outs = [gmod.get_output(i).numpy() for i in range(n_out)]
    with open(os.path.join(mdir, "outputs.bin"), "wb") as f:
        f.write(
            tvm.runtime.save_param_dict({str(i): tvm.nd.array(o) for i, o in enumerate(outs)})
        )

    timer = gmod.module.time_evaluator("run", dev, number=10, repeat=5)
    run_ms = float(np.mean(timer().results)) * 1000.0

    graph = json.loads(graph_json)
    src = kernel_source(kernels)
    uses_parallel, uses_workspace = code_uses(src)
    info = {
        "inputs": input_info(gmod, graph, set(lib_params.keys())),
        # Graph order of the inputs (arg nodes that are not params).
        "input_names": [
            graph["nodes"][nid]["name"]
            for nid in graph["arg_nodes"]
            if graph["nodes"][nid]["name"] not in lib_params
        ],
        "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype)} for o in outs],
        "num_outputs": n_out,
        "params": {
            k: {"shape": [int(d) for d in v.shape], "dtype": str(v.dtype)}
            for k, v in sorted(lib_params.items())
        },
        "tvm_run_ms": round(run_ms, 6),
        "tvm_num_threads_env": os.environ.get("TVM_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
        "tvm_version": tvm.__version__,
        "target": machine["target"],
        "machine": machine_name,
        "opt_level": opt_level,
        "uses_parallel": uses_parallel,
        "uses_workspace": uses_workspace,
        "env_funcs": env_funcs(src),
    }
    if cross:
        kind, why = ARM_TOLERANCE.get(name, ("close", "float arithmetic scheduled differently for ARM"))
        info["reference"] = "TVM's outputs for the same relay graph compiled for x86-64 (%s)" % TARGET
        info["tolerance"] = {"exact": kind == "exact", "rtol": 0 if kind == "exact" else 1e-5,
                             "atol": 0 if kind == "exact" else 1e-6, "why": why}
    if system_lib:
        info["static"] = "static/"
    info.update(graph_facts(graph))
    for fname in ("lib.so", "model.so"):
        syms = dynamic_symbols(os.path.join(mdir, fname), machine["nm"])
        if syms is not None:
            key = "context_symbols_" + fname.replace(".", "_")
            info[key] = [s for s in CONTEXT_SYMBOLS if s in syms]
    mblob = None if cross else read_mblob(os.path.join(mdir, "model.so"))
    if mblob is not None:
        info["model_so_mblob"] = mblob
    with open(os.path.join(mdir, "info.json"), "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
        f.write("\n")
    log(
        "%-14s opt=%d build %.1fs run %.3f ms outputs=%d nop=%s multi=%s parallel=%s workspace=%s"
        % (
            name,
            opt_level,
            build_s,
            run_ms,
            n_out,
            info["has_nop"],
            len(info["multi_output_nodes"]),
            uses_parallel,
            uses_workspace,
        )
    )


def main(argv):
    import argparse

    parser = argparse.ArgumentParser(prog="generate_models.py")
    parser.add_argument("out_dir")
    parser.add_argument("--target", choices=sorted(TARGETS), default="x86_64")
    parser.add_argument("--models", default="", help="comma-separated models (default: all but the extra ones, resnet18_224)")
    parser.add_argument("--system-lib", default="", help="comma-separated models that also get static/")
    args = parser.parse_args(argv[1:])
    known = [name for name, _ in MODELS + EXTRA_MODELS]
    chosen = [m for m in args.models.split(",") if m] or [name for name, _ in MODELS]
    static = {m for m in args.system_lib.split(",") if m}
    for m in chosen + sorted(static):
        if m not in known:
            parser.error("no model named %r (models: %s)" % (m, ", ".join(known)))
    models = [(name, factory) for name, factory in MODELS + EXTRA_MODELS if name in chosen]
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    manifest_path = os.path.join(out_dir, "manifest.json")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    machine = TARGETS[args.target]
    log("tvm %s, python %s, target %r" % (tvm.__version__, platform.python_version(), machine["target"]))
    # Drop model folders left by an older model list.
    current = {name for name, _ in models}
    for entry in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, entry)
        if entry not in current and os.path.isfile(os.path.join(path, "info.json")):
            log("removing stale model folder %s" % path)
            shutil.rmtree(path)
    names = []
    for name, factory in models:
        build_one(out_dir, name, factory, args.target, name in static)
        names.append(name)
    manifest = {
        "tvm_version": tvm.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "target": machine["target"],
        "machine": args.target,
        "relay_testing": HAVE_RELAY_TESTING,
        "models": names,
    }
    # Written last: its presence means every model is complete.
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(tmp, manifest_path)
    log("wrote %s" % manifest_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
