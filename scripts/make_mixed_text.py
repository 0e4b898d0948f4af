#!/usr/bin/env python3
"""Writes a deterministic mixed Arabic / English / code text of about SIZE bytes.

    scripts/make_mixed_text.py OUT.txt [--bytes 1000000] [--seed 1]

The text is made for tokenizer benchmarks and cross-checks against llama.cpp: Arabic
prose (with and without diacritics, Arabic-Indic digits and punctuation), English prose
(contractions in mixed case, numbers of every length, accented words), source code
(C++, Python, JSON, shell: indentation, tabs, CRLF lines, long runs of spaces and
punctuation), emoji (with ZWJ sequences and variation selectors) and a little CJK.
It is valid UTF-8 and is cut at a line boundary. Nobody wrote tests for this text: it is
random on purpose, and the same seed always gives the same bytes.
"""
import argparse
import random

ARABIC_WORDS = (
    "كتب الطالب الدرس في المكتبة ذهب الولد إلى المدرسة صباحا وقرأ كتابا جديدا عن تاريخ "
    "العلوم والرياضيات قال المعلم إن الامتحان سيكون يوم الخميس القادم بعد الظهر السماء "
    "صافية اليوم والشمس مشرقة فوق المدينة القديمة يحب الأطفال اللعب في الحديقة العامة "
    "مع أصدقائهم الحاسوب أداة مهمة للبحث العلمي والبرمجة تعلم اللغة العربية ممتع ومفيد "
    "للطلاب من جميع أنحاء العالم الشبكات العصبية تتعلم من البيانات والنماذج اللغوية الكبيرة"
).split()
ARABIC_DIACRITIZED = "كَتَبَ الطَّالِبُ الدَّرْسَ فِي الْمَكْتَبَةِ وَقَرَأَ كِتَابًا جَدِيدًا".split()
ARABIC_PUNCT = ["،", "؛", "؟", ".", "!", ":", "«", "»"]
ARABIC_DIGITS = "٠١٢٣٤٥٦٧٨٩"

ENGLISH_WORDS = (
    "the quick brown fox jumps over the lazy dog while a model reads every token of the "
    "prompt and writes its hidden states to disk researchers compare layers heads and "
    "neurons across languages tokenization must match exactly byte offsets never "
    "character offsets attention weights residual stream probe intervention activation "
    "patching logit lens sparse autoencoder feature circuit gradient embedding vocabulary "
    "naïve café résumé façade coöperate Zürich São Paulo Ångström"
).split()
CONTRACTIONS = ["don't", "it's", "we're", "they've", "I'm", "you'll", "he'd", "DON'T", "IT'S", "We'Re",
                "THEY'VE", "I'M", "YOU'LL", "HE'D", "'s", "o'clock", "rock'n'roll"]
EMOJI = ["🦊", "🚀", "😀", "👍🏽", "👩‍💻", "❤️", "✅", "🇸🇦", "🇬🇧", "👨‍👩‍👧‍👦", "☕", "🤖"]
CJK = ["机器学习", "東京", "한국어", "自然言語処理", "数据"]

CODE_SNIPPETS = [
    "#include <vector>\n#include <string>\n\nint main(int argc, char** argv) {\n"
    "    std::vector<int> v{1, 2, 3};\n    for (auto& x : v) x *= 2;  // double\n"
    "    return v.size() > 2 ? 0 : 1;\n}\n",
    "def tokenize(text: str) -> list[int]:\n    \"\"\"Split text into ids.\"\"\"\n"
    "    ids = []\n    for i, ch in enumerate(text):\n        if ch.isspace():\n"
    "            continue\n        ids.append(ord(ch) % 32000)\n    return ids\n",
    '{\n  "model": "synth-llama3",\n  "layers": 16,\n  "rope_theta": 500000.0,\n'
    '  "tokens": [128000, 791, 4062, 14198],\n  "ok": true\n}\n',
    "for f in *.gguf; do\n\tsha256sum \"$f\" >> SUMS && echo \"done: $f\";\ndone\n"
    "if [ -z \"${EMBER_FIXTURES:-}\" ]; then exit 2; fi\n",
    "template <typename T>\nconstexpr T clamp(T v, T lo, T hi) noexcept {\r\n"
    "\treturn v < lo ? lo : (hi < v ? hi : v);\r\n}\r\n",
    "SELECT id, name FROM tokens WHERE score >= 0.5 AND name LIKE '%▁the%' ORDER BY id DESC;\n",
    "x = [[0.125, -3.5e-7], [1e+10, 42]]  # a 2x2 matrix\n"
    "print(f\"{x[0][0]:>8.3f} | {x[1][1]!r}\")   ;;;   ===>>> <<<=== !!! ??? ...\n",
    "        \n\n\n    \t\t  \n",
]


def number(rng):
    kind = rng.random()
    if kind < 0.4:
        return str(rng.randint(0, 10 ** rng.randint(1, 12)))
    if kind < 0.6:
        return f"{rng.uniform(-1000, 1000):.{rng.randint(1, 6)}f}"
    if kind < 0.8:
        return "".join(rng.choice(ARABIC_DIGITS) for _ in range(rng.randint(1, 6)))
    return f"{rng.randint(1, 31)}/{rng.randint(1, 12)}/{rng.randint(1900, 2100)}"


def arabic_sentence(rng):
    words = []
    for _ in range(rng.randint(4, 16)):
        r = rng.random()
        if r < 0.1:
            words.append(rng.choice(ARABIC_DIACRITIZED))
        elif r < 0.15:
            words.append(number(rng))
        elif r < 0.18:
            words.append(rng.choice(EMOJI))
        elif r < 0.22:
            words.append(rng.choice(ENGLISH_WORDS))
        else:
            words.append(rng.choice(ARABIC_WORDS))
    return " ".join(words) + rng.choice(ARABIC_PUNCT)


def english_sentence(rng):
    words = []
    for _ in range(rng.randint(4, 18)):
        r = rng.random()
        if r < 0.1:
            words.append(rng.choice(CONTRACTIONS))
        elif r < 0.17:
            words.append(number(rng))
        elif r < 0.2:
            words.append(rng.choice(EMOJI))
        elif r < 0.23:
            words.append(rng.choice(CJK))
        elif r < 0.27:
            words.append(rng.choice(ARABIC_WORDS))
        else:
            w = rng.choice(ENGLISH_WORDS)
            words.append(w.capitalize() if rng.random() < 0.15 else w.upper() if rng.random() < 0.03 else w)
    sep = rng.choice([" ", " ", " ", " ", "  ", " , ", "; ", " - ", "\t"])
    return sep.join(words) + rng.choice([".", "!", "?", "...", ":", ""])


def paragraph(rng):
    r = rng.random()
    if r < 0.4:
        body = " ".join(arabic_sentence(rng) for _ in range(rng.randint(1, 5)))
    elif r < 0.75:
        body = " ".join(english_sentence(rng) for _ in range(rng.randint(1, 5)))
    elif r < 0.95:
        body = rng.choice(CODE_SNIPPETS)
    else:
        body = arabic_sentence(rng) + " " + english_sentence(rng) + " " + rng.choice(CODE_SNIPPETS).splitlines()[0]
    return body + rng.choice(["\n", "\n\n", "\n\n\n", " \n", "\r\n"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--bytes", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    parts, size = [], 0
    while size < args.bytes:
        p = paragraph(rng)
        parts.append(p)
        size += len(p.encode("utf-8"))
    data = "".join(parts).encode("utf-8")
    cut = data.rfind(b"\n", 0, args.bytes + 1)
    data = data[: cut + 1 if cut > 0 else args.bytes]
    with open(args.out + ".tmp", "wb") as f:
        f.write(data)
    import os
    os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
