"""Named task subsets for `verl-swe eval --subset NAME`: fixed instance-id lists, each bundled with its source.

The paper tracks checkpoints on "Verified-50", a fixed random subset of SWE-bench Verified whose ids it lists
in App. B (P1 Sec. 4.1, Fig. 3; paper 1.8). A subset file holds one instance id a line; `#` lines are its
header (where the list came from). `--subset` also takes such a file's path, or a number N (a fixed random N
of the tasks given, verl_swe/eval/runs.py `subset_ids`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent


class SubsetError(ValueError):
    pass


@dataclass(frozen=True)
class NamedSubset:
    name: str
    file: Path
    about: str


SUBSETS = {
    "verified-50": NamedSubset(
        "verified-50", HERE / "verified_50.txt",
        "the paper's checkpoint-tracking subset of SWE-bench Verified (P1 App. B)"),
}


def read_ids(path: Path) -> list[str]:
    """The ids of a subset file: one a line, `#` comments and blank lines skipped, order and duplicates kept out."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise SubsetError(f"cannot read subset file {path}: {e}") from None
    ids = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not ids:
        raise SubsetError(f"subset file {path} lists no instance ids")
    return list(dict.fromkeys(ids))


def subset_source(spec: str) -> tuple[str, Path]:
    """(name, file) of `spec`: a registered name or a path to a file of ids."""
    if spec in SUBSETS:
        named = SUBSETS[spec]
        if not named.file.is_file():
            raise SubsetError(f"subset {spec!r} ({named.about}) has no id list bundled at {named.file}: the paper's "
                              "list could not be sourced; pass the path to a file of its instance ids instead")
        return spec, named.file
    path = Path(spec).expanduser()
    if path.is_file():
        return path.stem, path
    raise SubsetError(f"--subset {spec!r}: not a registered subset ({', '.join(SUBSETS)}), a file of instance ids, "
                      "or a number of tasks")


def select_subset(instance_ids: list[str], spec: str) -> tuple[list[str], dict]:
    """The ids of subset `spec` (all of them must be among `instance_ids`), and what the report says of it."""
    name, path = subset_source(spec)
    ids = read_ids(path)
    missing = [i for i in ids if i not in set(instance_ids)]
    if missing:
        raise SubsetError(f"{len(missing)} of the {len(ids)} ids of subset {name!r} ({path}) are not among the tasks "
                          f"given: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    return ids, {"name": name, "file": str(path), "size": len(ids)}
