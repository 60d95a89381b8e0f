"""Web addresses, e-mail addresses and file names, read as a person reads them on the phone.

``www.hanbit.go.kr`` -> ``더블유 더블유 더블유 점 한빗 점 지오 점 케이알``; ``minwon@seoul.go.kr`` ->
``민원 골뱅이 서울 점 지오 점 케이알``; ``사진.jpg`` -> ``사진 점 제이피지``. A dot is 점 (``.com`` is the one
word 닷컴), ``@`` is 골뱅이; a part is read as a word when it is a known word (``WEB_WORDS``, then the
normalizer's own Latin words) or romanized Korean (the Revised Romanization, four letters or more:
hanbit, seoul, minwon), otherwise letter by letter; digits one by one, 0 as 공. The scheme
(``https://``) is not read: nobody dictates it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Parts read as words (lower case). The rest is spelled, unless it is romanized Korean.
WEB_WORDS = {
    "www": "더블유 더블유 더블유", "com": "컴", "net": "넷", "zip": "집", "jpeg": "제이펙", "gif": "지아이에프",
    "mail": "메일", "gmail": "지메일", "hotmail": "핫메일", "daum": "다음", "hanmail": "한메일", "nate": "네이트",
    "yahoo": "야후", "outlook": "아웃룩", "icloud": "아이클라우드", "nvidia": "엔비디아", "youtube": "유튜브",
    "facebook": "페이스북", "instagram": "인스타그램", "home": "홈", "help": "헬프", "news": "뉴스", "blog": "블로그",
    "cafe": "카페", "shop": "샵", "info": "인포", "data": "데이터", "open": "오픈", "search": "서치", "admin": "어드민",
    "user": "유저", "korea": "코리아", "seoul": "서울", "busan": "부산", "mobile": "모바일",
    "service": "서비스", "support": "서포트", "contact": "컨택트", "notice": "노티스", "minwon": "민원",
    "epeople": "이피플", "hometax": "홈택스", "wetax": "위택스", "main": "메인", "index": "인덱스", "page": "페이지",
    "board": "보드", "login": "로그인", "member": "멤버", "event": "이벤트", "portal": "포털", "online": "온라인",
    "welfare": "웰페어", "health": "헬스", "safe": "세이프", "smart": "스마트", "city": "시티", "green": "그린",
}
# Suffixes (file types, top-level domains) spelled letter by letter although a word could be read in
# them: co.kr is 씨오 점 케이알, never 코.
SPELLED = {"co", "go", "or", "ac", "ne", "re", "pe", "kr", "jp", "cn", "de", "fr", "it", "uk", "us", "io",
           "jpg", "png", "pdf", "hwp", "hwpx", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "txt", "csv", "mp3",
           "mp4", "avi", "mov", "org", "edu", "html", "htm"}
FILE_TYPES = ("jpg", "jpeg", "png", "gif", "bmp", "pdf", "hwp", "hwpx", "doc", "docx", "xls", "xlsx", "ppt",
              "pptx", "txt", "csv", "zip", "mp3", "mp4", "avi", "mov", "html", "htm")
TOP_DOMAINS = ("com", "net", "org", "kr", "jp", "cn", "de", "fr", "it", "uk", "us", "io", "app", "info", "edu",
               "gov", "biz", "me", "tv", "co")
DOT, DOT_COM, AT = "점", "닷컴", "골뱅이"
SEPARATORS = {"-": "하이픈", "_": "언더바", "/": "슬래시", "~": "물결"}

# --- Revised Romanization, read back ---------------------------------------------------------------
_INITIALS = {"g": 0, "kk": 1, "n": 2, "d": 3, "tt": 4, "r": 5, "m": 6, "b": 7, "pp": 8, "s": 9, "ss": 10, "": 11,
             "j": 12, "jj": 13, "ch": 14, "k": 15, "t": 16, "p": 17, "h": 18}
_VOWELS = {"a": 0, "ae": 1, "ya": 2, "yae": 3, "eo": 4, "e": 5, "yeo": 6, "ye": 7, "o": 8, "wa": 9, "wae": 10,
           "oe": 11, "yo": 12, "u": 13, "wo": 14, "we": 15, "wi": 16, "yu": 17, "eu": 18, "ui": 19, "i": 20}
_FINALS = {"": 0, "k": 1, "n": 4, "t": 19, "l": 8, "m": 16, "p": 17, "ng": 21}  # t: ㅅ, said as the RR's ㄷ
_RR_MIN = 4  # shorter parts (aol, abc) are more often initials than a Korean word
# English spellings the Revised Romanization never writes: a silent e after a consonant, ee, oo.
_NOT_RR = re.compile(r"[aeiou][bcdfghjklmnpqrstvwxz]e$|ee|oo")


def romanized(word: str) -> str | None:
    """Hangul for a Revised Romanization spelling (hanbit -> 한빗), or None when it is not one.

    Of the ways to cut it into syllables, the one with fewest syllables without an initial consonant,
    then fewest syllables, wins (hana is 하나, not 한아).
    """
    word = word.lower()
    if len(word) < _RR_MIN or not word.isalpha() or _NOT_RR.search(word):
        return None
    best: dict[int, tuple[int, int, str]] = {len(word): (0, 0, "")}
    for start in range(len(word) - 1, -1, -1):
        options = []
        for ini, i_code in _INITIALS.items():
            if not word.startswith(ini, start):
                continue
            for vow, v_code in _VOWELS.items():
                at = start + len(ini)
                if not word.startswith(vow, at):
                    continue
                for fin, f_code in _FINALS.items():
                    end = at + len(vow)
                    if not word.startswith(fin, end) or end + len(fin) not in best:
                        continue
                    empty, count, rest = best[end + len(fin)]
                    syllable = chr(0xAC00 + (i_code * 21 + v_code) * 28 + f_code)
                    options.append((empty + (ini == ""), count + 1, syllable + rest))
        if options:
            best[start] = min(options)
    return best[0][2] if 0 in best else None


def read_part(part: str, latin: Callable[[str], str], digits: Callable[[str], str]) -> str:
    """One dot-separated part: known word, romanized Korean or letters; digits one by one."""
    words = []
    for run in re.findall(r"[A-Za-z]+|\d+|[가-힣]+|[-_/~]", part):
        low = run.lower()
        if run.isdigit():
            words.append(digits(run))
        elif run in SEPARATORS:
            words.append(SEPARATORS[run])
        elif not run.isascii():
            words.append(run)
        elif low in WEB_WORDS:
            words.append(WEB_WORDS[low])
        elif low in SPELLED:
            words.append(latin(low))
        else:
            words.append(romanized(low) or latin(low))
    return "".join(words) if len(words) == 1 else " ".join(words)


def _read_dotted(text: str, latin: Callable[[str], str], digits: Callable[[str], str]) -> str:
    parts = text.split(".")
    out = [read_part(parts[0], latin, digits)]
    for part in parts[1:]:
        if part.lower() == "com":
            out.append(DOT_COM)
        else:
            out += [DOT, read_part(part, latin, digits)]
    return " ".join(out)


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_TOP = "|".join(sorted(TOP_DOMAINS, key=len, reverse=True))
_EMAIL_RE = re.compile(
    rf"(?<![A-Za-z0-9_.@])(?P<user>[A-Za-z0-9][A-Za-z0-9._-]*)@(?P<host>{_LABEL}(?:\.{_LABEL})+)(?![A-Za-z0-9_@])")
# A web address: a scheme or www, or labels ending in a known top-level domain; a path may follow.
_URL_RE = re.compile(
    rf"(?<![A-Za-z0-9_.@/])(?P<scheme>https?://)?(?P<host>(?:www\.)?{_LABEL}(?:\.{_LABEL})*\.(?:{_TOP}))"
    rf"(?P<path>/[A-Za-z0-9_./~-]*[A-Za-z0-9_/])?(?![A-Za-z0-9_@]|\.[A-Za-z0-9])",
    re.IGNORECASE,
)
_FILE_RE = re.compile(
    rf"(?<![\w.])(?P<name>[\w가-힣-]+)\.(?P<ext>{'|'.join(sorted(FILE_TYPES, key=len, reverse=True))})(?![A-Za-z0-9_]|\.\w)",
    re.IGNORECASE,
)


def read_web(text: str, latin: Callable[[str], str], digits: Callable[[str], str]) -> str:
    """Rewrites the e-mail addresses, web addresses and file names in ``text`` as they are said.

    ``latin`` spells a Latin word letter by letter (or reads a known one); ``digits`` reads digits one
    by one. Other text is left as it is.
    """

    def email(m: re.Match[str]) -> str:
        return f"{_read_dotted(m['user'], latin, digits)} {AT} {_read_dotted(m['host'], latin, digits)}"

    def url(m: re.Match[str]) -> str:
        path = m["path"] or ""
        spoken = _read_dotted(m["host"], latin, digits)
        for piece in re.findall(r"/|[^/]+", path):
            spoken += " " + (SEPARATORS["/"] if piece == "/" else _read_dotted(piece, latin, digits))
        return spoken

    def file(m: re.Match[str]) -> str:
        return f"{read_part(m['name'], latin, digits)} {DOT} {read_part(m['ext'], latin, digits)}"

    text = _EMAIL_RE.sub(email, text)
    text = _URL_RE.sub(url, text)
    return _FILE_RE.sub(file, text)
