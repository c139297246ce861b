"""LoCoMo conversations as memories and searches (the measure of SPEC §12).

Every turn is one memory: ``"Speaker: text"``, plus the image caption in parentheses when
the turn shared an image. Every question is a search in its conversation's scope; its
evidence is the turns that answer it.

Evidence ids are repaired, never guessed. Each entry of a question's ``evidence`` is read
for every ``D<session>:<turn>`` it holds, tolerating a stray colon after the ``D`` and
leading zeros (``D8:6; D9:17`` is two ids, ``D:11:26`` is ``D11:26``, ``D30:05`` is
``D30:5``). An id that names no turn of the conversation (``D``, or ``D10:19`` in a session
of nine turns) is dropped. A question left with no evidence has no recall to measure and
is counted apart. Every repair and drop is listed in the result.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation: the memory it becomes and the id it answers to."""

    dia_id: str
    speaker: str
    text: str
    caption: str | None = None

    @property
    def memory(self) -> str:
        body = f"{self.speaker}: {self.text}"
        return f"{body} ({self.caption})" if self.caption else body


@dataclass(frozen=True, slots=True)
class Question:
    """One question, its category (1 multi-hop … 5 adversarial) and its evidence turns."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Repair:
    """An evidence entry that was not a turn id as written, and what became of it."""

    conversation: str
    question: int
    raw: str
    kept: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    repairs: tuple[Repair, ...] = field(default=())


def normal_id(raw: str) -> list[str]:
    """Every turn id written in ``raw``, in the canonical ``D<session>:<turn>`` form."""
    return [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE.findall(raw)]


def parse(name: str, data: dict[str, Any]) -> Conversation:
    """One conversation file's content as turns and questions, evidence repaired."""
    sessions = sorted(
        (int(m.group(1)), value)
        for key, value in data.items()
        if (m := _SESSION.fullmatch(key)) and isinstance(value, list)
    )
    turns = []
    for _, session in sessions:
        for turn in session:
            ids = normal_id(str(turn["dia_id"]))
            caption = turn.get("blip_caption")
            turns.append(
                Turn(
                    ids[0] if ids else str(turn["dia_id"]),
                    str(turn["speaker"]),
                    str(turn["text"]),
                    str(caption) if caption else None,
                )
            )
    known = {t.dia_id for t in turns}
    questions = []
    repairs = []
    for number, qa in enumerate(data.get("qa", [])):
        evidence: dict[str, None] = {}
        for raw in qa.get("evidence") or []:
            ids = [i for i in normal_id(str(raw)) if i in known]
            if ids != [str(raw)]:
                repairs.append(Repair(name, number, str(raw), tuple(ids)))
            evidence.update(dict.fromkeys(ids))
        questions.append(Question(str(qa["question"]), int(qa["category"]), tuple(evidence)))
    return Conversation(name, tuple(turns), tuple(questions), tuple(repairs))


def load(folder: Path) -> list[Conversation]:
    """Every ``*.json`` conversation of ``folder``, in name order."""
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no LoCoMo conversation (*.json) in {folder}")
    return [parse(f.stem, json.loads(f.read_text(encoding="utf-8"))) for f in files]
