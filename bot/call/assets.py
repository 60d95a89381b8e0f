"""The data files a line's dialog needs, read once per process (``DialogAssets``)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from bot import DATA_DIR
from bot.config import Config
from bot.dialog.abusive import AbuseRules
from bot.dialog.calendar import LineCalendar
from bot.dialog.domain import Domain, DomainError, load_domain
from bot.dialog.emergency import DEFAULT_PATH as EMERGENCY_PATH
from bot.dialog.emergency import EmergencyRules
from bot.dialog.intake import Intake
from bot.dialog.language_packs import LanguagePack, load_language, unserved_notice
from bot.dialog.shortcuts import ShortcutMatcher, load_shortcuts
from bot.dialog.state import CannedReplies
from bot.knowledge import Knowledge
from bot.stages.backchannel_turn_start import Backchannels
from bot.stages.korean_turn_stop import EndOfTurnRules


@dataclass
class DialogAssets:
    """Data files the dialog needs, read once."""

    domain: Domain
    shortcuts: ShortcutMatcher
    prompt: str
    canned: CannedReplies
    endpointing: EndOfTurnRules
    intake: Intake
    knowledge: Knowledge | None
    emergency: EmergencyRules
    calendar: LineCalendar
    backchannels: Backchannels | None = None
    # line.languages beyond Korean (bot/dialog/language_packs.py); a language without its files fails here.
    languages: dict[str, LanguagePack] = field(default_factory=dict)
    # Said once to a caller heard in a language the line does not serve (Korean, then English).
    unserved: tuple[str, ...] = ()
    menu_lines: dict[str, str] = field(default_factory=dict)  # language -> "For English, press 9."
    ai_notice: str = ""  # call.ai_notice: an AI answers, said after the greeting (issue 47)
    abuse: AbuseRules | None = None  # bot/data/abuse.toml: warned once, then the call ends

    @classmethod
    def load(cls, config: Config) -> DialogAssets:
        domain = load_domain(config.path(config.llm.domain_file))
        emergency = _emergency_rules(config, domain)
        calendar = LineCalendar.from_config(config.line)
        assets = cls(
            languages={code: _with_hours(load_language(code, domain), calendar) for code in config.line.languages[1:]},
            unserved=unserved_notice(config.line.languages),
            ai_notice=config.call.ai_notice,
            abuse=AbuseRules.load(),
            domain=domain,
            shortcuts=load_shortcuts(config.path(config.llm.shortcuts_file), domain),
            prompt=config.path(config.llm.prompt_file).read_text(encoding="utf-8"),
            canned=CannedReplies.load(DATA_DIR / "replies.toml").with_hours(
                calendar.hours_phrase()),
            emergency=emergency,
            calendar=calendar,
            endpointing=EndOfTurnRules.load(config.path(config.turn.endpointing_file)),
            backchannels=Backchannels.load(config.path(config.turn.backchannels_file)),
            intake=Intake.load(DATA_DIR / "intake.toml", domain),
            knowledge=_knowledge(config.path(config.llm.faq_file), config.path(config.llm.directory_file),
                                 tuple(domain.category_names)) if config.llm.knowledge else None,
        )
        # The keypad menu's lines, each synthesized at startup in its own language (said in a Korean call).
        assets.menu_lines = {code: line for _key, code, line in language_menu(config, assets)}
        return assets

    def language_sentences(self, code: str) -> dict[str, str]:
        """Another language's fixed sentences (its canned replies, shortcut answers, the switch
        sentence) -> their names in ``heard``: synthesized at startup with its TTS tag."""
        pack = self.languages[code]
        ids = {s.reply.strip(): f"shortcut:{s.name}" for s in pack.shortcuts.shortcuts if s.reply}
        ids |= {pack.intake.text("ask_correction").strip(): "ask_correction", pack.switched.strip(): "language_switched"}
        ids |= {self.menu_lines[code]: "language_menu"} if code in self.menu_lines else {}
        ids |= {pack.recording_notice.strip(): "recording_notice"} if pack.recording_notice.strip() else {}
        ids |= {pack.ai_notice.strip(): "ai_notice"} if pack.ai_notice.strip() else {}
        return ids | {text: name for text, name in pack.canned.ids().items() if name != "busy"}

    def fixed_sentences(self, greeting: str, notice: str = "") -> list[str]:
        """Everything the bot says without the model: worth synthesizing once at startup."""
        return [greeting, *([self.ai_notice] if self.ai_notice else []), *([notice] if notice else []),
                *(s for kind in self.emergency.kinds.values()
                  for s in (*kind.sentences, kind.question, *kind.stay, *kind.closing)),
                *self.unserved[:1],  # its English sentence is synthesized with its own tag when said
                *(text for text, name in self.canned.ids().items() if name != "busy"),  # busy: Twilio says it
                *(s.reply for s in self.shortcuts.shortcuts if s.reply),
                self.intake.text("ask_correction")]

    def sentence_ids(self, greeting: str, notice: str = "") -> dict[str, str]:
        """Fixed sentence -> the name turn records give it in ``heard`` (model sentences are "reply")."""
        ids = {s.reply.strip(): f"shortcut:{s.name}" for s in self.shortcuts.shortcuts if s.reply}
        for kind in self.emergency.kinds.values():
            ids |= {s.strip(): f"emergency:{kind.name}" for s in kind.sentences}
            ids[kind.question.strip()] = f"emergency_check:{kind.name}"
            ids |= {s.strip(): f"emergency_stay:{kind.name}" for s in kind.stay}
            ids |= {s.strip(): f"emergency_closing:{kind.name}" for s in kind.closing}
        ids |= {s.strip(): "unserved_language" for s in self.unserved}
        ids |= {notice.strip(): "recording_notice"} if notice else {}
        ids |= {self.ai_notice.strip(): "ai_notice"} if self.ai_notice else {}
        return ids | self.canned.ids() | {greeting.strip(): "greeting"}


def language_menu(config: Config, assets: DialogAssets) -> list[tuple[str, str, str]]:
    """The keypad menu: (key, language, its line said after the greeting) for the line's second
    language (``line.language_key``) and each of ``line.language_keys``, in the line's order."""
    return [(key, code, assets.languages[code].menu.format(key=key))
            for code, key in config.line.menu_keys().items()]


def _emergency_rules(config: Config, domain: Domain) -> EmergencyRules:
    emergency = _shipped_emergency_rules()
    unknown = [c.name for c in domain.emergencies if c.name not in emergency.kinds]
    if unknown:  # the model would flag a kind the policy cannot escalate
        raise DomainError(f"{config.llm.domain_file}: [[emergencies]] {unknown} are not kinds of "
                          f"emergency.toml ({', '.join(emergency.kinds)})")
    return emergency


def _with_hours(pack: LanguagePack, calendar: LineCalendar) -> LanguagePack:
    """The pack's ``{hours}`` filled in its own language, once (its sentences stay pre-synthesizable)."""
    return dataclasses.replace(pack, canned=pack.canned.with_hours(calendar.hours_phrase(language=pack.code)))


def _knowledge(faq: Path, directory: Path, categories: tuple[str, ...]) -> Knowledge:
    """Index the FAQ and directory once per file version (Kiwi's analyser takes ~1.5 s to load)."""
    key = (faq, faq.stat().st_mtime_ns, directory, directory.stat().st_mtime_ns, categories)
    if key not in _KNOWLEDGE:
        _KNOWLEDGE[key] = Knowledge.load(faq, directory, categories=list(categories))
    return _KNOWLEDGE[key]


_KNOWLEDGE: dict[tuple, Knowledge] = {}


def _shipped_emergency_rules() -> EmergencyRules:
    """The shipped emergency rules, read and compiled once per version of their files (the grammar's
    ~2,400 Kiwi analyses cost ~0.4 s of CPU a load). Each caller gets its own shallow copy, so one
    that swaps out a net changes no other's rules."""
    files = sorted(EMERGENCY_PATH.parent.glob("emergency*"))
    key = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    if key not in _EMERGENCY:
        _EMERGENCY.clear()
        _EMERGENCY[key] = EmergencyRules.load()
    return copy.copy(_EMERGENCY[key])


_EMERGENCY: dict[tuple, EmergencyRules] = {}
