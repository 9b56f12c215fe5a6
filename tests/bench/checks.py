"""A benchmark target and how one measured figure fares against it (shared by the benchmarks)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    value: float
    target: float
    higher_is_better: bool

    @property
    def met(self) -> bool:
        return self.value >= self.target if self.higher_is_better else self.value <= self.target

    def line(self) -> str:
        relation = ">=" if self.higher_is_better else "<="
        verdict = "ok" if self.met else "MISSED"
        return f"  {self.name:<48} {self.value:>10.2f}  target {relation} {self.target:<8g} {verdict}"
