#!/usr/bin/env python3
"""Every fenced block of README.md and docs/*.md is run, checked, or marked.

The marker is an HTML comment on the line right before the opening fence:

  <!-- doc-test: run -->                  a shell block: run with bash in the page's
                                          fixture folder (below), every command must exit 0;
                                          lines "$ CMD" run CMD and the lines after it,
                                          up to the next "$ ", are its expected output
                                          (compared exactly, where the page shows any)
  <!-- doc-test: compile -->              a C or C++ block that is a whole file: compiled
                                          with -fsyntax-only -Werror against include/
  <!-- doc-test: compile: fragment -->    C++ statements using names the text around them
                                          defines: compiled as a function's body that sees
                                          tests/docs/prelude.hpp, which declares those names
                                          (the C++ blocks share one translation unit)
  <!-- doc-test: python -->               a Python block run as written by python/tests/test_docs.py
                                          (the python stage, against the installed package, in
                                          the folder of the conformance models: resnet/...)
  <!-- doc-test: covered-by: TEST FILE -->  the block is FILE's text (checked here), and the
                                          CTest test TEST builds and runs FILE
  <!-- doc-test: skip: REASON -->         not run here, and why (a GPU, a Triton server,
                                          an output sample, minutes of build...)

A block with no marker, a marker this script does not know, a command that fails, an
output that differs, or a covered-by block that is not its file's text fails the test,
naming the Markdown file and line. Run blocks of one page run in order in one folder
(WORK/<page>/), as a reader would run them, starting from the fixture files the pages
name: the bundled MLP (examples/mlp) as graph.json, params.bin, lib.so (the sample
kernels) and model.so (the single-file library holding them), x.npy and image.npy (its
input), want.npy (its output for that input, computed here), inputs.npz, tvm_out.npz,
and tvmdbg/ (TVM's debug executor's dump of the graph, made from gexec-run --dump-dir's).

  check_docs.py SOURCE_DIR WORK_DIR --gexec-run PATH --kernels PATH --factory PATH
                [--cc CC] [--cxx CXX] [--include DIR...] [--include-list=DIR,DIR...]
                [--pages DIR --expect-failing PAGE:LINE,...]   (the test's own check)
Standard library only. Exit 0 when every block passes. docs/testing.md says more.
"""
import argparse
import ast
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zipfile

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(\w[\w-]*)\s*(?::\s*(.*?))?\s*-->\s*$")
SHELL = {"sh", "bash", "shell", "console"}


class Block:
    def __init__(self, path, line, lang, text, marker, argument):
        self.path, self.line, self.lang, self.text = path, line, lang, text
        self.marker, self.argument = marker, argument

    def where(self):
        return f"{self.path}:{self.line}"


def read_blocks(root, rel):
    lines = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        if j == len(lines):
            raise SystemExit(f"{rel}:{start + 1}: a fenced block that never closes")
        text = "\n".join(l[len(indent):] if l.startswith(indent) else l for l in lines[start + 1:j]) + "\n"
        marker = argument = None
        if start > 0:
            mm = MARKER.match(lines[start - 1])
            if mm:
                marker, argument = mm.group(1), mm.group(2)
            elif "doc-test" in lines[start - 1]:
                marker, argument = "malformed", lines[start - 1].strip()
        blocks.append(Block(rel, start + 1, lang, text, marker, argument))
        i = j + 1
    return blocks


# Fixture files, made with the standard library only.
def npy_bytes(values, shape, dtype="<f4"):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype, "".join(f"{d}, " for d in shape) if len(shape) != 1 else f"{shape[0]},")
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    fmt = {"<f4": "f", "<i4": "i"}[dtype]
    return (b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") +
            struct.pack("<%d%s" % (len(values), fmt), *values))


def write_npz(path, arrays):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in arrays.items():
            z.writestr(name + ".npy", data)


MLP_INPUT = [0.5, -1.0, 2.0, 0.25]


def read_mlp(root):
    """The bundled MLP's kernels in graph order, and its parameters read from
    examples/mlp/params.bin (a tvm.runtime.save_param_dict blob): {name: (shape, values)}."""
    import json
    graph = json.load(open(os.path.join(root, "examples/mlp/graph.json")))
    funcs = [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    blob = open(os.path.join(root, "examples/mlp/params.bin"), "rb").read()
    pos = 16
    (count,) = struct.unpack_from("<Q", blob, pos)
    pos += 8
    names = []
    for _ in range(count):
        (n,) = struct.unpack_from("<Q", blob, pos)
        names.append(blob[pos + 8:pos + 8 + n].decode())
        pos += 8 + n
    pos += 8
    params = {}
    for name in names:
        pos += 8 + 8 + 8  # the NDArray magic, a reserved word, the device
        ndim, = struct.unpack_from("<i", blob, pos)
        code, bits, lanes = struct.unpack_from("<BBH", blob, pos + 4)
        assert (code, bits, lanes) == (2, 32, 1), f"{name}: not float32"
        shape = struct.unpack_from("<%dq" % ndim, blob, pos + 8)
        pos += 8 + 8 * ndim
        (nbytes,) = struct.unpack_from("<q", blob, pos)
        pos += 8
        params[name] = (shape, struct.unpack_from("<%df" % (nbytes // 4), blob, pos))
        pos += nbytes
    return funcs, params


def dense(x, w, wshape):
    out_n, in_n = wshape  # test_dense: y = x w^T (tests/kernels/test_kernels.c)
    return [sum(x[k] * w[o * in_n + k] for k in range(in_n)) for o in range(out_n)]


def expected_mlp_output(root, x):
    """The bundled MLP's output for x computed without gexec (examples/mlp/graph.json:
    dense(x, w1), relu, dense(., w2), softmax): what the pages' --expected and
    --bundle-expected are checked against."""
    funcs, params = read_mlp(root)
    assert funcs == ["test_dense", "test_relu", "test_dense", "test_softmax"], funcs
    (w1s, w1), (w2s, w2) = params["w1"], params["w2"]
    h = [max(0.0, v) for v in dense(x, w1, w1s)]
    z = dense(h, w2, w2s)
    m = max(z)
    e = [math.exp(v - m) for v in z]
    return [v / sum(e) for v in e]


def make_fixture(args, folder):
    os.makedirs(folder)
    root = args.source
    shutil.copy(os.path.join(root, "examples/mlp/graph.json"), folder)
    shutil.copy(os.path.join(root, "examples/mlp/params.bin"), folder)
    shutil.copy(args.kernels, os.path.join(folder, "lib.so"))
    shutil.copy(args.factory, os.path.join(folder, "model.so"))
    x = npy_bytes(MLP_INPUT, [1, 4])
    for name in ("x.npy", "image.npy"):
        open(os.path.join(folder, name), "wb").write(x)
    want = expected_mlp_output(root, MLP_INPUT)
    open(os.path.join(folder, "want.npy"), "wb").write(npy_bytes(want, [1, 3]))
    write_npz(os.path.join(folder, "inputs.npz"), {"x": x})
    write_npz(os.path.join(folder, "tvm_out.npz"), {"0": npy_bytes(want, [1, 3])})
    r = subprocess.run([args.gexec_run, "-g", "graph.json", "-l", "lib.so", "-p", "params.bin",
                        "-i", "x=@x.npy", "--dump-dir", "nodes.tmp/"], cwd=folder,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"the fixture's dump (gexec-run --dump-dir) failed:\n{r.stdout}{r.stderr}")
    tensors = tvm_debug_dump(os.path.join(folder, "nodes.tmp"), os.path.join(folder, "tvmdbg"))
    shutil.rmtree(os.path.join(folder, "nodes.tmp"))
    last = tensors[-1][2]  # the dump is a reference only where it agrees with the MLP computed here
    if len(last) != len(want) or any(abs(g - w) > 1e-6 for g, w in zip(last, want)):
        raise SystemExit(f"the fixture's dump ends with {list(last)}, not the MLP's output {want}")


def read_npy_f32(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<H", data, 8)
    header = ast.literal_eval(data[10:10 + n].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], path
    count = math.prod(header["shape"])
    return list(header["shape"]), struct.unpack_from("<%df" % count, data, 10 + n)


def tvm_debug_dump(nodes, out):
    """TVM's debug executor's dump (DIR/_tvmdbg_device_CPU_0/output_tensors.params, a
    save_param_dict blob keyed "<node>____topo-index:<id>____output-num:<i>") of the
    node outputs gexec-run --dump-dir wrote as NODE_NAME_OUTPUT.npy files."""
    tensors = []
    for f in sorted(os.listdir(nodes), key=lambda f: int(f.split("_")[0])):
        node, rest = f[:-len(".npy")].split("_", 1)
        name, output = rest.rsplit("_", 1)
        tensors.append((f"{name}____topo-index:{int(node)}____output-num:{int(output)}",) +
                       tuple(read_npy_f32(os.path.join(nodes, f))))
    blob = struct.pack("<QQQ", 0xF7E58D4F05049CB7, 0, len(tensors))
    blob += b"".join(struct.pack("<Q", len(k)) + k.encode() for k, _, _ in tensors)
    blob += struct.pack("<Q", len(tensors))
    for _, shape, values in tensors:
        blob += struct.pack("<QQiiiBBH", 0xDD5E40F096B4A13F, 0, 1, 0, len(shape), 2, 32, 1)
        blob += struct.pack("<%dq" % len(shape), *shape) + struct.pack("<q", 4 * len(values))
        blob += struct.pack("<%df" % len(values), *values)
    os.makedirs(os.path.join(out, "_tvmdbg_device_CPU_0"))
    open(os.path.join(out, "_tvmdbg_device_CPU_0", "output_tensors.params"), "wb").write(blob)
    return tensors


def shell_env(args):
    env = dict(os.environ)
    bindir = os.path.join(args.work, "bin")
    os.makedirs(bindir, exist_ok=True)
    link = os.path.join(bindir, "gexec-run")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(args.gexec_run), link)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def run_shell(block, folder, env):
    lines = block.text.rstrip("\n").split("\n")
    if any(l.startswith("$ ") for l in lines):  # a console transcript: commands and outputs
        steps, cmd, out = [], None, []
        for l in lines:
            if l.startswith("$ "):
                if cmd is not None:
                    steps.append((cmd, out))
                cmd, out = l[2:], []
            elif cmd is not None:
                out.append(l)
        steps.append((cmd, out))
    else:
        steps = [(block.text, None)]
    for cmd, want in steps:
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=folder, env=env,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            return f"exit {r.returncode}:\n{cmd}\n--- output:\n{r.stdout}{r.stderr}"
        if want:  # a command the page shows no output of may print anything
            got = [l.rstrip() for l in r.stdout.rstrip("\n").split("\n")]
            if got != [l.rstrip() for l in want]:
                return "the output differs from the page's:\n" + "\n".join(want) + "\n--- got:\n" + r.stdout
    return None


def compile_c(args, blocks):
    errors = []
    for b in blocks:
        src = os.path.join(args.work, f"c_{b.line}.c")
        open(src, "w").write(f'#line 1 "{b.path}:{b.line + 1}"\n' + b.text)
        r = subprocess.run([args.cc, "-fsyntax-only", "-std=c11", "-Wall", "-Wextra", "-Werror"] +
                           [f"-I{d}" for d in args.include] + [src], capture_output=True, text=True)
        if r.returncode != 0:
            errors.append((b, "does not compile:\n" + r.stderr))
    return errors


def start_cxx(args, blocks):
    """The C++ blocks, one translation unit: their #include lines first, then each block
    in turn. A whole file is placed there as it is, at global scope, its `int main(`
    renamed after its line (and free to end without a return, as main is), so that pages
    may each show a complete program (two whole files defining any other same name
    conflict); a fragment ("compile: fragment") becomes the body
    of a function, in a namespace of its own, that sees the names tests/docs/prelude.hpp
    declares, which the text around it defines (its classes and static_asserts, which
    start at column 0, go before that function). Compiled against
    the declarations of compiled mode (GEXEC_COMPILED, as gexec::compiled's users do), in
    the background while the shell blocks run: the parse of the headers is most of this
    test's time."""
    if not blocks:
        return None
    head, body = [f'#include "{os.path.join(args.source, "tests/docs/prelude.hpp")}"'], []
    for b in blocks:
        fragment = b.argument == "fragment"
        lines = b.text.rstrip("\n").split("\n")
        outer, inner, in_class = [], [], False
        for n, l in enumerate(lines):
            located = f'#line {b.line + 1 + n} "{b.path}"\n' + l
            if l.startswith("#include"):
                head.append(located)
            elif not fragment:
                outer.append(re.sub(r"^int main\(", f"int doc_block_{b.line}_main(", located, flags=re.M))
            elif in_class or re.match(r"(struct|class)\b", l) or l.startswith("static_assert"):
                # a class (a local class may not hold a member template) or a static_assert
                # at column 0 goes before the function, at namespace scope
                outer.append(located)
                in_class = re.match(r"(struct|class)\b", l) is not None or (in_class and l != "};")
                in_class = in_class and not (l.endswith("};") and l.startswith(("struct", "class")))
            else:
                inner.append(located)
        if not fragment and re.search(r"^int main\(", b.text, flags=re.M):
            # a renamed main may end without a return, as main may
            outer = ['#pragma GCC diagnostic push', '#pragma GCC diagnostic ignored "-Wreturn-type"'] + outer + ['#pragma GCC diagnostic pop']
        if fragment:
            body.append(f"namespace doc_block_{b.line} {{ using namespace doc_prelude;")
            body += outer
            body.append("[[maybe_unused]] void fragment() {")
            body += inner
            body.append("}}")
        else:
            body += outer
    src = os.path.join(args.work, "cxx_blocks.cpp")
    open(src, "w").write("\n".join(head + body) + "\n")
    command = [args.cxx, "-fsyntax-only", "-std=gnu++20", "-DGEXEC_COMPILED", "-Wall", "-Wextra", "-Werror",
               "-Wno-unused-variable", "-Wno-unused-but-set-variable",
               "-Wno-missing-field-initializers"]  # g++ 12 says it of designated initializers
    return (blocks, src, subprocess.Popen(command + [f"-I{d}" for d in args.include] + [src],
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))


def finish_cxx(started):
    if started is None:
        return []
    blocks, src, process = started
    output, _ = process.communicate()
    if process.returncode != 0:
        where = ", ".join(b.where() for b in blocks)
        return [(blocks[0], f"the C++ blocks ({where}; one translation unit, {src}) do not compile:\n{output}")]
    return []


def normalized(text):
    return [l.rstrip() for l in text.strip("\n").split("\n")]


def check_covered(args, b):
    parts = (b.argument or "").split()
    if len(parts) != 2:
        return "covered-by needs a CTest test name and the file it runs: covered-by: TEST FILE"
    path = os.path.join(args.source, parts[1])
    if not os.path.isfile(path):
        return f"covered-by names {parts[1]}, which does not exist"
    want, have = normalized(b.text), normalized(open(path, encoding="utf-8").read())
    for i in range(len(have) - len(want) + 1):
        if have[i:i + len(want)] == want:
            return None
    return f"the block is not the text of {parts[1]} (which {parts[0]} runs): update one from the other"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source")
    p.add_argument("work")
    p.add_argument("--gexec-run", required=True)
    p.add_argument("--kernels", required=True)
    p.add_argument("--factory", required=True)
    p.add_argument("--cc", default="cc")
    p.add_argument("--cxx", default="c++")
    p.add_argument("--include", action="append", default=[])
    p.add_argument("--include-list", action="append", default=[], help="include directories, comma-separated")
    p.add_argument("--pages", help="read README.md and docs/*.md from this folder instead of SOURCE_DIR")
    p.add_argument("--expect-failing", metavar="PAGE:LINE,...",
                   help="the test's own check: exit 0 only if exactly these blocks fail")
    args = p.parse_args()
    for name in ("source", "work", "gexec_run", "kernels", "factory"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    args.include = [os.path.join(args.source, "include")] + args.include + [
        d for dirs in args.include_list for d in dirs.split(",") if d and d != "/usr/include"]  # a system dir stays one
    started = time.monotonic()

    pages_dir = os.path.abspath(args.pages or args.source)
    pages = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(pages_dir, "docs"))
                                   if f.endswith(".md"))
    blocks = [b for page in pages for b in read_blocks(pages_dir, page)]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    env = shell_env(args)

    errors, counts, skipped = [], {}, {}
    c_blocks = [b for b in blocks if b.marker == "compile" and b.lang == "c"]
    cxx_blocks = [b for b in blocks if b.marker == "compile" and b.lang in ("cpp", "c++")]
    cxx = start_cxx(args, cxx_blocks)
    for b in blocks:
        counts[b.marker] = counts.get(b.marker, 0) + 1
        if b.marker is None:
            errors.append((b, f"a ```{b.lang} block with no doc-test marker: run it, or say why not "
                              "(docs/testing.md, \"Every command a doc shows runs\")"))
        elif b.marker == "skip":
            if not b.argument:
                errors.append((b, "skip needs a reason: <!-- doc-test: skip: REASON -->"))
            else:
                skipped.setdefault(b.argument, []).append(b.where())
        elif b.marker == "python":
            if b.lang != "python":
                errors.append((b, f"python is for python blocks, not ```{b.lang}"))
        elif b.marker == "covered-by":
            e = check_covered(args, b)
            if e:
                errors.append((b, e))
        elif b.marker == "compile":
            if b.argument not in (None, "fragment") or (b.argument and b.lang == "c"):
                errors.append((b, f"compile takes no argument, or fragment for a C++ block: not {b.argument!r}"))
            elif b.lang not in ("c", "cpp", "c++"):
                errors.append((b, f"compile is for c and cpp blocks, not ```{b.lang}"))
        elif b.marker == "run":
            if b.lang not in SHELL:
                errors.append((b, f"run is for shell blocks, not ```{b.lang}"))
                continue
            folder = os.path.join(args.work, b.path.replace("/", "_").replace(".md", ""))
            if not os.path.isdir(folder):
                make_fixture(args, folder)
            t = time.monotonic()
            e = run_shell(b, folder, env)
            print(f"{b.where()}: ran in {time.monotonic() - t:.2f} s" + (": FAILED" if e else ""))
            if e:
                errors.append((b, e))
        else:
            errors.append((b, f"unknown doc-test marker {b.marker!r} ({b.argument})"))
    errors += compile_c(args, c_blocks)
    errors += finish_cxx(cxx)

    for b, e in errors:
        print(f"{b.where()}: error: {e}")
    print(f"{len(blocks)} blocks in {len(pages)} pages: {counts.get('run', 0)} run, "
          f"{counts.get('compile', 0)} compiled ({len(c_blocks)} C, {len(cxx_blocks)} C++), "
          f"{counts.get('python', 0)} run by python/tests/test_docs.py, "
          f"{counts.get('covered-by', 0)} covered by another test, {counts.get('skip', 0)} skipped; "
          f"{len(errors)} failing; {time.monotonic() - started:.1f} s")
    for reason, where in sorted(skipped.items()):
        print(f"  skipped ({reason}): {', '.join(where)}")
    if args.expect_failing is not None:
        want = set(args.expect_failing.split(","))
        got = {b.where() for b, _ in errors}
        if got != want:
            print(f"FAIL: the blocks failing are {sorted(got)}, not {sorted(want)}")
            return 1
        print(f"PASS: exactly the planted blocks fail ({len(want)})")
        return 0
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
