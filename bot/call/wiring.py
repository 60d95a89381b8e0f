"""A line's dialog policy and dialog stage, wired from its config and data files."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot import languages
from bot.call.assets import DialogAssets, language_menu
from bot.config import Config, Secrets
from bot.dialog.intake import Intake
from bot.dialog.policy import DialogPolicy
from bot.dialog.shortcuts import ShortcutMatcher
from bot.dialog.state import CannedReplies, DialogState
from bot.stages.dialog_llm import DialogLLMService
from bot.stages.filler import Filler
from bot.stages.records_effects import RecordsEffects, TicketRecords
from bot.stages.structured_llm import StructuredLLMClient
from bot.stages.turn_prompt import TurnPrompt


def make_policy(config: Config, assets: DialogAssets, clock: Callable[[], datetime] | None = None) -> DialogPolicy:
    """One line's rules; ``clock`` runs a call as if at another time (``chat --at``). Each other
    language of the line gets the same rules with its own words (``DialogPolicy.for_language``)."""
    siblings: dict[str, DialogPolicy] = {}  # filled as each language's policy is made

    def policy(shortcuts: ShortcutMatcher, canned: CannedReplies, intake: Intake | None, **words: Any) -> DialogPolicy:
        return DialogPolicy(shortcuts=shortcuts, canned=canned, intake=intake,
                            can_transfer=bool(config.call.transfer_number), emergency=assets.emergency,
                            emergency_transfer=config.call.emergency_transfer, calendar=assets.calendar,
                            clock=clock, offer_callback=config.line.offer_callback,
                            offer_sms=config.sms.enabled and config.sms.after_ticket, abuse=assets.abuse,
                            unserved=assets.unserved, siblings=siblings, **words)

    # Each menu line is said in its own language, whatever the call's (``tagged``: the TTS reads it so).
    menu = {key: (code, assets.languages[code].switched, languages.tagged(line, code))
            for key, code, line in language_menu(config, assets)}
    main = policy(assets.shortcuts, assets.canned, assets.intake, language=config.line.languages[0],
                  ai_notice=config.call.ai_notice, menu=menu)
    recorded = config.recording.enabled and bool(config.call.recording_notice)
    for code, pack in assets.languages.items():
        policy(pack.shortcuts, pack.canned, pack.intake, language=code, instruction=pack.instruction,
               ai_notice=pack.ai_notice, recording_notice=pack.recording_notice if recorded else "")
    return main


def make_llm(config: Config, secrets: Secrets, assets: DialogAssets, *, dialog: DialogState | None = None,
             records: TicketRecords | None = None, call_id: str | None = None,
             speech_end: Callable[[], float | None] = lambda: None, end_call_on_end_flow: bool = True,
             clock: Callable[[], datetime] | None = None) -> DialogLLMService:
    """The dialog stage of one call (or of ``chat``): the line's policy, and the model client, prompt,
    records and filler it holds. ``speech_end``: when the caller went quiet this turn (the filler
    counts from it); ``records``: where tickets are made and looked up (None: nowhere)."""
    llm = config.llm
    return DialogLLMService(
        client=StructuredLLMClient(config=llm, domain=assets.domain, api_key=secrets.llm_api_key),
        policy=make_policy(config, assets, clock),
        prompt=TurnPrompt(assets.prompt, assets.domain, knowledge=assets.knowledge, reply_max_chars=llm.reply_max_chars,
                          history_turns=llm.history_turns, facts_k=llm.facts_k),
        records=RecordsEffects(records, call_id=call_id),
        filler=Filler(after_ms=llm.filler_after_ms, first_token_timeout_ms=llm.first_token_timeout_ms,
                      speech_end=speech_end),
        dialog=dialog,
        end_call_on_end_flow=end_call_on_end_flow,
    )
