#!/usr/bin/env python3
"""The comments under rust/ say what is and why, checked by `make check`.

A comment that quotes a measurement (MB/s, a time in µs or ms, "rounds" of a
run, `vm.sh ab`), tells a story ("was tried", "was reverted"), sends the
reader to the README for the reason, or cites a commit hash belongs in a
commit body, which the comment may name in a present-tense sentence of why.
This check flags those in `//`, `///` and `//!` comments of rust/**/*.rs.

Comments that still carry them are listed in rust/prose-debt.txt, one
`file: flagged words | comment text` per line (absent: none). The check
fails on a finding that is not listed, and on a listed one that is gone,
so that the list only shrinks and says the truth.

Usage: check_prose.py [repo root] [--write-debt]
"""
import re
import sys
from pathlib import Path

args = [a for a in sys.argv[1:] if not a.startswith('--')]
ROOT = Path(args[0] if args else '.')
DEBT = ROOT / 'rust/prose-debt.txt'
COMMENT = re.compile(r'^\s*//[/!]?\s?(.*)$')
# A measurement is a figure with its unit; a unit alone (what a function
# returns) or a time the spec or the kernel fixes (a formula, a timer) is not.
PATTERNS = [
    ('a throughput', re.compile(r'\b\d[\d.,]*\s*(?:[KMG]i?B/s|Gb/s)')),
    ('a time', re.compile(r'^(?!.*(?:×|\*\s*2\^|\btimer\b|\bBH worker\b)).*\b\d[\d.,]*\s*(?:µs|us)\b')),
    ('a benchmark round', re.compile(r'\brounds?\b.*\b(?:of|in)\b.*\b(?:ab|bench|run)\b|\bvm\.sh ab\b')),
    ('a story', re.compile(r'\bwas (?:tried|reverted)\b|\btried,? then\b', re.I)),
    ('the README as a reason', re.compile(r'\bsee the README\b', re.I)),
    ('a commit hash', re.compile(r'\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\b')),
]


def found():
    """Every flagged comment line, as `file: kinds | text`."""
    out = set()
    for path in sorted((ROOT / 'rust').rglob('*.rs')):
        if 'target' in path.parts:
            continue
        rel = path.relative_to(ROOT).as_posix()
        for line in path.read_text(errors='replace').splitlines():
            m = COMMENT.match(line)
            if not m:
                continue
            text = m.group(1).strip()
            kinds = [name for name, pat in PATTERNS if pat.search(text)]
            if kinds:
                out.add(f'{rel}: {", ".join(kinds)} | {text}')
    return out


def main():
    now = found()
    if '--write-debt' in sys.argv:
        DEBT.write_text(''.join(f'{l}\n' for l in sorted(now)))
        print(f'check_prose: {len(now)} line(s) written to {DEBT}')
        return 0
    listed = set()
    if DEBT.exists():
        listed = {l for l in DEBT.read_text().splitlines() if l.strip() and not l.startswith('#')}
    new, gone = sorted(now - listed), sorted(listed - now)
    for l in new:
        print(f'prose: a comment carries {l}')
    for l in gone:
        print(f'prose: paid off, remove from {DEBT.name}: {l}')
    if new or gone:
        print('check_prose: comments say what is and why; figures and history go in commit bodies')
        return 1
    print(f'check_prose: clean ({len(listed)} listed in {DEBT.name})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
