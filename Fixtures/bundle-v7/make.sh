#!/usr/bin/env bash
# Writes long.cbundle and long.dump.json (Fixtures/README.md, bundle-v7/) with the syncctl given
# as $1 (default: syncctl on PATH), in a temporary directory.
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
milk=$(a reminder add "Buy milk" --notes "two litres" --tag home)
b merge a.db >/dev/null
b reminder edit "$milk" --title "Buy whole milk" >/dev/null
a reminder edit "$milk" --title "Buy oat milk" >/dev/null
a merge b.db >/dev/null
# A note whose body takes 1 MiB: its assign is a block of its own (SPEC.md §13, "Canonical
# order"), so the operations after it are in a third block, which names by number the records
# that the first block named.
python3 -c '
import json
print(json.dumps({"kind": "note", "title": "Draft", "body": "All work and no play. " * 47663, "tags": ["long"]}))' >draft.json
a import draft.json >/dev/null
draft=$(a note list --json | python3 -c 'import json, sys; print([n["id"] for n in json.load(sys.stdin) if n["title"] == "Draft"][0])')
a note edit "$draft" --body "All work." >/dev/null
# A reminder the third block lists: its id's time is a delta from the first block's last entry.
a reminder add "Call the plumber" --priority high >/dev/null
a reminder edit "$milk" --title "Buy milk, any" >/dev/null
a reminder complete "$milk" >/dev/null
a export "$here/long.cbundle" >/dev/null
"$syncctl" init --store fresh.db >/dev/null
"$syncctl" merge --store fresh.db "$here/long.cbundle" >/dev/null
"$syncctl" dump --store fresh.db >"$here/long.dump.json"
