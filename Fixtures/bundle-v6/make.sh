#!/usr/bin/env bash
# Writes mixed.cbundle and mixed.dump.json (Fixtures/README.md, bundle-v6/) with the syncctl
# given as $1 (default: syncctl on PATH), in a temporary directory. Builds after 5b0b47a write
# format 7: give one of format 6.
set -euo pipefail
syncctl=${1:-syncctl}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
a() { "$syncctl" "$@" --store a.db; }
b() { "$syncctl" "$@" --store b.db; }
a init --name laptop >/dev/null
b init --name phone >/dev/null
milk=$(a reminder add "Buy milk" --notes "two litres" --due 2026-12-01T09:00:00Z --priority medium --tag home --tag errands)
ideas=$(a note add "Ideas" --body "A sync engine" --tag work --pinned)
b merge a.db >/dev/null
# Both edit the title without an exchange between: a conflict, and predecessors.
a reminder edit "$milk" --title "Buy oat milk" >/dev/null
b reminder edit "$milk" --title "Buy whole milk" >/dev/null
b reminder tag "$milk" --remove errands >/dev/null
b reminder complete "$milk" >/dev/null
a merge b.db >/dev/null
a reminder edit "$milk" --title "Buy milk, any" >/dev/null
call=$(a reminder add "Call mom" --repeat weekly)
a reminder purge "$call" >/dev/null
a note edit "$ideas" --body "A sync engine, in Swift" >/dev/null
a note edit "$ideas" --body "A sync engine, in Swift, offline first" >/dev/null
a replica retire "$(b status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["replica"])')" >/dev/null
a compact --keep-history 0 >/dev/null
a export "$here/mixed.cbundle" >/dev/null
"$syncctl" init --store fresh.db >/dev/null
"$syncctl" merge --store fresh.db "$here/mixed.cbundle" >/dev/null
"$syncctl" dump --store fresh.db >"$here/mixed.dump.json"
