"""The prompt-echo guard: a transcript that is Whisper's decoding prompt copied back, not what was said."""

from __future__ import annotations

import re

# Prompt echo (see ``is_prompt_echo``). faster-whisper puts ``hotwords`` (and ``initial_prompt``)
# after <|startofprev|>, where Whisper was trained to see the previous window's transcript, so once
# the decoder has written a word of the list it tends to go on copying the list: Whisper base heard
# "주민등록등본 떼려면 어떻게 해요" as "주민등록등본 민원 불법주차 쓰레기 수거 가로등" (avg log-prob
# -0.25, no-speech 0.06, compression 0.88: every other guard passes it).
_ECHO_MIN_RUN = 3  # this many prompt words in the prompt's order, one after the other
_ECHO_MIN_WORDS = 3  # or at least this many prompt words ...
_ECHO_MIN_SHARE = 0.8  # ... making up at least this share of the transcript's words
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    """Lower-cased words, punctuation dropped ("수거, 가로등." -> ["수거", "가로등"])."""
    return _WORD.findall(text.lower())


def is_prompt_echo(text: str, *prompts: str) -> bool:
    """Whether a transcript is the decoding prompt copied back rather than what was said.

    ``prompts`` are the texts Whisper was prompted with (``stt.hotwords``, ``stt.initial_prompt``);
    their words are the "prompt words". The transcript is an echo when, punctuation and spacing
    ignored,

    * it contains ``_ECHO_MIN_RUN`` (3) or more consecutive words of one prompt, in the prompt's
      order ("민원 불법주차 쓰레기 수거 가로등", "수거, 가로등, 상수도", the whole list, the list
      twice, the list without its spaces); or
    * at least ``_ECHO_MIN_WORDS`` (3) of its words are prompt words and they make up at least
      ``_ECHO_MIN_SHARE`` (80 %) of its words (the list shuffled or repeated).

    A word counts only when it IS a prompt word: "가로등이" (with a particle) is not "가로등". So a
    caller's sentence with a hotword or two in it passes ("대형폐기물 신고하려고요", "쓰레기 수거
    문의드리려고요", "민원 불법주차"). The price: a caller who really says three list words in the
    list's order ("쓰레기 수거 가로등") is rejected too, and with a prompt of one or two words an
    echo cannot be told from a caller saying those words, so it is never rejected.
    """
    words = _words(text)
    if not words:
        return False
    lists = [w for w in (_words(p) for p in prompts) if w]
    if not lists:
        return False
    compact = "".join(words)
    for plist in lists:
        for i in range(len(plist) - _ECHO_MIN_RUN + 1):
            if "".join(plist[i : i + _ECHO_MIN_RUN]) in compact:
                return True
    vocab = {w for plist in lists for w in plist}
    hits = sum(w in vocab for w in words)
    return hits >= _ECHO_MIN_WORDS and hits >= _ECHO_MIN_SHARE * len(words)
