#!/usr/bin/env python3
"""Rewrites a .cu file into C++ that cudasim compiles: translate.py IN OUT.

A .cuh header (device code that .cu files include) is rewritten the same
way, into OUT beside the .cu files' translations, so that their
`#include "X.cuh"` finds it there first.

Three rewrites, keeping every line where it was (a `#line` directive names
IN, so diagnostics, __FILE__ and __LINE__ point at the CUDA source):

  kernel<<<grid, block, shared, stream>>>(args)
    -> ::cudasim::launch("kernel", __FILE__, __LINE__, ENTRY,
           ::cudasim::Config(grid, block, shared, stream),
           [=, cudasimArgs = std::make_tuple(args)] {
             std::apply([&](const auto &...a) { kernel(a...); }, cudasimArgs);
           })
  extern __shared__ __align__(N) T name[];
    -> T *name = reinterpret_cast<T *>(::cudasim::dynamicShared());
  __shared__ T name[N];
    -> static T name[N]; ::cudasim::sharedOnce(&name, sizeof name);

The lambda evaluates the arguments once, as the launch does, and calls the
kernel on them, deducing a template kernel's arguments; ENTRY is the
kernel's address (cudaFuncSetAttribute's
key) where the launch names one function: a kernel with explicit template
arguments, one that is not a template, or a function pointer; it is null
for a template kernel whose arguments the call deduces (a template kernel
of IN, or of a .cuh header IN includes, directly or not). A launch is a kernel
name, optionally qualified and with template arguments that hold no `<`,
then `<<<`; a __shared__ variable is declared alone on its line. Any `<<<`
or `__shared__` left over outside a comment is an error naming its line, so
that nothing is silently left for the host compiler to misread.
"""

import os
import re
import sys

LAUNCH = re.compile(
    r"(?P<kernel>\b(?P<name>[A-Za-z_][\w:]*)(?P<targs><[^<>;{}]*>)?)"
    r"(?P<before>\s*)<<<(?P<config>.*?)>>>(?P<after>\s*)\(",
    re.S,
)
TEMPLATE_KERNEL = re.compile(
    r"template\s*<[^;{}]*?>\s*__global__\s+void\s+"
    r"(?:__launch_bounds__\([^)]*\)\s+)?(?P<name>\w+)\s*\("
)
SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?"
    r"(?P<type>[\w\s:]+?)\s+(?P<name>\w+)\s*\[\s*\]\s*;"
)
STATIC_SHARED = re.compile(
    r"^(?P<indent>[ \t]*)__shared__[ \t]+(?P<type>[\w \t:<>,()]+?)[ \t]+"
    r"(?P<name>\w+)(?P<dims>(?:[ \t]*\[[^\]\n]*\])*)[ \t]*;",
    re.M,
)


def closing_paren(text, open_index):
    """The index of the `)` matching the `(` at open_index."""
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


INCLUDE_CUH = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]+"(?P<path>[^"]+\.cuh)"', re.M
)


def template_kernels(text, directory, seen):
    """The template kernels of `text` and of the .cuh headers it includes
    (found beside it, in `directory`), each header read once."""
    names = set(m["name"] for m in TEMPLATE_KERNEL.finditer(text))
    for m in INCLUDE_CUH.finditer(text):
        header = os.path.normpath(os.path.join(directory, m["path"]))
        if header in seen or not os.path.exists(header):
            continue
        seen.add(header)
        with open(header) as f:
            names |= template_kernels(f.read(), os.path.dirname(header), seen)
    return names


def rewrite_launches(text, path):
    deduced = template_kernels(
        text, os.path.dirname(path), {os.path.normpath(path)}
    )
    out, pos = [], 0
    for m in LAUNCH.finditer(text):
        if m.start() < pos:
            continue
        close = closing_paren(text, m.end() - 1)
        if close < 0:
            line = text.count("\n", 0, m.start()) + 1
            sys.exit(f"{path}:{line}: a launch without its closing parenthesis")
        kernel, args = m["kernel"], text[m.end() : close]
        entry = (
            "nullptr"
            if m["name"] in deduced and not m["targs"]
            else f"reinterpret_cast<const void *>({kernel})"
        )
        out.append(text[pos : m.start()])
        out.append(
            f'::cudasim::launch("{kernel}", __FILE__, __LINE__, {entry}, '
            f'::cudasim::Config({m["before"]}{m["config"]}{m["after"]}), '
            f"[=, cudasimArgs = std::make_tuple({args})] {{ std::apply("
            f"[&](const auto &...a) {{ {kernel}(a...); }}, cudasimArgs); }})"
        )
        pos = close + 1
    out.append(text[pos:])
    return "".join(out)


def shared(match):
    t = match["type"].strip()
    return (
        f"{t} *{match['name']} = "
        f"reinterpret_cast<{t} *>(::cudasim::dynamicShared());"
    )


def static_shared(match):
    name = match["name"]
    return (
        f"{match['indent']}static {match['type'].strip()} {name}"
        f"{match['dims']}; ::cudasim::sharedOnce(&{name}, sizeof {name});"
    )


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: translate.py IN.cu|IN.cuh OUT")
    source_path, output_path = sys.argv[1:]
    with open(source_path) as f:
        source = f.read()
    text = SHARED.sub(shared, rewrite_launches(source, source_path))
    text = STATIC_SHARED.sub(static_shared, text)
    for number, line in enumerate(text.split("\n"), 1):
        code = line.split("//")[0]
        if "<<<" in code:
            sys.exit(f"{source_path}:{number}: a launch translate.py cannot read")
        if "__shared__" in code:
            sys.exit(f"{source_path}:{number}: a __shared__ variable "
                     "translate.py cannot read (one declaration per line)")
    with open(output_path, "w") as f:
        quoted = source_path.replace("\\", "\\\\").replace('"', '\\"')
        f.write(f'#line 1 "{quoted}"\n{text}')


if __name__ == "__main__":
    main()
