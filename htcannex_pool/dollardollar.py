"""Match-time `$$()` expansion, as HTCondor's schedd does it when a job starts on a slot.

condor_submit leaves every `$$(...)` in the job ad (config.cpp: a `$$` prefix is never a submit
macro); the schedd expands them against the matched slot's ad before the shadow and starter see
the job (qmgmt.cpp, get_expanded_job_ad): in every attribute but MATCH_* (strings and expressions,
in their unparsed form), each `$$(Name)`, `$$(Name:default)`, `$$([expression])` and
`$$(DOLLARDOLLAR)`, left to right, never re-reading what it put in:
- `$$(DOLLARDOLLAR)` is a literal `$$` (the escape for a `$$(` a job means literally);
- `$$(Name)` is the slot's attribute Name (a string without its quotes), else the default after
  ':'; the value is kept in the job ad as MATCH_Name and the expanded attribute as
  MATCH_EXP_<attribute>, which is what later expansions use when there is no slot ad (here: the
  output transfer after the job exits);
- `$$([expression])` is `string(expression)` evaluated with the job as MY and the slot as TARGET;
- anything else (a missing attribute without a default, a '.' in a name, an expression that does
  not evaluate) holds the job: "Cannot expand $$ expression (Name)." with the schedd's holdJob
  default code 0.
The scanner follows config.cpp's next_config_macro with the `$$` prefix: `$` signs pair up from
the left, so `$$$(x)` holds no `$$(` macro.
"""
import re

import classad2

MATCH_PREFIX = "MATCH_"
MATCH_EXPANDED_PREFIX = "MATCH_EXP_"  # the whole expanded attribute, kept for a later expansion without a slot
ESCAPE_NAME = "DOLLARDOLLAR"
ID_CHARACTER = re.compile(r"[A-Za-z0-9_./]")  # condor_isidchar
AFTER_COLON_EXTRA = set("$ ,\\:")  # COLON_DEF_EXTRACHARSET
PREFIX_WORD = re.compile(r"[A-Za-z0-9_]*")


class ExpansionError(ValueError):
    """A `$$()` that cannot be expanded; the message is the schedd's hold reason."""

    def __init__(self, name: str):
        super().__init__(f"Cannot expand $$ expression ({name}).")


def next_macro(text: str, start: int) -> tuple[int, int, int] | None:
    """(where the `$$` is, where its body starts, where its ')' is) of the next `$$()` from `start`."""
    search = start
    while True:
        dollar = text.find("$", search)
        if dollar < 0:
            return None
        after = dollar + 2 if text.startswith("$$", dollar) else dollar + 1
        after = PREFIX_WORD.match(text, after).end()
        if not (text.startswith("(", after) and after - dollar == 2 and text.startswith("$$", dollar)):
            search = after
            continue
        body = after + 1
        close = _body_end(text, body)
        if close is None:
            search = body
            continue
        return dollar, body, close


def _body_end(text: str, body: int) -> int | None:
    """The index of the body's closing ')' (MACRO_BODY_SCAN_BRACKET or MACRO_BODY_IDCHAR_COLON), or None."""
    if text.startswith("[", body):
        end = text.find("])", body)
        return None if end < 0 else end + 1
    at, after_colon = body, False
    while at < len(text) and text[at] != ")":
        character = text[at]
        at += 1
        if character == ":" and not after_colon:
            after_colon = True
            continue
        if after_colon:
            if character == "(":
                close = text.find(")", at)
                if close >= 0:
                    at = close + 1
                    continue
            elif character in AFTER_COLON_EXTRA:
                continue
        if not ID_CHARACTER.fullmatch(character):
            return None
    return at if at < len(text) else None


def expand(job: classad2.ClassAd, slot: classad2.ClassAd | None) -> classad2.ClassAd:
    """The job ad the starter gets: `job` with every `$$()` expanded against `slot` (None: from the
    MATCH_* values kept in `job` by an earlier expansion), a copy if anything changes. Raises
    ExpansionError."""
    if "$$" not in str(job):
        return job  # nearly every job: no copy
    expanded = classad2.ClassAd(str(job))
    for attribute in list(job.keys()):
        if attribute.upper().startswith(MATCH_PREFIX):
            continue
        text = str(job.lookup(attribute))
        if "$$" not in text:
            continue
        cached = MATCH_EXPANDED_PREFIX + attribute
        if slot is None and cached in job:
            expanded[attribute] = job.lookup(cached)
            continue
        expanded[attribute] = classad2.ExprTree(_expand_text(text, job, slot))
        if slot is not None:
            job[cached] = expanded.lookup(attribute)
    return expanded


def _expand_text(text: str, job: classad2.ClassAd, slot: classad2.ClassAd | None) -> str:
    search = 0
    while (found := next_macro(text, search)) is not None:
        dollar, body, close = found
        name = text[body:close]
        value = _value(name, job, slot)
        text = text[:dollar] + value + text[close + 1:]
        search = dollar + len(value)
    return text


def _value(name: str, job: classad2.ClassAd, slot: classad2.ClassAd | None) -> str:
    if name.startswith("[") and name.endswith("]"):
        expression = "string(" + re.sub(r'\\(["\\])', r"\1", name[1:-1]) + ")"
        try:
            value = classad2.ExprTree(expression).simplify(job, slot).eval()
        except Exception:  # classad2 raises its own ClassAdException for a parse error
            raise ExpansionError(name) from None
        if not isinstance(value, str):
            raise ExpansionError(name)
        return value
    if "." in name:
        raise ExpansionError(name)
    attribute, _, default = name.partition(":")
    if attribute.upper() == ESCAPE_NAME:
        return "$$"
    if slot is not None and attribute in slot:
        value = str(slot.lookup(attribute))
        job[MATCH_PREFIX + attribute] = slot.lookup(attribute)
    elif slot is None and MATCH_PREFIX + attribute in job:
        value = str(job.lookup(MATCH_PREFIX + attribute))
    elif ":" in name:
        return default
    else:
        raise ExpansionError(name)
    return value[1:-1] if value.startswith('"') and value.endswith('"') and len(value) > 1 else value
