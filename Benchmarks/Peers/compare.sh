#!/bin/sh
# Concord's merge beside SQLite inserting one row per operation, Yrs (pycrdt) and Loro, all
# merging the same workload, interleaved round by round in one run (Benchmarks/README.md,
# "Merge beside its peers"). With --busy, a process spins on one core throughout, as another
# program would on a user's machine. Concord is timed as a whole `syncctl merge` process; the
# others on their merge alone (SQLite: the inserts and the COMMIT, not reading the input), which
# favours them by the process's start and the reading of the bundle.
#
# Usage: Benchmarks/Peers/compare.sh [--records N] [--rounds R] [--busy]
# Needs: a release build of syncctl (SYNCCTL, default .build/release/syncctl), cc and SQLite's
# headers (libsqlite3-dev), python3 with pycrdt and loro (pip install pycrdt loro).
set -eu
records=100000
rounds=3
busy=no
while [ $# -gt 0 ]; do
    case $1 in
        --records) records=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --busy) busy=yes; shift ;;
        *) echo "compare.sh: unknown option $1" >&2; exit 64 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
syncctl=$(realpath "${SYNCCTL:-.build/release/syncctl}")
# On a disk, not in memory (a tmpfs makes every durable commit free).
work=$(mktemp -d "${TMPDIR:-/var/tmp}/concord-compare-XXXXXX")
spinner=
cleanup() {
    if [ -n "$spinner" ]; then kill "$spinner" 2>/dev/null; fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building the workload (N = $records) and the peers' inputs, not timed" >&2
"$syncctl" bench merge --records "$records" --runs 1 --keep "$work" >/dev/null
"$syncctl" init --store "$work/b.db" >/dev/null
"$syncctl" merge "$work/b.cbundle" --store "$work/b.db" >/dev/null
"$syncctl" log --store "$work/b.db" --json --limit 1000000000 | python3 "$here/operations.py" >"$work/b.tsv"
"$syncctl" log --store "$work/a.db" --json --limit 1000000000 | python3 "$here/operations.py" >"$work/a.tsv"
cc -O2 -o "$work/sqlite-insert" "$here/sqlite_insert.c" -lsqlite3
operations=$(wc -l <"$work/b.tsv")

if [ $busy = yes ]; then
    sh -c 'while :; do :; done' &
    spinner=$!
fi

for round in $(seq "$rounds"); do
    cp "$work/a.db" "$work/merged.db"
    # The whole process, as a user runs it: starting, reading the file, the durable commits.
    python3 - "$operations" "$syncctl" merge "$work/b.cbundle" --store "$work/merged.db" <<'PY'
import subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)
seconds = time.perf_counter() - start
print(f"concord {sys.argv[1]} operations in {seconds:.3f} s: {int(sys.argv[1]) / seconds:.0f} operations/s")
PY
    rm -f "$work/merged.db" "$work/merged.db-wal" "$work/merged.db-shm" "$work/merged.db-lock"
    rm -f "$work/oplog.db"*
    "$work/sqlite-insert" "$work/b.tsv" "$work/oplog.db"
    python3 "$here/crdt_peers.py" yrs "$work/a.tsv" "$work/b.tsv" 1
    python3 "$here/crdt_peers.py" loro "$work/a.tsv" "$work/b.tsv" 1
done | tee "$work/rounds.txt"

bytes=$(wc -c <"$work/b.cbundle")
python3 - "$work/rounds.txt" "$bytes" "$operations" "$busy" <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    peer, rate = line.split()[0], float(line.split()[-2])
    rates.setdefault(peer, []).append(rate)
concord = statistics.median(rates["concord"])
print(f"\nmedians of {len(rates['concord'])} rounds{', one core busy' if sys.argv[4] == 'yes' else ''}:")
print("| | operations/s per round | Concord / it |\n|---|---|---|")
for peer in ["concord", "sqlite-insert", "yrs", "loro"]:
    each = ", ".join(f"{r / 1000:.0f}k" for r in rates[peer])
    print(f"| {peer} | {each} | {concord / statistics.median(rates[peer]):.2f} |")
print(f"Concord's bundle: {int(sys.argv[2])} bytes, {int(sys.argv[2]) / int(sys.argv[3]):.2f} bytes/operation")
PY
