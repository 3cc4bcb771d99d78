"""Relax models compiled by today's TVM (relax.build, export_library), run by TVM's own
VM, and what gexec must make of them.

    python generate_models.py OUT_DIR [--target aarch64]

With --target aarch64 the same models are compiled for 64-bit ARM (the kernels by TVM's
LLVM for aarch64-linux-gnu with NEON, linked by Debian's aarch64-linux-gnu-g++) for
gexec cross-built for that machine to run under qemu-user; TVM cannot run ARM code here,
so the outputs recorded are those of TVM's VM running the same module compiled for this
x86-64 machine, with the same inputs, and each case says how close an ARM run must come
(a "close" line; see ARM_TOLERANCE).

For each model: OUT_DIR/<name>.so (the single-file library TVM >= 0.21 exports: the
relax.VMExecutable module beside its kernels), OUT_DIR/<name>.npz (inputs in0, in1, ...
and the outputs TVM's relax.VirtualMachine returned, out0, out1, ... tuples flattened
depth first) and an entry in OUT_DIR/manifest.json (and OUT_DIR/manifest.txt, the same a fact a line). Cases that gexec must refuse carry
the error code and message parts instead of outputs.

Three models are also built as a system library (relax.build(..., system_lib=True),
export_library("<name>.tar"): lib0.o with the kernels, devc.o with the executable), into
OUT_DIR/static/, which tests/relax_static links into static programs; a line each in
OUT_DIR/static/manifest.txt: name, function, inputs, outputs, the atol and rtol a run
must meet (0 0: bit for bit) and, for a model whose weights are arguments, the file in
OUT_DIR holding them.
"""

import json
import os
import sys

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend import nn
from tvm.script import relax as R

TARGET = "llvm"

# The machines a suite is compiled for: TVM's target and the compiler export_library links
# the kernels with (None: TVM's default, the host's).
TARGETS = {
    "x86_64": (TARGET, None),
    "aarch64": ({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]}, "aarch64-linux-gnu-g++"),
}

# How close gexec's run of the ARM build must come to TVM's VM on the x86-64 build, per
# model (atol, rtol); a model not named must be bit for bit (tiny, int8, float16,
# tuple_out, the two functions, if_else, float8_constants are). Where the kernels sum float32
# products (matmul, conv2d, batch norm, softmax), the aarch64 kernels round their sums
# otherwise (likely LLVM's fused multiply-adds, which x86-64's baseline CPU lacks):
# measured under qemu-aarch64, at most 7.6e-6 (nn_mlp), 3.8e-6 (mlp), 9.5e-7 (convnet,
# dynamic_batch), 4.8e-7 (attention).
ARM_TOLERANCE = {
    "mlp": (1e-5, 1e-5), "nn_mlp": (1e-5, 1e-5), "mlp_constants": (1e-5, 1e-5),
    "convnet": (1e-5, 1e-5), "convnet_constants": (1e-5, 1e-5), "attention": (1e-5, 1e-5),
    "dynamic_batch": (1e-5, 1e-5),
}


@tvm.script.ir_module
class Tiny:
    """Eight elementwise operators on a small tensor: what a call costs beyond its kernels."""

    @R.function
    def main(x: R.Tensor((1, 16), "float32")) -> R.Tensor((1, 16), "float32"):
        with R.dataflow():
            a = R.add(x, R.const(1, "float32"))
            b = R.multiply(a, R.const(0.5, "float32"))
            c = R.nn.relu(b)
            d = R.subtract(c, R.const(0.25, "float32"))
            e = R.exp(d)
            f = R.sqrt(e)
            g = R.negative(f)
            h = R.abs(g)
            R.output(h)
        return h


@tvm.script.ir_module
class Mlp:
    @R.function
    def main(x: R.Tensor((4, 16), "float32"), w1: R.Tensor((32, 16), "float32"), b1: R.Tensor((32,), "float32"),
             w2: R.Tensor((8, 32), "float32"), b2: R.Tensor((8,), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, R.permute_dims(w1)), b1))
            y = R.add(R.matmul(h, R.permute_dims(w2)), b2)
            R.output(y)
        return y


@tvm.script.ir_module
class ConvNet:
    @R.function
    def main(x: R.Tensor((1, 3, 16, 16), "float32"), w: R.Tensor((8, 3, 3, 3), "float32"), gamma: R.Tensor((8,), "float32"),
             beta: R.Tensor((8,), "float32"), mean: R.Tensor((8,), "float32"), var: R.Tensor((8,), "float32"),
             fw: R.Tensor((10, 8), "float32"), fb: R.Tensor((10,), "float32")) -> R.Tensor((1, 10), "float32"):
        with R.dataflow():
            c = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            bn = R.nn.batch_norm(c, gamma, beta, mean, var, axis=1)
            r = R.nn.relu(bn[0])
            p = R.nn.max_pool2d(r, pool_size=[2, 2], strides=[2, 2])
            g = R.mean(p, axis=[2, 3])
            y = R.add(R.matmul(g, R.permute_dims(fw)), fb)
            R.output(y)
        return y


@tvm.script.ir_module
class Attention:
    @R.function
    def main(x: R.Tensor((8, 16), "float32"), wq: R.Tensor((16, 16), "float32"), wk: R.Tensor((16, 16), "float32"),
             wv: R.Tensor((16, 16), "float32")) -> R.Tensor((8, 16), "float32"):
        with R.dataflow():
            q = R.matmul(x, wq)
            k = R.matmul(x, wk)
            v = R.matmul(x, wv)
            s = R.multiply(R.matmul(q, R.permute_dims(k)), R.const(0.25, "float32"))
            a = R.nn.softmax(s, axis=-1)
            y = R.add(R.matmul(a, v), x)
            R.output(y)
        return y


@tvm.script.ir_module
class Int8:
    @R.function
    def main(x: R.Tensor((4, 16), "int8"), w: R.Tensor((16, 8), "int8")) -> R.Tensor((4, 8), "int32"):
        with R.dataflow():
            y = R.matmul(R.astype(x, "int32"), R.astype(w, "int32"))
            z = R.maximum(y, R.const(0, "int32"))
            R.output(z)
        return z


@tvm.script.ir_module
class Float16:
    @R.function
    def main(x: R.Tensor((4, 16), "float16"), w: R.Tensor((16, 8), "float16")) -> R.Tensor((4, 8), "float16"):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y


@tvm.script.ir_module
class TupleOut:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), y: R.Tensor((4, 8), "float32")) -> R.Tuple(R.Tensor((4, 8), "float32"), R.Tuple(R.Tensor((4, 8), "float32"), R.Tensor((8, 4), "float32"))):
        with R.dataflow():
            a = R.add(x, y)
            b = R.multiply(x, y)
            c = R.permute_dims(a)
            out = (a, (b, c))
            R.output(out)
        return out


@tvm.script.ir_module
class TwoFunctions:
    @R.function
    def main(x: R.Tensor((4, 8), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            y = R.add(x, R.const(1, "float32"))
            R.output(y)
        return y

    @R.function
    def scale(x: R.Tensor((4, 8), "float32"), s: R.Tensor((), "float32")) -> R.Tensor((4, 8), "float32"):
        with R.dataflow():
            y = R.multiply(x, s)
            R.output(y)
        return y


@tvm.script.ir_module
class IfElse:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4, 8), "float32"):
        if flag:
            y = R.add(x, x)
        else:
            y = R.multiply(x, x)
        return y


def float8_constants():
    """float32 x plus two constants stored as float8 (e4m3fn and e5m2, ml_dtypes' bits):
    what gexec's reader must take with TVM >= 0.21's dtype codes (10 and 12), bit for bit.
    Returns the module and the constants' bits."""
    import ml_dtypes

    values = [0.5, -1.25, 448.0, -0.0, 2.0**-9, 3.0, -240.0, 0.0625]
    e4m3 = np.array(values, dtype=ml_dtypes.float8_e4m3fn).reshape(2, 4)
    e5m2 = np.array(values[:2] + [57344.0, -0.0, 2.0**-16] + values[5:], dtype=ml_dtypes.float8_e5m2).reshape(2, 4)
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((2, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.astype(relax.const(tvm.runtime.tensor(e4m3)), "float32"))
            b = bb.emit(relax.op.astype(relax.const(tvm.runtime.tensor(e5m2)), "float32"))
            y = bb.emit_output(relax.op.add(relax.op.add(x, a), b))
        bb.emit_func_output(y)
    return bb.get(), e4m3.view(np.uint8), e5m2.view(np.uint8)


@tvm.script.ir_module
class DynamicBatch:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")) -> R.Tensor(("n", 8), "float32"):

        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y


class NnMlp(nn.Module):
    """A model as nn.Module.export_tvm gives it: the weights are arguments after the input."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(nn.relu(self.fc1(x)))


def write_safetensors(path, arrays):
    """A .safetensors file (8-byte header length, JSON header, data), written by hand."""
    names = {"float32": "F32", "float16": "F16", "int8": "I8", "int32": "I32"}
    header, offset, blobs = {}, 0, []
    for name, a in arrays.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[str(a.dtype)], "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


def flatten(value, out):
    if isinstance(value, (tvm.runtime.Tensor,)) or hasattr(value, "numpy"):
        out.append(value.numpy())
    else:
        for item in value:
            flatten(item, out)
    return out


def bind_constants(mod, names, arrays):
    """Weights as constants of the executable: the function's trailing parameters bound."""
    params = {n: tvm.runtime.tensor(a) for n, a in zip(names, arrays)}
    return relax.transform.BindParams("main", params)(mod)


def main(out, machine="x86_64"):
    os.makedirs(out, exist_ok=True)
    target, cc = TARGETS[machine]
    cross = machine != "x86_64"
    export = {}
    if cc:
        from tvm.support import cc as tvm_cc

        export = {"fcompile": tvm_cc.cross_compiler(cc)}
    rng = np.random.default_rng(20)
    dev = tvm.cpu()
    cases = []

    def f32(*shape):
        return rng.standard_normal(shape).astype("float32")

    static_cases = []

    def build(name, mod, function, inputs, runs=None, exec_mode="bytecode", weights=None, system_lib=False):
        """Builds `mod`, runs `function` on each input list with TVM's VM, records the case.
        `weights` (name -> array) are passed after the inputs and written to parameter
        files (TVM's blob and .safetensors) that gexec binds by name. `system_lib` also
        exports it as a system library, to OUT_DIR/static/<name>.tar."""
        lib_path = name + ".so"
        ex = relax.build(mod, target=tvm.target.Target(target), exec_mode=exec_mode)
        ex.export_library(os.path.join(out, lib_path), **export)
        if system_lib:  # objects only: no compiler links a .tar, for any target
            os.makedirs(os.path.join(out, "static"), exist_ok=True)
            relax.build(mod, target=tvm.target.Target(target), exec_mode=exec_mode, system_lib=True).export_library(
                os.path.join(out, "static", name + ".tar"))
        if cross:  # TVM runs the module built for this machine instead
            vm = relax.VirtualMachine(relax.build(mod, target=TARGET, exec_mode=exec_mode), dev)
        else:
            vm = relax.VirtualMachine(tvm.runtime.load_module(os.path.join(out, lib_path)), dev)
        params = []
        if weights:
            with open(os.path.join(out, name + ".params"), "wb") as f:
                f.write(tvm.runtime.save_param_dict({k: tvm.runtime.tensor(v) for k, v in weights.items()}))
            write_safetensors(os.path.join(out, name + ".safetensors"), weights)
            params = [name + ".params", name + ".safetensors"]
        for k, args in enumerate(runs or [inputs]):
            result = vm[function](*[tvm.runtime.tensor(a) for a in list(args) + list((weights or {}).values())])
            outs = flatten(result, [])
            data = name if k == 0 else "%s_%d" % (name, k)
            arrays = {"in%d" % i: a for i, a in enumerate(args)}
            arrays.update({"out%d" % i: o for i, o in enumerate(outs)})
            np.savez(os.path.join(out, data + ".npz"), **arrays)
            for key, a in arrays.items():  # the same one file an array, for gexec-run (tests/relax/run_cli.sh)
                np.save(os.path.join(out, "%s_%s.npy" % (data, key)), a)
            for p in params or [None]:
                case = {"name": data + ("" if p is None else "/" + p.split(".")[-1]), "library": lib_path, "function": function,
                        "data": data + ".npz", "inputs": len(args), "outputs": len(outs)}
                if p:
                    case["params"] = p
                if cross and name in ARM_TOLERANCE:
                    case["close"] = ARM_TOLERANCE[name]
                cases.append(case)
        if system_lib:
            close = ARM_TOLERANCE.get(name, (0, 0)) if cross else (0, 0)
            line = "%s %s %d %d %g %g" % (name, function, len(inputs), len(outs), close[0], close[1])
            static_cases.append(line + (" " + name + ".safetensors" if weights else ""))

    build("tiny", Tiny, "main", [f32(1, 16)], system_lib=True)
    x = f32(4, 16)
    nn_mod, nn_spec = NnMlp().export_tvm(spec={"forward": {"x": nn.spec.Tensor((4, 16), "float32")}})
    build("nn_mlp", nn_mod, "forward", [x], weights={n: f32(*[int(d) for d in p.shape]) for n, p in nn_spec}, system_lib=True)
    w1, b1, w2, b2 = f32(32, 16), f32(32), f32(8, 32), f32(8)
    build("mlp", Mlp, "main", [x, w1, b1, w2, b2])
    build("mlp_constants", bind_constants(Mlp, ["w1", "b1", "w2", "b2"], [w1, b1, w2, b2]), "main", [x], system_lib=True)

    conv = [f32(1, 3, 16, 16), f32(8, 3, 3, 3), f32(8), f32(8), f32(8), np.abs(f32(8)) + 0.5, f32(10, 8), f32(10)]
    build("convnet", ConvNet, "main", conv)
    build("convnet_constants", bind_constants(ConvNet, ["w", "gamma", "beta", "mean", "var", "fw", "fb"], conv[1:]), "main", conv[:1])

    build("attention", Attention, "main", [f32(8, 16), f32(16, 16) * 0.25, f32(16, 16) * 0.25, f32(16, 16) * 0.25])
    build("int8", Int8, "main", [rng.integers(-128, 128, (4, 16)).astype("int8"), rng.integers(-128, 128, (16, 8)).astype("int8")])
    build("float16", Float16, "main", [f32(4, 16).astype("float16"), f32(16, 8).astype("float16")])
    build("tuple_out", TupleOut, "main", [f32(4, 8), f32(4, 8)])
    build("two_functions", TwoFunctions, "main", [f32(4, 8)])
    build("two_functions_scale", TwoFunctions, "scale", [f32(4, 8), np.array(1.5, dtype="float32")])
    xi = f32(4, 8)
    build("if_else", IfElse, "main", None, runs=[[xi, np.array(True)], [xi, np.array(False)]])
    wd = f32(16, 8)
    build("dynamic_batch", DynamicBatch, "main", None, runs=[[f32(1, 16), wd], [f32(5, 16), wd], [f32(32, 16), wd]])

    f8_mod, e4m3_bits, e5m2_bits = float8_constants()
    build("float8_constants", f8_mod, "main", [f32(2, 4)])
    np.savez(os.path.join(out, "float8_constants_bits.npz"), e4m3fn=e4m3_bits, e5m2=e5m2_bits)

    # Refused at load: the VM-TIR form (exec_mode="compiled"), whose functions call TVM's
    # runtime (TVMBackendAnyList*) from compiled code.
    relax.build(TwoFunctions, target=tvm.target.Target(target), exec_mode="compiled").export_library(os.path.join(out, "compiled_mode.so"), **export)
    cases.append({"name": "compiled_mode", "library": "compiled_mode.so", "function": "main",
                  "error": {"code": "invalid_module", "parts": ["TVMBackendAnyList", "exec_mode=\"compiled\""]}})

    with open(os.path.join(out, "static", "manifest.txt"), "w") as f:
        f.write("".join(line + "\n" for line in static_cases))

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"tvm": tvm.__version__, "machine": machine, "cases": cases}, f, indent=1)
    # The same, one line a fact, for the C++ suite (no JSON parser needed there).
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        for c in cases:
            f.write("case %s %s %s\n" % (c["name"], c["library"], c["function"]))
            if "error" in c:
                f.write("error %s\n" % c["error"]["code"])
                for part in c["error"]["parts"]:
                    f.write("contains %s\n" % part)
            else:
                f.write("data %s %d %d\n" % (c["data"], c["inputs"], c["outputs"]))
                if "params" in c:
                    f.write("params %s\n" % c["params"])
                if "close" in c:
                    f.write("close %g %g\n" % c["close"])
    print("wrote %d cases to %s" % (len(cases), out))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and (sys.argv[2] != "--target" or sys.argv[3] not in TARGETS)):
        sys.exit("usage: generate_models.py OUT_DIR [--target %s]" % "|".join(TARGETS))
    main(sys.argv[1], sys.argv[3] if len(sys.argv) == 4 else "x86_64")
