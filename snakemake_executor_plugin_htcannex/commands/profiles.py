"""`htcannex profiles install`: put the bundled profiles where `--profile NAME` finds them.

Snakemake resolves `--profile local` in ./local, then in its user config
directory (~/.config/snakemake/local on Linux), then the site directory; never in
a repository's `profiles/`. Installing copies profiles/local and profiles/nairr
into the user config directory. A profile already there that differs from the
bundled one (the user set their allocations in it) is kept unless --force.
"""
import filecmp
import shutil
from pathlib import Path

from snakemake.common import get_appdirs

from snakemake_executor_plugin_htcannex.commands._common import UsageError, add_verbs

PROFILE_NAMES = ("local", "nairr")


def bundled_profiles() -> Path:
    """profiles/ inside the wheel, or at the root of a source checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "profiles", here.parent / "profiles"):
        if (candidate / "local" / "config.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"no bundled profiles next to {here}; reinstall htcannex")


def user_profiles_dir() -> Path:
    """Where `snakemake --profile NAME` looks after the working directory."""
    return Path(get_appdirs().user_config_dir)


def _same_tree(left: Path, right: Path) -> bool:
    comparison = filecmp.dircmp(left, right)
    if comparison.left_only or comparison.right_only or comparison.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(left, right, comparison.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(_same_tree(left / sub, right / sub) for sub in comparison.common_dirs)


def install(names=PROFILE_NAMES, destination: Path | None = None, force: bool = False) -> int:
    source_root = bundled_profiles()
    destination = destination or user_profiles_dir()
    status = 0
    for name in names:
        source, target = source_root / name, destination / name
        if target.exists() and _same_tree(source, target):
            print(f"profile {name}: already installed at {target}")
            continue
        if target.exists() and not force:
            print(f"profile {name}: {target} exists and differs from the bundled one "
                  f"(your edits?); kept. Use --force to replace it.")
            status = 1
            continue
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
        print(f"profile {name}: installed at {target}; use it with --profile {name}")
    return status


def register(nouns) -> None:
    install_parser = add_verbs(nouns, "profiles", "install the bundled Snakemake profiles", (
        ("install", _run_install, f"copy the {' and '.join(PROFILE_NAMES)} profiles to {user_profiles_dir()}"),
    ))["install"]
    install_parser.add_argument("names", nargs="*", metavar="NAME", help=f"profiles to install (default: all of {', '.join(PROFILE_NAMES)})")
    install_parser.add_argument("--dest", type=Path, default=None,
                                help=f"install here instead of {user_profiles_dir()}")
    install_parser.add_argument("--force", action="store_true",
                                help="replace an installed profile that differs from the bundled one")


def _run_install(args) -> int:
    unknown = [name for name in args.names if name not in PROFILE_NAMES]
    if unknown:
        raise UsageError(f"unknown profile(s) {', '.join(unknown)}; the bundled ones are {', '.join(PROFILE_NAMES)}")
    return install(args.names or PROFILE_NAMES, args.dest, args.force)
