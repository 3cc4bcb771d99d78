"""Runs a Triton Inference Server for the gexec backend's tests and benchmarks.

The server and client come from tests/triton/setup_env.sh ENV_DIR. This module uses
only the standard library at import time; numpy is imported by read_param_dict, and
tritonclient is left to the callers.

    env = skip_if_unavailable(env_dir)        # exits 77 when setup_env.sh skipped
    make_model_dir(repo, "resnet", {"model.so": path}, 'backend: "gexec"\\n')
    with Server(env, backend_dir, repo, log_path) as server:
        server.wait_ready()
        ... tritonclient.grpc.InferenceServerClient(server.grpc_url) ...
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

# Files at least this large are symlinked into a model directory instead of copied.
SYMLINK_MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class Env:
    root: str
    tritonserver: str  # the server binary
    libs: str  # its shared libraries, for LD_LIBRARY_PATH
    python: str  # the venv's interpreter (tritonclient, numpy)


def env_paths(env_dir):
    root = os.path.abspath(env_dir)
    server = os.path.join(root, "server")
    return Env(
        root=root,
        tritonserver=os.path.join(server, "pytriton", "tritonserver", "bin", "tritonserver"),
        libs=os.path.join(server, "nvidia_pytriton.libs"),
        python=os.path.join(root, "venv", "bin", "python"),
    )


def unavailable_reason(env_dir):
    """Why the environment cannot be used, or None when it can."""
    env = env_paths(env_dir)
    skipped = os.path.join(env.root, "SKIPPED")
    if os.path.isfile(skipped):
        with open(skipped) as f:
            return f.read().strip() or "setup_env.sh skipped"
    if not os.path.isfile(os.path.join(env.root, ".stamp")):
        return "no Triton environment in %s (run tests/triton/setup_env.sh %s)" % (env.root, env.root)
    for path in (env.tritonserver, env.libs, env.python):
        if not os.path.exists(path):
            return "missing %s" % path
    return None


def skip_if_unavailable(env_dir):
    """The Env, or prints 'SKIPPED: reason' and exits 77 (the ctest skip code)."""
    reason = unavailable_reason(env_dir)
    if reason:
        print("SKIPPED: %s" % reason, flush=True)
        sys.exit(77)
    return env_paths(env_dir)


def reexec_in_venv(env, script):
    """Runs `script` again with the environment's interpreter (which has tritonclient),
    with the same arguments, unless this process already is that interpreter."""
    venv = os.path.dirname(os.path.dirname(env.python))
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if os.environ.get("GEXEC_TRITON_REEXEC"):
        sys.exit("%s: %s does not run in its venv" % (os.path.basename(script), env.python))
    os.environ["GEXEC_TRITON_REEXEC"] = "1"
    sys.stdout.flush()
    os.execv(env.python, [env.python, os.path.abspath(script), *sys.argv[1:]])


# TVM param dicts (tvm.runtime.save_param_dict), little-endian throughout.
_DICT_MAGIC = 0xF7E58D4F05049CB7
_ARRAY_MAGIC = 0xDD5E40F096B4A13F
_DTYPES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
           (1, 1): "bool", (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
           (2, 16): "float16", (2, 32): "float32", (2, 64): "float64"}


def read_param_dict(path):
    """{name: numpy array} from a file tvm.runtime.save_param_dict wrote."""
    import numpy as np

    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    magic, _reserved, count = take("QQQ")
    if magic != _DICT_MAGIC:
        raise ValueError("%s: not a TVM param dict (magic %#x)" % (path, magic))
    names = []
    for _ in range(count):
        (length,) = take("Q")
        names.append(data[pos:pos + length].decode())
        pos += length
    (arrays,) = take("Q")
    if arrays != count:
        raise ValueError("%s: %d names but %d arrays" % (path, count, arrays))
    result = {}
    for name in names:
        magic, _reserved, _dev_type, _dev_id, ndim, code, bits, lanes = take("QQiiiBBH")
        if magic != _ARRAY_MAGIC:
            raise ValueError("%s: array %r has a bad magic %#x" % (path, name, magic))
        shape = take("%dq" % ndim)
        (nbytes,) = take("q")
        dtype = _DTYPES.get((code, bits))
        if dtype is None or lanes != 1:
            raise ValueError("%s: array %r has an unsupported dtype (code %d, bits %d, lanes %d)"
                             % (path, name, code, bits, lanes))
        little = np.dtype(dtype).newbyteorder("<")
        count = nbytes // little.itemsize
        if count != int(np.prod(shape, dtype=np.int64)) or pos + nbytes > len(data):
            raise ValueError("%s: array %r has %d bytes for shape %s" % (path, name, nbytes, shape))
        array = np.frombuffer(data, dtype=little, count=count, offset=pos)
        pos += nbytes
        result[name] = array.reshape(shape).astype(dtype)  # native byte order, writable
    return result


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(model_dir, text):
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.pbtxt"), "w") as f:
        f.write(text)


def make_model_dir(repo, name, files, config_text, version="1"):
    """<repo>/<name>/config.pbtxt and <repo>/<name>/<version>/<dest> for each
    {dest: src} in files: large files are symlinked, small ones copied. Returns the
    model directory."""
    model_dir = os.path.join(repo, name)
    version_dir = os.path.join(model_dir, str(version))
    os.makedirs(version_dir, exist_ok=True)
    for dest, src in files.items():
        target = os.path.join(version_dir, dest)
        if os.path.lexists(target):
            os.remove(target)
        if os.path.getsize(src) >= SYMLINK_MIN_BYTES:
            os.symlink(os.path.abspath(src), target)
        else:
            shutil.copyfile(src, target)
    write_config(model_dir, config_text)
    return model_dir


class ServerError(RuntimeError):
    pass


class Server:
    """A tritonserver process on free local ports; a context manager that stops it."""

    def __init__(self, env, backend_dir, repo, log_path, extra_args=(), environ=None, metrics=False):
        self.env = env
        self.log_path = log_path
        self._explicit = "explicit" in " ".join(extra_args)
        self.http_port = free_port()
        self.grpc_port = free_port()
        while self.grpc_port == self.http_port:
            self.grpc_port = free_port()
        self.metrics_port = None
        if metrics:  # Prometheus text on /metrics, CPU and GPU figures off: the backend's own gauges
            self.metrics_port = free_port()
            while self.metrics_port in (self.http_port, self.grpc_port):
                self.metrics_port = free_port()
        args = [
            env.tritonserver,
            "--model-repository", os.path.abspath(repo),
            "--backend-directory", os.path.abspath(backend_dir),
            "--http-address", "127.0.0.1", "--http-port", str(self.http_port),
            "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc_port),
            *(["--allow-metrics", "true", "--allow-gpu-metrics", "false", "--allow-cpu-metrics", "false",
               "--metrics-address", "127.0.0.1", "--metrics-port", str(self.metrics_port)]
              if metrics else ["--allow-metrics", "false"]),
            "--pinned-memory-pool-byte-size", "0",
            "--exit-on-error", "false",
            "--strict-readiness", "false",
            "--log-verbose", "0",
            *extra_args,
        ]
        environ = dict(os.environ, **(environ or {}))
        environ["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (env.libs, os.environ.get("LD_LIBRARY_PATH")) if p)
        self._log = open(log_path, "wb")
        try:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log,
                                          stderr=subprocess.STDOUT, env=environ)
        except BaseException:
            self._log.close()
            raise

    @property
    def pid(self):
        return self._proc.pid

    @property
    def http_url(self):
        return "127.0.0.1:%d" % self.http_port

    @property
    def grpc_url(self):
        return "127.0.0.1:%d" % self.grpc_port

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def running(self):
        return self._proc.poll() is None

    def log_text(self):
        self._log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def _fail(self, what):
        tail = "\n".join(self.log_text().splitlines()[-40:])
        raise ServerError("%s\n--- %s (last lines) ---\n%s" % (what, self.log_path, tail))

    def _request(self, method, path, body=None, timeout=10):
        request = urllib.request.Request("http://%s%s" % (self.http_url, path), method=method,
                                         data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()

    def metrics(self):
        """{(name, frozenset of (label, value)): value} from the server's /metrics."""
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10) as response:
            text = response.read().decode()
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            head, value = line.rsplit(" ", 1)
            name, labels = (head.split("{", 1) + [""])[:2]
            pairs = frozenset(tuple(kv.split("=", 1)) for kv in labels.rstrip("}").split(",") if kv) if labels else frozenset()
            out[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
        return out

    def metadata(self):
        """The server's metadata: {"name", "version", "extensions"}."""
        return json.loads(self._request("GET", "/v2")[1])

    def model_states(self):
        """{model name: (state, reason)} from the repository index; state is "READY",
        "UNAVAILABLE", "LOADING", "UNLOADING", or "" for a model never loaded."""
        _, body = self._request("POST", "/v2/repository/index", {})
        states = {}
        for entry in json.loads(body):
            states[entry["name"]] = (entry.get("state", ""), entry.get("reason", ""))
        return states

    def wait_ready(self, timeout=60):
        """Waits until the server is live and no model in the repository is loading.
        A model that failed to load counts as settled (UNAVAILABLE). In explicit model
        control mode, models never asked to load ("" state) count as settled too."""
        deadline = time.monotonic() + timeout
        live = False
        while True:
            if not self.running():
                self._fail("tritonserver exited with status %s" % self._proc.returncode)
            try:
                if not live:
                    live = self._request("GET", "/v2/health/live", timeout=2)[0] == 200
                if live:
                    pending = [name for name, (state, _) in self.model_states().items()
                               if state in ("LOADING", "UNLOADING") or (state == "" and not self._explicit)]
                    if not pending:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                self._fail("tritonserver was not ready after %g s" % timeout)
            time.sleep(0.05)

    def _proc_status(self, key):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024  # the kernel reports kB
        raise ServerError("no %s in /proc/%d/status" % (key, self.pid))

    def rss_bytes(self):
        return self._proc_status("VmRSS")

    def rss_anon_bytes(self):
        return self._proc_status("RssAnon")

    def stop(self, timeout=30):
        """SIGTERM, then SIGKILL after timeout seconds; returns the exit status."""
        if self.running():
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()
        return self._proc.returncode
