#!/bin/sh
# `weft bench comm` end to end: 2 real ranks over gloo, with shared memory
# (the default between ranks of one host) and with -o shm=off (tcp); every
# row of the table must report 0 wrong elements (the result of each size
# is checked on every rank). Then the -o mistakes a user can make: no
# '=', a key gloo does not have (the config error names it and suggests
# the near one), a value outside the choices.
set -u
WEFT="${WEFT_BUILD_DIR:?}/bin/weft"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() {
	echo "test_bench_comm: $*" >&2
	cat "$out" >&2
	exit 1
}

for opt in "" "-o shm=off"; do
	# shellcheck disable=SC2086
	"$WEFT" bench comm -n 2 -b 8 -e 256K -f 8 -w 1 -i 3 $opt >"$out" 2>&1 ||
		fail "bench comm $opt exited with $?"
	rows=$(grep -c '^ *[0-9]' "$out")
	[ "$rows" -eq 6 ] || fail "bench comm $opt printed $rows rows, expected 6 (8 B .. 256 KiB)"
	bad=$(awk '/^ *[0-9]/ && $NF != 0' "$out" | wc -l)
	[ "$bad" -eq 0 ] || fail "bench comm $opt: $bad rows with wrong elements"
done

"$WEFT" bench comm -o shm >"$out" 2>&1 && fail "-o without '=' was accepted"
grep -q "bad option '-o shm'" "$out" || fail "-o without '=': no message naming it"

"$WEFT" bench comm -n 2 -b 8 -e 8 -o shmm=on >"$out" 2>&1 && fail "an unknown key was accepted"
grep -q "unknown key 'shmm'" "$out" || fail "an unknown key is not named"
grep -q "did you mean 'shm'" "$out" || fail "no suggestion for a misspelt key"

"$WEFT" bench comm -n 2 -b 8 -e 8 -o shm=maybe >"$out" 2>&1 && fail "shm=maybe was accepted"
grep -q "maybe" "$out" && grep -q "auto" "$out" || fail "shm=maybe: the message lacks the value or the choices"
echo "bench comm: shared memory and tcp tables correct; -o errors named"
