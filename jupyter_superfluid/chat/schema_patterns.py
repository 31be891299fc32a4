"""A JSON schema's ``pattern`` in the regex subset the grammar converter translates right.

llama-cpp-python's ``SchemaConverter`` (llama.cpp's own converter, ported) copies most
backslash escapes into GBNF unchanged. GBNF reads only ``\\x \\u \\U \\t \\r \\n \\\\ \\"
\\[ \\]``, so the commonest patterns (``\\d``, ``\\.``, ``\\w``, ``\\s``) became grammars
that llama.cpp and vLLM's xgrammar both refuse to compile. It also takes only anchored
patterns, while JSON Schema's are searches. This rewrites a pattern into one the converter
handles: shorthand classes spelled out, escaped punctuation as hex escapes, an unanchored
side opened with ``.*``.

The grammar matches the JSON text of the string, not its value, so what it allows must
also be valid inside a JSON string: a quote or a backslash the pattern asks for is
written JSON-escaped, negated classes leave out the quote, the backslash and control
characters, and ``\\s`` allows the space only (a tab or a line break would need an
escape a character class cannot hold). The value still always matches the pattern. Pure.
"""

from __future__ import annotations

# What the shorthand classes hold (ASCII, as JSON Schema's ECMA-262 regexes without /u),
# as far as a JSON string holds them unescaped.
_SHORTHAND = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " "}
# What no class may let into a JSON string unescaped: the quote, the backslash, controls.
_NOT_IN_JSON = "\\x22\\x5C\\x00-\\x1F\\x7F"
# A quote or a backslash of the value, as its JSON text in a converter literal.
_JSON_ESCAPED = {'"': '\\\\\\"', "\\": "\\\\\\\\"}
# Escapes GBNF reads itself, in a literal and in a class.
_GBNF_ESCAPES = frozenset('xuUtrn\\"[]')
# Escapes the converter turns into the plain character outside a class.
_CONVERTER_UNESCAPES = frozenset("()|{}*+?")
# A control character the pattern asks for, as its JSON escape in a converter literal
# (written raw it would not be JSON); in a class it has no such form and is refused.
_CONTROL = {c: "\\\\" + e for c, e in {"t": "t", "n": "n", "r": "r", "f": "f"}.items()}
_CONTROL |= {"v": "\\\\u000B", "0": "\\\\u0000"}


def pattern_for_grammar(pattern: str) -> str:
    """``pattern`` anchored at both ends, its escapes in the converter's subset."""
    body, anchored_start, anchored_end = _strip_anchors(pattern)
    out: list[str] = []
    in_class = negated = False
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_escape(body[i + 1], in_class))
            i += 2
            continue
        if c == "[" and not in_class:
            in_class, negated = True, body.startswith("[^", i)
        elif c == "]" and in_class:
            in_class = False
            out.append(_NOT_IN_JSON if negated else "")
        elif c == '"' and not in_class:
            c = _JSON_ESCAPED[c]
        out.append(c)
        i += 1
    rewritten = "".join(out)
    if not (anchored_start and anchored_end):  # a search: anything may come around it
        around = "(" + rewritten + ")" if rewritten else ""
        rewritten = ("" if anchored_start else ".*") + around + ("" if anchored_end else ".*")
    return "^" + rewritten + "$"


def _strip_anchors(pattern: str) -> tuple[str, bool, bool]:
    """The pattern without its ``^``/``$`` anchors, and which ends had one."""
    start = pattern.startswith("^")
    body = pattern[1:] if start else pattern
    # A final "$" is an anchor unless escaped: an odd run of backslashes before it.
    run = len(body[:-1]) - len(body[:-1].rstrip("\\"))
    end = body.endswith("$") and run % 2 == 0
    return (body[:-1] if end else body), start, end


def _escape(char: str, in_class: bool) -> str:
    """One escape ``\\char``, as the converter and GBNF will read it."""
    lower = char.lower()
    if lower in _SHORTHAND:
        chars = _SHORTHAND[lower]
        if char == lower:
            return chars if in_class else f"[{chars}]"
        return "\\" + char if in_class else f"[^{chars}{_NOT_IN_JSON}]"  # in a class: refused
    if not in_class and char in _JSON_ESCAPED:
        return _JSON_ESCAPED[char]
    if not in_class and char in _CONTROL:
        return _CONTROL[char]
    if char in _GBNF_ESCAPES or (not in_class and char in _CONVERTER_UNESCAPES):
        return "\\" + char
    if char.isalnum():
        return "\\" + char  # \b, \B, \1…: no grammar equivalent; the compiler refuses it
    code = ord(char)
    hexed = f"\\x{code:02X}" if code < 0x100 else f"\\u{code:04X}"
    return hexed if in_class else f"[{hexed}]"
