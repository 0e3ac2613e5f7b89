"""Coverage of a persona set: how many profiles fall in each hidden-need x personality cell (optionally per
language), with the empty cells named, so a set that never trains or tests some combination shows it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from simulator.personas.profile import LANGUAGES, NEED_CATEGORIES, PERSONALITIES, Profile

NEEDS = tuple(NEED_CATEGORIES)
TYPES = tuple(PERSONALITIES)


@dataclass
class Coverage:
    needs: tuple[str, ...]  # rows
    personalities: tuple[str, ...]  # columns
    languages: tuple[str, ...]  # ("",) when not split by language
    counts: dict[str, list[list[int]]]  # language ("" = all) -> rows x columns
    n: int

    def total(self) -> list[list[int]]:
        """need x personality counts over every language."""
        return [[sum(self.counts[lang][i][j] for lang in self.languages) for j in range(len(self.personalities))]
                for i in range(len(self.needs))]

    def empty(self) -> list[tuple[str, str, str]]:
        """(need, personality, language) of every empty cell; language "" when not split by language."""
        return [(need, pers, lang) for lang in self.languages for i, need in enumerate(self.needs)
                for j, pers in enumerate(self.personalities) if self.counts[lang][i][j] == 0]

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "needs": list(self.needs), "personalities": list(self.personalities),
                "languages": [x for x in self.languages if x], "counts": self.counts,
                "empty": [{"need_category": n, "personality": p, **({"language": lang} if lang else {})}
                          for n, p, lang in self.empty()]}


def coverage(profiles: Sequence[Profile], by_language: bool = False,
             languages: Optional[Sequence[str]] = None) -> Coverage:
    """The count matrix of `profiles` over every need category x personality type (x each of `languages`,
    default LANGUAGES, with by_language). Profiles outside the known categories are not counted."""
    langs = tuple(languages or LANGUAGES) if by_language else ("",)
    counts = {lang: [[0] * len(TYPES) for _ in NEEDS] for lang in langs}
    for p in profiles:
        lang = p.language if by_language else ""
        if p.need_category in NEEDS and p.personality in TYPES and lang in counts:
            counts[lang][NEEDS.index(p.need_category)][TYPES.index(p.personality)] += 1
    return Coverage(needs=NEEDS, personalities=TYPES, languages=langs, counts=counts, n=len(profiles))


def format_coverage(cov: Coverage) -> str:
    """A text table per language (need rows, personality columns; '.' marks an empty cell), then the empty cells."""
    width = max(len(n) for n in cov.needs)
    lines = []
    for lang in cov.languages:
        if lang:
            lines.append(f"language {lang}:")
        lines.append(f"{'':<{width}}  " + "  ".join(f"{p:>9}" for p in cov.personalities))
        for need, row in zip(cov.needs, cov.counts[lang]):
            lines.append(f"{need:<{width}}  " + "  ".join(f"{c if c else '.':>9}" for c in row))
    empty = cov.empty()
    lines.append(f"{cov.n} persona(s); {len(empty)} empty cell(s)" + (": " if empty else ""))
    lines += [f"  {n} x {p}" + (f" ({lang})" if lang else "") for n, p, lang in empty]
    return "\n".join(lines)
