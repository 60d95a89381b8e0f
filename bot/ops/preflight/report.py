"""What ``check`` found and how it prints: the statuses, the rows, the table, and one look at the LLM server."""

from __future__ import annotations

from dataclasses import dataclass, field

OK, FAIL, WARN, NO_GPU, SKIP, HATCH = "ok", "FAIL", "warn", "no GPU", "skip", "hatch"


@dataclass
class Row:
    area: str
    item: str
    status: str
    detail: str
    #: The declared escape hatch that lets ``serve`` start despite this failure.
    hatch: str | None = None


@dataclass
class CheckReport:
    rows: list[Row] = field(default_factory=list)
    #: Lines printed loudly under the table (the ways out of an unreachable LLM server).
    notes: list[str] = field(default_factory=list)
    #: Figures other checks reuse (the LLM's first token, for the startup self-timing).
    figures: dict[str, float] = field(default_factory=dict)

    def add(self, area: str, item: str, status: str, detail: str, hatch: str | None = None) -> Row:
        row = Row(area, item, status, detail, hatch)
        self.rows.append(row)
        return row

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.status == FAIL]

    @property
    def blocking(self) -> list[Row]:
        """Failures no declared escape hatch covers: ``serve`` refuses to start on these."""
        return [r for r in self.failures if not r.hatch]

    def table(self) -> str:
        w_area = max(len("area"), *(len(r.area) for r in self.rows))
        w_item = max(len("check"), *(len(r.item) for r in self.rows))
        w_status = max(len("status"), *(len(r.status) for r in self.rows))
        lines = [f"{'area':<{w_area}}  {'check':<{w_item}}  {'status':<{w_status}}  detail"]
        lines.append("-" * (w_area + w_item + w_status + 6 + 40))
        for r in self.rows:
            detail = r.detail + (f"  [declared escape hatch {r.hatch}: serve starts anyway]" if r.hatch else "")
            lines.append(f"{r.area:<{w_area}}  {r.item:<{w_item}}  {r.status:<{w_status}}  {detail}")
        n, h = len(self.failures), len(self.failures) - len(self.blocking)
        if n:
            names = ", ".join(f"{r.area} {r.item}" for r in self.failures)
            lines.append(f"result: {n} FAILED ({names})" + (f"; {h} covered by a declared escape hatch" if h else ""))
        else:
            warns = sum(r.status == WARN for r in self.rows)
            lines.append("result: all checks passed" + (f" ({warns} warning{'s' * (warns != 1)})" if warns else ""))
        if self.notes:
            bar = "!" * 78
            lines += [bar, *self.notes, bar]
        return "\n".join(lines)


@dataclass
class Probe:
    """What one look at the LLM server found."""

    reachable: bool = False
    error: str = ""
    models: list[str] = field(default_factory=list)
    turn: dict | None = None
    problem: str = ""  # why the structured answer is not usable ("" = it is)
    first_token_ms: float | None = None
    total_ms: float | None = None

