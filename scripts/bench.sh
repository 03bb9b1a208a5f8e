#!/usr/bin/env bash
# bench.sh: leasehold side by side with Redis, the measurement of issue 3.
#
# Starts its own redis-server and its own leasehold on free loopback ports,
# runs the same workloads against both (redis-benchmark for single commands,
# scripts/loadgen for lock cycles, memory, expiry), alternating which server
# goes first each round, and prints one table. The durability section (issue 5)
# runs the lock cycle again against leasehold with --data-dir and each --fsync
# policy, and Redis with appendonly yes and the same appendfsync. Results go to
# bench-results/<timestamp>.{md,json,csv}, the raw records of every run to
# <timestamp>.raw.jsonl, and the servers' logs and loadgen's lines to
# <timestamp>.d/. See docs/performance.md for what each row means.
#
# Knobs (environment):
#   ROUNDS=3           A/B rounds of each throughput test (QUICK: 1)
#   QUICK=1            small counts for a smoke run (< 1 minute)
#   CONNS=50           client connections
#   N_P1, N_P16        redis-benchmark requests at -P 1 / -P 16 (200000 / 1000000)
#   CYCLE_SECS=5       seconds per loadgen cycle run
#   CONTENDED_KEYS=8   key space of the contended cycle
#   LEASES=1000000     leases for the memory and mass-expiry tests
#   EXPIRY_T_MS=8000   the mass-expiry window opens this long after its load starts
#   EXPIRY_REDIS=1     also run the mass expiry against Redis
#   LOADGEN_GOMAXPROCS=1  loadgen's GOMAXPROCS (1: one core, like redis-benchmark)
#   LH_ARGS            extra flags for every leasehold (e.g. "--io-loops 0")
#   LH_VARIANTS        ';'-separated leasehold set-ups for extra ACQUIRE rows: each
#                      is NAME=VALUE environment and serve flags
#                      (default "GOMAXPROCS=1;--io-loops 0;--io-loops 2"; "" for none)
#   DURABILITY=1       0 skips the durability section
#   FSYNC_POLICIES     the policies it runs, in order ("always everysec no")
#   DUR_SECS           seconds per durability cycle run (CYCLE_SECS; QUICK: 0.5)
#   ONLY               run only these sections, space- or comma-separated, of
#                      throughput variants lockstats memory expiry durability
#                      security (e.g. ONLY=durability); empty for all
#   STEP_TIMEOUT=180   seconds any one client command may take
#   BENCH_BUDGET       seconds the whole run may take (1800; QUICK: 240)
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
	ROUNDS=${ROUNDS:-1}
	N_P1=${N_P1:-20000}
	N_P16=${N_P16:-100000}
	CYCLE_SECS=${CYCLE_SECS:-1}
	LEASES=${LEASES:-100000}
	EXPIRY_T_MS=${EXPIRY_T_MS:-3000}
	IDLE_MS=${IDLE_MS:-500}
	DUR_SECS=${DUR_SECS:-0.5}
	BENCH_BUDGET=${BENCH_BUDGET:-240}
else
	ROUNDS=${ROUNDS:-3}
	N_P1=${N_P1:-200000}
	N_P16=${N_P16:-1000000}
	CYCLE_SECS=${CYCLE_SECS:-5}
	LEASES=${LEASES:-1000000}
	EXPIRY_T_MS=${EXPIRY_T_MS:-8000}
	IDLE_MS=${IDLE_MS:-2000}
	DUR_SECS=${DUR_SECS:-$CYCLE_SECS}
	BENCH_BUDGET=${BENCH_BUDGET:-1800}
fi
CONNS=${CONNS:-50}
CONTENDED_KEYS=${CONTENDED_KEYS:-8}
EXPIRY_REDIS=${EXPIRY_REDIS:-1}
LOADGEN_GOMAXPROCS=${LOADGEN_GOMAXPROCS:-1}
LH_ARGS=${LH_ARGS:-}
LH_VARIANTS=${LH_VARIANTS-GOMAXPROCS=1;--io-loops 0;--io-loops 2}
STEP_TIMEOUT=${STEP_TIMEOUT:-180}
DURABILITY=${DURABILITY:-1}
FSYNC_POLICIES=${FSYNC_POLICIES:-always everysec no}
ONLY=${ONLY:-}
EXPIRY_W_MS=1000
LOAD_TTL_MS=600000

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
die() {
	log "bench: $*"
	exit 1
}

for w in ${ONLY//,/ }; do
	case $w in
	throughput | variants | lockstats | memory | expiry | durability | security) ;;
	*) die "ONLY: unknown section $w (throughput variants lockstats memory expiry durability security)" ;;
	esac
done
for w in $FSYNC_POLICIES; do
	case $w in
	always | everysec | no) ;;
	*) die "FSYNC_POLICIES: unknown policy $w (always everysec no)" ;;
	esac
done
[[ $DUR_SECS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "DUR_SECS: not a number of seconds: $DUR_SECS"

# section NAME: whether this run includes section NAME (see ONLY).
section() {
	[ -n "$ONLY" ] || return 0
	[[ " ${ONLY//,/ } " == *" $1 "* ]]
}

OUT_DIR=bench-results
TS=$(date -u +%Y%m%dT%H%M%SZ)
WORK=$OUT_DIR/$TS.d
RAW=$OUT_DIR/$TS.raw.jsonl
mkdir -p "$WORK"
: >"$RAW"
CLK_TCK=$(getconf CLK_TCK)

# budget stops the run once it has taken BENCH_BUDGET seconds.
budget() {
	if ((SECONDS > BENCH_BUDGET)); then
		die "over the budget of ${BENCH_BUDGET}s (BENCH_BUDGET); stopping"
	fi
}

# ---- tools -----------------------------------------------------------------

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null || ! command -v redis-cli >/dev/null; then
	log "installing redis-server and redis-tools with apt-get"
	SUDO=
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server redis-tools
fi
log "building bin/leasehold and bin/loadgen"
# What was built: other work may change the tree later in the run.
LH_VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
go build -ldflags "-X main.version=$LH_VERSION" -o bin/leasehold . # stamped as make build does
go build -o bin/loadgen ./scripts/loadgen

# ---- servers ---------------------------------------------------------------

LH_PID='' LH_PORT='' RD_PID='' RD_PORT=''
DUR_DIR= # the durability section's data directories, removed on exit

stop_pid() {
	local pid=$1
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

stop_lh() {
	stop_pid "$LH_PID"
	LH_PID=
}
stop_rd() {
	stop_pid "$RD_PID"
	RD_PID=
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	# Background loadgen helpers of the expiry test, if any are left.
	for p in $(jobs -p); do
		if [ "$p" != "$LH_PID" ] && [ "$p" != "$RD_PID" ]; then
			kill "$p" 2>/dev/null || true
		fi
	done
	stop_lh
	stop_rd
	[ -z "$DUR_DIR" ] || rm -rf "$DUR_DIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_ready PORT PID: until the server answers PING, at most 10 s.
wait_ready() {
	local port=$1 pid=$2
	for _ in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || die "server on port $port exited; see $WORK"
		if [ "$(redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null)" = PONG ]; then
			return 0
		fi
		sleep 0.05
	done
	die "server on port $port did not answer PING within 10 s"
}

SERVER_N=0
# start_lh [SPEC]: a fresh leasehold. SPEC is words: NAME=VALUE sets its
# environment (GOMAXPROCS=1), anything else is a serve flag (--io-loops 0).
start_lh() {
	local spec=${1:-} w envs=() args=()
	for w in $spec; do
		if [[ $w == *=* && $w != -* ]]; then envs+=("$w"); else args+=("$w"); fi
	done
	stop_lh
	LH_PORT=$(bin/loadgen freeport)
	SERVER_N=$((SERVER_N + 1))
	# shellcheck disable=SC2086 # LH_ARGS is words
	env "${envs[@]}" bin/leasehold serve --addr "127.0.0.1:$LH_PORT" --log-level warn $LH_ARGS "${args[@]}" \
		>"$WORK/leasehold-$SERVER_N.log" 2>&1 &
	LH_PID=$!
	wait_ready "$LH_PORT" "$LH_PID"
	log "leasehold pid $LH_PID on 127.0.0.1:$LH_PORT${spec:+ ($spec)}"
}

# start_rd [ARGS...]: a fresh redis-server without persistence, or with ARGS
# in place of --appendonly no (e.g. --appendonly yes --appendfsync always --dir D;
# it chdirs into D, hence the absolute log file).
start_rd() {
	local persist=(--appendonly no)
	[ $# = 0 ] || persist=("$@")
	stop_rd
	RD_PORT=$(bin/loadgen freeport)
	SERVER_N=$((SERVER_N + 1))
	redis-server --save "" "${persist[@]}" --bind 127.0.0.1 --port "$RD_PORT" --daemonize no \
		--logfile "$PWD/$WORK/redis-$SERVER_N.log" >/dev/null 2>&1 &
	RD_PID=$!
	wait_ready "$RD_PORT" "$RD_PID"
	log "redis-server pid $RD_PID on 127.0.0.1:$RD_PORT${1:+ ($*)}"
}

# port_of / pid_of TARGET
port_of() { if [ "$1" = redis ]; then echo "$RD_PORT"; else echo "$LH_PORT"; fi; }
pid_of() { if [ "$1" = redis ]; then echo "$RD_PID"; else echo "$LH_PID"; fi; }

# ---- measuring -------------------------------------------------------------

# cpu_ticks PID: the process's user+system CPU so far, in clock ticks.
cpu_ticks() {
	local line rest
	read -r line <"/proc/$1/stat"
	rest=${line##*) } # the command name may hold spaces; skip past it
	read -ra f <<<"$rest"
	echo $((f[11] + f[12]))
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# info_field PORT SECTION FIELD
info_field() {
	redis-cli -h 127.0.0.1 -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f {print $2}'
}

# children_cpu: the CPU of every waited-for child so far, "user sys" as bash's
# times prints them (1m2.345s). Runs in this shell, not a subshell, so that it
# sees this shell's children.
CHILD_CPU=
children_cpu() {
	times >"$WORK/times"
	local u s
	{
		read -r _ _
		read -r u s
	} <"$WORK/times"
	CHILD_CPU="$u $s"
}

# cpu_delta "U0 S0" "U1 S1": seconds between two children_cpu readings.
cpu_delta() {
	awk -v a="$1" -v b="$2" 'function s(t, p) { split(t, p, /[ms]/); return p[1] * 60 + p[2] }
		BEGIN { split(a, x, " "); split(b, y, " "); printf "%.3f", s(y[1]) + s(y[2]) - s(x[1]) - s(x[2]) }'
}

# calc EXPR: floating-point arithmetic.
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }

# json_str S: S as a JSON string body.
json_str() {
	local v=$1
	v=${v//\\/\\\\}
	v=${v//\"/\\\"}
	printf '%s' "$v"
}

# rec KEY=VALUE...: one record for loadgen report. test, target, unit, goal,
# derive and note are strings; the rest are numbers, left out when empty.
rec() {
	local out="" kv k v
	for kv in "$@"; do
		k=${kv%%=*}
		v=${kv#*=}
		case $k in
		test | target | unit | goal | derive | note) v="\"$(json_str "$v")\"" ;;
		*) [ -n "$v" ] || continue ;;
		esac
		out+="${out:+,}\"$k\":$v"
	done
	printf '{%s}\n' "$out" >>"$RAW"
}

meta() { rec target=meta "note=$*"; }

# leasehold's garbage collector so far: "cycles pause_ns".
gc_stats() {
	local info
	info=$(redis-cli -h 127.0.0.1 -p "$LH_PORT" INFO memory | tr -d '\r')
	awk -F: '$1 == "gc_cycles" {c = $2} $1 == "gc_pause_total_ns" {p = $2} END {print c + 0, p + 0}' <<<"$info"
}

GC_CYCLES='' GC_PAUSE_MS=''
# measure TARGET CMD...: runs a client command, bounded by STEP_TIMEOUT, and
# sets OUT (its stdout), SRV_CPU and CLI_CPU (seconds), and for leasehold
# GC_CYCLES and GC_PAUSE_MS over the run.
measure() {
	local tgt=$1 pid g0 g1 s0 s1 c0
	shift
	pid=$(pid_of "$tgt")
	GC_CYCLES='' GC_PAUSE_MS=''
	[ "$tgt" = redis ] || g0=$(gc_stats)
	s0=$(cpu_ticks "$pid")
	children_cpu
	c0=$CHILD_CPU
	if ! OUT=$(timeout "$STEP_TIMEOUT" "$@"); then
		die "failed or timed out: $* ($OUT)"
	fi
	children_cpu
	s1=$(cpu_ticks "$pid")
	CLI_CPU=$(cpu_delta "$c0" "$CHILD_CPU")
	SRV_CPU=$(calc "($s1 - $s0) / $CLK_TCK")
	if [ "$tgt" != redis ]; then
		g1=$(gc_stats)
		read -r gc0 gp0 <<<"$g0"
		read -r gc1 gp1 <<<"$g1"
		GC_CYCLES=$((gc1 - gc0))
		GC_PAUSE_MS=$(calc "($gp1 - $gp0) / 1e6")
	fi
	budget
}

# rb TEST TARGET ROUND P N GOAL CMD...: one redis-benchmark run, on the
# server's plain port, or with RB_TLS=1 on its TLS port with RB_ARGS (the
# security section's).
RB_TLS=0 RB_ARGS=()
rb() {
	local test=$1 tgt=$2 round=$3 p=$4 n=$5 goal=$6 line rps p50 p99 port
	shift 6
	log "$test: $tgt (round $round)"
	port=$(port_of "$tgt")
	[ "$RB_TLS" = 0 ] || port=$(tls_port_of "$tgt")
	measure "$tgt" redis-benchmark -h 127.0.0.1 -p "$port" -c "$CONNS" -P "$p" -n "$n" -r 1000000 --csv ${RB_ARGS[@]+"${RB_ARGS[@]}"} "$@"
	line=$(tail -n 1 <<<"$OUT" | tr -d '"')
	IFS=, read -r _ rps _ _ p50 _ p99 _ <<<"$line"
	[[ $rps =~ ^[0-9.]+$ ]] || die "cannot read redis-benchmark's CSV: $OUT"
	rec "test=$test" "target=$tgt" "round=$round" "goal=$goal" "value=$rps" "p50_ms=$p50" "p99_ms=$p99" \
		"ops=$n" "srv_cpu_s=$SRV_CPU" "cli_cpu_s=$CLI_CPU" "gc_cycles=$GC_CYCLES" "gc_pause_ms=$GC_PAUSE_MS"
}

# loadgen TARGET MODE ARGS...: bin/loadgen on one core (LOADGEN_GOMAXPROCS);
# its JSON line goes to OUT and to $WORK/loadgen.jsonl. LOADGEN_PROTO=redis
# has it send Redis's lock commands (SET NX PX, the release by EVALSHA)
# whatever the target: a Redis lock library's cycle, run on leasehold too.
loadgen() {
	local tgt=$1 mode=$2
	shift 2
	measure "$tgt" env GOMAXPROCS="$LOADGEN_GOMAXPROCS" bin/loadgen "$mode" -target "${LOADGEN_PROTO:-$tgt}" -addr "127.0.0.1:$(port_of "$tgt")" "$@"
	printf '%s\n' "$OUT" >>"$WORK/loadgen.jsonl"
}

# field NAME...: fields of loadgen's last line, space-separated.
field() { bin/loadgen field "$@" <<<"$OUT" | paste -sd' '; }

# cycle TEST TARGET ROUND P KEYS GOAL: one loadgen lock-cycle run.
cycle() {
	local test=$1 tgt=$2 round=$3 p=$4 keys=$5 goal=$6 cps cycles p50 p99
	log "$test: $tgt (round $round)"
	loadgen "$tgt" cycle -c "$CONNS" -P "$p" -keys "$keys" -d "${CYCLE_SECS}s"
	read -r cps cycles p50 p99 <<<"$(field cycles_per_s cycles latency.p50_ms latency.p99_ms)"
	rec "test=$test" "target=$tgt" "round=$round" "goal=$goal" "value=$cps" "p50_ms=$p50" "p99_ms=$p99" \
		"ops=$cycles" "srv_cpu_s=$SRV_CPU" "cli_cpu_s=$CLI_CPU" "gc_cycles=$GC_CYCLES" "gc_pause_ms=$GC_PAUSE_MS"
}

# order ROUND: the targets in this round's order, alternating who goes first.
order() { if (($1 % 2)); then echo "leasehold redis"; else echo "redis leasehold"; fi; }

# acquire_rows ROUND LABEL-SUFFIX KEYPREFIX: ACQUIRE vs SET NX PX at -P 1 and 16.
acquire_rows() {
	local r=$1 suffix=$2 prefix=$3 tgt
	for tgt in $(order "$r"); do
		if [ "$tgt" = redis ]; then
			rb "ACQUIRE vs SET NX PX, -P1$suffix" redis "$r" 1 "$N_P1" "ratio>=1.0" SET "${prefix}__rand_int__" v NX PX 30000
		else
			rb "ACQUIRE vs SET NX PX, -P1$suffix" leasehold "$r" 1 "$N_P1" "ratio>=1.0" ACQUIRE "${prefix}__rand_int__" 30000
		fi
	done
	for tgt in $(order "$r"); do
		if [ "$tgt" = redis ]; then
			rb "ACQUIRE vs SET NX PX, -P16$suffix" redis "$r" 16 "$N_P16" "ratio>=1.3" SET "${prefix}__rand_int__" v NX PX 30000
		else
			rb "ACQUIRE vs SET NX PX, -P16$suffix" leasehold "$r" 16 "$N_P16" "ratio>=1.3" ACQUIRE "${prefix}__rand_int__" 30000
		fi
	done
}

# ---- context ---------------------------------------------------------------

meta "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
meta "machine: $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(uname -sr); shared and noisy: compare ratios within one run, not absolute numbers across runs"
meta "leasehold $LH_VERSION, $(go version | awk '{print $3}'); $(redis-server --version | awk '{print $1, $2, $3}')"
meta "settings: ROUNDS=$ROUNDS CONNS=$CONNS N_P1=$N_P1 N_P16=$N_P16 CYCLE_SECS=$CYCLE_SECS LEASES=$LEASES QUICK=$QUICK LOADGEN_GOMAXPROCS=$LOADGEN_GOMAXPROCS LH_ARGS=\"$LH_ARGS\" ONLY=\"$ONLY\" DURABILITY=$DURABILITY FSYNC_POLICIES=\"$FSYNC_POLICIES\" DUR_SECS=$DUR_SECS; leasehold runs with its default flags and Go's default GOMAXPROCS (${GOMAXPROCS:-$(nproc)}) unless a row says otherwise; medians over rounds; CPU is per operation (per cycle for cycle rows)"

# ---- throughput, alternating A/B -------------------------------------------

# Each round gets a fresh pair of servers: otherwise a round runs while the
# previous round's leases (30 s) expire, and round 1 alone grows the table
# from empty, so the rounds would not measure the same thing.
fresh_pair() {
	start_lh "${1:-}"
	start_rd
}

if section throughput; then
	for r in $(seq "$ROUNDS"); do
		fresh_pair
		acquire_rows "$r" "" "lock:r$r:"
		for p in 1 16; do
			n=$N_P1
			[ "$p" = 1 ] || n=$N_P16
			for tgt in $(order "$r"); do
				rb "PING, -P$p" "$tgt" "$r" "$p" "$n" "" PING
			done
		done
		for p in 1 16; do
			for tgt in $(order "$r"); do
				cycle "cycle uncontended (1M keys), -P$p" "$tgt" "$r" "$p" 1000000 "ratio>=1.5"
			done
		done
		for p in 1 16; do
			for tgt in $(order "$r"); do
				cycle "cycle contended ($CONTENDED_KEYS keys), -P$p" "$tgt" "$r" "$p" "$CONTENDED_KEYS" "ratio>=1.5"
			done
		done
		# The lock libraries' cycle, the same commands to both servers:
		# SET NX PX, then the compare-and-delete release by EVALSHA.
		for p in 1 16; do
			goal="ratio>=1.0"
			[ "$p" = 1 ] || goal="ratio>=1.5"
			for tgt in $(order "$r"); do
				LOADGEN_PROTO=redis cycle "library cycle (SET NX PX + EVALSHA release, 1M keys), -P$p" "$tgt" "$r" "$p" 1000000 "$goal"
			done
		done
	done
	for p in 1 16; do
		rec "test=ACQUIRE / PING, -P$p (SET / PING for redis)" target=leasehold "derive=ACQUIRE vs SET NX PX, -P$p/PING, -P$p" "goal=value>=0.9"
	done
fi

# ---- leasehold set-ups: GOMAXPROCS, transports -------------------------------

if section variants; then
	v=0
	IFS=';' read -ra variants <<<"$LH_VARIANTS"
	for spec in "${variants[@]}"; do
		[ -n "${spec// /}" ] || continue
		v=$((v + 1))
		for r in $(seq "$ROUNDS"); do
			fresh_pair "$spec"
			acquire_rows "$r" ", leasehold $spec" "lock:v${v}r$r:"
		done
	done
fi

# ---- the contention statistics' cost: on (the default) against off ----------

# leasehold with lock statistics on (--lockstats-top 100, the default, given
# so that the rows measure it whatever the default) against
# --lockstats-top 0, on a million random keys (each seen about once: the
# workload where a heavy-hitters sketch has the most to do), each round a
# fresh server for each, the order alternating. The derived rows are the
# throughput with statistics over without (issue 27 asks >= 0.97).
if section lockstats; then
	for r in $(seq "$ROUNDS"); do
		if ((r % 2)); then specs=(on off); else specs=(off on); fi
		for st in "${specs[@]}"; do
			if [ "$st" = on ]; then start_lh "--lockstats-top 100"; else start_lh "--lockstats-top 0"; fi
			rb "ACQUIRE, -P16, lockstats $st" leasehold "$r" 16 "$N_P16" "" ACQUIRE "lock:s$r:__rand_int__" 30000
			cycle "cycle uncontended (1M keys), -P16, lockstats $st" leasehold "$r" 16 1000000 ""
		done
	done
	for t in "ACQUIRE, -P16" "cycle uncontended (1M keys), -P16"; do
		rec "test=lockstats on / off: $t" target=leasehold "derive=$t, lockstats on/$t, lockstats off" "goal=value>=0.97"
	done
fi

# ---- memory with LEASES live leases, then p99 and GC with them live ------------

if section memory; then
	log "memory: fresh servers, $LEASES leases of ${LOAD_TTL_MS} ms each"
	start_lh
	start_rd
	sleep 1
	lh_rss0=$(rss_kb "$LH_PID")
	lh_heap0=$(info_field "$LH_PORT" memory used_memory)
	rd_rss0=$(rss_kb "$RD_PID")
	rd_used0=$(info_field "$RD_PORT" memory used_memory)
	for tgt in leasehold redis; do
		loadgen "$tgt" load -m "$LEASES" -ttl "$LOAD_TTL_MS"
		read -r rate granted <<<"$(field load_per_s granted)"
		[ "$granted" = "$LEASES" ] || die "$tgt granted $granted of $LEASES leases"
		rec "test=load $LEASES leases (4 conns, -P512)" "target=$tgt" round=1 "value=$rate" "ops=$LEASES" \
			"srv_cpu_s=$SRV_CPU" "cli_cpu_s=$CLI_CPU"
	done
	sleep 1
	lh_rss1=$(rss_kb "$LH_PID")
	lh_heap1=$(info_field "$LH_PORT" memory used_memory)
	rd_rss1=$(rss_kb "$RD_PID")
	rd_used1=$(info_field "$RD_PORT" memory used_memory)
	rec "test=memory: RSS per live lease" target=leasehold round=1 unit=B "goal=ratio<=0.75" \
		"value=$(calc "($lh_rss1 - $lh_rss0) * 1024 / $LEASES")" "note=RSS $lh_rss0 -> $lh_rss1 kB (leasehold), $rd_rss0 -> $rd_rss1 kB (redis)"
	rec "test=memory: RSS per live lease" target=redis round=1 unit=B "value=$(calc "($rd_rss1 - $rd_rss0) * 1024 / $LEASES")"
	rec "test=memory: used_memory per live lease" target=leasehold round=1 unit=B "goal=ratio<=0.75" \
		"value=$(calc "($lh_heap1 - $lh_heap0) / $LEASES")" "note=leasehold used_memory is the Go heap in use (HeapAlloc); redis's is its allocator's"
	rec "test=memory: used_memory per live lease" target=redis round=1 unit=B "value=$(calc "($rd_used1 - $rd_used0) / $LEASES")"

	# At -P 1 the saturated client decides the tail; at -P 16 the server's
	# work per batch shows, so both are measured with the leases live.
	for r in $(seq "$ROUNDS"); do
		for p in 1 16; do
			n=$N_P1
			[ "$p" = 1 ] || n=$N_P16
			for tgt in $(order "$r"); do
				if [ "$tgt" = redis ]; then
					rb "ACQUIRE vs SET NX PX, -P$p, $LEASES live leases" redis "$r" "$p" "$n" "p99ratio<=1.0" SET "live:p${p}r$r:__rand_int__" v NX PX 30000
				else
					rb "ACQUIRE vs SET NX PX, -P$p, $LEASES live leases" leasehold "$r" "$p" "$n" "p99ratio<=1.0" ACQUIRE "live:p${p}r$r:__rand_int__" 30000
					rec "test=GC cycles in that leasehold run, -P$p" target=leasehold "round=$r" unit=count "value=$GC_CYCLES"
					rec "test=GC pause total in that leasehold run, -P$p" target=leasehold "round=$r" unit=ms "value=$GC_PAUSE_MS"
				fi
			done
		done
	done
fi

# ---- mass expiry -----------------------------------------------------------

EXP_IDLE="mass expiry: probe p99, idle ($LEASES live)"
EXP_DURING="mass expiry: probe p99, during"
EXP_LATE="mass expiry: last lease reclaimed, ms after the last deadline"

# expiry_load TARGET: a fresh server holding LEASES leases whose deadlines are
# spread over EXPIRY_W_MS, starting EXPIRY_T_MS after the load starts. Sets
# WINDOW (its start, Unix ms) and LAST (the last deadline, Unix ms, at most).
expiry_load() {
	local tgt=$1 at late_sent now
	if [ "$tgt" = redis ]; then start_rd; else start_lh; fi
	at=$(date +%s%3N)
	WINDOW=$((at + EXPIRY_T_MS))
	loadgen "$tgt" load -m "$LEASES" -at "$at" -t "$EXPIRY_T_MS" -w "$EXPIRY_W_MS"
	read -r LAST late_sent <<<"$(field last_deadline_high_ms late)"
	[ "$late_sent" = 0 ] || die "the load ran past the window; raise EXPIRY_T_MS"
	now=$(date +%s%3N)
	((now + IDLE_MS + 300 < WINDOW)) || die "the load took too long ($((now - at)) ms) for an idle probe before the window; raise EXPIRY_T_MS"
}

# lg_timed TARGET MODE ARGS...: loadgen without CPU accounting (in the expiry
# window only timing matters); its line goes to OUT_FILE and OUT.
lg_timed() {
	local tgt=$1 mode=$2
	shift 2
	env GOMAXPROCS="$LOADGEN_GOMAXPROCS" timeout "$STEP_TIMEOUT" bin/loadgen "$mode" -target "$tgt" \
		-addr "127.0.0.1:$(port_of "$tgt")" "$@" >"$OUT_FILE"
	OUT=$(cat "$OUT_FILE")
	printf '%s\n' "$OUT" >>"$WORK/loadgen.jsonl"
}

# expiry TARGET: two passes on fresh servers. The first probes latency idle
# (just before the window) and during it; the second polls the live count
# every 10 ms until 0. They are apart because the poll (INFO) is itself a
# command that the expiry can slow, and would disturb the probe.
expiry() {
	local tgt=$1 p50 p99 zero tick late goal maxpoll
	log "mass expiry, latency pass: $tgt, $LEASES leases due within ${EXPIRY_W_MS} ms"
	expiry_load "$tgt"
	OUT_FILE=$WORK/probe-idle-$tgt.json lg_timed "$tgt" probe -start "$((WINDOW - IDLE_MS - 300))" -d "${IDLE_MS}ms"
	read -r p50 p99 <<<"$(field latency.p50_ms latency.p99_ms)"
	rec "test=$EXP_IDLE" "target=$tgt" round=1 unit=ms "value=$p99" "p50_ms=$p50" "p99_ms=$p99"
	OUT_FILE=$WORK/probe-during-$tgt.json lg_timed "$tgt" probe -start "$WINDOW" -d "$((EXPIRY_W_MS + 500))ms"
	read -r p50 p99 <<<"$(field latency.p50_ms latency.p99_ms)"
	rec "test=$EXP_DURING" "target=$tgt" round=1 unit=ms "value=$p99" "p50_ms=$p50" "p99_ms=$p99"
	budget

	log "mass expiry, reclaim pass: $tgt"
	expiry_load "$tgt"
	OUT_FILE=$WORK/watch-$tgt.json lg_timed "$tgt" watch -start "$WINDOW" -interval 10ms -timeout 30s
	read -r zero maxpoll <<<"$(field zero_at_ms max_poll_ms)"
	tick=$(field wheel_tick_ms 2>/dev/null || true)
	if [ "$zero" = 0 ]; then
		rec "test=$EXP_LATE" "target=$tgt" round=1 unit=ms "note=$tgt still held leases 30 s after the window opened"
	else
		late=$((zero - LAST))
		goal=
		[ -z "$tick" ] || goal="value<=$((2 * tick))"
		rec "test=$EXP_LATE" "target=$tgt" round=1 unit=ms "goal=$goal" "value=$late"
		rec "test=mass expiry: slowest INFO poll during it" "target=$tgt" round=1 unit=ms "value=$maxpoll"
	fi
	budget
}
if section expiry; then
	expiry leasehold
	stop_lh
	if [ "$EXPIRY_REDIS" = 1 ]; then
		expiry redis
	fi
	stop_rd
	rec "test=mass expiry: probe p99 during / idle" target=leasehold "derive=$EXP_DURING/$EXP_IDLE" "goal=value<=2"
fi

# ---- durability: each fsync policy against Redis's AOF (issue 5) -----------

# lh_persist: leasehold's INFO persistence as
# "fsyncs fsync_avg_us compactions aof_current_size".
lh_persist() {
	redis-cli -h 127.0.0.1 -p "$LH_PORT" INFO persistence | tr -d '\r' |
		awk -F: '{ v[$1] = $2 } END { print v["fsyncs"] + 0, v["fsync_avg_us"] + 0, v["compactions"] + 0, v["aof_current_size"] + 0 }'
}

# rd_persist: redis's INFO persistence as "aof_rewrites aof_delayed_fsync
# aof_current_size busy" (busy: 1 while a rewrite runs or is scheduled).
rd_persist() {
	redis-cli -h 127.0.0.1 -p "$RD_PORT" INFO persistence | tr -d '\r' |
		awk -F: '{ v[$1] = $2 } END { print v["aof_rewrites"] + 0, v["aof_delayed_fsync"] + 0, v["aof_current_size"] + 0,
			(v["aof_rewrite_in_progress"] + v["aof_rewrite_scheduled"] > 0) }'
}

# dur_cycle TEST TARGET ROUND P: one uncontended loadgen lock-cycle run of
# DUR_SECS against a persistent server. Its record also holds what the run
# did to the log: for leasehold fsyncs, fsync_us (their total time, from
# fsyncs × fsync_avg_us before and after, so within a µs per fsync),
# compactions; for redis aof_rewrites, aof_delayed_fsync; log_bytes for both
# when no compaction or rewrite ran meanwhile. DSUM[TARGET,P,FIELD] adds them
# up over rounds.
declare -A DSUM=()
dur_cycle() {
	local test=$1 tgt=$2 round=$3 p=$4 a b cps cycles p50 p99 bytes='' kv k
	local extra=()
	log "$test: $tgt (round $round)"
	if [ "$tgt" = redis ]; then a=$(rd_persist); else a=$(lh_persist); fi
	loadgen "$tgt" cycle -c "$CONNS" -P "$p" -keys 1000000 -d "${DUR_SECS}s"
	if [ "$tgt" = redis ]; then b=$(rd_persist); else b=$(lh_persist); fi
	read -r cps cycles p50 p99 <<<"$(field cycles_per_s cycles latency.p50_ms latency.p99_ms)"
	if [ "$tgt" = redis ]; then
		local rw0 df0 sz0 rw1 df1 sz1 busy
		read -r rw0 df0 sz0 _ <<<"$a"
		read -r rw1 df1 sz1 busy <<<"$b"
		((rw1 != rw0 || busy || sz1 < sz0)) || bytes=$((sz1 - sz0))
		extra=("aof_rewrites=$((rw1 - rw0))" "aof_delayed_fsync=$((df1 - df0))")
	else
		local f0 av0 c0 sz0 f1 av1 c1 sz1
		read -r f0 av0 c0 sz0 <<<"$a"
		read -r f1 av1 c1 sz1 <<<"$b"
		((c1 != c0 || sz1 < sz0)) || bytes=$((sz1 - sz0))
		extra=("fsyncs=$((f1 - f0))" "fsync_us=$((f1 * av1 - f0 * av0))" "compactions=$((c1 - c0))")
	fi
	[ -z "$bytes" ] || extra+=("log_bytes=$bytes" "log_cycles=$cycles")
	rec "test=$test" "target=$tgt" "round=$round" "value=$cps" "p50_ms=$p50" "p99_ms=$p99" \
		"ops=$cycles" "srv_cpu_s=$SRV_CPU" "cli_cpu_s=$CLI_CPU" "gc_cycles=$GC_CYCLES" "gc_pause_ms=$GC_PAUSE_MS" "${extra[@]}"
	extra+=("cycles=$cycles" "runs=1")
	for kv in "${extra[@]}"; do
		k=$tgt,$p,${kv%%=*}
		DSUM[$k]=$((${DSUM[$k]:-0} + ${kv#*=}))
	done
}

# dur_note P: a note on the row at pipeline depth P, from DSUM.
dur_note() {
	local p=$1 t f out=() v
	for t in leasehold redis; do
		for f in cycles runs fsyncs fsync_us compactions aof_rewrites aof_delayed_fsync log_bytes log_cycles; do
			v=${DSUM[$t,$p,$f]:-0}
			out+=("$v")
		done
	done
	awk -v s="${out[*]}" 'function per(a, b, fmt) { return b > 0 ? sprintf(fmt, a / b) : "-" }
		BEGIN {
			split(s, v, " ")
			# leasehold: v[1..9], redis: v[10..18], in the order of the fields above
			if (v[3] == 0)
				printf "leasehold: no fsync"
			else
				printf "leasehold: %d fsync%s (%s cycles per fsync, %s µs each on average)",
					v[3], v[3] == 1 ? "" : "s", per(v[1], v[3], "%.1f"), per(v[4], v[3], "%.0f")
			printf ", %s B of log per cycle, %d compactions; ", per(v[8], v[9], "%.0f"), v[5]
			printf "redis: %s B of AOF per cycle, %d AOF rewrites, aof_delayed_fsync %d; ",
				per(v[17], v[18], "%.0f"), v[15], v[16]
			printf "sums over %d leasehold and %d redis runs", v[2], v[11]
		}'
}

if section durability && [ "$DURABILITY" = 1 ]; then
	DUR_DIR=$PWD/$WORK/durability
	for pol in $FSYNC_POLICIES; do
		log "durability: leasehold --fsync $pol, redis appendonly yes, appendfsync $pol"
		rm -rf "$DUR_DIR"
		mkdir -p "$DUR_DIR/leasehold" "$DUR_DIR/redis"
		# start_lh splits its spec into words: the repository path must hold no space.
		start_lh "--data-dir $DUR_DIR/leasehold --fsync $pol"
		start_rd --appendonly yes --appendfsync "$pol" --dir "$DUR_DIR/redis"
		DSUM=()
		for r in $(seq "$ROUNDS"); do
			for p in 1 16; do
				for tgt in $(order "$r"); do
					dur_cycle "cycle uncontended (1M keys), -P$p, fsync $pol" "$tgt" "$r" "$p"
				done
			done
		done
		for p in 1 16; do
			rec "test=cycle uncontended (1M keys), -P$p, fsync $pol" target=leasehold "round=$ROUNDS" "note=$(dur_note "$p")"
		done
		meta "durability, fsync $pol: leasehold INFO persistence after its runs: $(redis-cli -h 127.0.0.1 -p "$LH_PORT" INFO persistence |
			tr -d '\r' | grep -E '^(fsync|fsyncs|fsync_avg_us|compactions|aof_current_size|snapshot_size):' | paste -sd' ')"
		meta "durability, fsync $pol: redis INFO persistence after its runs: $(redis-cli -h 127.0.0.1 -p "$RD_PORT" INFO persistence |
			tr -d '\r' | grep -E '^(aof_rewrites|aof_delayed_fsync|aof_current_size|aof_base_size|aof_last_write_status):' | paste -sd' ')"
		stop_lh
		stop_rd
		rm -rf "$DUR_DIR"
		budget
	done
	DUR_DIR=
fi

# ---- security: TLS and AUTH, against Redis's (issue 14) ----------------------

# tls_port_of TARGET: the security section's TLS ports.
LH_TLS_PORT='' RD_TLS_PORT=''
tls_port_of() { if [ "$1" = redis ]; then echo "$RD_TLS_PORT"; else echo "$LH_TLS_PORT"; fi; }

# make_certs DIR: a CA, a server certificate for 127.0.0.1 and a client
# certificate, as Redis's utils/gen-test-certs.sh makes them; both servers
# get the same files.
make_certs() {
	local d=$1
	mkdir -p "$d"
	openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$d/ca.key" \
		-sha256 -days 2 -subj "/CN=bench CA" -out "$d/ca.crt" 2>/dev/null
	local who
	for who in server client; do
		openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$d/$who.key" \
			-subj "/CN=bench $who" -out "$d/$who.csr" 2>/dev/null
		openssl x509 -req -in "$d/$who.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 -sha256 \
			-extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n') -out "$d/$who.crt" 2>/dev/null
	done
}

if section security; then
	command -v openssl >/dev/null || die "the security section needs openssl to make its certificates"
	CERTS=$PWD/$WORK/certs
	make_certs "$CERTS"
	for r in $(seq "$ROUNDS"); do
		LH_TLS_PORT=$(bin/loadgen freeport)
		start_lh "--tls-port $LH_TLS_PORT --tls-cert-file $CERTS/server.crt --tls-key-file $CERTS/server.key --tls-ca-cert-file $CERTS/ca.crt"
		RD_TLS_PORT=$(bin/loadgen freeport)
		start_rd --appendonly no --tls-port "$RD_TLS_PORT" --tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key" --tls-ca-cert-file "$CERTS/ca.crt"
		RB_TLS=1 RB_ARGS=(--tls --cacert "$CERTS/ca.crt" --cert "$CERTS/client.crt" --key "$CERTS/client.key")
		acquire_rows "$r" ", TLS" "tls:r$r:"
		RB_TLS=0 RB_ARGS=()
	done
	# The servers' INFO and wait_ready's PING authenticate from here on.
	export REDISCLI_AUTH=bench-password
	printf '%s\n' "$REDISCLI_AUTH" >"$CERTS/password"
	for r in $(seq "$ROUNDS"); do
		start_lh "--requirepass-file $CERTS/password"
		start_rd --appendonly no --requirepass "$REDISCLI_AUTH"
		RB_ARGS=(-a "$REDISCLI_AUTH")
		acquire_rows "$r" ", AUTH" "auth:r$r:"
		RB_ARGS=()
	done
	unset REDISCLI_AUTH
	stop_lh
	stop_rd
fi

# ---- the table -------------------------------------------------------------

log "done in ${SECONDS}s"
bin/loadgen report -in "$RAW" -json "$OUT_DIR/$TS.json" -csv "$OUT_DIR/$TS.csv" | tee "$OUT_DIR/$TS.md"
log "wrote $OUT_DIR/$TS.{md,json,csv}, raw records $RAW, logs and loadgen lines in $WORK/"
