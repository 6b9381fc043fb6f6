#!/usr/bin/env python3
"""Turns `syncctl log --json` (newest first) into the operations file the peers of
compare.sh merge: one operation per line, oldest first, tab-separated:

    replica  seq  record  field  type  value

`field` is the field's name for an assign, `+tag` or `-tag` for a tag's add or remove (the tag
is then the value); `type` is `i` (integer), `s` (string, with tab, newline and backslash
escaped as \\t, \\n, \\\\) or `n` (null)."""
import json
import sys


def escape(text):
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def main():
    operations = json.load(sys.stdin)
    out = sys.stdout
    for op in reversed(operations):
        action = op["action"]
        if action == "assign":
            field, value = op["field"], op["value"]
        elif action in ("addTag", "removeTag"):
            field, value = ("+tag" if action == "addTag" else "-tag"), op["tag"]
        else:
            continue  # purges and elided operations: the workload has none
        if value is None:
            kind, text = "n", ""
        elif isinstance(value, bool) or isinstance(value, int):
            kind, text = "i", str(int(value))
        else:
            kind, text = "s", escape(str(value))
        out.write(f"{op['replica']}\t{op['seq']}\t{op['record']}\t{field}\t{kind}\t{text}\n")


if __name__ == "__main__":
    main()
