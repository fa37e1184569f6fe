r"""`transfer_output_remaps`, read as HTCondor reads it (src/condor_utils/filename_tools_cpp.cpp).

The value is `name = destination; name = destination; ...`. Tabs and newlines are dropped
(eat_space); each side is read up to its delimiter (`=` for a name, `;` for a destination), where a
backslash before the delimiter makes it part of the text, and is trimmed of white space (copy_upto).
An entry whose name holds a `;` (one without `=`) is skipped. A name with no rule of its own is
remapped by its parent directory (`a/b/c` by a rule for `a/b` -> `<destination>/c`), and a remapped
name is looked up again, up to MAX_REMAP_RECURSIONS (128) times: more is a cycle, which holds the job.
"""

MAX_REMAP_RECURSIONS = 128  # HTCondor's default


class RemapCycle(ValueError):
    """The remaps lead round in a cycle (HTCondor holds the job: "remaps resulted in a cycle")."""


def _copy_upto(text: str, start: int, delimiter: str) -> tuple[str, int | None]:
    """(the text from `start` up to an unescaped `delimiter`, trimmed; the delimiter's index or None)."""
    out, escape, at = [], False, start
    while at < len(text):
        char = text[at]
        if char == "\\" and not escape and text[at + 1:at + 2] == delimiter:
            escape = True
        elif char == delimiter and not escape:
            return "".join(out).strip(), at
        elif char.isspace() and not out:
            pass  # leading white space
        else:
            escape = False
            out.append(char)
        at += 1
    return "".join(out).strip(), None


def rules(value: str) -> list[tuple[str, str]]:
    """The (name, destination) rules of a transfer_output_remaps value, in order."""
    text = value.replace("\t", "").replace("\n", "")
    found, at = [], 0
    while True:
        start = at
        name, at = _copy_upto(text, at, "=")
        if at is None:
            break
        if ";" in name:  # a field without '=': skip it and start again after its ';' (counted as HTCondor does)
            at = start + name.index(";") + 1
            continue
        destination, at = _copy_upto(text, at + 1, ";")
        found.append((name, destination))
        if at is None:
            break
        at += 1
    return found


def remap(value: str, name: str, level: int = 0) -> str | None:
    """Where `name` goes under the remaps `value`; None when no rule applies. Raises RemapCycle."""
    if level > MAX_REMAP_RECURSIONS:
        raise RemapCycle(f"remaps resulted in a cycle: {name}")
    destination = next((to for rule_name, to in rules(value) if rule_name == name), None)
    if destination is not None:
        further = remap(value, destination, level + 1)
        return destination if further is None else further
    parent, slash, entry = name.rpartition("/")
    if not slash:
        return None
    new_parent = remap(value, parent, level + 1)
    return None if new_parent is None else f"{new_parent}/{entry}"
