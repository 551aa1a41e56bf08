#!/usr/bin/env python3
"""Generate tests/layout/probe.c from the installed (Debian, rdma-core 44)
<infiniband/verbs.h>.

The list of names to probe is taken mechanically from Debian's header:
  * structs/unions and their fields, via clang's JSON AST dump;
  * enum types and enum constants, via the same AST;
  * prototypes of the functions the header declares (exported or inline);
  * object-like #defines and the names of all macros, from the header text.

The generated probe.c prints one fact per line; it is compiled once against
Debian's header and once against ours (tests/layout/run_layout_test.sh) and
the two outputs are compared.  probe.c is committed, so running the test
needs neither clang nor this script; re-run it only to refresh the list:

    python3 tests/layout/gen_probe.py > tests/layout/probe.c

With the argument "rdmacm" it probes librdmacm-dev's headers instead
(<rdma/rdma_cma.h>, <rdma/rdma_verbs.h>, <rdma/rsocket.h> and the
<infiniband/sa.h> they use):

    python3 tests/layout/gen_probe.py rdmacm > tests/layout/probe_rdmacm.c

Facts printed by the probe:
    size  S N        sizeof(struct S)
    align S N        _Alignof(struct S)
    off   S.f N      offsetof (for verbs_context: relative to .context)
    fsize S.f N      sizeof of the member
    ftype S.f 0|1    member type compatible with Debian's declared type
    esize E N        sizeof(enum E)
    const C V        value of an enum constant or object-like #define
    csize C N        sizeof of such a constant (integer ones)
    csign C 0|1      whether its type is signed (integer ones)
    macro M 1|0      whether macro M is defined
    proto F 0|1      function F has the type Debian declares
"""
import json
import os
import re
import subprocess
import sys
import tempfile

INC = "/usr/include/infiniband"
HEADERS = ["verbs.h", "verbs_api.h", "tm_types.h"]
INCLUDES = ["infiniband/verbs.h", "infiniband/tm_types.h"]
MODE = sys.argv[1] if len(sys.argv) > 1 else "verbs"
if MODE == "rdmacm":
    INC = "/usr/include"
    HEADERS = ["rdma/rdma_cma.h", "rdma/rdma_verbs.h", "rdma/rsocket.h",
               "infiniband/sa.h"]
    INCLUDES = HEADERS
RSOCKET_CALLS = ("socket bind listen accept connect shutdown close recv recvfrom "
                 "recvmsg send sendto sendmsg read readv write writev poll select "
                 "getpeername getsockname setsockopt getsockopt fcntl iomap "
                 "iounmap iowrite").split()

# Records whose member offsets are reported relative to this member
# (struct verbs_context grows towards lower addresses).
RELATIVE_TO = {"verbs_context": "context"}

# Macros that are implementation details of one header or another
SKIP_MACROS = {
    "INFINIBAND_VERBS_H", "VERBS_API_H", "_TM_TYPES_H",
    "__attribute_const",
    "RDMA_CMA_H", "RDMA_VERBS_H", "RSOCKET_H", "INFINIBAND_SA_H",
}


def clang_ast():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "d.c")
        with open(src, "w") as f:
            f.write("".join("#include <%s>\n" % h for h in INCLUDES))
        out = subprocess.run(
            ["clang", "-Xclang", "-ast-dump=json", "-fsyntax-only", src],
            check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out)


def header_macros():
    """(object-like defines with their text, all macro names, aliases)."""
    objs, names, aliases = {}, set(), {}
    for h in HEADERS:
        text = open(os.path.join(INC, h)).read()
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\(?)(.*)$",
                             text, re.M):
            name, paren, rest = m.group(1), m.group(2), m.group(3).strip()
            if name in SKIP_MACROS:
                continue
            if re.match(r"^ib_uverbs_\w+$", rest):
                # ibv_* type name aliasing a kernel one
                aliases[rest] = name
                continue
            names.add(name)
            if paren or not rest or rest.endswith("\\"):
                continue
            objs.setdefault(name, rest)
    return objs, names, aliases


def is_ours(name, aliases):
    if MODE == "rdmacm":
        return bool(name) and name.startswith(("rdma_", "ibv_sa_", "ibv_path_"))
    return bool(name) and (name.startswith(("ibv_", "verbs_", "_ibv_"))
                           or name in aliases)


# rdma_* names that Debian's verbs.h pulls in from kernel headers (the verbs probe's)
RDMACM_NOT_OURS = ("rdma_driver_id", "RDMA_DRIVER_")


def const_ours(name):
    if MODE == "rdmacm":
        return name.startswith(("RDMA_", "RAI_")) and not name.startswith(RDMACM_NOT_OURS)
    return name.startswith("IBV_")


def enum_ours(name):
    if MODE == "rdmacm":
        return bool(name) and name.startswith("rdma_") and not name.startswith(RDMACM_NOT_OURS)
    return bool(name) and name.startswith("ibv_")


def func_ours(name):
    if MODE == "rdmacm":
        return name.startswith("rdma_") or (
            name.startswith("r") and name[1:] in RSOCKET_CALLS)
    return bool(re.match(r"^_*(ibv_|verbs_)", name)) or name in (
        "mult_to_ibv_rate", "mbps_to_ibv_rate")


def map_type(qt, aliases):
    for k, v in aliases.items():
        qt = re.sub(r"\b%s\b" % k, v, qt)
    return qt


def walk_record(rec, prefix, out, aliases):
    """Yield (path, qualType or None) for every member, recursing into
    anonymous and inline-defined nested records."""
    pending = None
    for n in rec.get("inner", []):
        k = n["kind"]
        if k == "RecordDecl":
            pending = n
            continue
        if k != "FieldDecl":
            continue
        qt = n["type"]["qualType"]
        name = n.get("name")
        inline_rec = pending is not None and (
            "unnamed" in qt or "anonymous" in qt
            or (pending.get("name") and qt.endswith(pending["name"])))
        if not name:
            # anonymous struct/union member: its fields belong to us
            if inline_rec:
                walk_record(pending, prefix, out, aliases)
            pending = None
            continue
        path = prefix + name
        if inline_rec and ("unnamed" in qt or "anonymous" in qt):
            out.append((path, None))
            walk_record(pending, path + ".", out, aliases)
        else:
            out.append((path, map_type(qt, aliases)))
        pending = None


def main():
    ast = clang_ast()
    objs, macro_names, aliases = header_macros()

    records, enums, consts, funcs = [], [], [], []
    seen_rec, seen_const, seen_enum = set(), set(), set()
    for n in ast["inner"]:
        k = n["kind"]
        if k == "RecordDecl" and n.get("completeDefinition"):
            name = n.get("name")
            if not is_ours(name, aliases) or name in seen_rec:
                continue
            seen_rec.add(name)
            fields = []
            walk_record(n, "", fields, aliases)
            records.append((aliases.get(name, name), n["tagUsed"], fields))
        elif k == "EnumDecl":
            name = n.get("name")
            for c in n.get("inner", []):
                if c["kind"] != "EnumConstantDecl":
                    continue
                cn = c["name"]
                if const_ours(cn) and cn not in seen_const:
                    seen_const.add(cn)
                    consts.append(cn)
            if enum_ours(name) and name not in seen_enum:
                seen_enum.add(name)
                enums.append(name)
            elif name in aliases and aliases[name] not in seen_enum:
                seen_enum.add(aliases[name])
                enums.append(aliases[name])
        elif k == "FunctionDecl":
            name = n["name"]
            if func_ours(name):
                if name not in [f[0] for f in funcs]:
                    funcs.append((name, map_type(n["type"]["qualType"],
                                                 aliases)))

    for name in sorted(objs):
        if name not in seen_const:
            consts.append(name)

    w = sys.stdout.write
    w("/* Generated by tests/layout/gen_probe.py%s from Debian's rdma-core 44\n"
      " * <%s>: do not edit.  Prints layout facts, one per\n"
      " * line; see run_layout_test.sh. */\n"
      % (" rdmacm" if MODE == "rdmacm" else "", INCLUDES[0]))
    w("#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n")
    w("".join("#include <%s>\n" % h for h in INCLUDES) + "\n")
    w("#define OFF(T, f) ((long)offsetof(T, f))\n")
    w("#define FSZ(T, f) ((long)sizeof(((T *)0)->f))\n")
    w("#define FTY(T, f, ty) __builtin_types_compatible_p("
      "__typeof__(((T *)0)->f), ty)\n")
    w("#define CSIGN(x) ((__typeof__(x))-1 < (__typeof__(x))0)\n\n")
    w("int main(void)\n{\n")

    for name, tag, fields in records:
        t = "%s %s" % (tag, name)
        w('\tprintf("size %s %%ld\\n", (long)sizeof(%s));\n' % (name, t))
        w('\tprintf("align %s %%ld\\n", (long)_Alignof(%s));\n' % (name, t))
        rel = RELATIVE_TO.get(name)
        for path, qt in fields:
            base = " - OFF(%s, %s)" % (t, rel) if rel else ""
            w('\tprintf("off %s.%s %%ld\\n", OFF(%s, %s)%s);\n'
              % (name, path, t, path, base))
            w('\tprintf("fsize %s.%s %%ld\\n", FSZ(%s, %s));\n'
              % (name, path, t, path))
            if qt is not None:
                w('\tprintf("ftype %s.%s %%d\\n", FTY(%s, %s, %s));\n'
                  % (name, path, t, path, qt))
    for e in enums:
        w('\tprintf("esize %s %%ld\\n", (long)sizeof(enum %s));\n' % (e, e))
    for c in consts:
        text = objs.get(c, "")
        if "void *" in text or c == "__VERBS_ABI_IS_EXTENDED":
            w('\tprintf("const %s %%lld\\n", (long long)(intptr_t)(%s));\n'
              % (c, c))
            continue
        w('\tprintf("const %s %%lld\\n", (long long)(%s));\n' % (c, c))
        w('\tprintf("csize %s %%ld\\n", (long)sizeof(%s));\n' % (c, c))
        w('\tprintf("csign %s %%d\\n", (int)CSIGN(%s));\n' % (c, c))
    for m in sorted(macro_names):
        w("#ifdef %s\n\tputs(\"macro %s 1\");\n#else\n"
          "\tputs(\"macro %s 0\");\n#endif\n" % (m, m, m))
    for f, qt in funcs:
        w('\tprintf("proto %s %%d\\n", __builtin_types_compatible_p('
          '__typeof__(%s), %s));\n' % (f, f, qt))
    w("\treturn 0;\n}\n")


if __name__ == "__main__":
    main()
