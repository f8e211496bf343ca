"""The output budget, applied once to every result where it is produced.

Two limits meet here. `max_output_chars` is the caller's budget in characters: an output
longer than that keeps its head and ends with a note saying exactly how many characters
were cut. `max_output_bytes` is what one reply may carry over the message bus: an output
whose encoded size is over it is written whole to a file in the workspace (the sandbox's
own disk, behind the same path containment as write_file), and the result keeps the head
that fits with a note naming that file. Nothing downstream cuts a result again, so the
notes written here are the last word.
"""
import json
import re
import secrets

from .registry import ToolError

DEFAULT_MAX_OUTPUT_CHARS = 30000
SPILL_DIR = ".runbox/outputs"
# Closing notes kept through a cut: a few short lines, never a way to keep content uncut.
MAX_CLOSING_NOTES = 3
MAX_NOTE_CHARS = 300


def fit_output(result, args, request_id=None):
    """Cut `result["output"]` to the character budget, then spill it if it is over the byte budget."""
    output = result.get("output")
    if not isinstance(output, str):
        return result
    output = cut_to_chars(output, _positive_int(args.get("max_output_chars")) or DEFAULT_MAX_OUTPUT_CHARS)
    max_bytes = _positive_int(args.get("max_output_bytes"))
    if max_bytes and encoded_size(output) > max_bytes:
        output, spilled_to = spill(output, max_bytes, request_id)
        result["metadata"] = dict(result.get("metadata") or {}, output_spilled_to=spilled_to)
    result["output"] = output
    return result


def cut_to_chars(text, limit):
    """At most `limit` characters of the tool's text, then a note counting exactly what was cut.

    The tool's own closing notes (its last lines starting with "… ", such as read_file's
    "… 1 more line (use offset=2 to continue)") are kept whole after the cut note and count
    against the budget: they tell the model how to go on, which matters more than the last
    characters of the content.
    """
    if len(text) <= limit:
        return text
    body, notes = split_closing_notes(text)
    keep = max(limit - len(notes), 0)
    return body[:keep] + _cut_note(len(body) - keep, limit) + notes


def split_closing_notes(text):
    """(text without its closing notes, the notes with their leading newlines)."""
    start = len(text)
    for _ in range(MAX_CLOSING_NOTES):
        line_start = text.rfind("\n", 0, start)
        if line_start < 0 or not text.startswith("\n… ", line_start) or start - line_start > MAX_NOTE_CHARS:
            break
        start = line_start
    return text[:start], text[start:]


def _cut_note(cut, limit):
    return "\n… %d characters cut (max_output_chars=%d)" % (cut, limit)


def encoded_size(text):
    """Bytes `text` takes as a JSON string in a reply."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogateescape"))


def spill(output, max_bytes, request_id):
    """Writes `output` to a workspace file; returns (head that fits + note, display path or None)."""
    # Imported here: files imports the registry this module sits beside.
    from .files import write_file

    name = "%s-%s.txt" % (re.sub(r"[^A-Za-z0-9_.-]", "_", str(request_id or "output"))[:80], secrets.token_hex(3))
    total = len(output.encode("utf-8", "surrogateescape"))
    try:
        written = write_file({"path": "%s/%s" % (SPILL_DIR, name), "content": output})
        where = written["metadata"]["path"]
        note = (
            "\n… the output is %d bytes, over the %d-byte limit for one result: above is its start; "
            "all of it is in %s (page through it with read_file, or grep it)" % (total, max_bytes, where)
        )
    except ToolError as e:
        where = None
        note = "\n… the output is %d bytes, over the %d-byte limit for one result: above is its start; the rest could not be saved (%s)" % (
            total,
            max_bytes,
            e,
        )
    return _head_within(output, max_bytes - encoded_size(note)) + note, where


def _head_within(text, budget):
    """The longest start of `text` (ending at a line break when one is near) whose encoded size fits `budget`."""
    if budget <= 2:
        return ""
    head = text.encode("utf-8", "surrogateescape")[:budget].decode("utf-8", "ignore")
    # Escapes (\n, \", control characters) make the JSON longer than the raw bytes: shrink by the excess.
    while head and encoded_size(head) > budget:
        head = head[: len(head) - max(1, encoded_size(head) - budget)]
    newline = head.rfind("\n")
    if newline >= len(head) // 2:
        head = head[: newline + 1]
    return head


def _positive_int(value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value
