"""What the model is told in a turn: its instruction, its answer's schema, the recent exchanges."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bot.dialog.domain import Domain, render_system_prompt
from bot.knowledge import Entry, Knowledge, Lookup, render_facts

# One thread for every call's fact lookups (Kiwi's analyser is shared; lookups take ~0.1-1 ms).
_LOOKUP_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowledge")

Hits = list[tuple[Entry, float]]


@dataclass(frozen=True)
class TurnPrompt:
    """A line's prompt, made for each model turn from what the dialog knows so far.

    Attributes:
        template: The system prompt (``llm.prompt_file``), filled with the domain's lists, the
            known slots and the facts found for the turn.
        domain: Intents, categories, emergencies: the prompt's lists and the answer's schema.
        knowledge: The city's facts (None: ``llm.knowledge`` off: no lookup, no ``answer_source``).
        reply_max_chars: The longest reply the schema allows (``llm.reply_max_chars``).
        history_turns: Caller/bot exchanges the model sees (``llm.history_turns``).
        facts_k: Facts per turn in the prompt (``llm.facts_k``).
    """

    template: str
    domain: Domain
    knowledge: Knowledge | None = None
    reply_max_chars: int = 160
    history_turns: int = 8
    facts_k: int = 3

    async def look_up(self, text: str, slots: Mapping[str, str | None]) -> Lookup | None:
        """The city's facts for this turn (off the event loop: Kiwi can take over a millisecond)."""
        if self.knowledge is None or not text:
            return None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_LOOKUP_POOL, self.knowledge.lookup, text, slots, self.facts_k)

    def instruction(self, slots: Mapping[str, Any], hits: Hits, language_note: str = "") -> str:
        """The system message: the template with the known slots and the facts found, then what the
        caller's language adds (``DialogPolicy.instruction``)."""
        text = render_system_prompt(self.template, self.domain, slots, facts=render_facts(hits))
        return text + "\n\n" + language_note if language_note else text

    def schema(self, hits: Hits) -> dict[str, Any]:
        """The answer's JSON schema: ``answer_source`` may only name a fact in this prompt (or none)."""
        sources = [entry.id for entry, _ in hits] if self.knowledge is not None else None
        return self.domain.response_schema(self.reply_max_chars, sources)

    def recent(self, messages: list[Any]) -> list[Any]:
        """The last ``history_turns`` user/assistant exchanges (the system message is made each turn)."""
        convo = [m for m in messages if isinstance(m, dict) and m.get("role") in ("user", "assistant", "developer")]
        return convo[-2 * self.history_turns :] if self.history_turns > 0 else convo
