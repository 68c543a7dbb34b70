"""The seed studies as runnable examples (`tilemark example`).

Each example is a directory under `tilemark/examples/` (shipped in the wheel; `examples/` in
the source tree links to it) holding its tile or workload files, a README that states the
seed's setup and maps every output to the seed's table or figure, and `example.toml`: the
targets it needs, and its steps, each a tilemark command line with placeholders:

- `{dir}` the example's directory (its tile files), `{results}` the results directory;
- `{NAME}` the target the user gave for the example's target NAME (`{target}`, `{hdd}`);
- `{study:STEP}` the study an earlier step stored, `{run:STEP}` the run an earlier step
  stored (for `compare`).

`quick` in a step overrides flags (`"--duration" = "1"`) to scale durations, sizes and the
number of steps down, so an example runs in seconds on a small file; `--quick` applies them.
The same override rule carries the user's own flags after `--`: a flag the step has gets the
new value, a flag it lacks is added to the steps that use a target.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.workload.tomlfile import read_toml

EXAMPLES_DIR = Path(__file__).parent / "examples"
MANIFEST = "example.toml"
PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_]+(?::[A-Za-z0-9_-]+)?)\}")
MAKES = ("study", "run", "file")
# Flags every command of a step takes from `tilemark example run` itself.
RESULTS_FLAG = "--results"


@dataclass
class Output:
    """A file a step writes, and the seed's table or figure it corresponds to."""

    file: str  # relative to the step's study (or run) directory, or to the results directory
    seed: str  # the seed's caption
    what: str = ""


@dataclass
class Step:
    """One tilemark command of an example."""

    name: str
    args: list[str]
    quick: dict[str, str | None]
    outputs: list[Output]
    # "study": stores a study; "run": stores a run; "file": writes the files named in outputs
    makes: str = "study"


@dataclass
class Example:
    """An example: a seed study as tilemark commands."""

    name: str
    seed: str
    title: str
    directory: Path
    targets: list[str]
    steps: list[Step]
    readme: Path = field(init=False)

    def __post_init__(self) -> None:
        self.readme = self.directory / "README.md"


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a list of strings.")
    return list(value)


def load_example(directory: Path) -> Example:
    """An example directory's manifest, checked."""
    where = str(directory / MANIFEST)
    doc = read_toml(directory / MANIFEST, "example manifest")
    head = doc.get("example") or {}
    for key in ("name", "seed", "title"):
        if not isinstance(head.get(key), str):
            raise UsageError(f"{where}: [example] {key} is required (a string).")
    steps = []
    for i, t in enumerate(doc.get("step") or []):
        here = f"{where} [[step]] {i + 1}"
        quick = t.get("quick", {})
        if not isinstance(quick, dict):
            raise UsageError(f"{here}: quick must be a table of flags.")
        outputs = [Output(o["file"], o["seed"], o.get("what", "")) for o in t.get("output", [])]
        makes = str(t.get("makes", "study"))
        if makes not in MAKES:
            raise UsageError(f"{here}: makes must be one of {', '.join(MAKES)}, got {makes!r}.")
        steps.append(
            Step(
                name=str(t.get("name", f"step{i + 1}")),
                args=_strings(t.get("args"), f"{here} args"),
                quick={k: (None if v is True else str(v)) for k, v in quick.items()},
                outputs=outputs,
                makes=makes,
            )
        )
    if not steps:
        raise UsageError(f"{where} has no [[step]] tables.")
    return Example(
        name=head["name"],
        seed=head["seed"],
        title=head["title"],
        directory=directory,
        targets=_strings(head.get("targets", ["target"]), f"{where} [example] targets"),
        steps=steps,
    )


def list_examples() -> list[Example]:
    """Every shipped example, by name."""
    return [load_example(d) for d in sorted(EXAMPLES_DIR.iterdir()) if (d / MANIFEST).is_file()]


def find_example(name: str) -> Example:
    """An example by its name or its seed number ('000', '0', '000-esg-mixed-workload')."""
    found = list_examples()
    for e in found:
        if name in (e.name, e.seed) or (name.isdigit() and int(name) == int(e.seed)):
            return e
    known = ", ".join(e.name for e in found)
    raise UsageError(f"unknown example {name!r} (examples: {known}).")


def parse_extra(extra: Sequence[str]) -> list[tuple[str, str | None]]:
    """Flags after `--`: ['--capacity', '2t', '--buffered'] -> [(flag, value or None)]."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(extra):
        flag = extra[i]
        if not flag.startswith("--"):
            raise UsageError(
                f"after --, give tilemark flags such as --capacity 2t or --duration 30m, "
                f"got {flag!r}."
            )
        has_value = i + 1 < len(extra) and not extra[i + 1].startswith("--")
        out.append((flag, extra[i + 1] if has_value else None))
        i += 2 if has_value else 1
    return out


def _uses_target(args: list[str], targets: list[str]) -> bool:
    return any(f"{{{t}}}" in a for a in args for t in targets)


def override(args: list[str], flags: Sequence[tuple[str, str | None]], add: bool) -> list[str]:
    """`args` with each flag's value replaced where the flag is present; absent flags are
    appended when `add`."""
    out = list(args)
    for flag, value in flags:
        if flag in out:
            i = out.index(flag)
            takes_value = i + 1 < len(out) and not out[i + 1].startswith("--")
            if value is None:
                if takes_value:
                    raise UsageError(f"{flag} needs a value in this example.")
            elif takes_value:
                out[i + 1] = value
            else:
                out.insert(i + 1, value)
        elif add:
            out += [flag] if value is None else [flag, value]
    return out


@dataclass
class Plan:
    """An example's steps as they will run: arguments with the targets filled in."""

    example: Example
    commands: list[list[str]]  # still holding {study:STEP} until the step before has run
    quick: bool


def plan_example(
    example: Example,
    targets: Sequence[str],
    *,
    quick: bool,
    results: Path,
    extra: Sequence[str] = (),
    destroy_data: Sequence[str] = (),
    force: bool = False,
) -> Plan:
    """The commands of an example for these targets; a UsageError before anything runs."""
    if len(targets) != len(example.targets):
        names = ", then ".join(example.targets)
        raise UsageError(
            f"example {example.name} needs {len(example.targets)} target(s): give --target "
            f"for {names}, got {len(targets)}."
        )
    values = {"dir": str(example.directory), "results": str(results)}
    values.update(zip(example.targets, targets, strict=True))
    user_flags = parse_extra(extra)
    if force and not destroy_data:
        raise UsageError("--force only applies together with --destroy-data PATH.")
    for path in destroy_data:
        if path not in targets:
            raise UsageError(
                f"--destroy-data {path} must name one of the example's targets "
                f"({', '.join(targets)})."
            )
    steps = {s.name for s in example.steps}
    commands = []
    for step in example.steps:
        args = list(step.args)
        writes = _uses_target(args, example.targets)
        if quick:
            args = override(args, list(step.quick.items()), add=True)
        args = override(args, user_flags, add=writes)
        filled = []
        for a in args:

            def fill(m: re.Match[str]) -> str:
                key = m.group(1)
                kind, _, step_name = key.partition(":")
                if kind in ("study", "run") and step_name:
                    if step_name not in steps:
                        raise UsageError(f"example {example.name}: no step {step_name!r}.")
                    return m.group(0)  # filled in once that step has run
                if key not in values:
                    raise UsageError(f"example {example.name}: unknown placeholder {{{key}}}.")
                return values[key]

            filled.append(PLACEHOLDER.sub(fill, a))
        used = {values[t] for t in example.targets if _uses_target(step.args, [t])}
        for path in destroy_data:
            if path in used:
                filled += ["--destroy-data", path] + (["--force"] if force else [])
        filled += [RESULTS_FLAG, str(results)]
        commands.append(filled)
    return Plan(example, commands, quick)


def studies_in(results: Path) -> set[Path]:
    studies = results / "studies"
    return {p for p in studies.iterdir() if p.is_dir()} if studies.is_dir() else set()


def runs_in(results: Path) -> set[Path]:
    if not results.is_dir():
        return set()
    return {p for p in results.iterdir() if (p / "run.json").is_file()}


STORED = {"study": studies_in, "run": runs_in}


@dataclass
class StepResult:
    """What one step did: its exit status and the study or run it stored (if any)."""

    step: Step
    argv: list[str]
    status: int
    study: Path | None  # the study's directory, or the run's for a step that makes a run
    outputs: list[tuple[Output, Path]]


def run_example(
    plan: Plan,
    results: Path,
    run: Callable[[list[str]], int],
    announce: Callable[[str], None],
) -> list[StepResult]:
    """Run the steps in order with `run(argv)` (tilemark's main); a step that fails (any exit
    status but 0, or 3: QoS failed, which is an answer) stops the example."""
    done: list[StepResult] = []
    stored: dict[str, Path] = {}  # "study:STEP" / "run:STEP" -> its directory
    for step, argv in zip(plan.example.steps, plan.commands, strict=True):
        missing = [
            m.group(1)
            for a in argv
            for m in PLACEHOLDER.finditer(a)
            if ":" in m.group(1) and m.group(1) not in stored
        ]
        if missing:
            kind, _, name = missing[0].partition(":")
            announce(f"step {step.name} needs the {kind} of step {name}, which stored none")
            done.append(StepResult(step, argv, 1, None, []))
            break
        argv = [PLACEHOLDER.sub(lambda m: stored[m.group(1)].name, a) for a in argv]
        announce("$ tilemark " + shlex.join(argv))
        find = STORED.get(step.makes)
        before = find(results) if find else set()
        status = run(argv)
        made = sorted(find(results) - before) if find else []
        study = made[-1] if made else None
        if study is not None:
            stored[f"{step.makes}:{step.name}"] = study
        home = study if study is not None else results
        outputs = [(o, home / o.file) for o in step.outputs]
        done.append(StepResult(step, argv, status, study, outputs))
        if status not in (0, 3):
            break
    return done
