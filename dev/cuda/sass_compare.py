#!/usr/bin/env python3
"""SASS of every fused-kernel instantiation of a source tree, offline (no GPU), and a before/after
comparison of two trees: a refactor of the .cu files that claims to change no machine code is
checked with one command.

    python3 dev/cuda/sass_compare.py --nvcc /usr/local/cuda-13.0/bin/nvcc --nvdisasm PATH/nvdisasm \
        BEFORE_TREE AFTER_TREE [--save DIR] [--only REGEX] [--repeat N]
    python3 dev/cuda/sass_compare.py ... TREE --json sass.json      # one tree: digests only
    python3 dev/cuda/sass_compare.py ... sass.json AFTER_TREE        # BEFORE as recorded by --json

The instantiations are those the tests compile (tiles.CANDIDATES and dev/cuda/fused_not_offered.py,
f2 1, 3 and 5; kernels only, not the layout kernels), enumerated by each tree's own code, each
tree in its own interpreter. Per kernel: the SHA-256 of its .text section (byte-identical machine
code or not), the instruction count, the registers and the opcode multiset; for a kernel that
differs, the opcodes whose counts differ. A kernel is paired with the one of the same
instantiation, else with the one of the same tile label (an instantiation renamed, e.g. a template
argument taken out: the .text holds no names).

Compilers: --nvcc PATH builds with that toolkit's cicc and ptxas (the inlined source, the kernel
instantiated by taking its address). Use it for comparisons: NVRTC 12.9 (the pip wheel the engine
uses, the default here) is NOT deterministic for these kernels: the same source and name
expression compiled repeatedly in one process gave 4 different PTX of one fp32 fold kernel in 8
compiles (a few instructions apart), so its SASS differs between runs of the same tree;
--repeat N builds each kernel N times and reports such kernels. --ptxas PATH assembles NVRTC's
PTX with that ptxas instead of NVRTC's own CUBIN (inherits NVRTC's nondeterminism). nvdisasm
(nvidia-cuda-nvdisasm wheel, 13.x; unzip it anywhere) cannot read NVRTC 12's CUBIN (ELF ABI 7):
those kernels are compared by their .text bytes only (instructions = bytes / 16). None of these
tools is a project dependency. --save DIR keeps each kernel's disassembly for a diff.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve()


# ---------------------------------------------------------------- one tree (run with the tree on sys.path)

def enumerate_kernels(tree: Path) -> list[tuple[str, str, str, str | None]]:
    """(source file, instantiation, label, its own target or None) of every fused kernel of ``tree``, by
    the tree's own code."""
    sys.path.insert(0, str(tree))
    from dev.cuda.fused_not_offered import not_offered_configs
    from srgpu.kernels import fused

    seen, jobs = set(), []
    for p in fused.ARITHMETICS:
        for f2 in (1, 3, 5):
            for cfg in fused.candidate_configs(p, f2) + not_offered_configs(p, f2):
                name = cfg.kernel_name(f2)
                if name not in seen:
                    seen.add(name)
                    # a tile built for its own target (wgmma: sm_90a) keeps it; trees before FusedConfig.arch: None
                    own = getattr(cfg, "arch", None)
                    jobs.append((cfg.source, name, f"{p} f2={f2} {cfg.label}", own[3:] if own else None))
    return jobs


def elf_sections(blob: bytes) -> dict[str, bytes]:
    """Section name -> contents of a 64-bit little-endian ELF (a CUBIN)."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2:
        raise ValueError("not a 64-bit ELF")
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = blob[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in heads:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        out[name] = b"" if h[1] == 8 else blob[h[4]:h[4] + h[5]]  # SHT_NOBITS holds nothing
    return out


_INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;")


def build_cubin(tree: str, source: str, name: str, arch: int | str, ptxas: str | None, nvcc: str | None,
                tmp: Path) -> tuple[bytes, str, str]:
    """(CUBIN, lowered name, assembler log) of one instantiation."""
    sys.path.insert(0, tree)
    from srgpu.kernels.build import COMPILE_OPTIONS, load_source

    if nvcc:  # the whole toolkit's cicc + ptxas; taking the kernel's address instantiates it
        (tmp / "k.cu").write_text(load_source(source) + f"\nstatic const void* const sass_compare_keep "
                                  f"__attribute__((used)) = (const void*)&{name};\n")
        r = subprocess.run([nvcc, *COMPILE_OPTIONS, f"-arch=sm_{arch}", "-cubin", "-Xptxas=-v", "-o",
                            str(tmp / "k.cubin"), str(tmp / "k.cu")], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"{name} ({source}) does not compile with nvcc:\n{r.stderr[:3000]}")
        blob = (tmp / "k.cubin").read_bytes()
        texts = [n for n in elf_sections(blob) if n.startswith(".text.")]
        if len(texts) != 1:
            raise SystemExit(f"{name}: expected one kernel in the CUBIN, found {texts}")
        return blob, texts[0][len(".text."):], r.stdout + r.stderr
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(load_source(source), source, [], [])
    try:
        nvrtc.addNameExpression(prog, name)
        target = f"-arch=compute_{arch}" if ptxas else f"-arch=sm_{arch}"
        try:
            nvrtc.compileProgram(prog, [*COMPILE_OPTIONS, target, *([] if ptxas else ["-Xptxas=-v"])])
        except nvrtc.NVRTCError:
            raise SystemExit(f"{name} ({source}) does not compile:\n{nvrtc.getProgramLog(prog)[:3000]}") from None
        lowered = nvrtc.getLoweredName(prog, name)
        log = nvrtc.getProgramLog(prog)
        ptx = nvrtc.getPTX(prog) if ptxas else None
        cubin = None if ptxas else nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    if not ptxas:
        return cubin, lowered, log
    (tmp / "k.ptx").write_bytes(ptx if isinstance(ptx, bytes) else ptx.encode())
    r = subprocess.run([ptxas, f"-arch=sm_{arch}", "-v", "-o", str(tmp / "k.cubin"), str(tmp / "k.ptx")],
                       capture_output=True, text=True, check=True)
    return (tmp / "k.cubin").read_bytes(), lowered, r.stdout + r.stderr


def compile_one(job: tuple[str, str, str, str, int | str, str | None, str | None, str]) -> dict:
    tree, source, name, label, arch, ptxas, nvcc, nvdisasm = job
    with tempfile.TemporaryDirectory() as tmpname:
        tmp = Path(tmpname)
        blob, lowered, log = build_cubin(tree, source, name, arch, ptxas, nvcc, tmp)
        (tmp / "k.cubin").write_bytes(blob)
        dis = subprocess.run([nvdisasm, "-c", str(tmp / "k.cubin")], capture_output=True, text=True)
    text = elf_sections(blob)[f".text.{lowered}"]
    if dis.returncode == 0:
        sass = dis.stdout
        insns = [m.group(1) for line in sass.splitlines() if (m := _INSN.match(line))]
        opcodes = dict(sorted(collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", i).split()[0] for i in insns).items()))
        count = len(insns)
    else:  # e.g. nvdisasm 13 refuses the CUBIN ABI of NVRTC 12: the machine code's bytes only, 16 per instruction
        sass, opcodes, count = f"(not disassembled: {dis.stderr.strip()})\n", None, len(text) // 16
    regs = re.search(rf"Function properties for {re.escape(lowered)}[\s\S]*?Used (\d+) registers", log)
    return {"name": name, "label": label, "lowered": lowered, "text_sha256": hashlib.sha256(text).hexdigest(),
            "text_bytes": len(text), "instructions": count, "registers": int(regs.group(1)) if regs else None,
            "opcodes": opcodes, "sass": sass}


def record(tree: Path, args: argparse.Namespace) -> dict:
    """Every kernel of ``tree``, each compiled ``args.repeat`` times: its distinct .text digests
    (more than one: the compiler is not deterministic for it) and the first build's details."""
    kernels = [k for k in enumerate_kernels(tree) if not args.only or re.search(args.only, k[1])]
    jobs = [(str(tree), s, n, l, own or args.arch, args.ptxas, args.nvcc, args.nvdisasm)
            for s, n, l, own in kernels for _ in range(args.repeat)]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(compile_one, jobs))
    out = []
    for i in range(0, len(results), args.repeat):
        builds = results[i:i + args.repeat]
        k = dict(builds[0])
        k["variants"] = list(dict.fromkeys(b["text_sha256"] for b in builds))
        k["variant_instructions"] = [next(b["instructions"] for b in builds if b["text_sha256"] == v)
                                     for v in k["variants"]]
        out.append(k)
    if args.nvcc:
        compiler = subprocess.run([args.nvcc, "--version"], capture_output=True, text=True).stdout.splitlines()[-2]
    else:
        from cupy_backends.cuda.libs import nvrtc

        compiler = "NVRTC " + ".".join(map(str, nvrtc.getVersion())) + (f" + {args.ptxas}" if args.ptxas else "")
    return {"tree": str(tree), "arch": args.arch, "compiler": compiler, "repeat": args.repeat, "kernels": out}


# ---------------------------------------------------------------- two trees

def run_tree(tree: Path, args: argparse.Namespace) -> dict:
    """Record ``tree`` in a fresh interpreter (each tree imports its own srgpu)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [sys.executable, str(HERE), "--_record", str(tree), "--json", str(out), "--arch", str(args.arch),
               "--nvdisasm", args.nvdisasm, "--jobs", str(args.jobs), "--repeat", str(args.repeat)]
        cmd += ["--only", args.only] if args.only else []
        cmd += (["--ptxas", args.ptxas] if args.ptxas else []) + (["--nvcc", args.nvcc] if args.nvcc else [])
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(tree)})
        return json.loads(out.read_text())


def save(rec: dict, label: str, where: Path) -> None:
    d = where / label
    d.mkdir(parents=True, exist_ok=True)
    for k in rec["kernels"]:
        (d / (re.sub(r"[^A-Za-z0-9]+", "_", k["name"]).strip("_") + ".sass")).write_text(k["sass"])


def compare(a: dict, b: dict) -> int:
    print(f"sm_{a['arch']}, {a['compiler']}, each kernel built {a['repeat']} times; before {a['tree']}, after {b['tree']}")
    if (a["arch"], a["compiler"]) != (b["arch"], b["compiler"]):  # a saved record built otherwise
        print(f"NOT COMPARABLE: after is sm_{b['arch']}, {b['compiler']}")
        return 1
    print(f"{'kernel':<56} {'insns before':>12} {'after':>6} {'regs':>9}  identical")
    by_name = {k["name"]: k for k in b["kernels"]}
    names_a = {k["name"] for k in a["kernels"]}
    renamed = {k["label"]: k for k in b["kernels"] if k["name"] not in names_a}  # after's, by label
    differ = 0
    for k in a["kernels"]:
        j = by_name.pop(k["name"], None)
        if j is None and k["label"] in renamed:
            j = renamed.pop(k["label"])
            del by_name[j["name"]]
            print(f"{k['name']} is {j['name']} after ({k['label']})")
        if j is None:
            print(f"{k['name']:<56} {k['instructions']:>12} {'-':>6}  missing after")
            differ += 1
            continue
        va, vb = k["variants"], j["variants"]
        if len(va) == 1 and va == vb:
            verdict = "yes"
        elif len(va) > 1 or len(vb) > 1:
            verdict = (f"compiler not deterministic: {len(va)} / {len(vb)} variants "
                       f"({'/'.join(map(str, k['variant_instructions']))} -> "
                       f"{'/'.join(map(str, j['variant_instructions']))} insns), "
                       f"{'some shared' if set(va) & set(vb) else 'none shared'}")
        else:
            verdict = "NO"
        differ += verdict != "yes"
        regs = f"{k['registers']}/{j['registers']}"
        print(f"{k['name']:<56} {k['instructions']:>12} {j['instructions']:>6} {regs:>9}  {verdict}")
        if verdict == "NO" and k["opcodes"] is not None and j["opcodes"] is not None:
            ca, cb = collections.Counter(k["opcodes"]), collections.Counter(j["opcodes"])
            delta = {op: cb[op] - ca[op] for op in sorted(set(ca) | set(cb)) if cb[op] != ca[op]}
            print(f"    opcode multiset {'identical (operands, order or scheduling differ)' if not delta else delta}")
    for n in by_name:  # instantiations only the after tree has: nothing to compare them with
        print(f"{n:<56} new after")
    print(f"{len(a['kernels']) - differ} of {len(a['kernels'])} byte-identical"
          + (f"; {len(by_name)} new after" if by_name else ""))
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", nargs="*", type=Path, help="one tree to record, or BEFORE AFTER to compare (either may be "
                                                        "a record written by --json)")
    ap.add_argument("--arch", type=int, default=90, help="sm_ARCH (90: H100/H200)")
    ap.add_argument("--nvdisasm", default="nvdisasm")
    ap.add_argument("--ptxas", help="assemble NVRTC's PTX with this ptxas instead of NVRTC's CUBIN")
    ap.add_argument("--nvcc", help="build with this nvcc (its cicc and ptxas) instead of NVRTC")
    ap.add_argument("--repeat", type=int, default=1, help="build each kernel this many times (determinism check)")
    ap.add_argument("--only", help="the kernels whose instantiation matches this regular expression")
    ap.add_argument("--json", type=Path, help="write the record (one tree) here")
    ap.add_argument("--save", type=Path, help="keep each kernel's disassembly under this folder")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--_record", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._record:
        args.json.write_text(json.dumps(record(args._record.resolve(), args)))
        return 0
    if len(args.trees) not in (1, 2):
        ap.error("give one tree or two")
    recs = [json.loads(t.read_text()) if t.suffix == ".json" else run_tree(t.resolve(), args) for t in args.trees]
    if args.save:
        for i, r in enumerate(recs):
            save(r, ("before", "after")[i] if len(recs) == 2 else "tree", args.save)
    if len(recs) == 1:
        r = recs[0]
        if args.json:
            args.json.write_text(json.dumps(r, indent=1))
        for k in r["kernels"]:
            print(f"{k['name']:<56} {k['instructions']:>6} insns {k['registers']} regs {len(k['variants'])} "
                  f"variant(s) {k['text_sha256'][:16]}")
        return 0
    return compare(*recs)


if __name__ == "__main__":
    sys.exit(main())
