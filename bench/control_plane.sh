#!/usr/bin/env bash
# The multi-node control plane at scale (issue 43): for each N, one `stretch launch --hostfile H
# --launcher local --elastic_training --min_elastic_nodes 1 --max_elastic_nodes N` of N local
# node agents (one slot each, `sh -c 'exec sleep ...'` workers, so only the control plane is
# measured), and per N:
#   launch_s            launch -> every worker of generation 1 running (a `sleep` process whose
#                       parent is an agent)
#   idle                store requests per node per second (the TCP data segments the job's
#                       store received, over N), each agent's own requests (the segments it
#                       sent) and CPU, the controller's requests, the launcher's CPU, agent RSS/PSS
#   kill_to_running_s   SIGKILL of the last host's agent -> the next generation's N-1 workers
#                       all running (new pids)
#   stop_noticed_s      SIGSTOP of another agent -> the controller's first event-log record that
#                       names it (its event time, on the controller's clock)
#   stop_to_running_s   SIGSTOP -> the generation after it all running (N-2 new workers)
# Workers are counted from one `ps -eo pid,ppid,args` snapshot per sample (not one pgrep per
# agent, which inflated the times at 256 agents). Requests are TCP data segments (`ss -ti`; a
# request is one), CPU from /proc/PID/stat, memory from /proc/PID/status and smaps_rollup.
# Everything it starts is stopped at the end (KEEP_LOGS=1 keeps the logs and event log).
#
# usage: bench/control_plane.sh [--json FILE] [--idle_seconds S] [--keepalive_timeout S]
#                               STRETCH_BINARY [N ...]      (N defaults to 256 1024 2048)
# The JSON file: {"machine", "date", "command", "points": [{"nodes", "launch_s",
# "kill_to_running_s", "stop_noticed_s", "idle_requests_per_node_s", "agent_rss_mib", ...}]}
# (`stretch sim --calibrate` reads it; field names are fixed). A time that was not reached is
# null, and "failed" is true when the job ended during the recoveries.
set -u
JSON=
IDLE=10
KEEPALIVE=
while [ $# -gt 0 ]; do
  case $1 in
    --json) JSON=$2; shift 2 ;;
    --idle_seconds) IDLE=$2; shift 2 ;;
    --keepalive_timeout) KEEPALIVE=$2; shift 2 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,27p' "$0" >&2; exit 2; }
STRETCH=$(readlink -f "$1")
shift
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(256 1024 2048)
SLEEP=86399 # the workers' `sleep` argument: tells them from every other sleep on the machine
hz=$(getconf CLK_TCK)
now() { date +%s.%N; }
since() { printf "%.3f\n" "$(echo "$(now) - $1" | bc)"; }
ulimit -n 65536 2>/dev/null
ulimit -u unlimited 2>/dev/null

lpid=
dir=
cleanup() {
  [ -n "$lpid" ] && kill -TERM "$lpid" 2>/dev/null
  for _ in $(seq 1 120); do
    [ -n "$lpid" ] && kill -0 "$lpid" 2>/dev/null || break
    sleep 0.5
  done
  [ -n "$lpid" ] && kill -KILL "$lpid" 2>/dev/null
  # Anything of this run left (an agent SIGSTOPped, its workers): its own process group.
  for p in $(ps -eo pid=,args= | awk -v d="$dir" 'index($0, d) {print $1}'); do
    kill -CONT "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  [ -n "$lpid" ] && wait "$lpid" 2>/dev/null
  lpid=
}
trap 'cleanup; exit 130' INT TERM

# One ps snapshot: "AGENT_PIDS|WORKER_PIDS" of the launcher's agents and their `sleep` workers.
snapshot() {
  ps -eo pid=,ppid=,args= | awk -v L="$lpid" -v S="sleep $SLEEP" '
    { pid[NR] = $1; ppid[NR] = $2; a = $0; sub(/^ *[0-9]+ +[0-9]+ +/, "", a); args[NR] = a }
    END {
      for (i = 1; i <= NR; i++) if (ppid[i] == L && args[i] ~ / agent /) agent[pid[i]] = 1
      as = ""; ws = ""
      for (p in agent) as = as " " p
      for (i = 1; i <= NR; i++) if ((ppid[i] in agent) && args[i] == S) ws = ws " " pid[i]
      print as "|" ws
    }'
}
# Waits until `want` workers run that are not in the file `old` (pids, one a line); prints the
# seconds since `t0` (or "timeout" after `limit` seconds).
wait_workers() {
  local want=$1 old=$2 t0=$3 limit=$4 snap n
  while :; do
    snap=$(snapshot)
    n=$(echo "${snap#*|}" | tr ' ' '\n' | grep -v '^$' | grep -vxFf "$old" | wc -l)
    if [ "$n" -ge "$want" ]; then
      since "$t0"
      return
    fi
    if [ "$(echo "$(since "$t0") > $limit" | bc)" = 1 ]; then
      echo timeout
      return
    fi
    sleep 0.05
  done
}
sum_field() { # sum_field FIELD_EXPR FILES...: sums an awk expression over /proc files
  local expr=$1
  shift
  [ $# -gt 0 ] || { echo 0; return; }
  awk "{ s += $expr } END { print s + 0 }" "$@" 2>/dev/null
}
# TCP data segments into the job store's port so far: "ALL AGENTS CONTROLLER" (the store's side
# of every connection, then the clients' side split by process). A request is one segment, its
# reply one back (`ss -ti` data_segs_in / data_segs_out; /proc/PID/io does not count send()).
segments() {
  local all
  all=$(ss -tinH state established "( sport = :$sport )" |
    awk '{ if (match($0, /data_segs_in:[0-9]+/)) s += substr($0, RSTART + 13, RLENGTH - 13) } END { print s + 0 }')
  echo "$all $(ss -tinHp state established "( dport = :$sport )" | awk -v L="$lpid" '
    /users:/ { match($0, /pid=[0-9]+/); p = substr($0, RSTART + 4, RLENGTH - 4) }
    { if (match($0, /data_segs_out:[0-9]+/)) { v = substr($0, RSTART + 14, RLENGTH - 14); if (p == L) c += v; else a += v } }
    END { print a + 0, c + 0 }')"
}

machine="$(nproc)-core dev VM ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), Linux $(uname -r))"
date_now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit=$(cd "$(dirname "$0")" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
points=()
printf '%-6s %9s %9s %9s %9s %11s %11s %11s %11s %9s %9s\n' nodes launch_s kill_run_s stop_seen stop_run_s req/node/s agent_req/s agent_ms/s launch_ms/s rss_MiB pss_MiB

for N in "${SIZES[@]}"; do
  dir=$(mktemp -d /tmp/stretch-cp-XXXXXX)
  for i in $(seq 0 $((N - 1))); do echo "h$i slots=1"; done >"$dir/hosts"
  port=$((20000 + RANDOM % 20000))
  sport=$((port + 1)) # the job store: --rdzv_port defaults to --master_port + 1
  extra=()
  [ -n "$KEEPALIVE" ] && extra=(--keepalive_timeout "$KEEPALIVE")
  : >"$dir/none"
  t0=$(now)
  "$STRETCH" launch --hostfile "$dir/hosts" --launcher local --elastic_training \
    --min_elastic_nodes 1 --max_elastic_nodes "$N" --master_port "$port" --log_dir "$dir/logs" \
    --event_log "$dir/events.jsonl" "${extra[@]}" sh -c "exec sleep $SLEEP" >"$dir/out" 2>&1 &
  lpid=$!
  launch=$(wait_workers "$N" "$dir/none" "$t0" 600)
  if [ "$launch" = timeout ] || ! kill -0 "$lpid" 2>/dev/null; then
    echo "$N: the job did not bring up $N workers (see $dir/out):"
    tail -3 "$dir/out"
    points+=("$(printf '{"nodes": %d, "launch_s": null, "kill_to_running_s": null, "stop_noticed_s": null, "idle_requests_per_node_s": null, "agent_rss_mib": null, "failed": true}' "$N")")
    cleanup
    continue
  fi

  # Idle: every worker runs; let the start's own traffic pass.
  sleep 3
  snap=$(snapshot)
  read -r -a A <<<"${snap%|*}"
  adirs=()
  for p in "${A[@]}"; do adirs+=("/proc/$p"); done
  acpu0=$(sum_field '$14 + $15' "${adirs[@]/%//stat}")
  read -r s0 a0 c0 <<<"$(segments)"
  lcpu0=$(awk '{print $14 + $15}' "/proc/$lpid/stat")
  ti0=$(now)
  sleep "$IDLE"
  acpu1=$(sum_field '$14 + $15' "${adirs[@]/%//stat}")
  read -r s1 a1 c1 <<<"$(segments)"
  lcpu1=$(awk '{print $14 + $15}' "/proc/$lpid/stat")
  idle=$(since "$ti0")
  na=${#A[@]}
  req_node=$(echo "scale=3; ($s1 - $s0) / $N / $idle" | bc)
  agent_req=$(echo "scale=3; ($a1 - $a0) / $na / $idle" | bc)
  ctl_req=$(echo "scale=1; ($c1 - $c0) / $idle" | bc)
  agent_ms=$(echo "scale=3; ($acpu1 - $acpu0) * 1000 / $hz / $na / $idle" | bc)
  launcher_ms=$(echo "scale=1; ($lcpu1 - $lcpu0) * 1000 / $hz / $idle" | bc)
  rss=$(echo "scale=2; $(sum_field '($1 == "VmRSS:") * $2' "${adirs[@]/%//status}") / 1024 / $na" | bc)
  pss=$(echo "scale=2; $(sum_field '($1 == "Pss:") * $2' "${adirs[@]/%//smaps_rollup}") / 1024 / $na" | bc)
  load=$(cut -d' ' -f1 /proc/loadavg)
  mem_avail=$(awk '/MemAvailable/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)

  # SIGKILL of the last host's agent: the next generation's N-1 workers all running.
  echo "${snap#*|}" | tr ' ' '\n' | grep -v '^$' >"$dir/gen1"
  victim=$(ps -eo pid=,ppid=,args= | awk -v L="$lpid" -v r="--node_rank $((N - 1)) " '$2 == L && index($0, r) {print $1; exit}')
  t1=$(now)
  kill -KILL "$victim" 2>/dev/null
  kill_run=$(wait_workers $((N - 1)) "$dir/gen1" "$t1" 120)
  failed=false
  kill -0 "$lpid" 2>/dev/null || { kill_run=timeout; failed=true; }

  # SIGSTOP of the first host's agent: its loss in the event log, then the next generation.
  snap=$(snapshot)
  echo "${snap#*|}" | tr ' ' '\n' | grep -v '^$' >"$dir/gen2"
  stopped=$(ps -eo pid=,ppid=,args= | awk -v L="$lpid" -v r="--node_rank 0 " '$2 == L && index($0, r) {print $1; exit}')
  t2ns=$(date +%s%N)
  t2=$(echo "scale=9; $t2ns / 1000000000" | bc)
  kill -STOP "$stopped" 2>/dev/null
  stop_run=timeout
  kill -0 "$lpid" 2>/dev/null && stop_run=$(wait_workers $((N - 2)) "$dir/gen2" "$t2" 120)
  noticed_ns=$(grep -E '[ "]h0[ "]' "$dir/events.jsonl" | grep -v '"event":"start_workers"' |
    sed -n 's/.*"time_ns":\([0-9]*\).*/\1/p' | awk -v t="$t2ns" '$1 > t {print; exit}')
  stop_seen=$([ -n "$noticed_ns" ] && echo "scale=3; ($noticed_ns - $t2ns) / 1000000000" | bc || echo null)
  kill -CONT "$stopped" 2>/dev/null
  kill -0 "$lpid" 2>/dev/null || failed=true
  [ "$failed" = true ] && { echo "$N: the job ended during the recoveries (see $dir/out):"; tail -2 "$dir/out"; }

  printf '%-6s %9s %9s %9s %9s %11s %11s %11s %11s %9s %9s\n' "$N" "$launch" "$kill_run" "$stop_seen" "$stop_run" "$req_node" "$agent_req" "$agent_ms" "$launcher_ms" "$rss" "$pss"
  echo "  ($na agents idle for ${idle}s: the controller sent $ctl_req requests/s; load average $load, memory available ${mem_avail} GiB; logs in $dir)"
  num() { case $1 in timeout | null | '') echo null ;; .*) echo "0$1" ;; *) echo "$1" ;; esac; }
  points+=("$(printf '{"nodes": %d, "launch_s": %s, "kill_to_running_s": %s, "stop_noticed_s": %s, "stop_to_running_s": %s, "idle_requests_per_node_s": %s, "idle_agent_requests_s": %s, "idle_controller_requests_s": %s, "idle_agent_cpu_ms_s": %s, "idle_launcher_cpu_ms_s": %s, "agent_rss_mib": %s, "agent_pss_mib": %s, "load_average": %s, "failed": %s}' \
    "$N" "$(num "$launch")" "$(num "$kill_run")" "$(num "$stop_seen")" "$(num "$stop_run")" "$(num "$req_node")" "$(num "$agent_req")" "$(num "$ctl_req")" "$(num "$agent_ms")" "$(num "$launcher_ms")" "$(num "$rss")" "$(num "$pss")" "$load" "$failed")")
  cleanup
  [ "${KEEP_LOGS:-0}" = 1 ] || rm -rf "$dir"
  sleep 2
done

if [ -n "$JSON" ]; then
  {
    printf '{"machine": "%s", "date": "%s", "command": "bench/control_plane.sh %s", "commit": "%s", "points": [' \
      "$machine" "$date_now" "${SIZES[*]}" "$commit"
    sep=
    for p in "${points[@]}"; do printf '%s\n  %s' "$sep" "$p"; sep=,; done
    printf '\n]}\n'
  } >"$JSON"
  echo "wrote $JSON"
fi
