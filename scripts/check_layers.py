#!/usr/bin/env python3
"""The module's layering rule, checked by `make check` so that it cannot rot.

  rust/bindings/  C declarations and the C shim: imports nothing of ours.
  rust/ib/        the Rust RDMA abstraction over ib_core: may use only
                  `kernel`, `crate::bindings`, `crate::oxe_core` and itself.
  rust/*.rs       the driver: may use anything, but no `unsafe`; each file
                  says so to the compiler (`#![deny(unsafe_code)]`), so that
                  code a macro expands there is held to it too.

The provider (provider/src) has no import circle among its modules: the
C-facing `ffi/` holds the ops table in its root (`ffi/mod.rs`), which uses
the other ffi modules, and helpers are leaves.

The tree follows the rule. Should a change ever need to break it for a
while, the exception goes in rust/layering-debt.txt, one `file: reference`
per line (absent: none). The check fails on an exception that is not
listed, and on a listed one that is gone (so that the list only shrinks,
and says the truth).

Usage: check_layers.py [repo root]
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else '.')
DEBT = ROOT / 'rust/layering-debt.txt'
ALLOWED_FROM_IB = {'ib', 'bindings', 'oxe_core'}
# A path into the driver: `crate::mr::reg_user`, `crate::limits`, ...
CRATE_PATH = re.compile(r'\bcrate::([a-z_][a-z0-9_]*)(?:::([A-Za-z_][A-Za-z0-9_]*))?')
# `use crate::{mr, qp::Qp}` and `super::super::mr` reach up as well.
CRATE_GROUP = re.compile(r'\bcrate::\{([^}]*)\}')
SUPER_SUPER = re.compile(r'\bsuper::super\b')
UNSAFE = re.compile(r'\bunsafe\b')
DENY = re.compile(r'^#!\[deny\(unsafe_code\)\]$', re.M)


def code_lines(path):
    """Lines with comments and string literals left out."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
        line = line.split('//', 1)[0]
        if line.strip():
            yield n, line


def found():
    """Every exception to the rule in the tree, as `file: reference`."""
    out = {}
    for path in sorted((ROOT / 'rust/ib').glob('*.rs')):
        rel = path.relative_to(ROOT).as_posix()
        for n, line in code_lines(path):
            refs = []
            for m in CRATE_PATH.finditer(line):
                if m.group(1) not in ALLOWED_FROM_IB:
                    refs.append('crate::' + m.group(1) + ('::' + m.group(2) if m.group(2) else ''))
            for m in CRATE_GROUP.finditer(line):
                refs += ['crate::' + p.strip().split('::')[0] for p in m.group(1).split(',')
                         if p.strip() and p.strip().split('::')[0] not in ALLOWED_FROM_IB]
            if SUPER_SUPER.search(line):
                refs.append('super::super')
            for ref in refs:
                out.setdefault(f'{rel}: {ref}', n)
    for path in sorted((ROOT / 'rust').glob('*.rs')):
        rel = path.relative_to(ROOT).as_posix()
        if rel == 'rust/bindings.rs':  # the bindgen output's module
            continue
        for n, line in code_lines(path):
            if UNSAFE.search(line):
                out.setdefault(f'{rel}: unsafe', n)
        # The module root holds the module! macro's expansion, which is
        # the kernel crate's unsafe code.
        if rel != 'rust/oxe.rs' and not DENY.search(path.read_text()):
            out.setdefault(f'{rel}: no #![deny(unsafe_code)]', 1)
    return out


def module_graph(src):
    """Module -> modules it uses, for a crate rooted at `src` (lib.rs)."""
    graph = {}
    for path in sorted(src.rglob('*.rs')):
        rel = path.relative_to(src).with_suffix('')
        parts = list(rel.parts)
        if parts[-1] == 'mod':
            parts.pop()
        if parts == ['lib']:
            parts = []
        name = '::'.join(parts)
        parent = '::'.join(parts[:-1])
        deps = set()
        for _, line in code_lines(path):
            for m in re.finditer(r'\bcrate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)', line):
                deps.add(m.group(1))
            for m in re.finditer(r'\bsuper::([a-z_][a-z0-9_]*)', line):
                deps.add((parent + '::' if parent else '') + m.group(1))
            m = re.match(r'\s*(?:pub(?:\([a-z]+\))? )?mod ([a-z_][a-z0-9_]*);', line)
            if m:
                deps.add((name + '::' if name else '') + m.group(1))
        graph[name] = deps
    # A path names its longest prefix that is a module.
    def module_of(p):
        while p and p not in graph:
            p = p.rpartition('::')[0]
        return p
    return {n: {module_of(d) for d in ds} - {n, ''} for n, ds in graph.items()}


def circles(graph):
    """One cycle through each module that is on one, as 'a -> b -> a'."""
    found, state = [], {}

    def visit(n, stack):
        state[n] = 'open'
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 'open':
                found.append(' -> '.join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d, stack + [d])
        state[n] = 'done'

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    return found


def listed():
    if not DEBT.exists():
        return set()
    return {l.strip() for l in DEBT.read_text().splitlines()
            if l.strip() and not l.startswith('#')}


def main():
    have, allowed = found(), listed()
    new = sorted(set(have) - allowed)
    gone = sorted(allowed - set(have))
    for e in new:
        f, ref = e.split(': ', 1)
        why = ('unsafe code outside rust/ib and rust/bindings' if ref == 'unsafe'
               else 'a driver file must deny unsafe code' if ref.startswith('no #!')
               else f'rust/ib reaches up into the driver ({ref})')
        print(f'{f}:{have[e]}: {why}; not in {DEBT.relative_to(ROOT)}')
    for e in gone:
        print(f'{DEBT.relative_to(ROOT)}: "{e}" is paid off: remove the line')
    provider = ROOT / 'provider/src'
    loops = circles(module_graph(provider)) if provider.is_dir() else []
    for c in loops:
        print(f'provider/src: import circle {c}')
    if new or gone or loops:
        return 1
    print(f'layering: {len(have)} listed exceptions, none new' if have else 'layering: clean')
    return 0


if __name__ == '__main__':
    sys.exit(main())
