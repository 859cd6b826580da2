"""Installing the package the three documented ways (docs/python.md, "Install"): pip from the source
tree into a fresh virtual environment without network access, cmake --install under a prefix, and
the refusal of a build directory that cannot be used. Each import runs in a fresh interpreter
outside the source and build trees, with PYTHONPATH cleared, so only the installed copy can answer.

pip reuses the suite's own build tree (STRETCH_BUILD_DIR): its module is up to date, so an install
takes about a second instead of a build."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SOURCE

BUILD = Path(os.environ["STRETCH_BUILD_DIR"])
CMAKE = os.environ.get("STRETCH_CMAKE", "cmake")

CHECK = (
    "import stretch, sys; from stretch.deepspeed import compute_elastic_config; "
    "batch, gpus = compute_elastic_config({'elasticity': {'enabled': True, "
    "'max_train_batch_size': 10000, 'micro_batch_sizes': [8, 12, 16, 17], 'min_gpus': 32, "
    "'max_gpus': 1500, 'version': 0.1}}, '0.18.0'); "
    "print(stretch.__file__); print(batch, len(gpus)); "
    # stretch.torch is installed too, with its private modules (found, not imported: the venv
    # has no torch).
    "import importlib.util; print(importlib.util.find_spec('stretch.torch').origin, "
    "hasattr(stretch._stretch, 'StoreClient'), all(importlib.util.find_spec(f'stretch.{m}') "
    "for m in ('_torch_group', '_torch_files')))"
)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)
    return env


def run(command, cwd, env, check=True):
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=600)
    if check and result.returncode != 0:
        pytest.fail(f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    where = tmp_path_factory.mktemp("venv")
    made = subprocess.run([sys.executable, "-m", "venv", where], capture_output=True, text=True)
    if made.returncode != 0 or not (where / "bin" / "pip").exists():
        pytest.skip(f"no virtual environments here (install python3-venv): {made.stderr.strip()}")
    return where


def test_pip_installs_from_the_source_tree_offline_into_a_venv(venv, tmp_path):
    env = clean_env(STRETCH_BUILD_DIR=str(BUILD))
    run([venv / "bin" / "pip", "install", "--no-index", "--no-cache-dir", SOURCE], tmp_path, env)
    answer = run([venv / "bin" / "python", "-c", CHECK], tmp_path, clean_env()).stdout.split("\n")
    assert answer[0].startswith(str(venv)), answer
    assert answer[1] == "9792 23"
    assert answer[2].startswith(str(venv)) and answer[2].endswith("stretch/torch.py True True"), answer

    run([venv / "bin" / "pip", "uninstall", "-y", "stretch"], tmp_path, env)
    gone = run([venv / "bin" / "python", "-c", "import stretch"], tmp_path, clean_env(),
               check=False)
    assert gone.returncode != 0 and "No module named 'stretch'" in gone.stderr


def test_pip_refuses_a_build_directory_that_is_not_a_build_tree(venv, tmp_path):
    env = clean_env(STRETCH_BUILD_DIR=str(tmp_path))
    result = run([venv / "bin" / "pip", "install", "--no-index", "--no-cache-dir", SOURCE],
                 tmp_path, env, check=False)
    assert result.returncode != 0
    assert "expected a configured CMake build tree" in result.stdout + result.stderr


def test_cmake_install_puts_the_package_under_the_prefix(tmp_path):
    prefix = tmp_path / "prefix"
    run([CMAKE, "--install", BUILD, "--component", "python", "--prefix", prefix], tmp_path,
        clean_env())
    installed = sorted(prefix.glob("lib/python3*/*-packages/stretch/__init__.py"))
    assert len(installed) == 1, sorted(str(p) for p in prefix.rglob("*"))
    site = installed[0].parent.parent
    assert site.relative_to(prefix).parts[0] == "lib"  # under the prefix, not dpkg's directory
    answer = run([sys.executable, "-c", CHECK], tmp_path, clean_env(PYTHONPATH=str(site)))
    lines = answer.stdout.split("\n")
    assert lines[0].startswith(str(site)) and lines[1] == "9792 23"
    assert lines[2].startswith(str(site)) and lines[2].endswith("stretch/torch.py True True"), lines
