"""What the fake LLM servers answer: a schema-valid default turn (fake_llm, keyword_llm, the bench)."""

from __future__ import annotations

from typing import Any

DEFAULT_TURN: dict[str, Any] = {
    "emergency": "none",
    "reply": "네, 확인해 드릴게요. 어느 위치인가요?",
    "intent": "report_problem",
    "category": "roads",
    "location": None,
    "time": None,
    "flow": "continue",
}


def schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of a request's response_format (vLLM json_schema or llama.cpp json_object)."""
    rf = body.get("response_format")
    if isinstance(rf, dict):
        if isinstance(rf.get("json_schema"), dict) and isinstance(rf["json_schema"].get("schema"), dict):
            return rf["json_schema"]["schema"]
        if isinstance(rf.get("schema"), dict):
            return rf["schema"]
    for key in ("guided_json", "structured_outputs"):
        value = body.get(key)
        if isinstance(value, dict):
            return value.get("json") if key == "structured_outputs" else value
    return None


def default_responder(body: dict[str, Any]) -> dict[str, Any]:
    """``DEFAULT_TURN``, adjusted to stay valid against the request's schema enums and maxLength."""
    turn = dict(DEFAULT_TURN)
    schema = schema_of(body) or {}
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    for name, spec in props.items():
        if not isinstance(spec, dict):
            continue
        enum = spec.get("enum")
        if name in turn and isinstance(enum, list) and enum and turn[name] not in enum:
            turn[name] = enum[0]
        if name == "reply" and isinstance(spec.get("maxLength"), int):
            turn["reply"] = turn["reply"][: spec["maxLength"]]
    if props:  # keep the schema's property order (reply first in ours)
        turn = {k: turn[k] for k in props if k in turn} | {k: v for k, v in turn.items() if k not in props}
    return turn


__all__ = ["DEFAULT_TURN", "default_responder", "schema_of"]
