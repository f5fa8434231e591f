#!/usr/bin/env python3
"""Serving load figures: throughput and p50/p99 latency of zoo models (convnet, mlp, resnet18,
mobilenet_v2) on cpu or one GPU under 1, 8 and 64 concurrent clients, for

  ferrite  tritonserver (nvidia-pytriton's build) with the ferrite backend (libtriton_ferrite.so),
           --instances instances (KIND_CPU, or KIND_GPU with --device cuda), dynamic batching
           (max batch 64, 2 ms queue delay);
  ort      ONNX Runtime behind a Python HTTP server speaking the same KServe v2 protocol, with the
           same batching (one batcher thread: up to 64 requests or 2 ms, one run, split), because
           the bundled tritonserver has no onnxruntime backend (and its python backend's stub
           returns empty tensors with this venv's numpy 2). With --device cuda it runs ONNX
           Runtime's CUDAExecutionProvider.

Both are driven by the same client: one per thread, requests of batch 1 with random inputs, binary
tensors (tritonclient.http where installed, else a KServe v2 client over http.client); every
answer is checked against ONNX Runtime on the cpu. Each cell runs for --seconds after a warm-up;
the client threads share the machine with the server, so on a small machine the client is part
of what is measured (say so with the figures).

  .venv/bin/python scripts/serving_bench.py [--seconds 5] [--clients 1,8,64] [--models convnet,mlp]
  python3 scripts/serving_bench.py --device cuda --instances 4 --models resnet18,mobilenet_v2
  (on the GPU machine: FERRITE_TRITONSERVER, FERRITE_BUILD_DIR and FERRITE_SHARED_MODELS say
  where the server, the backend and the zoo are; tests/serving/triton_harness.py)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "serving"))
import triton_harness as th  # noqa: E402

MAX_BATCH = 64
QUEUE_DELAY_S = 0.002
SHAPES = {"convnet": (3, 32, 32), "mlp": (512,), "resnet18": (3, 224, 224),
          "mobilenet_v2": (3, 224, 224)}
CLASSES = {"convnet": 10, "mlp": 10, "resnet18": 1000, "mobilenet_v2": 1000}
FERRITE_CONFIG = """
backend: "ferrite"
max_batch_size: 64
input [ { name: "input", data_type: TYPE_FP32, dims: [ %s ] } ]
output [ { name: "output", data_type: TYPE_FP32, dims: [ %d ] } ]
instance_group [ { count: %d, kind: %s } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
"""
# The largest difference allowed from ONNX Runtime on the cpu: `ferrite run --check`'s f32.
RTOL, ATOL = 1e-3, 1e-4


class RawClient:
    """The KServe v2 HTTP infer call with binary tensors (the Inference-Header-Content-Length
    extension) over http.client, for machines without tritonclient."""

    def __init__(self, url: str):
        import http.client
        import socket

        host, port = url.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def infer(self, model: str, x: np.ndarray) -> np.ndarray:
        head = json.dumps({
            "inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                        "parameters": {"binary_data_size": x.nbytes}}],
            "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
        self.conn.request("POST", f"/v2/models/{model}/infer", head + x.tobytes(), {
            "Inference-Header-Content-Length": str(len(head)),
            "Content-Type": "application/octet-stream"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{model}: HTTP {r.status}: {data[:300]!r}")
        n = int(r.getheader("Inference-Header-Content-Length") or len(data))
        out = json.loads(data[:n])["outputs"][0]
        return np.frombuffer(data[n:], np.float32).reshape(out["shape"])

    def close(self):
        self.conn.close()


def make_client(url: str):
    """tritonclient.http where installed (the same client for both servers), else RawClient."""
    try:
        import tritonclient.http as httpclient
    except ImportError:
        return RawClient(url)

    class Tc:
        def __init__(self):
            self.c = httpclient.InferenceServerClient(url, connection_timeout=120,
                                                      network_timeout=120)

        def infer(self, model, x):
            inp = httpclient.InferInput("input", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=True)
            out = [httpclient.InferRequestedOutput("output", binary_data=True)]
            return self.c.infer(model, [inp], outputs=out).as_numpy("output")

        def close(self):
            self.c.close()

    return Tc()


class OrtBatcher:
    """Triton's dynamic batching, in Python: one thread takes the queued requests (up to
    MAX_BATCH, waiting at most QUEUE_DELAY_S after the first), runs them as one batch, splits."""

    def __init__(self, model_file: Path, providers: list[str]):
        import onnxruntime as ort

        self.sess = ort.InferenceSession(str(model_file), providers=providers)
        self.q: queue.Queue = queue.Queue()
        self.runs = 0
        self.items = 0
        self.compute_s = 0.0
        threading.Thread(target=self._loop, daemon=True).start()

    def infer(self, x: np.ndarray) -> np.ndarray:
        done = threading.Event()
        slot: dict = {}
        self.q.put((x, done, slot))
        done.wait()
        return slot["y"]

    def _loop(self):
        while True:
            batch = [self.q.get()]
            deadline = time.monotonic() + QUEUE_DELAY_S
            while sum(len(b[0]) for b in batch) < MAX_BATCH:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.append(self.q.get(timeout=left))
                except queue.Empty:
                    break
            xs = np.concatenate([b[0] for b in batch])
            t0 = time.perf_counter()
            y = self.sess.run(None, {"input": xs})[0]
            self.compute_s += time.perf_counter() - t0
            self.runs += 1
            self.items += len(xs)
            at = 0
            for x, done, slot in batch:
                slot["y"] = y[at:at + len(x)]
                at += len(x)
                done.set()


def ort_server(models: dict[str, Path], providers: list[str]) -> ThreadingHTTPServer:
    """KServe v2 over HTTP, the subset tritonclient.http uses here: readiness, and infer with
    binary input and output tensors (the Inference-Header-Content-Length extension)."""
    batchers = {name: OrtBatcher(path, providers) for name, path in models.items()}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body are two writes: with Nagle on, the client's delayed ACK adds ~40 ms.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def _send(self, code, body: bytes, headers=None):
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(200 if self.path == "/v2/health/ready" else 404, b"")

        def do_POST(self):
            parts = self.path.strip("/").split("/")  # v2/models/<name>/infer
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if len(parts) != 4 or parts[3] != "infer" or parts[2] not in batchers:
                return self._send(404, b'{"error":"unknown model"}')
            n = int(self.headers.get("Inference-Header-Content-Length", len(body)))
            header = json.loads(body[:n])
            inp = header["inputs"][0]
            x = np.frombuffer(body[n:], np.float32).reshape(inp["shape"])
            y = np.ascontiguousarray(batchers[parts[2]].infer(x))
            out = json.dumps({"model_name": parts[2], "outputs": [{
                "name": "output", "datatype": "FP32", "shape": list(y.shape),
                "parameters": {"binary_data_size": y.nbytes}}]}).encode()
            self._send(200, out + y.tobytes(), {
                "Content-Type": "application/octet-stream",
                "Inference-Header-Content-Length": str(len(out))})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.batchers = batchers
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def load(url: str, model: str, clients: int, seconds: float, reference) -> dict:
    """`clients` threads sending batch-1 requests back to back for `seconds` (after 1 s of
    warm-up); latencies in ms. Every answer is compared with `reference(x)`."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    worst = [0.0] * clients
    errors: list[str] = []
    start_evt = threading.Event()
    t_begin = [0.0]
    inputs = [np.random.default_rng(i).standard_normal((1, *SHAPES[model]), dtype=np.float32)
              for i in range(clients)]
    wants = [reference(x) for x in inputs]

    def client(i):
        try:
            c = make_client(url)
            x, want = inputs[i], wants[i]
            start_evt.wait()
            warm_end = t_begin[0] + 1.0
            end = warm_end + seconds
            while True:
                t0 = time.perf_counter()
                if t0 >= end:
                    break
                y = c.infer(model, x)
                t1 = time.perf_counter()
                if y.shape != want.shape or not np.allclose(y, want, rtol=RTOL, atol=ATOL):
                    worst[i] = max(worst[i], float(np.max(np.abs(y - want))) if
                                   y.shape == want.shape else float("inf"))
                if t0 >= warm_end:
                    latencies[i].append((t1 - t0) * 1e3)
            c.close()
        except Exception as e:  # noqa: BLE001 - reported with the row
            errors.append(f"client {i}: {e!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # clients connected
    t_begin[0] = time.perf_counter()
    start_evt.set()
    for t in threads:
        t.join()
    lat = np.array([v for per in latencies for v in per] or [0.0])
    return {"requests": int(sum(len(p) for p in latencies)),
            "throughput": sum(len(p) for p in latencies) / seconds,
            "p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99)),
            "wrong": int(sum(w > 0 for w in worst)), "errors": errors[:3]}


def triton_stats(srv: th.Server, model: str) -> tuple[int, int, float]:
    """Batch items, executions, and seconds in the backend's compute (its reported
    compute_infer: the ferrite run)."""
    import urllib.request

    with urllib.request.urlopen(f"http://{srv.http_url}/v2/models/{model}/stats") as r:
        s = json.loads(r.read())["model_stats"][0]
    compute = sum(int(b["compute_infer"]["ns"]) for b in s["batch_stats"]) * 1e-9
    return int(s["inference_count"]), int(s["execution_count"]), compute


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--models", default="convnet,mlp")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--instances", type=int, default=1, help="ferrite instances (Triton)")
    ap.add_argument("--json", default=None, help="write the rows here (JSON lines)")
    args = ap.parse_args()
    import onnxruntime

    gpu = args.device == "cuda"
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if gpu else [
        "CPUExecutionProvider"]
    clients = [int(c) for c in args.clients.split(",")]
    names = args.models.split(",")
    work = Path(tempfile.mkdtemp(prefix="serving_bench_"))
    models = {n: th.materialize(n, work / "src" / n) / "model.onnx" for n in names}
    repo = work / "repo"
    refs = {n: onnxruntime.InferenceSession(str(models[n]), providers=["CPUExecutionProvider"])
            for n in names}
    reference = {n: (lambda x, n=n: refs[n].run(None, {"input": x})[0]) for n in names}
    kind = "KIND_GPU" if gpu else "KIND_CPU"
    for n in names:
        dims = ", ".join(str(d) for d in SHAPES[n])
        th.add_model(repo, n, models[n], FERRITE_CONFIG % (dims, CLASSES[n], args.instances, kind))
    rows = []
    with th.Server(repo, work / "tritonserver.log") as srv:
        for n in names:
            for c in clients:
                before = triton_stats(srv, n)
                r = load(srv.http_url, n, c, args.seconds, reference[n])
                after = triton_stats(srv, n)
                items, runs = after[0] - before[0], after[1] - before[1]
                compute = (after[2] - before[2]) / max(runs, 1)
                rows.append(("ferrite (Triton)", n, c, r, items / max(runs, 1), compute))
                print(rows[-1], flush=True)
    ort = ort_server(models, providers)
    url = f"127.0.0.1:{ort.server_address[1]}"
    for n in names:
        for c in clients:
            b = ort.batchers[n]
            before = (b.items, b.runs, b.compute_s)
            r = load(url, n, c, args.seconds, reference[n])
            runs = max(b.runs - before[1], 1)
            rows.append(("ONNX Runtime (Python server)", n, c, r, (b.items - before[0]) / runs,
                         (b.compute_s - before[2]) / runs))
            print(rows[-1], flush=True)
    ort.shutdown()
    on = (f"{args.device}, {args.instances} ferrite instance(s), ONNX Runtime "
          f"{'/'.join(ort.batchers[names[0]].sess.get_providers())}")
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, onnxruntime {onnxruntime.__version__}, {on}, "
          f"{args.seconds:.0f} s per cell, batch-1 requests over HTTP\n")
    print("| server | model | clients | req/s | p50 ms | p99 ms | mean batch | compute ms/run | wrong |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for server, n, c, r, mb, comp in rows:
        print(f"| {server} | {n} | {c} | {r['throughput']:.0f} | {r['p50']:.2f} | "
              f"{r['p99']:.2f} | {mb:.1f} | {comp * 1e3:.2f} | {r['wrong']}"
              f"{' ' + '; '.join(r['errors']) if r['errors'] else ''} |")
    if args.json:
        with open(args.json, "w") as f:
            for server, n, c, r, mb, comp in rows:
                f.write(json.dumps(dict(server=server, model=n, clients=c, device=args.device,
                                        instances=args.instances, mean_batch=mb,
                                        compute_ms=comp * 1e3, **r)) + "\n")
    return 0 if all(not r["wrong"] and not r["errors"] for *_, r, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
