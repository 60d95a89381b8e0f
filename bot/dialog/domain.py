"""The call line's domain: intents, categories, flows, the per-turn JSON schema and the prompt.

Every caller turn that is not answered by a shortcut (``bot/dialog/shortcuts.py``) makes one
structured-output LLM call whose answer is one JSON object::

    {"emergency": "none"|"<kind>", "reply": "...", "intent": "...", "category": "...",
     "location": "..."|null, "time": "..."|null, "flow": "continue"|"end"|"new_topic"}

The enums come from ``bot/data/domain.toml``; ``Domain.response_format`` wraps the schema
for the server dialect (vLLM / OpenAI ``json_schema``, llama.cpp ``json_object``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.core.datafile import DataFile

# Field order of a turn. The reply comes FIRST: it streams to the TTS while it is being
# generated, so its first sentence can be spoken after a handful of tokens. Slots first would
# delay the first spoken word by every token of the classification; generated after the reply,
# the classification costs nothing the caller hears.
FIELDS: tuple[str, ...] = ("reply", "intent", "category", "location", "time", "flow")
SLOT_FIELDS: tuple[str, ...] = ("location", "time")
# Which of the city's facts the reply used (an FAQ or directory id, or "none"). Last: it is the
# model's note for the records, never spoken, so it must not delay the reply. Optional when
# validating (older scripted turns and servers without it are still turns).
SOURCE_FIELD = "answer_source"
# The model's second net for emergencies the rules missed (kinds from domain.toml's [[emergencies]]).
# FIRST, before the reply: a flagged turn's reply is replaced by the escalation, so it must be known
# before a sentence is spoken; it costs the first sentence about five decode steps. Optional when
# validating, like answer_source.
EMERGENCY_FIELD = "emergency"
NO_EMERGENCY = "none"
REQUIRED_FLOWS: tuple[str, ...] = ("continue", "end", "new_topic")

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class DomainError(ValueError):
    """A domain file that cannot be used; the message names the entry."""


@dataclass(frozen=True)
class Choice:
    """One enum value (an intent, a category or a flow) with its texts for the prompt."""

    name: str
    label: str
    description: str = ""


_DEFAULT_FLOWS: tuple[Choice, ...] = (
    Choice("continue", "계속", "같은 용건으로 대화를 이어감."),
    Choice("end", "종료", "발신자가 작별 인사를 하거나 용건이 끝났다고 함."),
    Choice("new_topic", "새 용건", "발신자가 이전 용건과 관계없는 새 요청으로 바꿈."),
)


@dataclass(frozen=True)
class Domain:
    intents: tuple[Choice, ...]
    categories: tuple[Choice, ...]
    flows: tuple[Choice, ...] = field(default=_DEFAULT_FLOWS)
    emergencies: tuple[Choice, ...] = ()  # kinds the model may flag (names of emergency.toml's kinds)

    @property
    def intent_names(self) -> list[str]:
        return [c.name for c in self.intents]

    @property
    def category_names(self) -> list[str]:
        return [c.name for c in self.categories]

    @property
    def flow_names(self) -> list[str]:
        return [c.name for c in self.flows]

    @property
    def emergency_names(self) -> list[str]:
        """The ``emergency`` field's values: "none" first, then each kind."""
        return [NO_EMERGENCY, *(c.name for c in self.emergencies)]

    def response_schema(self, reply_max_chars: int = 160, sources: list[str] | None = None) -> dict[str, Any]:
        """The JSON schema of one turn (a fresh dict on every call); ``sources``: the fact ids."""
        if reply_max_chars < 1:
            raise ValueError(f"reply_max_chars must be >= 1, got {reply_max_chars}")
        # Property order matters: constrained decoders (xgrammar, llama.cpp grammars) emit the
        # properties in this order. "reply" first = the TTS can start speaking while the model
        # still has the classification to write (see FIELDS).
        properties: dict[str, Any] = {}
        required = list(FIELDS)
        if self.emergencies:
            properties[EMERGENCY_FIELD] = {"type": "string", "enum": self.emergency_names}
            required.insert(0, EMERGENCY_FIELD)
        properties |= {
            "reply": {"type": "string", "minLength": 1, "maxLength": reply_max_chars},
            "intent": {"type": "string", "enum": self.intent_names},
            "category": {"type": "string", "enum": self.category_names},
            "location": {"type": ["string", "null"]},
            "time": {"type": ["string", "null"]},
            "flow": {"type": "string", "enum": self.flow_names},
        }
        if sources is not None:
            properties[SOURCE_FIELD] = {"type": "string", "enum": ["none", *sources]}
            required.append(SOURCE_FIELD)
        return {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    def response_format(
        self, dialect: Literal["openai", "llama_cpp"], reply_max_chars: int = 160, sources: list[str] | None = None
    ) -> dict[str, Any]:
        """The request's ``response_format`` for a server dialect.

        ``openai`` (vLLM, OpenAI): ``json_schema`` with ``strict``; ``llama_cpp`` (llama.cpp
        server): ``json_object`` carrying the schema, which llama.cpp turns into a grammar.
        """
        return response_format_for(dialect, self.response_schema(reply_max_chars, sources))

    def validate(self, obj: Any, reply_max_chars: int | None = None) -> list[str]:
        """Check a parsed turn against ``response_schema``; returns error strings (empty = valid).

        ``reply_max_chars`` None skips the length bound (an already generated reply that is a
        little long is still worth speaking); the other rules are the schema's.
        """
        if not isinstance(obj, dict):
            return [f"turn: expected an object, got {_json_type(obj)}"]
        errors: list[str] = []
        for name in FIELDS:
            if name not in obj:
                errors.append(f"{name}: missing")
        for name in obj:
            if name not in FIELDS and name not in (SOURCE_FIELD, EMERGENCY_FIELD):
                errors.append(f"{name}: unexpected property")
        if SOURCE_FIELD in obj and not isinstance(obj[SOURCE_FIELD], str):
            errors.append(f"{SOURCE_FIELD}: expected a string, got {_json_type(obj[SOURCE_FIELD])}")
        reply = obj.get("reply")
        if "reply" in obj:
            if not isinstance(reply, str):
                errors.append(f"reply: expected a string, got {_json_type(reply)}")
            elif len(reply) < 1:
                errors.append("reply: empty")
            elif reply_max_chars is not None and len(reply) > reply_max_chars:
                errors.append(f"reply: {len(reply)} characters, more than {reply_max_chars}")
        for name, allowed in (
            ("intent", self.intent_names),
            ("category", self.category_names),
            ("flow", self.flow_names),
            (EMERGENCY_FIELD, self.emergency_names),
        ):
            if name not in obj:
                continue
            value = obj[name]
            if not isinstance(value, str):
                errors.append(f"{name}: expected a string, got {_json_type(value)}")
            elif value not in allowed:
                errors.append(f"{name}: {value!r} is not one of {allowed}")
        for name in SLOT_FIELDS:
            if name in obj and obj[name] is not None and not isinstance(obj[name], str):
                errors.append(f"{name}: expected a string or null, got {_json_type(obj[name])}")
        return errors


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _choices(source: DataFile, table: str) -> tuple[Choice, ...]:
    seen: set[str] = set()
    out: list[Choice] = []
    for i, _item in enumerate(source.tables((table,))):
        where = (table, i)
        source.no_unknown(where, ("name", "label", "description"))
        name = source.value((*where, "name"), str, "snake_case ASCII", ok=_NAME_RE.match)
        if name in seen:
            raise source.error((*where, "name"), f"duplicate name {name!r}")
        label = source.text_value((*where, "label"))
        desc = source.value((*where, "description"), str, "a string", default="")
        seen.add(name)
        out.append(Choice(name, label.strip(), desc.strip()))
    return tuple(out)


def load_domain(path: str | Path) -> Domain:
    """Read ``domain.toml`` (``[[intents]]``, ``[[categories]]``, optional ``[[flows]]`` and ``[[emergencies]]``).

    Raises:
        DomainError: a missing file, invalid TOML, or an entry that breaks the rules (file:line: key).
    """
    source = DataFile.read(path, DomainError, "domain file")
    source.no_unknown((), ("intents", "categories", "flows", "emergencies"), what="table")
    intents = _choices(source, "intents")
    categories = _choices(source, "categories")
    flows = _choices(source, "flows") if "flows" in source.data else _DEFAULT_FLOWS
    missing = [f for f in REQUIRED_FLOWS if f not in {c.name for c in flows}]
    if missing:
        raise source.error(("flows",), f"[[flows]] lacks {missing} (the processor acts on them)")
    emergencies = _choices(source, "emergencies") if "emergencies" in source.data else ()
    if any(c.name == NO_EMERGENCY for c in emergencies):
        raise source.error(("emergencies",), f"{NO_EMERGENCY!r} is implied: it cannot be a kind")
    return Domain(intents=intents, categories=categories, flows=flows, emergencies=emergencies)


# ---------------------------------------------------------------------------------------------
# System prompt

_SLOT_LABELS = {"location": "위치", "time": "시간", "intent": "용건", "category": "분야"}
_PLACEHOLDER_RE = re.compile(r"\{(intents|categories|flows|emergencies|facts|slots)\}")
_COMMENT_RE = re.compile(r"<!--.*?-->\s*", re.S)


def _choice_lines(choices: tuple[Choice, ...]) -> str:
    return "\n".join(
        f"- {c.name}: {c.label}" + (f". {c.description}" if c.description else "") for c in choices
    )


def render_slots(domain: Domain, slots: Mapping[str, Any] | None) -> str:
    """The known-slot block of the prompt: one ``- 위치: 값`` line per known (non-empty) slot."""
    lines: list[str] = []
    labels = {"intent": {c.name: c.label for c in domain.intents},
              "category": {c.name: c.label for c in domain.categories}}  # fmt: skip
    for key, value in (slots or {}).items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        text = str(value).strip()
        if key in labels and text in labels[key]:
            text = f"{labels[key][text]} ({text})"
        lines.append(f"- {_SLOT_LABELS.get(key, key)}: {text}")
    return "\n".join(lines) if lines else "- 아직 없음"


def response_format_for(dialect: Literal["openai", "llama_cpp"], schema: dict[str, Any]) -> dict[str, Any]:
    """A turn's JSON schema as the server dialect takes it in ``response_format``."""
    if dialect == "openai":
        return {"type": "json_schema", "json_schema": {"name": "turn", "schema": schema, "strict": True}}
    if dialect == "llama_cpp":
        return {"type": "json_object", "schema": schema}
    raise ValueError(f"unknown LLM dialect {dialect!r} (expected 'openai' or 'llama_cpp')")


def render_system_prompt(template: str, domain: Domain, slots: Mapping[str, Any] | None = None,
                         facts: str = "") -> str:
    """Fill ``{intents}``, ``{categories}``, ``{flows}`` and ``{slots}`` in the prompt template.

    Only those four exact placeholders are replaced (the JSON examples keep their braces, which
    is why this is not ``str.format``); ``<!-- ... -->`` comments are removed. Keep ``{slots}``
    at the end of the template: the slots change every turn, and everything before them stays a
    reusable prefix for the server's prefix cache.
    """
    values = {
        "intents": _choice_lines(domain.intents),
        "categories": _choice_lines(domain.categories),
        "flows": _choice_lines(domain.flows),
        "emergencies": _choice_lines((Choice(NO_EMERGENCY, "해당 없음", "위급 상황이 아님."), *domain.emergencies)),
        "slots": render_slots(domain, slots),
        # The city's facts found for this turn: after the static prefix, so the prefix cache holds.
        "facts": facts.strip() or "- 이번 질문에 맞는 참고 정보 없음",
    }
    text = _COMMENT_RE.sub("", template)
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], text).strip() + "\n"
