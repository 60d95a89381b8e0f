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


@dataclass(frozen=True)
class SwitchRule:
    """Thresholds (``[stt]`` language_* keys)."""

    switch_p: float = 0.8  # one turn with this probability switches
    repeat_p: float = 0.5  # two turns in a row with this probability switch
    min_words: int = 2  # a one-word turn ("okay") never switches
    min_secs: float = 1.0


class LanguageSwitcher:
    """One call's language decisions. ``observe`` returns the language the call is in after a turn."""

    def __init__(self, languages: list[str] | tuple[str, ...], rule: SwitchRule | None = None):
        if not languages:
            raise ValueError("line.languages is empty")
        self.languages = tuple(languages)
        self.default = self.languages[0]
        self.rule = rule or SwitchRule()
        self.current = self.default
        self._pending: str | None = None  # a language that won the last turn without switching

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
        """Whisper's most probable language of all is one the line does not serve, as surely as a
        switch would need (the caller is told where to call instead: never on one word)."""
        rule = self.rule
        return (guess.language not in self.languages and guess.p >= rule.switch_p
                and guess.words >= rule.min_words and guess.audio_secs >= rule.min_secs)

    def force(self, language: str) -> None:
        """The caller chose (the keypad menu): at once, no evidence needed."""
        if language not in self.languages:
            raise ValueError(f"language {language!r} is not in line.languages {list(self.languages)}")
        self.current, self._pending = language, None
