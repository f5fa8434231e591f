"""A tritonserver with the ferrite backend, for tests/serving/test_triton.py and
scripts/serving_bench.py: where the pieces are (the server bundled in PyPI's nvidia-pytriton wheel,
build/lib/triton/ferrite/libtriton_ferrite.so, the zoo's models), a model repository in a
directory, and a server process on free ports that is stopped on exit."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("FERRITE_BUILD_DIR", ROOT / "build"))
ZOO = Path(os.environ.get("FERRITE_SHARED_MODELS", ROOT.parent / "shared" / "models"))


def tritonserver_binary() -> Path | None:
    """FERRITE_TRITONSERVER, else the tritonserver of the nvidia-pytriton wheel (found without
    importing pytriton, whose Python side needs packages the server does not)."""
    if os.environ.get("FERRITE_TRITONSERVER"):
        return Path(os.environ["FERRITE_TRITONSERVER"])
    spec = importlib.util.find_spec("pytriton")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "tritonserver" / "bin" / "tritonserver"
    return binary if binary.is_file() else None


def backend_directory() -> Path:
    """The directory to pass as --backend-directory: it holds ferrite/libtriton_ferrite.so."""
    return BUILD / "lib" / "triton"


def materialize(name: str, dest: Path) -> Path:
    """The zoo model `name` with its weights filled in (build/bin/ferrite-materialize), as
    dest/model.onnx plus its test_data_set_* folders; returns dest."""
    src = ZOO / name
    if not (dest / "model.onnx").is_file():
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(BUILD / "bin" / "ferrite-materialize"), str(src), str(dest)],
                       check=True, stdout=subprocess.DEVNULL)
    return dest


def add_model(repo: Path, name: str, onnx_file: Path, config: str) -> None:
    """repo/<name>/config.pbtxt and repo/<name>/1/model.onnx."""
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(onnx_file, repo / name / "1" / "model.onnx")
    (repo / name / "config.pbtxt").write_text(config)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerDidNotStart(RuntimeError):
    def __init__(self, message: str, log: str, missing_system_library: bool):
        super().__init__(message)
        self.log = log
        self.missing_system_library = missing_system_library


class Server:
    """tritonserver over `repo` with the ferrite backend; a context manager."""

    def __init__(self, repo: Path, log_path: Path, extra_args: list[str] | None = None,
                 timeout: float = 120.0):
        self.repo, self.log_path, self.timeout = repo, log_path, timeout
        self.extra_args = extra_args or []
        self.http_port, self.grpc_port, self.metrics_port = (_free_port() for _ in range(3))
        self.proc: subprocess.Popen | None = None

    @property
    def http_url(self) -> str:
        return f"localhost:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"localhost:{self.grpc_port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> "Server":
        binary = tritonserver_binary()
        if binary is None:
            raise ServerDidNotStart("nvidia-pytriton's tritonserver is not installed", "", True)
        args = [str(binary), "--model-repository", str(self.repo),
                "--backend-directory", str(backend_directory()),
                "--http-port", str(self.http_port), "--grpc-port", str(self.grpc_port),
                "--metrics-port", str(self.metrics_port), "--allow-metrics", "false",
                # Clients that keep connections open would hold up shutdown for the default 30 s.
                "--exit-timeout-secs", "3",
                *self.extra_args]
        self._log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self._log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log()
                self.__exit__(None, None, None)
                missing = "error while loading shared libraries" in log or "GLIBC" in log
                raise ServerDidNotStart(
                    f"tritonserver exited with {self.proc.returncode}", log, missing)
            try:
                with urllib.request.urlopen(
                        f"http://{self.http_url}/v2/health/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        log = self.log()
        self.__exit__(None, None, None)
        raise ServerDidNotStart(f"tritonserver not ready after {self.timeout:.0f} s", log, False)

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log_file", None):
            self._log_file.close()
            self._log_file = None
