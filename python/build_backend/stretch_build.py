"""The PEP 517 build backend behind `pip install .` (docs/python.md, "Install").

It lives in the source tree and needs nothing from PyPI: pyproject.toml names it with
`backend-path` and `requires = []`, so pip's isolated build works without network access, on
Debian 12 as on any machine with the build's Debian packages (scripts/bootstrap.sh). It is the
normal CMake build, narrowed to the package's one target, then the wheel format (a zip with
METADATA, WHEEL and RECORD) written with the standard library.

Where it builds:
  - STRETCH_BUILD_DIR, or the config setting build-dir (`pip install . -C build-dir=build`):
    an existing build tree, whose up-to-date module is reused (seconds instead of minutes);
  - otherwise build/pip-<python tag> in the source tree: configured once for this interpreter,
    without tests, benchmarks, GUI or LibTorch, and kept so a second install is quick.
Progress goes to stderr (`pip install -v` shows it).
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]


class BuildError(RuntimeError):
    pass


def _project():
    with open(SOURCE / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    cmake = (SOURCE / "CMakeLists.txt").read_text()
    version = re.search(r"project\(Stretch\s+VERSION\s+([0-9.]+)", cmake)
    if version is None:
        raise BuildError("CMakeLists.txt: no `project(Stretch VERSION x.y.z)` to take the version from")
    return project, version.group(1)


def _python_tag():
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def _tag():
    python = _python_tag()
    platform = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
    return f"{python}-{python}{sys.abiflags}-{platform}"


def _say(text):
    print(f"stretch build: {text}", file=sys.stderr, flush=True)


def _run(command):
    _say(" ".join(str(part) for part in command))
    result = subprocess.run([str(part) for part in command])
    if result.returncode != 0:
        raise BuildError(f"`{' '.join(str(p) for p in command)}` failed with status "
                         f"{result.returncode}; its output is above")


def _build_dir(config_settings):
    chosen = os.environ.get("STRETCH_BUILD_DIR") or (config_settings or {}).get("build-dir")
    if chosen:
        path = Path(chosen)
        path = path if path.is_absolute() else SOURCE / path
        if not (path / "CMakeCache.txt").is_file():
            raise BuildError(f"build directory {path}: expected a configured CMake build tree "
                             "(it has no CMakeCache.txt); configure it with cmake, or leave "
                             "STRETCH_BUILD_DIR and build-dir unset")
        return path, False
    return SOURCE / "build" / f"pip-{_python_tag()}", True


def _build_module(config_settings):
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake: not found on PATH; install Debian's cmake (scripts/bootstrap.sh "
                         "installs everything the build needs)")
    build, own = _build_dir(config_settings)
    if own and not (build / "CMakeCache.txt").is_file():
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run([cmake, "-S", SOURCE, "-B", build, *generator, "-DCMAKE_BUILD_TYPE=Release",
              f"-DPython3_EXECUTABLE={sys.executable}", "-DSTRETCH_BUILD_TESTS=OFF",
              "-DSTRETCH_BUILD_BENCH=OFF", "-DSTRETCH_BUILD_FUZZERS=OFF",
              "-DSTRETCH_BUILD_GUI=OFF", "-DSTRETCH_WITH_TORCH=OFF"])
    _run([cmake, "--build", build, "--target", "stretch_python", "--parallel",
          str(os.cpu_count() or 1)])
    package = build / "python" / "stretch"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    module = package / f"_stretch{suffix}"
    if not module.is_file():
        built = sorted(p.name for p in package.glob("_stretch*")) or ["nothing"]
        raise BuildError(f"{build}: expected {module.name} for this Python ({sys.executable}), "
                         f"found {', '.join(built)}: the build tree was configured for another "
                         "interpreter (leave STRETCH_BUILD_DIR unset to build for this one) or "
                         "without pybind11-dev/python3-dev")
    return package, module


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _metadata(project, version):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    return ("\n".join(lines) + "\n").encode()


def _dist_info(version, project):
    return f"{project['name']}-{version}.dist-info"


# PEP 517 hooks -----------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    # Without this hook pip would build the module once for the metadata and once for the wheel.
    project, version = _project()
    info = Path(metadata_directory) / _dist_info(version, project)
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_bytes(_metadata(project, version))
    return info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project, version = _project()
    package, module = _build_module(config_settings)
    tag = _tag()
    name = f"{project['name']}-{version}-{tag}.whl"
    info = _dist_info(version, project)
    # The package directory holds what python/CMakeLists.txt put there: the Python files and the
    # module (bytecode caches, and modules built for other interpreters, stay out).
    files = [(f"stretch/{path.name}", path.read_bytes()) for path in sorted(package.iterdir())
             if path.is_file() and (not path.name.startswith("_stretch") or path == module)]
    files.append((f"{info}/METADATA", _metadata(project, version)))
    wheel = ("Wheel-Version: 1.0\nGenerator: stretch_build\nRoot-Is-Purelib: false\n"
             f"Tag: {tag}\n").encode()
    files.append((f"{info}/WHEEL", wheel))
    record = [_record_line(path, data) for path, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    target = Path(wheel_directory) / name
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in files:
            entry = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    _say(f"wrote {target}")
    return name
