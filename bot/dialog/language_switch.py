"""Which language a caller speaks: a small pure rule over Whisper's per-turn language guesses.

Korean (the line's first language) is the default. Whisper base calls poor Korean audio Thai or
Japanese and short English words English, so the rule is cautious: only a language the line
serves (``line.languages``), only on a turn with enough speech (words and seconds), and only
with a high probability, or a plainer win on two such turns in a row. Switching back works the
same way, so a caller who speaks Korean after an English turn is heard in Korean again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LanguageGuess:
    """What Whisper made of one turn: its most probable allowed language and that probability."""

    language: str
    p: float
    words: int  # words in the transcript
    audio_secs: float
    # The most probable of the line's own languages' probability (a guess of a language the line
    # does not serve: how unlikely the line's languages are); None when not known.
    served_p: float | None = None


@dataclass(frozen=True)
class SwitchRule:
    """Thresholds (``[stt]`` language_* keys)."""

    switch_p: float = 0.8  # one turn with this probability switches
    repeat_p: float = 0.5  # two turns in a row with this probability switch
    min_words: int = 2  # a one-word turn ("okay") never switches
    min_secs: float = 1.0


@dataclass(frozen=True)
class UnservedRule:
    """When a caller is told the line does not serve their language (``[stt]`` unserved_* keys).

    Whisper base gives espeak Korean over the phone to other languages at up to 0.92 (bench water.wav:
    Japanese 0.923, Korean 0.015), so one turn is never evidence: the same unserved language on
    ``turns`` turns in a row, each at ``p`` or more with the line's own languages at ``served_p`` or
    less, or one such turn of ``long_secs`` (docs/languages.md has the measurement).
    """

    p: float = 0.95
    served_p: float = 0.1
    turns: int = 2
    long_secs: float = 8.0


class LanguageSwitcher:
    """One call's language decisions. ``observe`` returns the language the call is in after a turn."""

    def __init__(self, languages: list[str] | tuple[str, ...], rule: SwitchRule | None = None,
                 unserved_rule: UnservedRule | None = None):
        if not languages:
            raise ValueError("line.languages is empty")
        self.languages = tuple(languages)
        self.default = self.languages[0]
        self.rule = rule or SwitchRule()
        self.unserved_rule = unserved_rule or UnservedRule()
        self.current = self.default
        self._pending: str | None = None  # a language that won the last turn without switching
        self._foreign: tuple[str, int] | None = None  # an unserved language heard on this many turns in a row

    def observe(self, guess: LanguageGuess) -> str:
        """Fold in one turn; the call's language afterwards."""
        rule = self.rule
        lang = guess.language
        if (lang not in self.languages or lang == self.current or guess.words < rule.min_words
                or guess.audio_secs < rule.min_secs or guess.p < rule.repeat_p):
            # A turn that says nothing about a new language breaks a run only when it was real speech
            # in the current language (a one-word "okay" in between neither counts nor resets).
            if lang == self.current and guess.words >= rule.min_words:
                self._pending = None
            return self.current
        if guess.p >= rule.switch_p or self._pending == lang:
            self.current, self._pending = lang, None
        else:
            self._pending = lang
        return self.current

    def unserved(self, guess: LanguageGuess) -> bool:
        """Fold in Whisper's most probable language of all for one turn; True once the evidence says
        the caller speaks a language the line does not serve (``UnservedRule``): never on one noisy
        turn. A turn of real speech that is no such evidence breaks the run."""
        rule, need = self.rule, self.unserved_rule
        if guess.words < rule.min_words or guess.audio_secs < rule.min_secs:
            return False  # says nothing either way ("okay", a cough)
        evidence = (guess.language not in self.languages and guess.p >= need.p
                    and guess.served_p is not None and guess.served_p <= need.served_p)
        if not evidence:
            self._foreign = None
            return False
        same = self._foreign is not None and self._foreign[0] == guess.language
        self._foreign = (guess.language, self._foreign[1] + 1 if same and self._foreign else 1)
        return self._foreign[1] >= need.turns or guess.audio_secs >= need.long_secs

    def force(self, language: str) -> None:
        """The caller chose (the keypad menu): at once, no evidence needed."""
        if language not in self.languages:
            raise ValueError(f"language {language!r} is not in line.languages {list(self.languages)}")
        self.current, self._pending = language, None
