"""Digits as callers say them and as the bot reads them: reception numbers, keyed or spoken.

Whisper writes a spoken number as numerals ("2026 0001"), as digit words ("이 공 이 육"), or a
mix, with fillers and STT spacing in between. ``spoken_digits`` reads all of those back to a
digit string (saying one digit at a time is ``bot.languages.ko.normalize.read_digits``).
"""

from __future__ import annotations

import re

DIGIT_WORDS = {"공": "0", "영": "0", "빵": "0", "일": "1", "이": "2", "삼": "3", "사": "4", "오": "5",
               "육": "6", "륙": "6", "칠": "7", "팔": "8", "구": "9"}
# Words that may sit around a spoken number without changing it.
_FILLER = re.compile(r"(?:접수\s*번호|번호|는|은|가|요|이요|입니다|이에요|예요|에요|음|어|저|그|네|예|"
                     r"확인|해\s*주세요|처리|상황|상태|좀|알려\s*주세요|다시|번)")
_WORD_RUN = re.compile(rf"(?:[{''.join(DIGIT_WORDS)}](?!요)[\s,.\-]*){{6,}}")


def spoken_digits(text: str) -> str | None:
    """The digit string of an utterance that is only a number (plus fillers), else None.

    "접수번호 이공이육 공공공일이요" -> "20260001"; "2026 0001번이요" -> "20260001";
    "이번 주에 접수했어요" -> None (words that are not digits).
    """
    rest = re.sub(r"[\s,.\-?!~]", "", text)
    rest = _FILLER.sub("", rest)
    if not rest:
        return None
    out = []
    for ch in rest:
        if ch.isdigit():
            out.append(ch)
        elif ch in DIGIT_WORDS:
            out.append(DIGIT_WORDS[ch])
        else:
            return None
    return "".join(out)


def spoken_digit_runs(text: str) -> list[tuple[tuple[int, int], str]]:
    """Runs of six or more spoken digit words: ((start, end), their digits)."""
    return [((m.start(), m.end()), "".join(DIGIT_WORDS.get(c, "") for c in m.group(0)))
            for m in _WORD_RUN.finditer(text)]
