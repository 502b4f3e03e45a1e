"""What an import did: counts per kind, what was skipped and why, renumbered ids, time."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ImportReport", "Skipped"]

KINDS = (
    "user",
    "workspace",
    "project",
    "experiment",
    "trial",
    "checkpoint",
    "metrics",
    "model",
    "model_version",
    "template",
    "webhook",
    "task_log",
)
"""The kinds the importer brings over, in the order it does."""


@dataclass(frozen=True)
class Skipped:
    """Something not imported, and why."""

    kind: str
    old_id: str
    reason: str


@dataclass
class ImportReport:
    """The outcome of one run of ``stalwart import determined``.

    ``counts[kind]`` has ``imported`` (new here), ``present`` (imported by an earlier run) and
    ``matched`` (an existing Stalwart user, workspace or project of the same name stands for
    it); metrics count reports, task logs lines. ``renumbered`` lists ``(kind, old, new)`` for
    rows whose Determined id was taken here. ``left_out`` names Determined tables not imported
    at all.
    """

    source: str
    dry_run: bool
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    renumbered: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left_out: dict[str, tuple[int, str]] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, kind: str, outcome: str, n: int = 1) -> None:
        """Add ``n`` to ``kind``'s ``outcome``."""
        self.counts.setdefault(kind, Counter())[outcome] += n

    def skip(self, kind: str, old_id: object, reason: str) -> None:
        self.skipped.append(Skipped(kind, str(old_id), reason))

    def imported(self, kind: str) -> int:
        return self.counts.get(kind, Counter())["imported"]

    def as_json(self) -> dict[str, Any]:
        """The report as plain JSON (``--json``)."""
        return {
            "source": self.source,
            "dryRun": self.dry_run,
            "counts": {kind: dict(self.counts.get(kind, Counter())) for kind in KINDS},
            "skipped": [vars(s) for s in self.skipped],
            "renumbered": [{"kind": k, "old": o, "new": n} for k, o, n in self.renumbered],
            "notes": self.notes,
            "leftOut": {t: {"rows": n, "why": w} for t, (n, w) in self.left_out.items()},
            "seconds": round(self.seconds, 3),
        }

    def render(self) -> str:
        """The report as the CLI prints it."""
        head = "Dry run (nothing written)" if self.dry_run else "Imported"
        lines = [f"{head} from Determined cluster {self.source} in {self.seconds:.1f} s", ""]
        lines.append(f"{'kind':<14}{'imported':>10}{'already':>10}{'matched':>10}")
        for kind in KINDS:
            c = self.counts.get(kind, Counter())
            lines.append(f"{kind:<14}{c['imported']:>10}{c['present']:>10}{c['matched']:>10}")
        if self.renumbered:
            lines += ["", "Renumbered (the Determined id was taken here):"]
            lines += [f"  {kind} {old} -> {new}" for kind, old, new in self.renumbered]
        if self.skipped:
            lines += ["", "Skipped:"]
            lines += [f"  {s.kind} {s.old_id}: {s.reason}" for s in self.skipped]
        if self.left_out:
            lines += ["", "Not imported:"]
            lines += [f"  {t} ({n} rows): {why}" for t, (n, why) in self.left_out.items()]
        if self.notes:
            lines += ["", *self.notes]
        return "\n".join(lines)
