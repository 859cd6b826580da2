#!/usr/bin/env bash
# Idle control-plane load of a multi-node job (issue 43): N local node agents (`--launcher local`,
# one slot each, `sh -c 'exec sleep 600'` workers), measured once every worker runs.
# Prints per idle agent: store requests per second (its send() calls, by strace, on a sample of
# agents) and CPU; for the launcher (controller + the job's store): its requests and the store's
# replies per second (send() calls per thread: the store's thread answers every request) and
# CPU; the load average. Everything it starts is killed at the end (bounded by timeouts).
# usage: bench/idle_agents.sh STRETCH_BINARY N [SECONDS] [SAMPLE_AGENTS]
set -u
STRETCH=$1
N=$2
SECS=${3:-10}
SAMPLE=${4:-8}
dir=$(mktemp -d /tmp/stretch-idle-XXXXXX)
for i in $(seq 0 $((N - 1))); do echo "h$i slots=1"; done >"$dir/hosts"
port=$((20000 + RANDOM % 20000))
timeout 600 "$STRETCH" launch --hostfile "$dir/hosts" --launcher local --elastic_training \
  --min_elastic_nodes 1 --max_elastic_nodes "$N" --master_port "$port" --log_dir "$dir/logs" \
  sh -c 'exec sleep 600' >"$dir/out" 2>&1 &
tpid=$!
sleep 0.5
lpid=$(pgrep -P "$tpid" | head -1)
agents() { pgrep -P "$lpid" -f ' agent ' | tr '\n' ' '; }
workers() { local n=0; for a in $(agents); do n=$((n + $(pgrep -P "$a" -f 'sleep 600' | wc -l))); done; echo $n; }
start=$(date +%s.%N)
for _ in $(seq 1 600); do
  [ "$(workers)" -ge "$N" ] && break
  sleep 0.5
done
echo "N=$N: all $(workers) workers running after $(echo "$(date +%s.%N) - $start" | bc) s"
sleep 3
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)
A=($(agents))
declare -A c0
for p in "${A[@]}" "$lpid"; do c0[$p]=$(cpu "$p"); done
# strace: send() calls of a sample of agents, and of every launcher thread
sample=("${A[@]:0:$SAMPLE}")
sargs=()
for p in "${sample[@]}"; do sargs+=(-p "$p"); done
timeout -s INT "$SECS" strace -f -qq -e trace=sendto,sendmsg -o "$dir/agents.trace" "${sargs[@]}" 2>/dev/null
timeout -s INT "$SECS" strace -f -qq -ff -e trace=sendto,sendmsg -o "$dir/launcher.trace" -p "$lpid" 2>/dev/null
secs2=$((2 * SECS))
total=0
for p in "${A[@]}"; do total=$((total + $(cpu "$p") - ${c0[$p]})); done
lcpu=$(($(cpu "$lpid") - ${c0[$lpid]}))
areq=$(grep -cE 'send(to|msg)\(' "$dir/agents.trace")
echo "idle agent: $(echo "scale=2; $areq / ${#sample[@]} / $SECS" | bc) store requests/s (strace of ${#sample[@]} agents, ${SECS} s)"
echo "idle agent: $(echo "scale=3; $total * 1000 / $hz / ${#A[@]} / $secs2" | bc) ms CPU/s (all ${#A[@]} agents, ${secs2} s)"
counts=$(for f in "$dir"/launcher.trace.*; do grep -cE 'send(to|msg)\(' "$f"; done | sort -n)
echo "launcher: store's replies $(echo "scale=1; $(echo "$counts" | tail -1) / $SECS" | bc)/s (busiest thread), other threads' sends $(echo "scale=1; ($(echo "$counts" | paste -sd+ | bc) - $(echo "$counts" | tail -1)) / $SECS" | bc)/s"
echo "launcher: $(echo "scale=1; $lcpu * 1000 / $hz / $secs2" | bc) ms CPU/s; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
kill -TERM "$lpid" 2>/dev/null
for _ in $(seq 1 60); do kill -0 "$tpid" 2>/dev/null || break; sleep 0.5; done
kill -KILL "$tpid" 2>/dev/null
wait "$tpid" 2>/dev/null
rm -rf "$dir"
