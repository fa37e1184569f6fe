"""The repository says what is true now, for the people who use and change htcannex: no numbers of
the issues the work was filed under, no ordinals of the sessions it was done in, no paths of the
machine it was developed on. History lives in git."""
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ORDINALS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\\d+(?:st|nd|rd|th)"
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.IGNORECASE),
    "a session of the work": re.compile(rf"\b(?:(?:{ORDINALS}|this|last|previous|next) session)\b", re.IGNORECASE),
    "a path of a development machine": re.compile(r"(?<![\w.~$])/work/|/tmp/realcondor|\bshared/real(?:pool|site)\b"),
}


def tracked_text_files():
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, names.split("\0")):
        path = REPO / name
        if path == Path(__file__).resolve() or not path.is_file():
            continue
        try:
            yield name, path.read_text()
        except UnicodeDecodeError:
            continue  # binary


def test_no_issue_numbers_sessions_or_machine_paths_in_the_repository():
    found = [f"{name}:{text.count(chr(10), 0, match.start()) + 1}: {what}: {match.group()!r}"
             for name, text in tracked_text_files()
             for what, pattern in FORBIDDEN.items() for match in pattern.finditer(text)]
    assert not found, f"{len(found)} place(s) to rewrite as what is true now:\n" + "\n".join(found[:200])
