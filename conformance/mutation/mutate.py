#!/usr/bin/env python3
"""The conformance suite's mutation score: how many deliberately broken copies of cpu-reference's
operators `h2 conform --quick` refuses.

Each mutant changes one spot of one source file of cpu-reference (an operator swapped, a comparison
moved by one, a constant changed, a term dropped, a stride taken as 1, fp64 arithmetic done in fp32,
an event completed early...). It is compiled with the build's own command for that file, linked with
the build's other objects into a renamed plugin (libh2-plugin-mutant-N.so), and certified by
`h2 conform --quick`: a mutant the suite refuses is killed; one it certifies survived. A mutant that
does not compile is stillborn and not counted. Survivors that compute the same thing as the original
(an equivalent mutant), or whose only effect is undefined behaviour in the plugin's private memory
that changes no output (an invisible one), are listed with the reason in equivalent.json, reviewed by
hand, and left out of the score; every other survivor is a gap in the suite.

    python3 conformance/mutation/mutate.py --build build --count 200 [--jobs 2] [--json out.json]

Prints a table of every mutant that was not killed and the score; exits 1 when the score is below
--goal (default 0.95). About 10 s per mutant per core here.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SOURCES = "plugins/cpu-reference/src"
# Operator files; not the dispatch table, the thread pool (its mutants hang or race rather than
# compute wrong) or the planted defects (only in the test plugin).
SKIPPED = {"ops/op_table.cpp", "ops/parallel.cpp", "ops/planted_defects.cpp"}

# (name, pattern, replacement): applied at every match on a code line.
OPERATORS = [
    ("+ to -", r"(?<=[\w\)\]]) \+ (?=[\w\(\[])", " - "),
    ("- to +", r"(?<=[\w\)\]]) - (?=[\w\(\[])", " + "),
    ("* to /", r"(?<=[\w\)\]]) \* (?=[\w\(\[])", " / "),
    ("/ to *", r"(?<=[\w\)\]]) / (?=[\w\(\[])", " * "),
    ("< to <=", r" < ", " <= "),
    ("<= to <", r" <= ", " < "),
    ("> to >=", r" > ", " >= "),
    (">= to >", r" >= ", " > "),
    ("== to !=", r" == ", " != "),
    ("!= to ==", r" != ", " == "),
    ("+= to =", r" \+= ", " = "),
    ("max to min", r"std::max\b", "std::min"),
    ("min to max", r"std::min\b", "std::max"),
    ("sqrt dropped", r"std::sqrt\(", "("),
    ("exp to exp2", r"std::exp\(", "std::exp2("),
    ("fp64 to fp32", r"\bdouble (\w+) = ", r"float \1 = "),
    ("stride as 1", r"\* (\w+)\.strides\[[^\]]+\]", "* 1"),
    ("integer + 1", r"(?<![\w.])([0-9]+)(?![\w.])", lambda m: str(int(m.group(1)) + 1)),
    ("float constant x2", r"(?<![\w.])([0-9]+\.[0-9]*(?:e[-+]?[0-9]+)?)(?![\w.])",
     lambda m: repr(float(m.group(1)) * 2)),
]
# Hand-written mutants of what the patterns cannot express: (file, original, replacement, name).
SPECIAL = [
    ("stream.cpp", "if (pending_ == 0 || (planted_defect() == Defect::early_event && queue_.empty())) {",
     "if (queue_.empty()) {", "event completes when its last task starts"),
    ("stream.cpp", "  idle_.wait(lock, [&] { return pending_ == 0; });\n  throw_if_failed();",
     "  idle_.wait(lock, [&] { return pending_ <= 1; });\n  throw_if_failed();", "synchronize returns one task early"),
    ("stream.cpp", "return pending_ == 0 ? H2_STATUS_OK : H2_STATUS_NOT_READY;",
     "return queue_.empty() ? H2_STATUS_OK : H2_STATUS_NOT_READY;", "query is ready once the last task starts"),
]


def code_part(line):
    """The line without its comment, or None for lines that are not operator code."""
    stripped = line.strip()
    if not stripped or stripped.startswith(("#", "//", "*", "/*")) or "planted_defect" in line or "Defect::" in line:
        return None
    return line.split("//")[0]


def inside_string(line, position):
    return line[:position].count('"') % 2 == 1


def planted_only(lines):
    """Line numbers of code that only the test plugin's planted defects reach: the block of an `if`
    that tests planted_defect() (not its else), and functions named planted_*. Dead in cpu-reference."""
    dead, depth, pending = set(), 0, False
    for number, line in enumerate(lines):
        if depth == 0:
            if re.match(r"\S.*\bplanted_\w+\(", line) or "planted_defect()" in line:
                pending = True
            if not pending:
                continue
            dead.add(number)
            if "{" not in line:
                pending = pending and not line.rstrip().endswith(";")
                continue
            pending = False
            line = line[line.index("{") + 1:]
            depth = 1
        else:
            dead.add(number)
        for ch in line:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if depth == 0:
                break
    return dead


def enumerate_mutants(files):
    mutants = []
    for rel in files:
        path = os.path.join(ROOT, SOURCES, rel)
        with open(path) as f:
            lines = f.read().split("\n")
        dead = planted_only(lines)
        seen = {}  # identical lines of a file get ids of their own: DIGEST, DIGEST.1, ...
        for number, line in enumerate(lines):
            code = code_part(line)
            if code is None or number in dead:
                continue
            digest = hashlib.sha1(line.strip().encode()).hexdigest()[:8]
            repeat = seen.get(digest, 0)
            seen[digest] = repeat + 1
            if repeat:
                digest += f".{repeat}"
            for name, pattern, replacement in OPERATORS:
                for occurrence, match in enumerate(re.finditer(pattern, code)):
                    if inside_string(code, match.start()):
                        continue
                    new = match.expand(replacement) if isinstance(replacement, str) else replacement(match)
                    mutated = code[:match.start()] + new + code[match.end():] + line[len(code):]
                    if mutated == line:
                        continue
                    mutants.append({"id": f"{rel}:{name}:{digest}:{occurrence}", "file": rel, "line": number + 1,
                                    "operator": name, "original": line.strip(), "mutated": mutated.strip(),
                                    "source": "\n".join(lines[:number] + [mutated] + lines[number + 1:])})
    for rel, original, replacement, name in SPECIAL:
        path = os.path.join(ROOT, SOURCES, rel)
        with open(path) as f:
            text = f.read()
        if original not in text:
            sys.exit(f"mutate.py: the special mutant '{name}' no longer matches {rel}; update SPECIAL")
        number = text[:text.index(original)].count("\n") + 1
        mutants.append({"id": f"{rel}:{name}", "file": rel, "line": number, "operator": name,
                        "original": original, "mutated": replacement, "source": text.replace(original, replacement, 1)})
    return mutants


class Builder:
    """Compiles a mutated file with the build's command and links a plugin from the build's objects."""

    def __init__(self, build):
        self.build = os.path.abspath(build)
        with open(os.path.join(self.build, "compile_commands.json")) as f:
            self.commands = [e for e in json.load(f) if "cpu-reference-internals" in e["output"]]
        archive = os.path.join(self.build, "plugins/cpu-reference/libh2-cpu-reference-internals.a")
        members = subprocess.run(["ar", "t", archive], check=True, capture_output=True, text=True).stdout.split()
        self.objects = [m if os.path.isabs(m) else os.path.join(self.build, m) for m in members]

    def compile(self, rel, source, obj, extra=()):
        """Compiles `source` as the build compiles `rel`, into `obj`; True when it compiled."""
        entry = self.compile_command(rel)
        args = shlex.split(entry["command"])
        args[args.index("-o") + 1] = obj
        args[-1] = source
        # Quoted includes of the original file's directory; no -Werror or debug info (speed).
        args = [a for i, a in enumerate(args) if not (i > 0 and args[i - 1] in ("-MQ", "-MF"))]
        args = [a for a in args if a not in ("-Werror", "-g") and not a.startswith("-M")]
        args[1:1] = ["-iquote", os.path.dirname(os.path.join(ROOT, SOURCES, rel))] + list(extra)
        return subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True).returncode == 0

    def object_of(self, rel):
        entry = self.compile_command(rel)
        return os.path.normpath(os.path.join(entry["directory"], entry["output"]))

    def rename(self, workdir):
        """The plugin's name becomes cpu-reference-mutant, so that h2 conform compares it with the reference."""
        obj = os.path.join(workdir, "plugin_api_renamed.o")
        rel = "plugin_api.cpp"
        if not self.compile(rel, os.path.join(ROOT, SOURCES, rel), obj, ['-DH2_PLUGIN_NAME="cpu-reference-mutant"']):
            raise SystemExit("mutate.py: cannot compile plugin_api.cpp under another name")
        self.objects = [obj if os.path.normpath(o) == self.object_of(rel) else o for o in self.objects]

    def compile_command(self, rel):
        wanted = os.path.normpath(os.path.join(ROOT, SOURCES, rel))
        for e in self.commands:
            if os.path.normpath(os.path.join(e["directory"], e["file"])) == wanted:
                return e
        raise SystemExit(f"mutate.py: {rel} is not in {self.build}/compile_commands.json")

    def build_plugin(self, mutant, workdir, index):
        source = os.path.join(workdir, os.path.basename(mutant["file"]))
        with open(source, "w") as f:
            f.write(mutant["source"])
        obj = os.path.join(workdir, "mutant.o")
        if not self.compile(mutant["file"], source, obj):
            return None
        original = self.object_of(mutant["file"])
        objects = [obj if os.path.normpath(o) == original else o for o in self.objects]
        plugin = os.path.join(workdir, f"libh2-plugin-mutant-{index}.so")
        link = ["c++", "-o", plugin, "-shared", "-fPIC", "-Wl,--whole-archive"] + objects + \
               ["-Wl,--no-whole-archive", "-Wl,--no-undefined", "-pthread"]
        linked = subprocess.run(link, capture_output=True, text=True)
        return plugin if linked.returncode == 0 else None


def run_mutant(builder, h2, mutant, index, timeout):
    with tempfile.TemporaryDirectory(prefix="h2-mutant-") as workdir:
        start = time.time()
        plugin = builder.build_plugin(mutant, workdir, index)
        if plugin is None:
            return "stillborn", "does not compile", time.time() - start
        env = dict(os.environ, H2_PLUGIN_PATH=os.path.join(builder.build, "plugins/cpu-reference"))
        try:
            run = subprocess.run([h2, "conform", "--plugin", plugin, "--quick"], env=env, capture_output=True,
                                 text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed", f"h2 conform ran past {timeout} s", time.time() - start
        summary = run.stdout.strip().split("\n")[-1] if run.stdout.strip() else run.stderr.strip()[-200:]
        if run.returncode == 0:
            return "survived", summary, time.time() - start
        return "killed", summary, time.time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="the Meson build directory (built)")
    parser.add_argument("--h2", help="the h2 tool (default: BUILD/tools/h2)")
    parser.add_argument("--count", type=int, default=200, help="mutants to try, drawn evenly (default 200)")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=int, default=300, help="seconds h2 conform may take per mutant")
    parser.add_argument("--goal", type=float, default=0.95)
    parser.add_argument("--json", help="write every mutant's result here")
    parser.add_argument("--survivors", help="write the table of mutants not killed here (Markdown)")
    parser.add_argument("--list", action="store_true", help="only count the mutants")
    parser.add_argument("--only", nargs="+", metavar="ID",
                        help="try just the mutants whose id starts with one of these (a survivor, once more)")
    args = parser.parse_args()

    files = sorted(os.path.relpath(os.path.join(d, f), os.path.join(ROOT, SOURCES))
                   for d, _, names in os.walk(os.path.join(ROOT, SOURCES)) for f in names
                   if f.endswith(".cpp") and os.path.basename(d) == "ops")
    files = [f for f in files if f not in SKIPPED]
    mutants = enumerate_mutants(files)
    specials = [m for m in mutants if m["file"] == "stream.cpp"]
    drawn = random.Random(args.seed).sample([m for m in mutants if m["file"] != "stream.cpp"],
                                            min(args.count, len(mutants) - len(specials)))
    drawn = sorted(drawn, key=lambda m: (m["file"], m["line"], m["id"])) + specials
    if args.only:
        drawn = [m for m in mutants if any(m["id"].startswith(prefix) for prefix in args.only)]
    print(f"{len(mutants)} mutants of {len(files)} operator files and the stream; trying {len(drawn)}", flush=True)
    if args.list:
        return 0
    with open(os.path.join(HERE, "equivalent.json")) as f:
        equivalent = {e["id"]: (e["kind"], e["reason"]) for e in json.load(f)["equivalent"]}

    builder = Builder(args.build)
    renamed = tempfile.TemporaryDirectory(prefix="h2-mutants-")
    builder.rename(renamed.name)
    h2 = args.h2 or os.path.join(builder.build, "tools/h2")
    results = [None] * len(drawn)
    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_mutant, builder, h2, m, i, args.timeout): i for i, m in enumerate(drawn)}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            i = futures[future]
            results[i] = future.result()
            state = results[i][0]
            print(f"[{done}/{len(drawn)}] {state:9s} {drawn[i]['id']}  ({results[i][2]:.0f} s, "
                  f"{time.time() - started:.0f} s so far)", flush=True)

    rows = []
    counts = {"killed": 0, "survived": 0, "stillborn": 0, "equivalent": 0, "invisible": 0}
    for m, (state, detail, seconds) in zip(drawn, results):
        if state == "survived" and m["id"] in equivalent:
            state, detail = equivalent[m["id"]]
        counts[state] += 1
        rows.append({"id": m["id"], "file": m["file"], "line": m["line"], "operator": m["operator"],
                     "original": m["original"], "mutated": m["mutated"], "state": state, "detail": detail,
                     "seconds": round(seconds, 1)})
    judged = counts["killed"] + counts["survived"]
    score = counts["killed"] / judged if judged else 0.0

    print("\nNot killed:")
    print(f"  {'state':10s} {'where':32s} {'operator':18s} mutated line")
    for r in rows:
        if r["state"] in ("survived", "equivalent", "invisible"):
            print(f"  {r['state']:10s} {r['file'] + ':' + str(r['line']):32s} {r['operator']:18s} {r['mutated'][:90]}")
    print(f"\n{len(rows)} mutants: {counts['killed']} killed, {counts['survived']} survived, "
          f"{counts['equivalent']} equivalent and {counts['invisible']} invisible (equivalent.json), "
          f"{counts['stillborn']} stillborn")
    print(f"mutation score {score:.1%} of the {judged} non-equivalent mutants killed (goal {args.goal:.0%})")
    if args.survivors:
        with open(args.survivors, "w") as f:
            f.write(f"# Mutants the quick suite did not kill\n\nWritten by `mutate.py --survivors` "
                    f"({len(rows)} mutants, seed {args.seed}): {counts['killed']} killed, {counts['survived']} "
                    f"survived, {counts['equivalent']} equivalent, {counts['invisible']} invisible, "
                    f"{counts['stillborn']} stillborn; score "
                    f"{score:.1%}.\n\n| state | where | operator | mutated line | why (equivalent.json) |\n|---|---|---|---|---|\n")
            for r in rows:
                if r["state"] in ("survived", "equivalent", "invisible"):
                    line = r["mutated"].replace("|", "\\|")
                    why = r["detail"].replace("|", "\\|") if r["state"] != "survived" else ""
                    f.write(f"| {r['state']} | {r['file']}:{r['line']} | {r['operator']} | `{line}` | {why} |\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"score": score, "counts": counts, "mutants": rows}, f, indent=1)
    return 0 if score >= args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
