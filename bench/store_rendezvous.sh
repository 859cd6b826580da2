#!/usr/bin/env bash
# The store benchmark of issue 43: the rendezvous barrier of 1,024 / 4,096 / 16,384 clients on
# Stretch's TCPStore and on PyTorch's TCPStore, same machine, same run, one row per N with the
# ratio (bench/compare_store.py; options pass through: --clients, --per-proc, --timeout,
# --json FILE, --build DIR, --python PY). Needs the stretch-bench-store target built and a
# python3 that imports torch (Debian's python3-torch). Raises RLIMIT_NOFILE itself (as root, or
# up to `ulimit -Hn`): 16,384 torch clients hold 32,768 connections to their master.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec python3 "$here/compare_store.py" "$@"
