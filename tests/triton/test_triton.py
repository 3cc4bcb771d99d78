#!/usr/bin/env python3
"""The gexec backend served by a real Triton Inference Server, checked over HTTP and gRPC.

    python3 tests/triton/test_triton.py --env ENV_DIR --backend-dir DIR --conformance DIR --work DIR [--only reloads,...]

ENV_DIR comes from tests/triton/setup_env.sh (the server from PyPI's nvidia-pytriton
wheel, tritonclient in a venv; this script re-runs itself with that venv's Python);
--backend-dir holds gexec/libtriton_gexec.so; --conformance is the directory of
TVM-compiled models tests/conformance/make_models.sh filled, with TVM's own outputs.
Exits 77 (skipped) with the reason when either is missing, 1 when a check fails.

The server binds 127.0.0.1 only, on ports picked here. Its repository holds every
conformance model as a single file, three of them also as TVM's three files, variants
with configuration (batching, parameters, explicit configs, outputs named by the config,
weights as inputs) and bad models. Checked:
outputs bit for bit against TVM's, model metadata against the models' info, each bad
model's load failure and message, bad requests' errors, 1,000 requests from 8 concurrent
clients, queued requests cancelled by their gRPC client answered without running, the
server's memory with 4 instances of ResNet and over 10 load/unload cycles, and a prompt shutdown after a streaming
client with hundreds of requests queued is killed.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SPLIT_FORMS = ("mlp", "resnet", "sort_float32")
TRITON_TYPES = {"bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
                "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
                "float16": "FP16", "float32": "FP32", "float64": "FP64"}
AUTO = 'backend: "gexec"\n'
WEIGHTS_AS_INPUTS = 'parameters: { key: "weights_as_inputs" value: { string_value: "true" } }\n'
# One instance on one thread: requests queue behind each other (ResNet takes tens of ms).
SERIAL = 'instance_group [ { count: 1, kind: KIND_CPU } ]\nparameters: { key: "num_threads" value: { string_value: "1" } }\n'

failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def same(got, want):
    """Bit-identical: dtype, shape and bytes (NaNs included)."""
    return got is not None and got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def served_shape(shape):
    """Triton has no scalars in models without batching: the backend serves them as [1]."""
    return list(shape) if len(shape) else [1]


# ---- the repository ---------------------------------------------------------------------

class Repo:
    def __init__(self, conformance, root):
        self.conformance = conformance
        self.root = root
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        self.good = {}  # served name -> conformance model
        self.bad = {}  # served name -> what the load failure must say

    def path(self, model, name):
        return os.path.join(self.conformance, model, name)

    def single(self, name, model, config=AUTO):
        harness.make_model_dir(self.root, name, {"model.so": self.path(model, "model.so")}, config)
        self.good[name] = model

    def split(self, name, model, config=AUTO, params="params"):
        harness.make_model_dir(self.root, name, {"graph.json": self.path(model, "graph.json"), "lib.so": self.path(model, "lib.so"),
                                                 params: self.path(model, "params.bin")}, config)
        self.good[name] = model

    def broken(self, name, files, config, message):
        version = os.path.join(self.root, name, "1")
        os.makedirs(version)
        for dest, data in files.items():
            with open(os.path.join(version, dest), "wb") as f:
                f.write(data)
        harness.write_config(os.path.join(self.root, name), config)
        self.bad[name] = message

    def read(self, model, name):
        with open(self.path(model, name), "rb") as f:
            return f.read()


def build_repository(conformance, root, models):
    repo = Repo(conformance, root)
    for m in models:
        repo.single(m, m)
    for m in SPLIT_FORMS:
        if m in models:
            repo.split(m + "_split", m)
    repo.single("mlp_batched", "mlp", AUTO + "max_batch_size: 4\ndynamic_batching { max_queue_delay_microseconds: 2000 }\n")
    repo.split("mlp_explicit", "mlp", AUTO + """max_batch_size: 2
input [ { name: "data", data_type: TYPE_FP32, dims: [ 64 ] } ]
output [ { name: "output0", data_type: TYPE_FP32, dims: [ 10 ] } ]
""", params="params.bin")
    repo.single("resnet_serial", "resnet", AUTO + SERIAL)
    repo.single("resnet_tuned", "resnet", AUTO + """instance_group [ { count: 2, kind: KIND_CPU } ]
parameters: { key: "num_threads" value: { string_value: "1" } }
parameters: { key: "planner" value: { string_value: "liveness" } }
parameters: { key: "execution_policy" value: { string_value: "parallel" } }
""")

    mlp_so, graph, lib, params = (repo.read("mlp", n) for n in ("model.so", "graph.json", "lib.so", "params.bin"))
    repo.broken("bad_truncated", {"model.so": mlp_so[:1000]}, AUTO, "the file is truncated")
    repo.broken("bad_not_a_library", {"model.so": b"#!/bin/sh\necho not a library\n" * 100}, AUTO, "invalid ELF header")
    repo.broken("bad_graph", {"graph.json": graph[:len(graph) // 2], "lib.so": lib, "params": params}, AUTO, "invalid_json")
    repo.broken("bad_params", {"graph.json": graph, "lib.so": lib, "params": params[:len(params) // 2]}, AUTO, "invalid_params")
    repo.broken("bad_no_params", {"graph.json": graph, "lib.so": lib}, AUTO,
                "has graph.json and lib.so but no parameter file (params or params.bin): add it, or set the parameter weights_as_inputs")
    repo.broken("bad_weights_as_inputs", {"graph.json": graph, "lib.so": lib, "params": params}, AUTO + WEIGHTS_AS_INPUTS,
                "weights_as_inputs \\\"true\\\" serves a graph.json + lib.so folder that has no parameter file")
    harness.make_model_dir(root, "mlp_weights_as_inputs", {"graph.json": repo.path("mlp", "graph.json"), "lib.so": repo.path("mlp", "lib.so")},
                           AUTO + WEIGHTS_AS_INPUTS)
    # Outputs named by the configuration: by the graph's names (gexec's "node:head" and the
    # bare node name where one output comes from it); a name the model does not have is
    # refused at load with the names it has, never served under another output.
    harness.make_model_dir(root, "mlp_named_outputs", {"model.so": repo.path("mlp", "model.so")}, AUTO + """max_batch_size: 0
output [ { name: "tvmgen_default_fused_nn_softmax", data_type: TYPE_FP32, dims: [ 2, 10 ] } ]
""")
    repo.broken("bad_output_name", {"model.so": mlp_so}, AUTO + """max_batch_size: 0
output [ { name: "nonexistent", data_type: TYPE_FP32, dims: [ 2, 10 ] } ]
""", 'config output \\"nonexistent\\": the model has no output of that name (outputs: output0 (tvmgen_default_fused_nn_softmax:0))')
    repo.broken("bad_output_head", {"model.so": mlp_so}, AUTO + """max_batch_size: 0
output [ { name: "tvmgen_default_fused_nn_softmax:3", data_type: TYPE_FP32, dims: [ 2, 10 ] } ]
""", 'config output \\"tvmgen_default_fused_nn_softmax:3\\": the model has no output of that name')
    harness.make_model_dir(root, "reshape_split_named_outputs", {"model.so": repo.path("reshape_split", "model.so")}, AUTO + """max_batch_size: 0
output [ { name: "tvmgen_default_fused_reshape_add", data_type: TYPE_FP32, dims: [ 4, 6 ] },
         { name: "tvmgen_default_fused_split:1", data_type: TYPE_FP32, dims: [ 6, 2 ] } ]
""")
    repo.broken("bad_no_files", {"README": b"nothing here\n"}, AUTO, "holds neither model.so nor graph.json + lib.so + params")
    repo.broken("bad_dims", {"model.so": mlp_so},
                AUTO + 'input [ { name: "data", data_type: TYPE_FP32, dims: [ 3, 64 ] } ]\n',
                'config input \\"data\\": dims [3,64], the model\'s are [2,64]')
    repo.broken("bad_parameter", {"model.so": mlp_so},
                AUTO + 'parameters: { key: "planner" value: { string_value: "fastest" } }\n',
                'parameter planner \\"fastest\\": expected as_compiled or liveness')
    repo.broken("bad_batch", {"model.so": repo.read("reshape_split", "model.so")}, AUTO + "max_batch_size: 2\n",
                "the model cannot be batched")
    return repo


def add_relax_models(relax, root, repo):
    """Relax VM executables from today's TVM (tests/relax/make_models.sh): a function with
    its weights as constants, nn.Module's MLP with its weights in params.safetensors beside
    model.so, and two functions gexec interprets: a dynamic batch dimension (served with
    dims -1, run with three batch sizes) and an If on a tensor value (both branches); the
    dynamic one with max_batch_size > 0 is refused with the reason.
    Returns {served name: ([npz of TVM's VM's inputs and outputs, ...], input names)}."""
    served = {}
    harness.make_model_dir(root, "relax_mlp", {"model.so": os.path.join(relax, "mlp_constants.so")}, AUTO)
    served["relax_mlp"] = ([os.path.join(relax, "mlp_constants.npz")], ["x"])
    harness.make_model_dir(root, "relax_nn_mlp", {"model.so": os.path.join(relax, "nn_mlp.so"),
                                                  "params.safetensors": os.path.join(relax, "nn_mlp.safetensors")},
                           AUTO + 'parameters: { key: "function" value: { string_value: "forward" } }\n')
    served["relax_nn_mlp"] = ([os.path.join(relax, "nn_mlp.npz")], ["x"])
    harness.make_model_dir(root, "relax_dynamic_batch", {"model.so": os.path.join(relax, "dynamic_batch.so")}, AUTO)
    served["relax_dynamic_batch"] = ([os.path.join(relax, n + ".npz") for n in ("dynamic_batch", "dynamic_batch_1", "dynamic_batch_2")], ["x", "w"])
    harness.make_model_dir(root, "relax_if_else", {"model.so": os.path.join(relax, "if_else.so")}, AUTO)
    served["relax_if_else"] = ([os.path.join(relax, n + ".npz") for n in ("if_else", "if_else_1")], ["x", "flag"])
    with open(os.path.join(relax, "dynamic_batch.so"), "rb") as f:
        repo.broken("bad_relax_batched", {"model.so": f.read()}, AUTO + "max_batch_size: 4\n",
                    "max_batch_size 4: the model has dimensions known only at run time")
    return served


def check_relax(server, served):
    """Each served Relax model answers TVM's VM's outputs bit for bit, over both protocols;
    the interpreted ones with their run-time shapes, described with dims -1 where the
    function's shape is symbolic; bad requests to one are refused, and it answers after."""
    import numpy as np

    states = server.model_states()
    for name, (npzs, input_names) in sorted(served.items()):
        state, reason = states.get(name, ("missing", ""))
        if not check(state == "READY", "Relax model %s is READY (%s %s)" % (name, state, reason)):
            continue
        for npz in npzs:
            data = np.load(npz)
            inputs = {n: data["in%d" % i].reshape(served_shape(data["in%d" % i].shape)) for i, n in enumerate(input_names)}
            want = data["out0"].reshape(served_shape(data["out0"].shape))
            for protocol in ("http", "grpc"):
                client = make_client(protocol, server)
                got = infer(protocol, client, name, inputs, ["output0"])
                check(same(got["output0"], want), "Relax model %s over %s, %s %s: bit-identical to TVM's VM" %
                      (name, protocol, os.path.basename(npz), list(want.shape)))
    if "relax_dynamic_batch" not in served or states.get("relax_dynamic_batch", ("",))[0] != "READY":
        return
    client = make_client("http", server)
    cfg = client.get_model_config("relax_dynamic_batch")
    dims = {t["name"]: (t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["input"] + cfg["output"]}
    check(dims == {"x": ("TYPE_FP32", [-1, 16]), "w": ("TYPE_FP32", [16, 8]), "output0": ("TYPE_FP32", [-1, 8])},
          "relax_dynamic_batch: the completed config gives dims -1 where the shape is symbolic: %s" % dims)
    data = np.load(served["relax_dynamic_batch"][0][1])
    x, w = data["in0"], data["in1"]
    cases = {
        "a wrong rank": ({"x": x.reshape(-1), "w": w}, "x"),
        "a wrong dtype": ({"x": x.astype(np.float64), "w": w}, "x"),
        "a wrong fixed dim": ({"x": x, "w": w[:15].copy()}, "w"),
    }
    for protocol in ("http", "grpc"):
        client = make_client(protocol, server)
        for what, (inputs, named) in cases.items():
            try:
                infer(protocol, client, "relax_dynamic_batch", inputs, ["output0"])
                check(False, "relax_dynamic_batch, %s over %s: refused" % (what, protocol))
            except Exception as e:  # noqa: BLE001 - the client's InferenceServerException
                message = str(e)
                check("InferenceServerException" in type(e).__name__ and ("'%s'" % named in message or '"%s"' % named in message),
                      "relax_dynamic_batch, %s over %s: refused naming input %s: %s" % (what, protocol, named, message[:200]))
        check(server.running(), "the server is still running after bad requests to relax_dynamic_batch over %s" % protocol)
        got = infer(protocol, client, "relax_dynamic_batch", {"x": x, "w": w}, ["output0"])
        check(same(got["output0"], data["out0"]), "relax_dynamic_batch over %s after bad requests: bit-identical to TVM's VM" % protocol)


# ---- clients ---------------------------------------------------------------------------------

def client_module(protocol):
    if protocol == "grpc":
        import tritonclient.grpc as tc
    else:
        import tritonclient.http as tc
    return tc


def make_client(protocol, server):
    tc = client_module(protocol)
    return tc.InferenceServerClient(server.grpc_url if protocol == "grpc" else server.http_url)


def infer(protocol, client, model, inputs, outputs):
    """{output name: array} for {input name: array}; raises the client's error."""
    tc = client_module(protocol)
    from tritonclient.utils import np_to_triton_dtype

    tensors = []
    for name, array in inputs.items():
        t = tc.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        t.set_data_from_numpy(array)
        tensors.append(t)
    wanted = [tc.InferRequestedOutput(name) for name in outputs]
    result = client.infer(model, tensors, outputs=wanted)
    return {name: result.as_numpy(name) for name in outputs}


class Reference:
    """A conformance model's inputs and TVM's outputs, shaped as the backend serves them."""

    def __init__(self, conformance, model):
        d = os.path.join(conformance, model)
        with open(os.path.join(d, "info.json")) as f:
            self.info = json.load(f)
        self.inputs = {k: v.reshape(served_shape(v.shape)) for k, v in harness.read_param_dict(os.path.join(d, "inputs.bin")).items()}
        outs = harness.read_param_dict(os.path.join(d, "outputs.bin"))
        self.outputs = {"output%d" % i: outs[str(i)].reshape(served_shape(outs[str(i)].shape)) for i in range(len(outs))}


def check_outputs(what, got, want):
    bad = [name for name in want if not same(got.get(name), want[name])]
    return check(not bad, "%s: %d outputs bit-identical to TVM's%s" % (what, len(want), " (differ: %s)" % bad if bad else ""))


# ---- checks ----------------------------------------------------------------------------------

def check_states(server, repo):
    states = server.model_states()
    log = server.log_text()
    for name in repo.good:
        state, reason = states.get(name, ("missing", ""))
        check(state == "READY", "model %s is READY (%s %s)" % (name, state, reason))
    for name, message in repo.bad.items():
        state, reason = states.get(name, ("missing", ""))
        check(state == "UNAVAILABLE", "bad model %s is not ready (%s)" % (name, state))
        plain = message.replace('\\"', '"')
        check(plain in reason, "bad model %s: the server says why: %r" % (name, reason))
        check(("failed to load '%s'" % name) in log and message in log, "bad model %s: the server log has the failure and %r" % (name, plain))


def check_models(server, repo, refs):
    for protocol in ("http", "grpc"):
        client = make_client(protocol, server)
        for name, model in sorted(repo.good.items()):
            ref = refs[model]
            if name in ("mlp_batched", "mlp_explicit"):
                continue  # batched: checked by check_batching
            got = infer(protocol, client, name, ref.inputs, list(ref.outputs))
            check_outputs("%s over %s" % (name, protocol), got, ref.outputs)
            meta = client.get_model_metadata(name) if protocol == "http" else client.get_model_metadata(name, as_json=True)
            want_in = sorted((k, TRITON_TYPES[v["dtype"]], served_shape(v["shape"])) for k, v in ref.info["inputs"].items())
            got_in = sorted((t["name"], t["datatype"], [int(d) for d in t.get("shape", [])]) for t in meta["inputs"])
            want_out = [("output%d" % i, TRITON_TYPES[o["dtype"]], served_shape(o["shape"])) for i, o in enumerate(ref.info["outputs"])]
            got_out = [(t["name"], t["datatype"], [int(d) for d in t.get("shape", [])]) for t in meta["outputs"]]
            check(got_in == want_in and got_out == want_out,
                  "%s over %s: metadata lists the model's inputs and outputs%s" % (name, protocol, "" if got_in == want_in and got_out == want_out
                                                                                  else " (got %s %s)" % (got_in, got_out)))


def check_weights_as_inputs(server, args, refs):
    """A split folder without its parameter file, served on request with the weights as
    inputs: sending params.bin's tensors with the data gives TVM's output."""
    params = harness.read_param_dict(os.path.join(args.conformance, "mlp", "params.bin"))
    state, reason = server.model_states().get("mlp_weights_as_inputs", ("missing", ""))
    check(state == "READY", "mlp_weights_as_inputs (weights_as_inputs \"true\", no parameter file) is READY (%s %s)" % (state, reason))
    client = make_client("http", server)
    meta = client.get_model_metadata("mlp_weights_as_inputs")
    names = sorted(t["name"] for t in meta["inputs"])
    check(names == sorted(["data", *params]), "mlp_weights_as_inputs: its inputs are the data and the %d weights (%s)" % (len(params), names))
    got = infer("http", client, "mlp_weights_as_inputs", {"data": refs["mlp"].inputs["data"], **params}, ["output0"])
    check_outputs("mlp_weights_as_inputs with params.bin's tensors sent as inputs", got, refs["mlp"].outputs)


def check_named_outputs(server, refs):
    cases = {"mlp_named_outputs": ("mlp", {"tvmgen_default_fused_nn_softmax": "output0"}),
             "reshape_split_named_outputs": ("reshape_split", {"tvmgen_default_fused_reshape_add": "output4", "tvmgen_default_fused_split:1": "output1"})}
    for protocol in ("http", "grpc"):
        client = make_client(protocol, server)
        for name, (model, named) in cases.items():
            ref = refs[model]
            got = infer(protocol, client, name, ref.inputs, list(named))
            check_outputs("%s over %s: outputs %s" % (name, protocol, sorted(named)), got, {k: ref.outputs[v] for k, v in named.items()})
            meta = client.get_model_metadata(name) if protocol == "http" else client.get_model_metadata(name, as_json=True)
            served = sorted(t["name"] for t in meta["outputs"])
            check(served == sorted(named), "%s over %s: metadata lists the configured output names %s" % (name, protocol, served))


def check_batching(server, refs):
    ref = refs["mlp"]
    x, y = ref.inputs["data"], ref.outputs["output0"]  # 2 rows: the model's batch
    for protocol in ("http", "grpc"):
        client = make_client(protocol, server)
        for rows in ([0], [1], [0, 1], [1, 0, 1], [0, 1, 1, 0]):  # fewer rows than compiled are padded; more run in turns
            got = infer(protocol, client, "mlp_batched", {"data": x[rows]}, ["output0"])["output0"]
            check(same(got, y[rows]), "mlp_batched over %s: rows %s give TVM's rows" % (protocol, rows))
        got = infer(protocol, client, "mlp_explicit", {"data": x[[1]]}, ["output0"])["output0"]
        check(same(got, y[[1]]), "mlp_explicit over %s: one row of two padded and sliced" % protocol)
    # Single-row requests at once: the dynamic batcher may gather them; each gets its row.
    results, errors = {}, []

    def one(i):
        try:
            client = make_client("grpc", server)
            results[i] = infer("grpc", client, "mlp_batched", {"data": x[[i % 2]]}, ["output0"])["output0"]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors and all(same(results[i], y[[i % 2]]) for i in range(16)), "mlp_batched: 16 concurrent one-row requests answered right %s" % errors[:1])
    stats = make_client("http", server).get_inference_statistics("mlp_batched")["model_stats"][0]
    print("      mlp_batched: %d inferences in %d executions" % (stats["inference_count"], stats["execution_count"]))
    cfg = make_client("http", server).get_model_config("mlp_explicit")
    check(cfg.get("max_batch_size") == 2 and [i["dims"] for i in cfg["input"]] == [[64]], "mlp_explicit: the config as given, checked, kept")


def check_bad_requests(server, refs):
    import numpy as np

    x = refs["mlp"].inputs["data"]
    for protocol in ("http", "grpc"):
        client = make_client(protocol, server)
        cases = {
            "a wrong input name": ("mlp", {"input": x}, ["output0"]),
            "a wrong shape": ("mlp", {"data": x[:, :63].copy()}, ["output0"]),
            "a wrong dtype": ("mlp", {"data": x.astype(np.float64)}, ["output0"]),
            "a missing input": ("reshape_split", {"x": refs["reshape_split"].inputs["x"]}, ["output0"]),
            "an unknown output": ("mlp", {"data": x}, ["output7"]),
            "too many rows": ("mlp_batched", {"data": np.concatenate([x, x, x])}, ["output0"]),
            "an unknown model": ("no_such_model", {"data": x}, ["output0"]),
            "a model that failed to load": ("bad_dims", {"data": x}, ["output0"]),
        }
        for what, (model, inputs, outputs) in cases.items():
            try:
                infer(protocol, client, model, inputs, outputs)
                check(False, "%s over %s: refused" % (what, protocol))
            except Exception as e:  # noqa: BLE001 - the client's InferenceServerException
                check("InferenceServerException" in type(e).__name__, "%s over %s: an error response: %s" % (what, protocol, str(e)[:150]))
        check(server.running(), "the server is still running after bad requests over %s" % protocol)
        got = infer(protocol, client, "mlp", {"data": x}, ["output0"])
        check_outputs("mlp over %s after bad requests" % protocol, got, refs["mlp"].outputs)


def model_stats(server, model):
    return make_client("http", server).get_inference_statistics(model)["model_stats"][0]


def inputs_of(protocol, ref):
    tc = client_module(protocol)
    from tritonclient.utils import np_to_triton_dtype

    tensors = []
    for name, array in ref.inputs.items():
        t = tc.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        t.set_data_from_numpy(array)
        tensors.append(t)
    return tensors


def check_cancellation(server, refs, cancelled=8, model="resnet_serial"):
    """Requests cancelled by their gRPC client while queued behind others are answered
    CANCELLED by the backend and never run: the model's statistics count only the others'
    executions, and the cancelled ones as failures. The requests kept in front take about
    a second (as many as one measured inference says), so the cancelled ones are queued
    before their cancellation and still queued when it arrives."""
    client = make_client("grpc", server)
    start = time.monotonic()
    infer("grpc", client, model, refs["resnet"].inputs, ["output0"])
    kept = max(6, int(1.0 / max(time.monotonic() - start, 1e-3)) + 1)
    before = model_stats(server, model)
    errors = []

    def done(result, error):
        if error is not None:
            errors.append(str(error))

    running = [client.async_infer(model, inputs_of("grpc", refs["resnet"]), callback=done) for _ in range(kept)]
    time.sleep(0.05)  # the kept ones queue first
    queued = [client.async_infer(model, inputs_of("grpc", refs["resnet"]), callback=done) for _ in range(cancelled)]
    time.sleep(0.2)  # and these behind them, before they are cancelled
    for call in queued:
        call.cancel()

    def delta(after, key):
        return int(after["inference_stats"][key]["count"]) - int(before["inference_stats"][key]["count"])

    deadline = time.monotonic() + 120
    while True:  # until the server has answered all of them (the client knew at once)
        after = model_stats(server, model)
        if delta(after, "success") + delta(after, "fail") >= kept + cancelled or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    ran = int(after["execution_count"]) - int(before["execution_count"])
    check(ran == kept and delta(after, "success") == kept and delta(after, "fail") == cancelled and len(running) == kept,
          "%d of %d queued requests cancelled by the gRPC client: %d executions, %d succeeded, %d answered with an error (want %d, %d, %d)"
          % (cancelled, kept + cancelled, ran, delta(after, "success"), delta(after, "fail"), kept, kept, cancelled))
    check(len(errors) == cancelled and all("CANCELLED" in e.upper() for e in errors),
          "the client saw %d cancelled calls and no other error: %s" % (len(errors), errors[:1]))
    check(server.running(), "the server is still running after cancelled requests")


def stream_client(url, model, count, conformance):
    """Sends `count` requests to `model` on one gRPC stream, says so on stdout, then waits
    to be killed (check_shutdown_after_client_dies runs this in a child process)."""
    import tritonclient.grpc as tc

    ref = Reference(conformance, "resnet")
    client = tc.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: None)
    for i in range(count):
        client.async_stream_infer(model, inputs_of("grpc", ref), request_id=str(i))
    print("sent %d" % count, flush=True)
    time.sleep(3600)


def check_shutdown_after_client_dies(env, args, trials=2, requests=500, bound=10.0):
    """A streaming client killed (SIGKILL) with hundreds of requests queued, then SIGTERM:
    the server cancels the dead stream's requests, the backend answers them without running
    them, the model unloads and the server exits at once. (Running them all kept the model
    loaded past the server's 30 s exit timeout.)"""
    d = os.path.join(args.conformance, "resnet")
    root = os.path.join(args.work, "shutdown")
    shutil.rmtree(root, ignore_errors=True)
    harness.make_model_dir(root, "resnet", {"model.so": os.path.join(d, "model.so")}, AUTO + SERIAL)
    for trial in range(trials):
        log = os.path.join(args.work, "shutdown_%d.log" % trial)
        with harness.Server(env, args.backend_dir, root, log) as server:
            server.wait_ready()
            child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--stream-client", server.grpc_url, "resnet", str(requests),
                                      args.conformance], stdout=subprocess.PIPE)
            sent = child.stdout.readline().decode().strip()
            time.sleep(0.5)
            child.kill()
            child.wait()
            ran = int(model_stats(server, "resnet")["execution_count"])
            start = time.monotonic()
            status = server.stop(timeout=60)
            took = time.monotonic() - start
            check(sent == "sent %d" % requests and status == 0 and took < bound,
                  "shutdown %d after a streaming client was killed with %d requests queued (%d had run): %.1f s, exit status %s (want < %g s, 0)"
                  % (trial + 1, requests, ran, took, status, bound))


def check_load(server, repo, refs, total=1000, clients=8):
    models = ["mlp", "mlp_split", "reshape_split", "int_scalar", "sort_dtypes", "sort_nan", "extern_call", "mobilenet", "resnet_tuned"]
    models = [m for m in models if m in repo.good]
    lock = threading.Lock()
    counts = {"ok": 0, "wrong": 0, "error": 0}
    first_error = []

    def worker(k):
        protocol = "grpc" if k % 2 else "http"
        client = make_client(protocol, server)
        for i in range(k, total, clients):
            name = models[i % len(models)]
            ref = refs[repo.good[name]]
            try:
                got = infer(protocol, client, name, ref.inputs, list(ref.outputs))
                key = "ok" if all(same(got[o], ref.outputs[o]) for o in ref.outputs) else "wrong"
            except Exception as e:  # noqa: BLE001 - counted and reported
                key = "error"
                with lock:
                    first_error.append("%s: %r" % (name, e))
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(counts["ok"] == total, "%d requests from %d concurrent clients (HTTP and gRPC, %d models): %s %s"
          % (total, clients, len(models), counts, first_error[:1]))


def activation_bytes(graph_path, param_names):
    """Bytes of one executor's storage as TVM planned it: per storage id, the largest
    entry placed there, parameters left out (the model holds them once)."""
    with open(graph_path) as f:
        g = json.load(f)
    sizes = {"float32": 4, "float16": 2, "float64": 8, "int32": 4, "int64": 8, "int8": 1, "uint8": 1, "bool": 1}
    attrs = g["attrs"]
    sids, shapes, types = attrs["storage_id"][1], attrs["shape"][1], attrs["dltype"][1]
    param_entries = set()
    for nid in g["arg_nodes"]:
        if g["nodes"][nid]["name"] in param_names:
            param_entries.add(g["node_row_ptr"][nid])
    per_sid = {}
    for e, (sid, shape, t) in enumerate(zip(sids, shapes, types)):
        if e in param_entries:
            continue
        n = sizes[t]
        for d in shape:
            n *= d
        per_sid[sid] = max(per_sid.get(sid, 0), n)
    return sum(per_sid.values())


def check_memory(env, args, refs, instances=4, slack=16 << 20):
    """4 instances of ResNet hold one copy of its weights and 4 executors' activations."""
    d = os.path.join(args.conformance, "resnet")
    params = harness.read_param_dict(os.path.join(d, "params.bin"))
    weights = sum(v.nbytes for v in params.values())
    activations = activation_bytes(os.path.join(d, "graph.json"), set(params))
    root = os.path.join(args.work, "memory")
    shutil.rmtree(root, ignore_errors=True)
    config = AUTO + "instance_group [ { count: %d, kind: KIND_CPU } ]\nparameters: { key: \"num_threads\" value: { string_value: \"1\" } }\n" % instances
    harness.make_model_dir(root, "resnet_split", {"graph.json": os.path.join(d, "graph.json"), "lib.so": os.path.join(d, "lib.so"),
                                                  "params": os.path.join(d, "params.bin")}, config)
    harness.make_model_dir(root, "resnet_single", {"model.so": os.path.join(d, "model.so")}, config)
    ref = refs["resnet"]
    for form in ("resnet_split", "resnet_single"):
        with harness.Server(env, args.backend_dir, root, os.path.join(args.work, "memory_%s.log" % form),
                            ("--model-control-mode", "explicit")) as server:
            server.wait_ready()
            before = server.rss_bytes()
            client = make_client("http", server)
            client.load_model(form)
            wrong = []

            def go():
                c = make_client("grpc", server)
                for _ in range(3):
                    if not same(infer("grpc", c, form, ref.inputs, ["output0"])["output0"], ref.outputs["output0"]):
                        wrong.append(1)

            threads = [threading.Thread(target=go) for _ in range(2 * instances)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            grown = server.rss_bytes() - before
            client.close()  # an open connection holds the server's exit for its 30 s timeout
            bound = weights + instances * activations
            check(not wrong, "%s: %d concurrent requests over %d instances answered right" % (form, 6 * instances, instances))
            check(grown <= bound + slack, "%s with %d instances: the server grew by %.1f MB, within one copy of the weights (%.1f MB) + %d x %.2f MB "
                  "of activations = %.1f MB (+ %.0f MB for code, threads and the server's own)"
                  % (form, instances, grown / 1e6, weights / 1e6, instances, activations / 1e6, bound / 1e6, slack / 1e6))


def check_reloads(env, args, cycles=10, slack=1 << 20):
    """Load/unload cycles of ResNet (44.7 MB of weights) in explicit model control mode:
    the server's memory after 10 cycles is within 1 MB of what it was after one, in both
    forms. (The weights and activations are mappings of their own, unmapped at unload:
    from glibc's heap, after the first unload raised its mmap threshold, they went to the
    arenas of Triton's 4 loading threads, whose tops malloc_trim does not return: the
    server grew by 2-4 MB in 20 cycles. What is left is those threads' own arenas,
    about 0.5 MB, reached by the 4th cycle.)"""
    d = os.path.join(args.conformance, "resnet")
    root = os.path.join(args.work, "reloads")
    shutil.rmtree(root, ignore_errors=True)
    harness.make_model_dir(root, "resnet_split", {"graph.json": os.path.join(d, "graph.json"), "lib.so": os.path.join(d, "lib.so"),
                                                  "params": os.path.join(d, "params.bin")}, AUTO)
    harness.make_model_dir(root, "resnet_single", {"model.so": os.path.join(d, "model.so")}, AUTO)
    for form in ("resnet_split", "resnet_single"):
        with harness.Server(env, args.backend_dir, root, os.path.join(args.work, "reloads_%s.log" % form),
                            ("--model-control-mode", "explicit")) as server:
            server.wait_ready()
            client = make_client("http", server)
            rss = []
            for cycle in range(cycles):
                client.load_model(form)
                client.unload_model(form)
                deadline = time.monotonic() + 60
                while server.log_text().count("successfully unloaded '%s'" % form) <= cycle and time.monotonic() < deadline:
                    time.sleep(0.02)
                rss.append(server.rss_bytes())
            client.close()  # an open connection holds the server's exit for its 30 s timeout
            check(rss[-1] - rss[0] <= slack, "%s: %d load/unload cycles: the server holds %.1f MB after the first, %.1f MB after the last (want within %.2f MB; "
                  "MB over the first, cycle by cycle: %s)" % (form, cycles, rss[0] / 1e6, rss[-1] / 1e6, slack / 1e6,
                                                              " ".join("%.2f" % ((r - rss[0]) / 1e6) for r in rss[1:])))


def serve(env, args, repo, refs, relax_served, log):
    """The checks on one server of the whole repository."""
    with harness.Server(env, args.backend_dir, repo.root, log) as server:
        server.wait_ready()
        check_states(server, repo)
        check_weights_as_inputs(server, args, refs)
        check_named_outputs(server, refs)
        check_models(server, repo, refs)
        check_relax(server, relax_served)
        check_batching(server, refs)
        check_bad_requests(server, refs)
        check_load(server, repo, refs)
        check_cancellation(server, refs)
        check(server.running(), "the server ran throughout")


# What --only picks from, in the order they run.
GROUPS = ("serve", "memory", "reloads", "shutdown")


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--stream-client":
        return stream_client(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", required=True)
    p.add_argument("--backend-dir", required=True)
    p.add_argument("--conformance", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--relax", default="", help="the Relax suite's models (tests/relax/make_models.sh), served where they were built")
    p.add_argument("--only", default="", help="run only these checks, comma-separated, of: " + ", ".join(GROUPS) +
                   " (serve: everything checked on the server of the whole repository)")
    args = p.parse_args()
    only = set(filter(None, args.only.split(",")))
    if only - set(GROUPS):
        p.error("--only: unknown check(s) %s; there are %s" % (", ".join(sorted(only - set(GROUPS))), ", ".join(GROUPS)))
    run = only or set(GROUPS)
    env = harness.skip_if_unavailable(args.env)
    skipped = os.path.join(args.conformance, "SKIPPED")
    if os.path.isfile(skipped) or not os.path.isfile(os.path.join(args.conformance, "manifest.json")):
        reason = open(skipped).read().strip() if os.path.isfile(skipped) else "no conformance models in " + args.conformance
        print("SKIPPED: no TVM-compiled models to serve: %s" % reason)
        return 77
    if not os.path.isfile(os.path.join(args.backend_dir, "gexec", "libtriton_gexec.so")):
        print("FAIL: no %s/gexec/libtriton_gexec.so" % args.backend_dir)
        return 1
    harness.reexec_in_venv(env, __file__)

    with open(os.path.join(args.conformance, "manifest.json")) as f:
        models = json.load(f)["models"]
    os.makedirs(args.work, exist_ok=True)
    repo = build_repository(args.conformance, os.path.join(args.work, "repository"), models)
    relax_served = {}
    if args.relax and os.path.isfile(os.path.join(args.relax, "manifest.json")):
        relax_served = add_relax_models(args.relax, repo.root, repo)
    elif args.relax:
        print("note: no Relax models in %s; not served" % args.relax)
    refs = {m: Reference(args.conformance, m) for m in set(repo.good.values())}
    log = os.path.join(args.work, "server.log")
    try:
        if "serve" in run:
            serve(env, args, repo, refs, relax_served, log)
        if "memory" in run:
            check_memory(env, args, refs)
        if "reloads" in run:
            check_reloads(env, args)
        if "shutdown" in run:
            check_shutdown_after_client_dies(env, args)
    except Exception:  # noqa: BLE001 - a crash of the test is a failure with its trace
        traceback.print_exc()
        failures.append("exception")
        print("server log: %s" % log)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
