#!/bin/sh
# The digits example's checkpoints under the std::filesystem traps (fs_trap.cmake): $1 is
# stretch-train-digits built with them, so any std::filesystem call aborts it, naming the
# function. Saves every 5 steps up to 10, resumes to 20 and must end with the weights of an
# uninterrupted 20-step run.
set -eu
train="$1"
dir="$(mktemp -d "${TMPDIR:-/tmp}/stretch-digits-fs-trap-XXXXXX")"
trap 'rm -rf "$dir"' EXIT
digest() { sed -n 's/.*"weights_sha256":"\([0-9a-f]*\)".*/\1/p'; }

straight="$("$train" --steps 20 --json | digest)"
"$train" --steps 10 --save-every 5 --checkpoint-dir "$dir/ckpt" --json > "$dir/first.out"
[ "$(cat "$dir/ckpt/latest")" = global_step5 ] || { echo "latest is not global_step5"; exit 1; }
"$train" --steps 10 --save-at 10 --checkpoint-dir "$dir/ckpt" --resume --json > "$dir/second.out"
[ "$(cat "$dir/ckpt/latest")" = global_step10 ] || { echo "latest is not global_step10"; exit 1; }
resumed="$("$train" --steps 20 --checkpoint-dir "$dir/ckpt" --resume --json 2>&1 | tee "$dir/third.out" | digest)"
grep -q "resumed from $dir/ckpt/global_step10 at step 10" "$dir/third.out" ||
  { echo "no resume from global_step10:"; cat "$dir/third.out"; exit 1; }
[ -n "$straight" ] && [ "$straight" = "$resumed" ] ||
  { echo "resumed weights $resumed differ from the uninterrupted run's $straight"; exit 1; }
echo "digits checkpoints under the std::filesystem traps: saved, resumed, weights $resumed"
