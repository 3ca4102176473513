"""The package build's torch ops option (python/TorchOps.cmake): MHC_TORCH_OPS=AUTO, a wheel
build's default, builds mhc._C alone with a warning where torch cannot be imported (a plain
`pip install .` builds in an isolated environment, which has no torch), and the ops where it can;
ON fails without torch. Each case runs CMake's configure step of a CPU-only package build, as
scikit-build-core does (SKBUILD defined), with a Python that has no torch or this one."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("ninja") is None,
    reason="needs cmake and ninja")


def nanobind_dir():
    nanobind = pytest.importorskip("nanobind")
    return nanobind.cmake_dir()


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory):
    """A virtual environment of this interpreter without its site-packages (no torch)."""
    env = tmp_path_factory.mktemp("no-torch-venv")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True)
    python = str(env / "bin" / "python")
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True)
    assert probe.returncode != 0, "the fresh environment imports torch"
    return python


def configure(tmp_path, python, *defines):
    build = tmp_path / "build"
    cmd = ["cmake", "-S", ROOT, "-B", str(build), "-G", "Ninja", "-DSKBUILD=2",
           "-DMHC_CUDA=OFF", "-DMHC_PYTHON=ON", "-DMHC_CLI=OFF", "-DBUILD_TESTING=OFF",
           "-DMHC_NCCL=OFF", f"-DPython_EXECUTABLE={python}", f"-Dnanobind_ROOT={nanobind_dir()}",
           *defines]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    status = build / "python" / "_build.py"
    return run, (status.read_text() if status.exists() else "")


def test_auto_without_torch_builds_the_module_alone_and_says_how(tmp_path, python_without_torch):
    run, status = configure(tmp_path, python_without_torch)  # the default: AUTO
    assert run.returncode == 0, run.stderr[-3000:]
    warning = " ".join(run.stderr.split())
    assert "WITHOUT the torch ops" in warning, run.stderr[-3000:]
    assert "--no-build-isolation" in warning and "No module named 'torch'" in warning
    assert 'TORCH_OPS = "missing' in status
    assert "mhc_torch_ops" not in (tmp_path / "build" / "build.ninja").read_text()


def test_on_without_torch_fails_the_configure(tmp_path, python_without_torch):
    run, _ = configure(tmp_path, python_without_torch, "-DMHC_TORCH_OPS=ON")
    assert run.returncode != 0
    assert "needs torch" in " ".join(run.stderr.split())


def test_auto_with_torch_builds_the_ops(tmp_path):
    pytest.importorskip("torch")
    run, status = configure(tmp_path, sys.executable)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "WITHOUT the torch ops" not in run.stderr
    assert 'TORCH_OPS = "built"' in status
    assert "_torch_ops" in (tmp_path / "build" / "build.ninja").read_text()


def test_a_bad_value_is_refused(tmp_path):
    run, _ = configure(tmp_path, sys.executable, "-DMHC_TORCH_OPS=maybe")
    assert run.returncode != 0
    assert "expected AUTO, ON or OFF" in run.stderr
