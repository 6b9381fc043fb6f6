#!/bin/sh
# What SQLite alone takes for one batch of a large merge's update phase (README, "Performance"):
# reads, then updates, COUNT random rows of the reminders table of a copy of STORE, in id order, in
# one transaction, with the store's settings (synchronous = FULL, a 16 MiB page cache).
# Usage: Benchmarks/sqlite-floor.sh STORE [COUNT]   (needs the sqlite3 shell)
set -eu
store=$1
count=${2:-110000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$store" "$work/store.db"
sqlite3 "$work/store.db" <<SQL
PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
PRAGMA cache_size = -16384;
CREATE TEMP TABLE pick (id BLOB PRIMARY KEY) WITHOUT ROWID;
INSERT INTO pick SELECT id FROM reminders ORDER BY random() LIMIT $count;
.timer on
BEGIN;
SELECT count(*), sum(length(crdt)) FROM reminders WHERE id IN (SELECT id FROM pick);
UPDATE reminders SET priority = 3, crdt = crdt || x'00' WHERE id IN (SELECT id FROM pick);
COMMIT;
SQL
