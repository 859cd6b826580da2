#!/usr/bin/env bash
# Re-runs DeepSpeed's own solver (restored at run time from the shared seed, never committed) and
# checks that the committed vectors are exactly what it produces, and that the restored peer
# reproduces DeepSpeed's recorded unit-test cases. Skips (exit 77) when Debian's python3 with
# numpy or the shared seed is not available.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py=/usr/bin/python3
seed="${STRETCH_DEEPSPEED_SEED:-$root/../shared/seeds/002_87447181318dfd9e.txt}"
if ! [[ -x "$py" ]] || ! "$py" -c 'import numpy' 2>/dev/null; then
  echo "SKIP: Debian python3 with numpy is not installed (apt-get install python3-numpy)"
  exit 77
fi
if ! [[ -f "$seed" ]]; then
  echo "SKIP: DeepSpeed seed not found at $seed (set STRETCH_DEEPSPEED_SEED)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" "$root/bench/deepspeed_peer/check_fixture.py" --seed "$seed"
"$py" "$root/bench/deepspeed_peer/make_vectors.py" --seed "$seed" --out "$tmp/vectors.json"
if ! cmp -s "$tmp/vectors.json" "$root/fixtures/elasticity/deepspeed_vectors.json"; then
  echo "FAIL: regenerated vectors differ from fixtures/elasticity/deepspeed_vectors.json:"
  diff <("$py" -m json.tool "$root/fixtures/elasticity/deepspeed_vectors.json") \
       <("$py" -m json.tool "$tmp/vectors.json") | head -40
  exit 1
fi
echo "OK: DeepSpeed reproduces all committed vectors"
