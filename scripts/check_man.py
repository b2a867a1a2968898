#!/usr/bin/env python3
"""Every direct verb has a man page.

Each function provider/include/oxedv.h declares (an `oxedv_*` name followed
by `(`, comments left out) must be named in the NAME section of some page
under provider/man/ (a `*.md` file with a `# NAME` heading; the section runs
to the next `# ` heading). Fails, naming them, on the functions no page
names; warns about names a NAME section lists that the header does not
declare (a page left behind by a removed function).

Usage: check_man.py [repo root]   (exit 0: all covered, 1: not, 2: bad tree)
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else '.')
HEADER = ROOT / 'provider/include/oxedv.h'
MAN_DIR = ROOT / 'provider/man'

COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
DECLARED = re.compile(r'\b(oxedv_[A-Za-z0-9_]+)\s*\(')
NAME_WORD = re.compile(r'\boxedv_[A-Za-z0-9_]+')
HEADING = re.compile(r'^#\s+(\S.*?)\s*#*\s*$')


def declared_functions(text):
    """The oxedv_* functions a C header declares."""
    return set(DECLARED.findall(COMMENT.sub(' ', text)))


def name_section(text):
    """The text of a page's NAME section, or None if it has none."""
    lines, inside, found = [], False, False
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith('```'):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        if m:
            inside = m.group(1).strip().upper() == 'NAME'
            found = found or inside
            continue
        if inside:
            lines.append(line)
    return '\n'.join(lines) if found else None


def main():
    if not HEADER.is_file():
        print(f'check_man: {HEADER} not found', file=sys.stderr)
        return 2
    functions = declared_functions(HEADER.read_text())
    if not functions:
        print(f'check_man: {HEADER} declares no oxedv_* function', file=sys.stderr)
        return 2
    named = {}
    for page in sorted(MAN_DIR.glob('*.md')) if MAN_DIR.is_dir() else []:
        section = name_section(page.read_text())
        if section is None:
            continue
        for word in NAME_WORD.findall(section.replace('\\_', '_')):
            named.setdefault(word, []).append(page.name)

    for word in sorted(set(named) - functions):
        print(f'check_man: warning: {", ".join(named[word])} names {word}, '
              f'which {HEADER.name} does not declare', file=sys.stderr)
    missing = sorted(functions - set(named))
    if missing:
        print(f'check_man: no page under {MAN_DIR} names these in its NAME section:',
              file=sys.stderr)
        for f in missing:
            print(f'  {f}', file=sys.stderr)
        return 1
    print(f'check_man: all {len(functions)} functions of {HEADER.name} have a man page')
    return 0


if __name__ == '__main__':
    sys.exit(main())
