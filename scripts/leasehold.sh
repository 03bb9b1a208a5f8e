# shellcheck shell=bash
# leasehold.sh: leasehold locks from bash, with nothing but redis-cli (Debian's
# redis-tools), for hosts without the leasehold binary.
#
#   source scripts/leasehold.sh
#
#   if token=$(leasehold_acquire reports:nightly 600000); then
#       ./make-report --fencing-token "$token"
#       leasehold_release reports:nightly "$token"
#   fi
#
#   # Or let a function hold the lock for as long as a command runs:
#   leasehold_with_lock reports:nightly 30000 ./make-report
#
# Functions (each returns 0 yes, 1 no, 2 on an error: bad arguments, an error
# reply, no server; the reason goes to stderr):
#
#   leasehold_acquire KEY TTL_MS [WAIT_MS]   prints the fencing token; 1: not granted
#   leasehold_release KEY TOKEN              1: the token did not hold the lock
#   leasehold_extend KEY TOKEN TTL_MS        1: the token no longer holds the lock
#   leasehold_verify KEY TOKEN               1: not a live lease
#   leasehold_with_lock KEY TTL_MS COMMAND [ARG...]
#
# leasehold_with_lock takes the lock under a random OWNER (so that it can retry
# an ACQUIRE whose reply was lost without ever holding the lock twice), runs
# COMMAND with LEASEHOLD_KEY, LEASEHOLD_TOKEN and LEASEHOLD_ADDR in its
# environment (so `leasehold verify "$LEASEHOLD_KEY" "$LEASEHOLD_TOKEN"` works
# from inside, as under `leasehold run`), renews the lease in the background with
# EXTEND every third of TTL_MS, and releases it when COMMAND exits. Its exit
# status follows `leasehold run`'s (docs/cli.md):
#
#   0, other  COMMAND's own status (128+n: killed by signal n)
#   1         the lock was not granted (held elsewhere, or LEASEHOLD_WAIT_MS ran out)
#   2         an error: bad arguments, no server, an error reply
#   75        the lease was lost while COMMAND ran (EX_TEMPFAIL), whatever
#             COMMAND's status
#   129, 130, 143  SIGHUP, SIGINT or SIGTERM while waiting for the lock
#
# As with flock, a COMMAND that itself exits 1, 2 or 75 cannot be told apart.
#
# The lease is lost when a renewal is refused (it expired, or was released
# behind our back), or when no renewal has been confirmed a tenth of TTL_MS
# before its deadline (reckoned from when each renewal was sent, so never
# later than the server's). Then leasehold_with_lock says so on stderr, sends
# COMMAND SIGTERM, then SIGKILL after LEASEHOLD_KILL_GRACE_MS: past that point
# another holder may have the lock, and only the fencing token protects the
# resource. SIGINT, SIGTERM or SIGHUP to the caller sends COMMAND SIGTERM; the
# lock is released once COMMAND has exited. Unlike `leasehold run`, COMMAND
# stays in the caller's process group (bash without job control cannot give it
# one of its own without taking the terminal from it): the signals go to
# COMMAND's own process, so a shell script should exec its long-running
# program, or handle SIGTERM, for them to reach it. Every renewal starts a
# redis-cli: give TTL_MS room for a few slow ones (seconds, not milliseconds,
# outside tests).
#
# Needs bash 4.4 or later (tested with 5.2), redis-cli, and for bounded renewals
# coreutils' timeout.
#
# Settings, from the environment:
#
#   LEASEHOLD_ADDR                  the server, HOST:PORT (127.0.0.1:7379), as
#                                   for the leasehold binary; an IPv6 host in
#                                   brackets ([::1]:7379). For the nodes of
#                                   one cluster, a comma-separated list
#                                   (h1:7379,h2:7379): each redis-cli call
#                                   tries them in order until one connects
#                                   ("could not connect" moves on; so does
#                                   a cluster's TRYAGAIN, below; another
#                                   error reply, or a connection lost after
#                                   the command went out, does not). A node
#                                   that does not answer at all holds a call
#                                   until the system gives up connecting.
#                                   Never a list of independent servers:
#                                   they do not know each other's locks.
#                                   LEASEHOLD_HOST and LEASEHOLD_PORT are no
#                                   longer read: set alone, they are an
#                                   error, not ignored
#   LEASEHOLD_OWNER                 OWNER for leasehold_acquire (none: a
#                                   random one per call, so a lease is
#                                   never re-entered by another call)
#   LEASEHOLD_RETRY_MS              how long a call goes on retrying a
#                                   cluster's TRYAGAIN and UNCERTAIN
#                                   (10000; 0: once); see "Clusters" below
#   LEASEHOLD_WAIT_MS               WAIT for leasehold_with_lock (0: try once)
#   LEASEHOLD_KILL_GRACE_MS         SIGTERM to SIGKILL on a lost lease (10000)
#   LEASEHOLD_PASSWORD              the password of a server started with one
#                                   (else REDISCLI_AUTH, redis-cli's own):
#                                   handed to redis-cli in its environment,
#                                   never on its command line
#   LEASEHOLD_USER                  the user to AUTH as (redis-cli --user);
#                                   the default user without it
#   LEASEHOLD_TLS                   1 (or true): connect with TLS (redis-cli
#                                   --tls, which needs a redis-cli built with
#                                   TLS, as Debian's is), verifying the server
#   LEASEHOLD_TLS_CACERT            with TLS, the CA certificate file to verify
#                                   the server with (--cacert; default: the
#                                   system's)
#   LEASEHOLD_TLS_CERT, _TLS_KEY    with TLS, a client certificate and its key
#                                   (--cert, --key), for a server that asks
#   LEASEHOLD_TLS_SNI               with TLS, the server name to ask for (--sni)
#   LEASEHOLD_TLS_INSECURE          1: with TLS, do not verify the server
#                                   (--insecure; for tests only)
#
# They are the leasehold binary's (docs/cli.md), and leasehold_with_lock
# exports them and LEASEHOLD_USER (with LEASEHOLD_ADDR) to COMMAND; the
# password only if the caller exported it. A TLS setting without
# LEASEHOLD_TLS is an error, not a connection in plain text.
#
# Clusters (docs/cluster.md): while a cluster has no leader ready (an
# election), or at a node cut off from the majority, a node answers
# TRYAGAIN: nothing ran, and the call tries the next address of
# LEASEHOLD_ADDR, pausing after each round of them (25 ms, doubling up to
# 250 ms). When the leader is lost while a change is on its way, the node
# answers UNCERTAIN: it may or may not have been applied, and the call sends
# it again, which is safe for every change here: ACQUIRE always names an
# OWNER (LEASEHOLD_OWNER, or one of its own), and a repeated ACQUIRE of the
# same owner gets the same lease and token back; a RELEASE that then finds
# no lease counts as released (the first one may have ended it); a second
# EXTEND extends again from a later moment. Neither goes on past
# LEASEHOLD_RETRY_MS from the first try (a renewal of leasehold_with_lock,
# past the lease's deadline); then the call returns 2, saying "outcome
# unknown" when an UNCERTAIN was among the answers (leasehold_acquire then
# names the OWNER that gets the lease back, if it was granted). The next
# call in the same shell starts at the address that last answered;
# leasehold_with_lock's renewals do too, whereas a $(leasehold_acquire ...)
# forgets it.
#
# redis-cli, as it is in Redis 7.0: with stdout not a terminal (as in $(...))
# it prints an integer bare, nil as an empty line (the "(nil)" is for
# terminals only), and an error reply as its text on stdout with exit status 0
# (-e, which makes it fail instead, is missing from older versions). It exits
# 1, printing nothing on stdout and its reason on stderr, when it cannot
# connect or the connection drops, during an ACQUIRE ... WAIT too. So every
# reply is checked for its shape: digits, or empty for nil, and empty counts
# as nil only with exit status 0. 7.0's redis-cli has no connect or read
# timeout option; renewals are bounded with coreutils' timeout instead.

# _leasehold_check WHO: checks LEASEHOLD_ADDR (HOST:PORT, or a list), the
# TLS settings and LEASEHOLD_RETRY_MS, saying on stderr what is wrong.
# Every public function checks them first.
_leasehold_check() {
	_leasehold_addr "$1" && _leasehold_tls_check "$1" || return 2
	if [ -n "${LEASEHOLD_RETRY_MS:-}" ] && ! _leasehold_is_uint "$LEASEHOLD_RETRY_MS"; then
		echo "$1: LEASEHOLD_RETRY_MS must be a number of milliseconds, got '$LEASEHOLD_RETRY_MS'" >&2
		return 2
	fi
}

# _leasehold_addr WHO: checks LEASEHOLD_ADDR (HOST:PORT, or a comma-separated
# list of them; an IPv6 host in brackets), saying why on stderr when it is
# not.
_leasehold_addr() {
	local addr=${LEASEHOLD_ADDR:-} a host port
	if [ -z "$addr" ] && { [ -n "${LEASEHOLD_HOST:-}" ] || [ -n "${LEASEHOLD_PORT:-}" ]; }; then
		# Ignoring them would send the locks to another server.
		echo "$1: LEASEHOLD_HOST and LEASEHOLD_PORT are no longer read: set LEASEHOLD_ADDR=HOST:PORT" >&2
		return 2
	fi
	local -a list
	_leasehold_addrs list
	for a in "${list[@]}"; do
		host=${a%:*} port=${a##*:}
		case $host in
		\[*\]) host=${host#[} host=${host%]} ;;
		*:*) host= ;; # an IPv6 host without its brackets
		esac
		if [ "$host" = "$a" ] || [ -z "$host" ] || ! _leasehold_is_uint "$port"; then
			if [ ${#list[@]} -eq 1 ]; then
				echo "$1: LEASEHOLD_ADDR must be HOST:PORT, got '$a'" >&2
			else
				echo "$1: LEASEHOLD_ADDR must be HOST:PORT or a comma-separated list of them, got '$a' in '${LEASEHOLD_ADDR:-}'" >&2
			fi
			return 2
		fi
	done
}

# _leasehold_addrs ARRAYVAR: sets the array to the addresses of
# LEASEHOLD_ADDR (127.0.0.1:7379 when unset), spaces dropped; an empty
# element, from a comma too many, stays, for _leasehold_addr to refuse.
_leasehold_addrs() {
	local _lh_list=${LEASEHOLD_ADDR:-127.0.0.1:7379}
	_lh_list=${_lh_list// /}
	# read -a drops an empty last element: keep it by adding one comma.
	IFS=, read -r -a "$1" <<<"$_lh_list,"
}

# _leasehold_split HOSTVAR PORTVAR ADDR: sets them to ADDR's host (an IPv6
# one without its brackets) and port.
_leasehold_split() {
	# Names of their own: a local named as HOSTVAR would hide the caller's.
	local _lh_addr=$3 _lh_host
	_lh_host=${_lh_addr%:*}
	_lh_host=${_lh_host#[}
	printf -v "$1" '%s' "${_lh_host%]}"
	printf -v "$2" '%s' "${_lh_addr##*:}"
}

# _leasehold_tls_on: whether LEASEHOLD_TLS turns TLS on (1, t, true, as
# the leasehold binary reads it). _leasehold_tls_check has refused other
# values.
_leasehold_tls_on() {
	case ${LEASEHOLD_TLS:-} in 1 | t | T | true | TRUE | True) return 0 ;; esac
	return 1
}

# _leasehold_tls_check WHO: LEASEHOLD_TLS is a boolean, and the TLS settings
# are not given without it (the connection would go out in plain text).
_leasehold_tls_check() {
	case ${LEASEHOLD_TLS:-} in
	'' | 0 | f | F | false | FALSE | False | 1 | t | T | true | TRUE | True) ;;
	*)
		echo "$1: LEASEHOLD_TLS must be 1 or 0, got '$LEASEHOLD_TLS'" >&2
		return 2
		;;
	esac
	_leasehold_tls_on && return 0
	local v
	for v in LEASEHOLD_TLS_CACERT LEASEHOLD_TLS_CERT LEASEHOLD_TLS_KEY LEASEHOLD_TLS_SNI LEASEHOLD_TLS_INSECURE; do
		if [ -n "${!v:-}" ]; then
			echo "$1: $v is a setting of TLS: set LEASEHOLD_TLS=1" >&2
			return 2
		fi
	done
}

# _leasehold_auth OPTSVAR: in the subshell that runs redis-cli, exports the
# password (LEASEHOLD_PASSWORD, else REDISCLI_AUTH) as REDISCLI_AUTH, where
# redis-cli reads it, never on its command line, which ps shows; and sets the
# array OPTSVAR to redis-cli's options for the user (--user LEASEHOLD_USER)
# and TLS (--tls, --cacert, --cert, --key, --sni, --insecure).
_leasehold_auth() {
	local _lh_pw=${LEASEHOLD_PASSWORD:-${REDISCLI_AUTH:-}} _lh_opts=()
	if [ -n "$_lh_pw" ]; then
		export REDISCLI_AUTH="$_lh_pw"
	else
		unset REDISCLI_AUTH
	fi
	if [ -n "${LEASEHOLD_USER:-}" ]; then
		_lh_opts+=(--user "$LEASEHOLD_USER")
	fi
	if _leasehold_tls_on; then
		_lh_opts+=(--tls)
		[ -z "${LEASEHOLD_TLS_CACERT:-}" ] || _lh_opts+=(--cacert "$LEASEHOLD_TLS_CACERT")
		[ -z "${LEASEHOLD_TLS_CERT:-}" ] || _lh_opts+=(--cert "$LEASEHOLD_TLS_CERT")
		[ -z "${LEASEHOLD_TLS_KEY:-}" ] || _lh_opts+=(--key "$LEASEHOLD_TLS_KEY")
		[ -z "${LEASEHOLD_TLS_SNI:-}" ] || _lh_opts+=(--sni "$LEASEHOLD_TLS_SNI")
		case ${LEASEHOLD_TLS_INSECURE:-} in 1 | t | T | true | TRUE | True) _lh_opts+=(--insecure) ;; esac
	fi
	eval "$1"'=("${_lh_opts[@]}")'
}

# _leasehold_cli ARG...: redis-cli with the server's address, the password
# (_leasehold_auth) and raw output, never reading the caller's stdin. A
# subshell, so that the export stays in it.
_leasehold_cli() (
	_leasehold_cli_on "" "$@"
)

# _leasehold_cli_within MS ARG...: _leasehold_cli, killed after MS
# milliseconds when coreutils' timeout is there.
_leasehold_cli_within() (
	local secs
	_leasehold_secs secs "$1"
	shift
	command -v timeout >/dev/null 2>&1 || secs=
	_leasehold_cli_on "$secs" "$@"
)

# _leasehold_cli_on SECS ARG...: in _leasehold_cli's subshell, redis-cli ARG...
# at each address of LEASEHOLD_ADDR in turn, starting at the one numbered
# _leasehold_start (0 when unset: the first; _leasehold_call moves it past a
# node that answers TRYAGAIN), under timeout SECS unless SECS is empty,
# until one connects. Only a connection that could not be made
# (redis-cli says "Could not connect to Redis at" and exits 1) moves on to
# the next address: an error reply, or a connection that dropped after the
# command went out (which the server may have acted on), ends it there.
# redis-cli's stderr is held back until then; that of the addresses passed
# over is shown only when none connected.
_leasehold_cli_on() {
	local secs=$1 addr host port err rc opts i
	shift
	local -a addrs cli=(redis-cli) passed=()
	[ -z "$secs" ] || cli=(timeout -k 1 "$secs" redis-cli)
	_leasehold_auth opts
	_leasehold_addrs addrs
	local n=${#addrs[@]} first=${_leasehold_start:-0}
	for ((i = 0; i < n; i++)); do
		addr=${addrs[(first + i) % n]}
		_leasehold_split host port "$addr"
		rc=0
		# stdout goes straight through (fd 3); stderr is caught.
		{ err=$("${cli[@]}" -h "$host" -p "$port" "${opts[@]}" --raw "$@" 2>&1 1>&3 3>&- </dev/null) || rc=$?; } 3>&1
		if [ "$rc" -eq 1 ] && [[ $err == "Could not connect to Redis at "* ]]; then
			passed+=("$err")
			continue
		fi
		[ -z "$err" ] || printf '%s\n' "$err" >&2
		return "$rc"
	done
	printf '%s\n' "${passed[@]}" >&2
	return 1
}

# _leasehold_call VAR MS TRY_MS ARG...: runs redis-cli ARG... (_leasehold_cli,
# or with MS each try within TRY_MS and what is left of MS:
# _leasehold_cli_within) and sets VAR to its reply; returns
# redis-cli's status (not 0: no reply). A cluster in transition is retried:
# a TRYAGAIN reply (no leader ready for that node: nothing ran) moves on to the next address of LEASEHOLD_ADDR, and an
# UNCERTAIN one (the leader was lost mid-way: the change may or may not
# have been applied) sends the command again, which is safe for every
# change this file sends: ACQUIRE always names an OWNER (the same lease
# and token come back if the first was granted), a second RELEASE or EXTEND
# of a token finds the first one's effect. After each round of the
# addresses it pauses (25 ms, doubling up to 250 ms), and it starts no try
# later than LEASEHOLD_RETRY_MS (10000) after the first, nor MS. It sets
# _leasehold_uncertain to 1 when a try answered UNCERTAIN, and leaves
# _leasehold_start at the address that answered, where the caller's next
# call begins (within one shell: a $(...) forgets it).
_leasehold_call() {
	local _lh_var=$1 _lh_ms=$2 _lh_try=$3 _lh_reply _lh_rc _lh_t0 _lh_now _lh_left _lh_secs _lh_pause=25 _lh_tries=0
	shift 3
	local -a _lh_addrs
	_leasehold_addrs _lh_addrs
	local _lh_n=${#_lh_addrs[@]} _lh_budget=${LEASEHOLD_RETRY_MS:-10000} # _leasehold_check has checked it
	[ -z "$_lh_ms" ] || [ "$_lh_ms" -ge "$_lh_budget" ] || _lh_budget=$_lh_ms
	_leasehold_now _lh_t0
	_leasehold_uncertain=0
	while :; do
		_lh_rc=0
		if [ -n "$_lh_ms" ]; then
			_leasehold_now _lh_now
			_lh_left=$((_lh_ms - (_lh_now - _lh_t0)))
			[ -z "$_lh_try" ] || [ "$_lh_left" -le "$_lh_try" ] || _lh_left=$_lh_try
			[ "$_lh_left" -ge 10 ] || _lh_left=10
			_lh_reply=$(_leasehold_cli_within "$_lh_left" "$@") || _lh_rc=$?
		else
			_lh_reply=$(_leasehold_cli "$@") || _lh_rc=$?
		fi
		case $_lh_rc:$_lh_reply in
		"0:TRYAGAIN "*) ;;
		"0:UNCERTAIN "*) _leasehold_uncertain=1 ;;
		*) break ;;
		esac
		_leasehold_start=$(((${_leasehold_start:-0} + 1) % _lh_n))
		_lh_tries=$((_lh_tries + 1))
		_leasehold_now _lh_now
		if [ $((_lh_tries % _lh_n)) -eq 0 ]; then
			[ $((_lh_now - _lh_t0 + _lh_pause)) -lt "$_lh_budget" ] || break
			_leasehold_secs _lh_secs "$_lh_pause"
			sleep "$_lh_secs"
			_lh_pause=$((_lh_pause * 2))
			[ "$_lh_pause" -le 250 ] || _lh_pause=250
		else
			[ $((_lh_now - _lh_t0)) -lt "$_lh_budget" ] || break
		fi
	done
	printf -v "$_lh_var" '%s' "$_lh_reply"
	return "$_lh_rc"
}

# _leasehold_unsettled WHO REPLY: when REPLY is a cluster's TRYAGAIN or
# UNCERTAIN that _leasehold_call's retries did not get past, or when an
# earlier try answered UNCERTAIN and this one got no reply, says so on
# stderr and returns 0.
_leasehold_unsettled() {
	case $2 in
	"TRYAGAIN "* | "UNCERTAIN "*) ;;
	*) [ "${_leasehold_uncertain:-0}" -eq 1 ] && [ -z "$2" ] || return 1 ;;
	esac
	if [ "${_leasehold_uncertain:-0}" -eq 1 ]; then
		echo "$1: outcome unknown: the cluster lost its leader while the command was on its way, and the retries ran out (${2:-no reply}); it may or may not have been applied" >&2
	else
		echo "$1: ${2:-no reply}" >&2
	fi
	return 0
}

# _leasehold_secs VAR MS: sets VAR to MS milliseconds as seconds with
# decimals, for read -t, sleep and timeout (no subshell).
_leasehold_secs() {
	printf -v "$1" '%d.%03d' "$(($2 / 1000))" "$(($2 % 1000))"
}

# _leasehold_now VAR: sets VAR to a clock in milliseconds. Where there is
# /proc/uptime it is the time since boot, which no clock step moves (and
# which counts a suspend); elsewhere the wall clock.
_leasehold_now() {
	local up
	if [ -r /proc/uptime ] && read -r up _ </proc/uptime 2>/dev/null && [ -n "$up" ]; then
		up=${up//[!0-9]/} # "350735.47": hundredths of a second
		printf -v "$1" '%s' "$((10#$up * 10))"
	elif [ -n "${EPOCHREALTIME:-}" ]; then
		# bash 5, no subshell; the decimal separator follows the locale.
		local us=${EPOCHREALTIME//[!0-9]/}
		printf -v "$1" '%s' "$((10#$us / 1000))"
	else
		printf -v "$1" '%s' "$(date +%s%3N)"
	fi
}

# _leasehold_is_uint VALUE: whether VALUE is a non-negative decimal integer.
_leasehold_is_uint() {
	case $1 in '' | *[!0-9]*) return 1 ;; esac
	return 0
}

_leasehold_where() {
	printf '%s' "${LEASEHOLD_ADDR:-127.0.0.1:7379}"
}

# _leasehold_take WHO OWNER KEY TTL_MS WAIT_MS: ACQUIRE, printing the token.
# 0 granted, 1 not granted, 2 error reply, 3 no reply (worth a retry, with
# the same OWNER). Without an OWNER it takes one of its own (random), so
# that a cluster's UNCERTAIN can be retried.
_leasehold_take() {
	local who=$1 owner=$2 key=$3 ttl=$4 wait=$5 reply
	_leasehold_check "$who" || return 2
	[ -n "$owner" ] || owner=$(_leasehold_owner)
	local args=(ACQUIRE "$key" "$ttl" OWNER "$owner")
	if [ -n "$wait" ] && [ "$wait" != 0 ]; then
		args+=(WAIT "$wait")
	fi
	if ! _leasehold_call reply "" "" "${args[@]}"; then
		_leasehold_unsettled "$who" "" ||
			echo "$who: no reply from the leasehold server at $(_leasehold_where)" >&2
		return 3
	fi
	if _leasehold_unsettled "$who" "$reply"; then
		[ "$_leasehold_uncertain" -eq 0 ] ||
			echo "$who: LEASEHOLD_OWNER=$owner leasehold_acquire $key $ttl returns the lease (the same token) if it was granted" >&2
		return 2
	fi
	case $reply in
	'') return 1 ;;
	*[!0-9]*)
		echo "$who: $reply" >&2
		return 2
		;;
	esac
	printf '%s\n' "$reply"
}

# _leasehold_yes_no WHO ARG...: runs a command that answers 1 or 0, through
# _leasehold_call's retries. A RELEASE that answers 0 after an UNCERTAIN
# counts as released (0): the first one may have ended the lease, and
# either way the token holds the lock no more.
_leasehold_yes_no() {
	local who=$1 reply
	shift
	_leasehold_check "$who" || return 2
	if ! _leasehold_call reply "" "" "$@"; then
		_leasehold_unsettled "$who" "" ||
			echo "$who: no reply from the leasehold server at $(_leasehold_where)" >&2
		return 2
	fi
	! _leasehold_unsettled "$who" "$reply" || return 2
	case $reply in
	1) return 0 ;;
	0)
		[ "$1" = RELEASE ] && [ "$_leasehold_uncertain" -eq 1 ] && return 0
		return 1
		;;
	esac
	echo "$who: ${reply:-empty reply}" >&2
	return 2
}

# leasehold_acquire KEY TTL_MS [WAIT_MS]: prints the token and returns 0 when
# granted, returns 1 when not (at once, or after WAIT_MS), 2 on an error.
# LEASEHOLD_OWNER, when set, is sent as OWNER (else a random one): the same
# owner gets the same token back, so a retry is safe.
leasehold_acquire() {
	if [ $# -lt 2 ] || [ $# -gt 3 ]; then
		echo "usage: leasehold_acquire KEY TTL_MS [WAIT_MS]" >&2
		return 2
	fi
	local rc=0
	_leasehold_take leasehold_acquire "${LEASEHOLD_OWNER:-}" "$1" "$2" "${3:-}" || rc=$?
	[ "$rc" -ne 3 ] || rc=2
	return "$rc"
}

# leasehold_release KEY TOKEN: 0 released, 1 the token did not hold the lock,
# 2 on an error.
leasehold_release() {
	if [ $# -ne 2 ]; then
		echo "usage: leasehold_release KEY TOKEN" >&2
		return 2
	fi
	_leasehold_yes_no leasehold_release RELEASE "$1" "$2"
}

# leasehold_extend KEY TOKEN TTL_MS: 0 the lease now ends TTL_MS from now,
# 1 the token no longer holds the lock, 2 on an error.
leasehold_extend() {
	if [ $# -ne 3 ]; then
		echo "usage: leasehold_extend KEY TOKEN TTL_MS" >&2
		return 2
	fi
	_leasehold_yes_no leasehold_extend EXTEND "$1" "$2" "$3"
}

# leasehold_verify KEY TOKEN: 0 the token is a live lease, 1 not, 2 on an error.
leasehold_verify() {
	if [ $# -ne 2 ]; then
		echo "usage: leasehold_verify KEY TOKEN" >&2
		return 2
	fi
	_leasehold_yes_no leasehold_verify VERIFY "$1" "$2"
}

# _leasehold_owner: a random owner id for one leasehold_with_lock.
_leasehold_owner() {
	local id=""
	if [ -r /proc/sys/kernel/random/uuid ]; then
		read -r id </proc/sys/kernel/random/uuid || id=""
	fi
	[ -n "$id" ] || id="$RANDOM$RANDOM$RANDOM$RANDOM"
	printf 'leasehold.sh:%s:%s:%s' "${HOSTNAME:-host}" "$BASHPID" "$id"
}

# _leasehold_nap MS: waits MS milliseconds on stdin, the renewer's pipe from
# leasehold_with_lock; false as soon as that pipe is closed (the caller is
# done, or gone). read -t waits in the shell itself: no sleep process to
# leave behind.
_leasehold_nap() {
	local secs _
	_leasehold_secs secs "$1"
	read -r -t "$secs" _
	[ $? -gt 128 ]
}

# _leasehold_renew KEY TOKEN TTL_MS COMMAND_PID OK_MS: leasehold_with_lock's
# background renewer, reading a pipe from it on stdin. The lease lasts at
# least until OK_MS + TTL_MS: OK_MS is when the request that granted or last
# renewed it was sent. It renews the lease until the pipe closes, or until the
# lease is lost: then it writes "lost" on stdout and stops COMMAND_PID. It
# sets no trap: it ignores the signals that the caller acts on (renewals go on
# while the command stops) and ends with its pipe.
_leasehold_renew() {
	local key=$1 token=$2 ttl=$3 cmd=$4 ok=$5
	local interval=$((ttl / 3)) margin=$((ttl / 10)) reply start now next bound lost=""
	[ "$interval" -gt 0 ] || interval=1
	# One renewal waits at most this long for its reply, and never past the
	# point where the lease counts as lost.
	local cap=$interval
	[ "$cap" -ge 1000 ] || cap=1000
	trap '' INT TERM HUP
	next=$((ok + interval))
	while :; do
		# Renew a third of the ttl after the last renewal was sent, however
		# long that one took to answer.
		_leasehold_now now
		[ "$next" -gt "$now" ] || next=$((now + 1))
		_leasehold_nap $((next - now)) || break
		_leasehold_now start
		if [ "$start" -ge $((ok + ttl - margin)) ]; then
			lost="the lease on $key (token $token) may be lost: no renewal was confirmed before its deadline"
			break
		fi
		# Tries (of a cluster answering TRYAGAIN) until the deadline, each
		# for at most cap.
		bound=$((ok + ttl - margin - start))
		[ "$bound" -ge 10 ] || bound=10
		_leasehold_call reply "$bound" "$cap" EXTEND "$key" "$token" "$ttl" || reply=""
		case $reply in
		1)
			ok=$start
			next=$((start + interval))
			continue
			;;
		0)
			lost="the lease on $key (token $token) is lost: a renewal was refused"
			;;
		*)
			_leasehold_now now
			if [ $((now - ok)) -lt $((ttl - margin)) ]; then
				echo "leasehold_with_lock: renewing $key failed (${reply:-no reply from $(_leasehold_where)}); retrying" >&2
				next=$((now + (interval < 1000 ? interval : 1000)))
				# Never sleep past the deadline: it is checked on waking.
				[ "$next" -le $((ok + ttl - margin)) ] || next=$((ok + ttl - margin))
				continue
			fi
			lost="the lease on $key (token $token) may be lost: no renewal was confirmed before its deadline"
			;;
		esac
		break
	done
	[ -n "$lost" ] || return 0 # the pipe closed: the caller is done
	echo lost
	echo "leasehold_with_lock: $lost; stopping the command (SIGTERM)" >&2
	kill -TERM "$cmd" 2>/dev/null || return 0
	local grace=${LEASEHOLD_KILL_GRACE_MS:-10000}
	_leasehold_is_uint "$grace" || grace=10000
	_leasehold_nap "$grace" || return 0
	if kill -0 "$cmd" 2>/dev/null; then
		echo "leasehold_with_lock: the command is still running ${grace} ms after SIGTERM; SIGKILL" >&2
		kill -KILL "$cmd" 2>/dev/null
	fi
	# Stay until the caller is done.
	while read -r _; do :; done
}

# _leasehold_wait_gone PID: leasehold_with_lock's wait for a child to exit
# (and be reaped), polling every 10 ms at first, every 200 ms later on. It
# naps with read -t on $nap, a pipe that the shell holds open at both ends
# (so no sleep process), where the renewer writes "lost".
_leasehold_wait_gone() {
	local pid=$1 ms=10 secs line rs
	while kill -0 "$pid" 2>/dev/null; do
		_leasehold_secs secs "$ms"
		if [ -n "$nap" ]; then
			line=""
			read -r -t "$secs" -u "$nap" line
			rs=$?
			# The renewer writes nothing but "lost" here; a read -t whose
			# time runs out part-way through the line returns what it got
			# ("lo", then "st" next time), so any of it counts.
			if [ -n "$line" ]; then
				lease_lost=1
			elif [ "$rs" -eq 1 ]; then
				nap="" # end of file: not a pipe that blocks here; sleep instead
			fi
		else
			sleep "$secs"
		fi
		[ "$ms" -ge 200 ] || ms=$((ms * 2))
	done
}

# _leasehold_on_signal STATUS: leasehold_with_lock's trap for SIGINT, SIGTERM
# and SIGHUP; it passes the signal on to the command as SIGTERM.
_leasehold_on_signal() {
	signalled=$1
	trapped=1
	if [ -n "${cmd:-}" ]; then
		kill -TERM "$cmd" 2>/dev/null
	fi
}

# leasehold_with_lock KEY TTL_MS COMMAND [ARG...]: runs COMMAND holding the
# lock; see the top of this file. The body is a subshell: its traps and
# settings stay out of the caller's shell.
leasehold_with_lock() (
	set +e
	if [ $# -lt 3 ]; then
		echo "usage: leasehold_with_lock KEY TTL_MS COMMAND [ARG...]" >&2
		exit 2
	fi
	key=$1
	ttl=$2
	shift 2
	if ! _leasehold_is_uint "$ttl" || [ "$ttl" -eq 0 ]; then
		echo "leasehold_with_lock: TTL_MS must be a positive number of milliseconds, got '$ttl'" >&2
		exit 2
	fi
	_leasehold_check leasehold_with_lock || exit 2
	if ! command -v timeout >/dev/null 2>&1; then
		# Without it a renewal to a server that stopped answering could hang
		# for ever, and the loss never be noticed.
		echo "leasehold_with_lock: needs coreutils' timeout, to bound each renewal" >&2
		exit 2
	fi
	wait_ms=${LEASEHOLD_WAIT_MS:-0}
	if ! _leasehold_is_uint "$wait_ms"; then
		echo "leasehold_with_lock: LEASEHOLD_WAIT_MS must be a number of milliseconds, got '$wait_ms'" >&2
		exit 2
	fi

	cmd=""
	signalled=""
	trapped=0
	# A signal to the caller is passed on to the command as SIGTERM.
	trap '_leasehold_on_signal 130' INT
	trap '_leasehold_on_signal 143' TERM
	trap '_leasehold_on_signal 129' HUP

	owner=$(_leasehold_owner)
	token=""
	sent=0
	rc=3
	for attempt in 1 2 3; do
		[ "$attempt" -eq 1 ] || sleep 0.2
		_leasehold_now sent
		token=$(_leasehold_take leasehold_with_lock "$owner" "$key" "$ttl" "$wait_ms")
		rc=$?
		if [ "$rc" -ne 3 ] || [ -n "$signalled" ]; then
			break
		fi
	done
	if [ -n "$signalled" ]; then
		# Stopped while acquiring: give back what may have been granted.
		if [ "$rc" -eq 0 ]; then
			_leasehold_yes_no leasehold_with_lock RELEASE "$key" "$token" || :
		fi
		exit "$signalled"
	fi
	case $rc in
	0) ;;
	1)
		echo "leasehold_with_lock: $key is held elsewhere" >&2
		exit 1
		;;
	*) exit 2 ;;
	esac

	# Granted after a long WAIT (or a slow reply): the deadline reckoned
	# from the request is near or past, so nothing proves the lease yet. A
	# renewal sent now does.
	_leasehold_now now
	if [ $((now - sent)) -ge $((ttl - ttl / 10)) ]; then
		_leasehold_yes_no leasehold_with_lock EXTEND "$key" "$token" "$ttl"
		rc=$?
		if [ "$rc" -ne 0 ]; then
			_leasehold_yes_no leasehold_with_lock RELEASE "$key" "$token" >/dev/null 2>&1 || :
			[ "$rc" -ne 1 ] || echo "leasehold_with_lock: the lease granted on $key ran out before it could be renewed" >&2
			exit "$rc"
		fi
		sent=$now
	fi

	export LEASEHOLD_KEY="$key" LEASEHOLD_TOKEN="$token"
	export LEASEHOLD_ADDR="${LEASEHOLD_ADDR:-127.0.0.1:7379}"
	# How to reach the server, for a client inside COMMAND, even where the
	# caller set it in its shell only; but not the password, which COMMAND
	# gets only if the caller exported it.
	local v
	for v in LEASEHOLD_USER LEASEHOLD_TLS LEASEHOLD_TLS_CACERT LEASEHOLD_TLS_CERT LEASEHOLD_TLS_KEY LEASEHOLD_TLS_SNI LEASEHOLD_TLS_INSECURE; do
		[ -z "${!v:-}" ] || export "${v?}"
	done
	lease_lost=0
	# A pipe this shell holds open at both ends: read -t on it naps without a
	# sleep process, and the renewer writes "lost" on it.
	exec {nap}<> <(:)
	# <&0: without job control, a command started with & would get
	# /dev/null for its stdin.
	"$@" <&0 {nap}>&- &
	cmd=$!
	# The renewer reads a pipe that only this shell holds open: closing it,
	# or this shell's death, ends the renewer.
	exec {feed}> >(_leasehold_renew "$key" "$token" "$ttl" "$cmd" "$sent" >&"$nap" {nap}>&-)
	renewer=$!

	# Wait for the command by polling, and call wait only once it has
	# exited: a wait that a trapped signal interrupts can lose the status of
	# a child that exits at that moment (seen with bash 5.2), and then wait
	# blocks for good.
	_leasehold_wait_gone "$cmd"
	status=""
	while :; do
		trapped=0
		wait "$cmd"
		st=$?
		if [ "$trapped" -eq 0 ]; then
			status=$st
			break
		fi
		if [ "$st" -eq 127 ] && [ -n "$status" ]; then
			break # the signal came after the command was already waited for
		fi
		status=$st
	done

	exec {feed}>&- # the renewer stops
	_leasehold_wait_gone "$renewer"
	if [ -n "$nap" ]; then
		while :; do
			line=""
			read -r -t 0.01 -u "$nap" line
			rs=$?
			[ -z "$line" ] || lease_lost=1 # part of a line counts: see _leasehold_wait_gone
			[ "$rs" -eq 0 ] || break
		done
	fi
	# 1 (no longer held) was reported by the renewer; errors say so themselves.
	_leasehold_yes_no leasehold_with_lock RELEASE "$key" "$token" || :
	if [ "$lease_lost" -eq 1 ]; then
		exit 75
	fi
	exit "$status"
)
