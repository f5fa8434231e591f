"""The ferrite Triton backend (libtriton_ferrite.so) in a real tritonserver: the one bundled in
PyPI's nvidia-pytriton wheel, which runs on cpu. A model repository in a temporary directory
serves the zoo's convnet (configuration auto-completed, two cpu instances) and mlp (written out,
with parameters), the other four zoo models (resnet18, mobilenet_v2, bert_base, gpt2;
auto-completed), plus models that exercise errors. 64 concurrent clients, half HTTP and half
gRPC, check every output against ONNX Runtime or the zoo's expected outputs; the server's
statistics show that requests were batched; malformed requests get error responses and the
server keeps serving.

Skips (with the reason) only when tritonserver is not installed or cannot start on this machine
(e.g. a missing system library); a backend that fails to load is a failure."""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton_harness as th  # noqa: E402

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from onnx import numpy_helper  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

CLIENTS = 64
REQUESTS_PER_CLIENT = 4
# The models' dynamic batchers wait up to 10 ms for more requests: long enough that concurrent
# clients share runs even on a loaded machine (the batching assertion), short for the test.
TOL = dict(rtol=1e-4, atol=1e-4)  # f32 sums in another order than ONNX Runtime's
# The deep zoo models against the zoo's expected outputs: `ferrite run --check`'s f32 tolerance.
ZOO_TOL = dict(rtol=1e-3, atol=1e-4)
ZOO_DEEP = ("resnet18", "mobilenet_v2", "bert_base", "gpt2")
ZOO_CONFIG = """
backend: "ferrite"
dynamic_batching { max_queue_delay_microseconds: 20000 }
"""

CONVNET_CONFIG = """
backend: "ferrite"
# No tensors and no max_batch_size: auto-completed from model.onnx (batch dim "batch").
instance_group [ { count: 2, kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 10000 }
"""
MLP_CONFIG = """
backend: "ferrite"
max_batch_size: 128  # the zoo's test data sets have batches of 64 and 65
input [ { name: "input", data_type: TYPE_FP32, dims: [ 512 ] } ]
output [ { name: "output", data_type: TYPE_FP32, dims: [ 10 ] } ]
dynamic_batching { max_queue_delay_microseconds: 10000 }
parameters { key: "threads" value: { string_value: "1" } }
parameters { key: "precision" value: { string_value: "f32" } }
"""
# dims [-1] where the model's dim is 512: the server lets any width through, so a wrong one is
# refused by the backend itself (its own per-request error path).
MLP_VAR_CONFIG = """
backend: "ferrite"
max_batch_size: 8
input [ { name: "input", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "output", data_type: TYPE_FP32, dims: [ 10 ] } ]
dynamic_batching { max_queue_delay_microseconds: 1000 }
"""
# An input the model does not have: the load fails with a message naming model and input.
BAD_CONFIG = """
backend: "ferrite"
max_batch_size: 8
input [ { name: "pixels", data_type: TYPE_FP32, dims: [ 512 ] } ]
output [ { name: "output", data_type: TYPE_FP32, dims: [ 10 ] } ]
"""

# More models that must fail their load alone, each with the message it must give.
BROKEN = {
    "bad_param": ('backend: "ferrite"\nparameters { key: "thread" value: { string_value: "2" } }\n',
                  "model 'bad_param': unknown parameter 'thread'"),
    "bad_precision": ('backend: "ferrite"\n'
                      'parameters { key: "precision" value: { string_value: "fp8" } }\n',
                      "model 'bad_precision' on cpu: "),
    "bad_onnx": ('backend: "ferrite"\n', "not a valid ONNX protobuf"),
    "no_onnx": ('backend: "ferrite"\n', "model.onnx not found"),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    if not (th.ZOO / "convnet").is_dir() or not (th.ZOO / "mlp").is_dir():
        pytest.skip(f"the shared model zoo is expected at {th.ZOO}")
    work = tmp_path_factory.mktemp("triton")
    names = ("convnet", "mlp") + tuple(m for m in ZOO_DEEP if (th.ZOO / m).is_dir())
    return {name: th.materialize(name, work / "src" / name) for name in names}


@pytest.fixture(scope="module")
def server(models, tmp_path_factory):
    if th.tritonserver_binary() is None:
        pytest.skip("tritonserver not installed (scripts/requirements-nodeps.txt: nvidia-pytriton)")
    lib = th.backend_directory() / "ferrite" / "libtriton_ferrite.so"
    assert lib.is_file(), f"{lib} not built (target triton_ferrite; needs nlohmann-json3-dev)"
    repo = tmp_path_factory.mktemp("repo")
    th.add_model(repo, "convnet", models["convnet"] / "model.onnx", CONVNET_CONFIG)
    th.add_model(repo, "mlp", models["mlp"] / "model.onnx", MLP_CONFIG)
    th.add_model(repo, "mlp_var", models["mlp"] / "model.onnx", MLP_VAR_CONFIG)
    for name in ZOO_DEEP:
        if name in models:
            th.add_model(repo, name, models[name] / "model.onnx", ZOO_CONFIG)
    th.add_model(repo, "bad", models["mlp"] / "model.onnx", BAD_CONFIG)
    for name, (config, _) in BROKEN.items():
        th.add_model(repo, name, models["mlp"] / "model.onnx", config)
    (repo / "bad_onnx" / "1" / "model.onnx").write_bytes(b"\x08\x07 not a protobuf " * 10)
    (repo / "no_onnx" / "1" / "model.onnx").unlink()
    # Keep serving with one model failing to load; ready means "up", not "every model loaded".
    srv = th.Server(repo, repo.parent / "tritonserver.log",
                    ["--exit-on-error=false", "--strict-readiness=false",
                     "--strict-model-config=false"])
    try:
        srv.__enter__()
    except th.ServerDidNotStart as e:
        if e.missing_system_library:
            pytest.skip(f"tritonserver cannot start here: {e}\n{e.log[-2000:]}")
        raise AssertionError(f"{e}\n{e.log[-6000:]}") from None
    yield srv
    srv.__exit__(None, None, None)


def _reference(model_file: Path):
    sess = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    return lambda x: sess.run(None, {"input": x})[0]


def _http_get(srv, path):
    with urllib.request.urlopen(f"http://{srv.http_url}{path}", timeout=10) as r:
        return json.loads(r.read() or b"null")


def _infer(protocol, client, model, x, dtype="FP32"):
    mod = httpclient if protocol == "http" else grpcclient
    inp = mod.InferInput("input", list(x.shape), dtype)
    inp.set_data_from_numpy(x)
    return client.infer(model, [inp]).as_numpy("output")


def _client(protocol, srv):
    if protocol == "http":
        return httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
    return grpcclient.InferenceServerClient(srv.grpc_url)


def test_autocompleted_config(server):
    cfg = _http_get(server, "/v2/models/convnet/config")
    assert cfg["max_batch_size"] == 64  # the backend's default for a model with a batch dim
    assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in cfg["input"]] == [
        ("input", "TYPE_FP32", [3, 32, 32])]
    assert [(t["name"], [int(d) for d in t["dims"]]) for t in cfg["output"]] == [("output", [10])]
    assert cfg["instance_group"][0]["count"] == 2 and cfg["instance_group"][0]["kind"] == "KIND_CPU"
    assert "dynamic_batching" in cfg


def test_zoo_expected_outputs(server, models):
    for name in ("convnet", "mlp"):
        for case in sorted(models[name].glob("test_data_set_*")):
            x = numpy_helper.to_array(onnx.load_tensor(str(case / "input_0.pb")))
            want = numpy_helper.to_array(onnx.load_tensor(str(case / "output_0.pb")))
            for protocol in ("http", "grpc"):
                got = _infer(protocol, _client(protocol, server), name, x)
                np.testing.assert_allclose(got, want, **TOL, err_msg=f"{name} {case.name}")


def test_concurrent_clients_batched(server, models):
    refs = {name: _reference(models[name] / "model.onnx") for name in ("convnet", "mlp")}
    shapes = {"convnet": (3, 32, 32), "mlp": (512,)}
    before = {m: _stats(server, m) for m in refs}

    def client(i):
        protocol = "http" if i % 2 == 0 else "grpc"
        c = _client(protocol, server)
        rng = np.random.default_rng(i)
        sent = {m: 0 for m in refs}  # batch items
        requests = {m: 0 for m in refs}
        for r in range(REQUESTS_PER_CLIENT):
            model = "convnet" if (i + r) % 2 == 0 else "mlp"
            batch = int(rng.integers(1, 4))
            x = rng.standard_normal((batch, *shapes[model]), dtype=np.float32)
            got = _infer(protocol, c, model, x)
            np.testing.assert_allclose(got, refs[model](x), **TOL,
                                       err_msg=f"client {i} ({protocol}) request {r} {model}")
            sent[model] += batch
            requests[model] += 1
        return sent, requests

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        results = list(pool.map(client, range(CLIENTS)))
    for model in refs:
        # The backend reports a run's statistics after sending its responses (as Triton's own
        # backends do), so the last runs' counts can land a moment after the clients return.
        want = sum(sent[model] for sent, _ in results)
        after = _settled_stats(server, model, before[model]["inference_count"] + want)
        inferences = after["inference_count"] - before[model]["inference_count"]
        executions = after["execution_count"] - before[model]["execution_count"]
        assert inferences == sum(sent[model] for sent, _ in results)
        # Dynamic batching: fewer ferrite runs than requests, so requests of several clients
        # shared runs (inference_count counts batch items, so it alone would not show that).
        requests = sum(req[model] for _, req in results)
        print(f"{model}: {executions} runs for {requests} requests ({inferences} items)")
        assert 0 < executions < requests, (model, executions, requests)


def _zoo_rows(model_dir: Path):
    """Every batch row of the model's test data sets: ({input name: [1, ...] array}, expected
    [1, ...] output)."""
    names = [i.name for i in onnx.load(str(model_dir / "model.onnx"),
                                       load_external_data=False).graph.input]
    rows = []
    for case in sorted(model_dir.glob("test_data_set_*")):
        xs = [numpy_helper.to_array(onnx.load_tensor(str(case / f"input_{k}.pb")))
              for k in range(len(names))]
        want = numpy_helper.to_array(onnx.load_tensor(str(case / "output_0.pb")))
        for r in range(want.shape[0]):
            rows.append(({n: x[r:r + 1] for n, x in zip(names, xs)}, want[r:r + 1]))
    return rows


def _infer_named(protocol, client, model, inputs):
    mod = httpclient if protocol == "http" else grpcclient
    dtypes = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64"}
    ins = []
    for name, x in inputs.items():
        inp = mod.InferInput(name, list(x.shape), dtypes[x.dtype])
        inp.set_data_from_numpy(x)
        ins.append(inp)
    out = (mod.InferRequestedOutput("output", binary_data=True) if protocol == "http"
           else mod.InferRequestedOutput("output"))
    return client.infer(model, ins, outputs=[out]).as_numpy("output")


def test_every_zoo_model_under_64_clients(server, models):
    """The zoo's four deep models (CNNs at 224x224, BERT-base, GPT-2) served at once to 64
    clients, each answer checked against the zoo's expected output for its row, and each model's
    requests batched into fewer runs."""
    served = [m for m in ZOO_DEEP if m in models]
    if len(served) < len(ZOO_DEEP):
        pytest.skip(f"zoo models missing under {th.ZOO}: {set(ZOO_DEEP) - set(served)}")
    rows = {m: _zoo_rows(models[m]) for m in served}
    before = {m: _stats(server, m) for m in served}
    per_client = 2

    def client(i):
        protocol = "http" if i % 2 == 0 else "grpc"
        c = _client(protocol, server)
        model = served[i % len(served)]
        for r in range(per_client):
            inputs, want = rows[model][(i // len(served) + r) % len(rows[model])]
            got = _infer_named(protocol, c, model, inputs)
            np.testing.assert_allclose(got, want, **ZOO_TOL,
                                       err_msg=f"client {i} ({protocol}) {model} request {r}")

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    for model in served:
        requests = CLIENTS // len(served) * per_client
        after = _settled_stats(server, model, before[model]["inference_count"] + requests)
        executions = after["execution_count"] - before[model]["execution_count"]
        inferences = after["inference_count"] - before[model]["inference_count"]
        print(f"{model}: {executions} runs for {requests} requests")
        assert inferences == requests
        assert 0 < executions < requests, (model, executions, requests)


def _stats(srv, model):
    return _http_get(srv, f"/v2/models/{model}/stats")["model_stats"][0]


def _settled_stats(srv, model, inference_count, timeout_s=10.0):
    """The model's statistics once its inference_count has reached `inference_count` (or the
    last reading after `timeout_s`: the caller's assertion then reports the shortfall)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = _stats(srv, model)
        if stats["inference_count"] >= inference_count or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


def test_malformed_requests_get_errors_and_server_keeps_serving(server, models):
    http = _client("http", server)
    grpc = _client("grpc", server)
    ok = np.zeros((1, 512), np.float32)
    fail_before = _stats(server, "mlp_var")["inference_stats"]["fail"]["count"]
    for protocol, c in (("http", http), ("grpc", grpc)):
        # Refused by the server against the configuration (wrong shape, wrong dtype).
        with pytest.raises(InferenceServerException, match="input"):
            _infer(protocol, c, "convnet", np.zeros((1, 3, 30, 32), np.float32))
        with pytest.raises(InferenceServerException):
            _infer(protocol, c, "mlp", ok.astype(np.float64), dtype="FP64")
        # Reaches the backend (config dims [-1]); its error names the model and the input.
        with pytest.raises(InferenceServerException,
                           match=r"model 'mlp_var', input 'input': shape \[1,100\]"):
            _infer(protocol, c, "mlp_var", np.zeros((1, 100), np.float32))
    # Reported to the server as failed requests by the backend. The backend reports a request's
    # statistics after sending its response, so the count may lag the client by a moment.
    deadline = time.monotonic() + 10
    while True:
        fails = _stats(server, "mlp_var")["inference_stats"]["fail"]["count"]
        if fails >= fail_before + 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert fails >= fail_before + 2
    # Good and bad requests at once on a batching model: each gets its own answer.
    ref = _reference(models["mlp"] / "model.onnx")
    rng = np.random.default_rng(7)

    def one(i):
        c = _client("http", server)
        if i % 3 == 0:
            with pytest.raises(InferenceServerException, match="model 'mlp_var'"):
                _infer("http", c, "mlp_var", np.zeros((2, 7), np.float32))
            return
        x = rng.standard_normal((2, 512), dtype=np.float32)
        np.testing.assert_allclose(_infer("http", c, "mlp_var", x), ref(x), **TOL)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(one, range(48)))
    # Still serving, on every model that loaded.
    assert server.proc.poll() is None
    for protocol, c in (("http", http), ("grpc", grpc)):
        x = np.ones((1, 512), np.float32)
        np.testing.assert_allclose(_infer(protocol, c, "mlp", x), ref(x), **TOL)


def test_bad_config_fails_that_model_only(server):
    index = urllib.request.Request(f"http://{server.http_url}/v2/repository/index", data=b"{}",
                                   method="POST")
    with urllib.request.urlopen(index, timeout=10) as r:
        states = {m["name"]: m for m in json.loads(r.read())}
    assert states["bad"]["state"] == "UNAVAILABLE"
    assert "model 'bad', input 'pixels'" in states["bad"]["reason"]
    for name, (_, reason) in BROKEN.items():
        assert states[name]["state"] == "UNAVAILABLE", states[name]
        assert reason in states[name]["reason"], states[name]
    for name in ("convnet", "mlp", "mlp_var") + ZOO_DEEP:
        if name in states:
            assert states[name]["state"] == "READY", states[name]
