"""Shared by the side-by-side scripts in bench/: finding a Python that can run the torch peers."""

import subprocess
import sys


def python_with_torch(explicit, tool):
    """The interpreter that runs a peer: `explicit` (--python), else this one if it imports torch,
    else Debian's /usr/bin/python3; exits with status 2 naming `tool` when none does."""
    if explicit:
        return explicit
    for candidate in (sys.executable, "/usr/bin/python3"):
        if candidate and subprocess.run([candidate, "-c", "import torch"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL).returncode == 0:
            return candidate
    print(f"{tool}: error: no python3 here imports torch; install python3-torch (Debian) or pass --python",
          file=sys.stderr)
    sys.exit(2)
