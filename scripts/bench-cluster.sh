#!/usr/bin/env bash
# bench-cluster.sh: a 3-node leasehold cluster (on each Raft log store:
# the default, raft-wal, and --raft-log-store bolt) side by side with a 3-node etcd cluster and
# a single leasehold, the cluster measurement of issue 15.
#
# Starts each system on free loopback ports with its own data directories,
# runs the same lock-cycle workload against each with scripts/clusterbench
# (leasehold: ACQUIRE then RELEASE; etcd: concurrency.Mutex Lock then
# Unlock), at -P 1 and -P 16, one system at a time, rotating which goes first
# each round; then kills the leader of each cluster (kill -9) FAILOVERS times
# and measures the time to the first lock granted through a survivor. Prints
# one table. Results go to bench-results/<timestamp>-cluster.{md,jsonl}, the
# servers' logs to <timestamp>-cluster.d/. See docs/performance.md, "Cluster".
#
# The clients talk to the leader (leasehold's followers answer -TRYAGAIN until
# they forward; etcd's client gets the leader's endpoint alone, so that
# neither side pays for a forward). The single node runs with --data-dir and
# --fsync always; etcd with its defaults (it fsyncs its WAL on every commit).
#
# Knobs (environment):
#   ROUNDS=3            rounds of the throughput rows, medians over them (QUICK: 1)
#   QUICK=1             small counts for a smoke run (< 1 minute)
#   CONNS=50            connections (etcd: gRPC clients, one session each)
#   PIPELINES="1 16"    cycles in flight per connection, one row each
#   CYCLE_SECS=5        seconds per cycle run (QUICK: 1)
#   FAILOVERS=5         leader kills per cluster (QUICK: 2)
#   FAILOVER_ETCD=1     0 skips etcd's failovers
#   ONLY                run only these sections, space- or comma-separated, of
#                       throughput failover; empty for both
#   STEP_TIMEOUT=120    seconds any one client command may take
#   BENCH_BUDGET        seconds the whole run may take (600; QUICK: 180)
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
	ROUNDS=${ROUNDS:-1}
	CYCLE_SECS=${CYCLE_SECS:-1}
	FAILOVERS=${FAILOVERS:-2}
	BENCH_BUDGET=${BENCH_BUDGET:-180}
else
	ROUNDS=${ROUNDS:-3}
	CYCLE_SECS=${CYCLE_SECS:-5}
	FAILOVERS=${FAILOVERS:-5}
	BENCH_BUDGET=${BENCH_BUDGET:-600}
fi
CONNS=${CONNS:-50}
PIPELINES=${PIPELINES:-1 16}
FAILOVER_ETCD=${FAILOVER_ETCD:-1}
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
ONLY=${ONLY:-}

LH_CLUSTER="leasehold, 3 nodes"
LH_BOLT="leasehold, 3 nodes, raft-boltdb"
LH_LIB="leasehold, 3 nodes, library cycle"
LH_SINGLE="leasehold, 1 node"
ETCD_CLUSTER="etcd, 3 nodes"

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() {
	log "bench-cluster: $*"
	exit 1
}

for w in ${ONLY//,/ }; do
	case $w in
	throughput | failover) ;;
	*) die "ONLY: unknown section $w (throughput failover)" ;;
	esac
done
section() {
	[ -n "$ONLY" ] || return 0
	[[ " ${ONLY//,/ } " == *" $1 "* ]]
}

budget() {
	if ((SECONDS > BENCH_BUDGET)); then
		die "over the budget of ${BENCH_BUDGET}s (BENCH_BUDGET); stopping"
	fi
}

OUT_DIR=bench-results
TS=$(date -u +%Y%m%dT%H%M%SZ)
WORK=$OUT_DIR/$TS-cluster.d
RAW=$OUT_DIR/$TS-cluster.jsonl
mkdir -p "$WORK"
: >"$RAW"

# ---- tools -----------------------------------------------------------------

if ! command -v etcd >/dev/null || ! command -v redis-cli >/dev/null; then
	log "installing etcd-server and redis-tools with apt-get"
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq etcd-server redis-tools
fi
log "building bin/leasehold, bin/loadgen and bin/clusterbench"
LH_VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
go build -ldflags "-X main.version=$LH_VERSION" -o bin/leasehold . # stamped as make build does
go build -o bin/loadgen ./scripts/loadgen
(cd scripts/clusterbench && go build -o ../../bin/clusterbench .)

# ---- processes ---------------------------------------------------------------

# Every server this script started and has not stopped yet, by pid.
declare -A LIVE=()

# gone PID: waits up to 5 s for a process to end. Servers are disowned when
# started, so that bash says nothing when one is killed: bash still reaps
# them, but `wait` cannot be used.
gone() {
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}

stop_pid() {
	local pid=$1
	[ -n "$pid" ] || return 0
	unset "LIVE[$pid]"
	kill -TERM "$pid" 2>/dev/null || return 0
	gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
	gone "$pid" || log "process $pid did not end"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local pid
	for pid in "${!LIVE[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		gone "$pid" || true
	done
	[ -z "${DATA:-}" ] || rm -rf "$DATA"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Every node's data directory, in one temporary directory removed on exit.
DATA=$(mktemp -d "${TMPDIR:-/tmp}/leasehold-bench-cluster.XXXXXX")

# started PID: remember a server for cleanup, and disown it (see gone).
started() {
	LIVE[$1]=1
	disown "$1"
}

freeport() { bin/loadgen freeport; }

# wait_ping PORT PID: until a leasehold answers PING, at most 10 s.
wait_ping() {
	local port=$1 pid=$2
	for _ in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || die "server on port $port exited; see $WORK"
		[ "$(redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null)" != PONG ] || return 0
		sleep 0.05
	done
	die "server on port $port did not answer PING within 10 s"
}

# cluster_role PORT: a leasehold node's cluster_role.
cluster_role() {
	redis-cli -h 127.0.0.1 -p "$1" CLUSTER INFO 2>/dev/null | tr -d '\r' | awk -F: '$1 == "cluster_role" {print $2}'
}

# The leasehold cluster: RESP ports, Raft ports and pids of n1..n3.
LH_PORT=() LH_RAFT=() LH_PID=()
SERVER_N=0

# The Raft log store of the cluster start_lh_cluster starts (--raft-log-store):
# wal, the default, but for the bolt rows.
LH_STORE=wal

# start_lh_node I [--bootstrap]
start_lh_node() {
	local i=$1
	shift
	SERVER_N=$((SERVER_N + 1))
	bin/leasehold serve --cluster --node-id "n$i" --raft-addr "127.0.0.1:${LH_RAFT[i]}" \
		--addr "127.0.0.1:${LH_PORT[i]}" --data-dir "$DATA/lh/n$i" --log-level warn \
		--raft-log-store "$LH_STORE" "$@" \
		>>"$WORK/leasehold-n$i.log" 2>&1 &
	LH_PID[i]=$!
	started "${LH_PID[i]}"
	wait_ping "${LH_PORT[i]}" "${LH_PID[i]}"
}

lh_addrs() { printf '127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s' "${LH_PORT[1]}" "${LH_PORT[2]}" "${LH_PORT[3]}"; }
lh_pids() { printf '%s,%s,%s' "${LH_PID[1]}" "${LH_PID[2]}" "${LH_PID[3]}"; }

# lh_leader: waits for the cluster to agree on a leader; sets LEADER (addr).
lh_leader() {
	LEADER=$(timeout "$STEP_TIMEOUT" bin/clusterbench leader -target leasehold -addrs "$(lh_addrs)") ||
		die "the leasehold cluster found no leader; see $WORK"
}

start_lh_cluster() {
	local i
	rm -rf "$DATA/lh"
	for i in 1 2 3; do
		LH_PORT[i]=$(freeport)
		LH_RAFT[i]=$(freeport)
	done
	start_lh_node 1 --bootstrap
	for _ in $(seq 200); do
		[ "$(cluster_role "${LH_PORT[1]}")" != leader ] || break
		sleep 0.05
	done
	[ "$(cluster_role "${LH_PORT[1]}")" = leader ] || die "n1 did not become leader within 10 s"
	for i in 2 3; do
		start_lh_node "$i"
		[ "$(redis-cli -h 127.0.0.1 -p "${LH_PORT[1]}" CLUSTER ADDNODE "n$i" "127.0.0.1:${LH_RAFT[i]}" | tr -d '\r')" = OK ] ||
			die "CLUSTER ADDNODE n$i failed"
	done
	lh_leader
	log "leasehold cluster: pids $(lh_pids) on $(lh_addrs), leader $LEADER"
}

stop_lh_cluster() {
	local i
	for i in 1 2 3; do stop_pid "${LH_PID[i]:-}"; done
	rm -rf "$DATA/lh"
}

# The etcd cluster: client ports, peer ports and pids of e1..e3.
ET_PORT=() ET_PEER=() ET_PID=()

start_etcd_node() {
	local i=$1 ic
	ic=$(printf 'e1=http://127.0.0.1:%s,e2=http://127.0.0.1:%s,e3=http://127.0.0.1:%s' "${ET_PEER[1]}" "${ET_PEER[2]}" "${ET_PEER[3]}")
	etcd --name "e$i" --data-dir "$DATA/etcd/e$i" \
		--listen-client-urls "http://127.0.0.1:${ET_PORT[i]}" --advertise-client-urls "http://127.0.0.1:${ET_PORT[i]}" \
		--listen-peer-urls "http://127.0.0.1:${ET_PEER[i]}" --initial-advertise-peer-urls "http://127.0.0.1:${ET_PEER[i]}" \
		--initial-cluster "$ic" --initial-cluster-state new --initial-cluster-token "bench-$TS" \
		--logger zap --log-level warn >>"$WORK/etcd-e$i.log" 2>&1 &
	ET_PID[i]=$!
	started "${ET_PID[i]}"
}

et_addrs() { printf '127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s' "${ET_PORT[1]}" "${ET_PORT[2]}" "${ET_PORT[3]}"; }
et_pids() { printf '%s,%s,%s' "${ET_PID[1]}" "${ET_PID[2]}" "${ET_PID[3]}"; }

et_leader() {
	LEADER=$(timeout "$STEP_TIMEOUT" bin/clusterbench leader -target etcd -addrs "$(et_addrs)") ||
		die "the etcd cluster found no leader; see $WORK"
}

start_etcd_cluster() {
	local i
	rm -rf "$DATA/etcd"
	for i in 1 2 3; do
		ET_PORT[i]=$(freeport)
		ET_PEER[i]=$(freeport)
	done
	for i in 1 2 3; do start_etcd_node "$i"; done
	et_leader
	log "etcd cluster: pids $(et_pids) on $(et_addrs), leader $LEADER"
}

stop_etcd_cluster() {
	local i
	for i in 1 2 3; do stop_pid "${ET_PID[i]:-}"; done
	rm -rf "$DATA/etcd"
}

SG_PORT='' SG_PID=''
start_single() {
	rm -rf "$DATA/single"
	SG_PORT=$(freeport)
	bin/leasehold serve --addr "127.0.0.1:$SG_PORT" --data-dir "$DATA/single" --fsync always --log-level warn \
		>>"$WORK/leasehold-single.log" 2>&1 &
	SG_PID=$!
	started "$SG_PID"
	wait_ping "$SG_PORT" "$SG_PID"
	log "leasehold single node: pid $SG_PID on 127.0.0.1:$SG_PORT"
}

stop_single() {
	stop_pid "$SG_PID"
	SG_PID=
	rm -rf "$DATA/single"
}

# ---- measuring ---------------------------------------------------------------

meta() { printf '{"mode":"meta","note":"%s"}\n' "${*//\"/\\\"}" >>"$RAW"; }

# cb ARGS...: bin/clusterbench, bounded by STEP_TIMEOUT; its line goes to RAW.
cb() {
	local out
	if ! out=$(timeout "$STEP_TIMEOUT" bin/clusterbench "$@"); then
		die "failed or timed out: clusterbench $* ($out)"
	fi
	printf '%s\n' "$out" >>"$RAW"
	OUT=$out
	budget
}

# cycles LABEL TARGET ADDR PIDS ROUND: the cycle rows of one system.
cycles() {
	local label=$1 tgt=$2 addr=$3 pids=$4 r=$5 p
	for p in $PIPELINES; do
		log "cycle -P $p: $label (round $r)"
		cb cycle -target "$tgt" -addr "$addr" -pids "$pids" -label "$label" \
			-c "$CONNS" -P "$p" -d "${CYCLE_SECS}s" -prefix "r${r}p$p:"
	done
}

# run_system NAME ROUND: start one system, measure it, stop it.
run_system() {
	case $1 in
	cluster)
		start_lh_cluster
		# With a Redis lock library's cycle (SET NX PX, EVALSHA release) on
		# the same cluster, each first in every other round.
		if (($2 % 2)); then
			cycles "$LH_CLUSTER" leasehold "$LEADER" "$(lh_pids)" "$2"
			cycles "$LH_LIB" leasehold-redis "$LEADER" "$(lh_pids)" "$2"
		else
			cycles "$LH_LIB" leasehold-redis "$LEADER" "$(lh_pids)" "$2"
			cycles "$LH_CLUSTER" leasehold "$LEADER" "$(lh_pids)" "$2"
		fi
		stop_lh_cluster
		;;
	bolt)
		LH_STORE=bolt
		start_lh_cluster
		cycles "$LH_BOLT" leasehold "$LEADER" "$(lh_pids)" "$2"
		stop_lh_cluster
		LH_STORE=wal
		;;
	etcd)
		start_etcd_cluster
		cycles "$ETCD_CLUSTER" etcd "$LEADER" "$(et_pids)" "$2"
		stop_etcd_cluster
		;;
	single)
		start_single
		cycles "$LH_SINGLE" leasehold "127.0.0.1:$SG_PORT" "$SG_PID" "$2"
		stop_single
		;;
	esac
}

# killed_pid: the process the last failover killed.
killed_pid() { grep -o '"killed_pid":[0-9]*' <<<"$OUT" | cut -d: -f2; }

# ---- context -----------------------------------------------------------------

meta "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
meta "machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -sr); shared and noisy: compare ratios within one run, not absolute numbers across runs"
meta "leasehold $LH_VERSION, $(go version | awk '{print $3}'); etcd $(etcd --version | awk '/^etcd Version/ {print $3}') (Debian etcd-server), client go.etcd.io/etcd/client/v3 $(cd scripts/clusterbench && go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3)"
meta "settings: ROUNDS=$ROUNDS CONNS=$CONNS PIPELINES=\"$PIPELINES\" CYCLE_SECS=$CYCLE_SECS FAILOVERS=$FAILOVERS QUICK=$QUICK; uncontended (1M keys); clients talk to the leader; server CPU is summed over the nodes; latency is per cycle (acquire sent to release answered)"

# ---- throughput --------------------------------------------------------------

if section throughput; then
	systems=(cluster bolt etcd single)
	for r in $(seq "$ROUNDS"); do
		for k in 0 1 2 3; do
			run_system "${systems[(r - 1 + k) % 4]}" "$r"
		done
	done
fi

# ---- failover ----------------------------------------------------------------

# lh_failovers: FAILOVERS leader kills, each followed by the killed node's
# restart and the cluster's agreement on a leader with every node caught up.
lh_failovers() {
	local k pid i
	start_lh_cluster
	for k in $(seq "$FAILOVERS"); do
		log "failover $k/$FAILOVERS: $LH_CLUSTER, killing the leader $LEADER"
		cb failover -target leasehold -addrs "$(lh_addrs)" -pids "$(lh_pids)" -label "$LH_CLUSTER"
		pid=$(killed_pid)
		for i in 1 2 3; do
			[ "${LH_PID[i]}" = "$pid" ] || continue
			unset "LIVE[$pid]"
			gone "$pid" || die "the killed process $pid did not end"
			start_lh_node "$i"
		done
		lh_leader
	done
	stop_lh_cluster
}

et_failovers() {
	local k pid i
	start_etcd_cluster
	for k in $(seq "$FAILOVERS"); do
		log "failover $k/$FAILOVERS: $ETCD_CLUSTER, killing the leader $LEADER"
		cb failover -target etcd -addrs "$(et_addrs)" -pids "$(et_pids)" -label "$ETCD_CLUSTER"
		pid=$(killed_pid)
		for i in 1 2 3; do
			[ "${ET_PID[i]}" = "$pid" ] || continue
			unset "LIVE[$pid]"
			gone "$pid" || die "the killed process $pid did not end"
			start_etcd_node "$i"
		done
		et_leader
	done
	stop_etcd_cluster
}

if section failover; then
	lh_failovers
	[ "$FAILOVER_ETCD" = 0 ] || et_failovers
fi

# ---- the table ---------------------------------------------------------------

log "done in ${SECONDS}s"
bin/clusterbench report -in "$RAW" -cluster "$LH_CLUSTER" -cluster-alt "$LH_BOLT" -cluster-lib "$LH_LIB" -etcd "$ETCD_CLUSTER" -single "$LH_SINGLE" | tee "$OUT_DIR/$TS-cluster.md"
log "wrote $OUT_DIR/$TS-cluster.{md,jsonl}, logs in $WORK/"
