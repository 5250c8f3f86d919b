#!/usr/bin/env python3
"""DiComm side by side with its peers on this machine, in one run.

Allreduce (f32 sum, 1 MiB to 64 MiB, 2 and 4 ranks): DiComm (`h2 bench comm`) against Open MPI's
MPI_Allreduce over shared memory (ob1 + vader, and UCX's sm transport) and Gloo over TCP (chunked ring
and halving-doubling); DiComm as a job gets it by default, its ranks talking through its node
transport, and DiComm on the plugin's own collective library (H2_DICOMM_VENDOR_COLLECTIVES=auto:
cpu-reference's shared memory). Point-to-point (ping-pong between two ranks): DiComm against `fi_pingpong` on the same
libfabric provider (shm, and tcp;ofi_rxm on loopback), and DiComm's node transport against
`fi_pingpong` on shm. The tcp;ofi_rxm table names the kernel's TCP congestion control, and
--tcp-congestion repeats it under others, each in a network namespace of its own (see there why).

Every contender is timed the same way (warm-up, then the mean over iterations of the slowest rank;
sizes below --scale-below run up to 8x the iterations, in every contender alike) and checks its own
results. Each measurement is repeated and the median kept, because this machine
is shared and noisy. Prints tables with DiComm's ratio to the best peer, and writes every row as JSON
lines. Exits non-zero when any contender computed a wrong result or DiComm failed to run; it never
asserts a timing.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


def run(command, env=None, timeout=300):
    """Runs a command; returns (exit code, stdout, stderr). A command past its time is killed."""
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", f"timed out after {timeout} s"
    except FileNotFoundError as e:
        return 127, "", f"{command[0]} is not installed ({e.strerror})"


def scale(size, scale_below):
    """How many times --iters a size runs (bench/dicomm/peer_result.hpp's scaled_iterations)."""
    return 1 if size <= 0 or size >= scale_below else min(8, scale_below // size)


def json_lines(text):
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def tcp_congestion(netns=None):
    """The TCP congestion control new sockets get, in this network namespace or in `netns`."""
    prefix = ["ip", "netns", "exec", netns] if netns else []
    code, out, err = run(prefix + ["cat", "/proc/sys/net/ipv4/tcp_congestion_control"], timeout=30)
    return out.strip() if code == 0 else f"unknown ({err.strip()})"


class CongestionNamespace:
    """A network namespace whose loopback uses the TCP congestion control `name`; removed on exit.

    Why: on loopback, BBR (this machine's default) has no fq qdisc to pace with, so the kernel paces
    each socket itself, and a 1 MiB ping-pong then falls off a cliff when a sender pauses a few
    microseconds before its burst: a test program pausing 10 us before each send went from 190 to
    290-330 us a transfer under BBR, and from 170 to 178 us under CUBIC (issue 7 note, stop 21). So a
    table per congestion control shows how much of a difference is the transport and how much the
    kernel's pacing."""

    def __init__(self, name):
        self.name = name
        self.netns = f"h2bench-{os.getpid()}-{name}"
        self.error = None

    def __enter__(self):
        for step in (["ip", "netns", "add", self.netns],
                     ["ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up"],
                     ["ip", "netns", "exec", self.netns, "sysctl", "-qw",
                      f"net.ipv4.tcp_congestion_control={self.name}"]):
            code, _, err = run(step, timeout=30)
            if code != 0:
                self.error = f"`{' '.join(step)}` failed: {(err.strip().splitlines() or ['no output'])[-1]}"
                break
        if self.error and "not permitted" in self.error:
            # Only the host's own namespace may pick a control outside the allowed list (the kernel's
            # TCP_CONG_NON_RESTRICTED rule); say so rather than leave a bare EPERM.
            try:
                with open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as f:
                    allowed = f.read().split()
            except OSError:
                allowed = None
            if allowed is not None and self.name not in allowed:
                self.error += (f"; {self.name} is not in net.ipv4.tcp_allowed_congestion_control ({' '.join(allowed)}), "
                               "and a network namespace may only choose an allowed one: the host's administrator can add "
                               "it there")
        return self

    def __exit__(self, *exc):
        run(["ip", "netns", "del", self.netns], timeout=30)


class Contenders:
    def __init__(self, args):
        self.args = args
        self.netns = None  # while set, the tcp;ofi_rxm contenders run inside this network namespace
        self.env = dict(os.environ, H2_PLUGIN_PATH=args.plugin_path,
                        OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.sizes = (str(args.min_bytes), str(args.max_bytes), str(args.factor))
        self.failures = []  # (contender, message)

    def _in_netns(self, provider, command):
        return ["ip", "netns", "exec", self.netns] + command if self.netns and provider == "tcp;ofi_rxm" else command

    def _note_failure(self, name, code, err):
        last = (err.strip().splitlines() or ["no output"])[-1]
        self.failures.append((name, f"exit {code}: {last}"))
        print(f"  {name}: failed (exit {code}): {last}", flush=True)

    def dicomm(self, ranks, op="allreduce", provider=None, node_transport=None, plugin_library=False,
               devices=None, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        if plugin_library:  # the plugin's own collective library (ABI 1.5): cpu-reference's shared memory
            env["H2_DICOMM_VENDOR_COLLECTIVES"] = "auto"
        if provider:
            env["H2_FABRIC_PROVIDER"] = provider
        if node_transport:
            env["H2_DICOMM_NODE_TRANSPORT"] = node_transport
        # A ping-pong runs as many round trips as fi_pingpong's (ten times the collectives' count).
        iters, warmup = ((self.args.iters * 10, self.args.warmup * 10) if op == "pingpong"
                         else (self.args.iters, self.args.warmup))
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            code, _, err = run(self._in_netns(provider, [
                self.args.h2, "launch", "-n", str(ranks), "--no-prefix", "--bind", self.args.bind,
                *(["--devices", devices] if devices else []), "--",
                self.args.h2, "bench", "comm", "--op", op, "--min-bytes", self.sizes[0],
                "--max-bytes", self.sizes[1], "--factor", self.sizes[2], "--iters", str(iters),
                "--warmup", str(warmup), "--scale-below", str(self.args.scale_below), "--json", out.name]), env)
            rows = [json.loads(line) for line in open(out.name) if line.strip()]
        name = (f"dicomm {provider or 'auto'}" + (f" node transport {node_transport}" if node_transport else "") +
                (" plugin library" if plugin_library else ""))
        if code != 0:
            self._note_failure(name, code, err)
        for row in rows:
            row["transport"] = row.get("provider", provider or "auto")
        return rows

    def mpi(self, ranks, transport):
        mca = {"vader": ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"],
               "ucx sm": ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices", "any",
                          "-x", "UCX_TLS=self,sm"]}[transport]
        # Yield when idle once ranks outnumber this machine's cores.
        bind = ["--bind-to", "core:overload-allowed", "--map-by", "core"] if self.args.bind == "cores" else \
            ["--bind-to", "none"]
        command = (["mpirun", "--oversubscribe", *bind, "-np", str(ranks),
                    "--mca", "mpi_yield_when_idle", "1" if ranks > os.cpu_count() else "0"] + mca +
                   [self.args.mpi_allreduce, transport, *self.sizes, str(self.args.iters), str(self.args.warmup),
                    str(self.args.scale_below)])
        code, out, err = run(command, self.env)
        if code != 0:
            self._note_failure(f"mpi {transport}", code, err)
        return json_lines(out)

    def gloo(self, ranks, algorithm):
        with tempfile.TemporaryDirectory() as store:
            code, out, err = run([self.args.h2, "launch", "-n", str(ranks), "--no-prefix", "--bind", self.args.bind,
                                  "--", self.args.gloo_allreduce, algorithm, store, *self.sizes, str(self.args.iters),
                                  str(self.args.warmup), str(self.args.scale_below)], self.env)
        if code != 0:
            self._note_failure(f"gloo {algorithm}", code, err)
        return json_lines(out)

    def fi_pingpong(self, provider, size):
        """One-way time of a `size`-byte tagged message on an RDM endpoint, as fi_pingpong reports it."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(self.env, FI_TCP_IFACE="lo")
        iters = self.args.iters * 10 * scale(size, self.args.scale_below)  # as `h2 bench comm --scale-below`
        common = ["fi_pingpong", "-p", provider, "-e", "rdm", "-m", "tagged", "-I", str(iters),
                  "-S", str(size)] + (["-d", "lo"] if provider != "shm" else [])
        # With --bind cores, server and client each get a CPU of their own, as `h2 launch --bind` gives
        # DiComm's two ranks.
        cpus = sorted(os.sched_getaffinity(0))
        pin = (lambda i: ["taskset", "-c", str(cpus[i % len(cpus)])]) if self.args.bind == "cores" else (lambda i: [])
        server = subprocess.Popen(self._in_netns(provider, pin(0) + common + ["-B", str(port)]), env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(0.3)
            code, out, err = run(self._in_netns(provider, pin(1) + common + ["-P", str(port), "127.0.0.1"]), env,
                                 timeout=120)
        finally:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        lines = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("bytes")]
        if code != 0 or not lines:
            self._note_failure(f"fi_pingpong {provider}", code, err)
            return None
        usec = float(lines[-1][6])
        return {"library": "fi_pingpong", "transport": provider, "op": "pingpong", "ranks": 2, "bytes": size,
                "time_us": usec, "algbw_gbps": size / (usec * 1e3), "busbw_gbps": size / (usec * 1e3),
                "wrong": 0}


def median_rows(repeats):
    """Per size, the row whose busbw is the median of the repeats."""
    by_size = {}
    for rows in repeats:
        for row in rows:
            by_size.setdefault(row["bytes"], []).append(row)
    result = []
    for size in sorted(by_size):
        rows = sorted(by_size[size], key=lambda r: r["busbw_gbps"])
        chosen = dict(rows[len(rows) // 2])
        chosen["wrong"] = max(r["wrong"] for r in rows)
        chosen["repeats"] = [round(r["busbw_gbps"], 4) for r in rows]
        result.append(chosen)
    return result


def medians_by_contender(repeats, all_rows):
    """{contender: [rows of each repeat]} -> {contender: {bytes: median row}}; appends those rows,
    tagged with their contender, to all_rows."""
    results = {}
    for name, rows in repeats.items():
        medians = median_rows(rows)
        results[name] = {row["bytes"]: row for row in medians}
        all_rows.extend(dict(row, contender=name) for row in medians)
    return results


def print_table(title, columns, results, ours):
    """results: {contender: {bytes: row}}; prints busbw per contender and, for each of `ours`, its
    ratio to the best of the other contenders."""
    sizes = sorted({size for rows in results.values() for size in rows})
    print(f"\n{title}")
    header = (f"{'size':>9} " + " ".join(f"{c:>16}" for c in columns) + f" {'best peer':>16} " +
              " ".join(f"{c + '/best':>22}" for c in ours))
    print(header)
    print("-" * len(header))
    ratios = {c: [] for c in ours}
    for size in sizes:
        cells, best = [], None
        for c in columns:
            row = results.get(c, {}).get(size)
            cells.append(f"{row['busbw_gbps']:16.3f}" if row else f"{'-':>16}")
            if row and c not in ours and (best is None or row["busbw_gbps"] > best[1]):
                best = (c, row["busbw_gbps"])
        cells_ratio = []
        for c in ours:
            row = results.get(c, {}).get(size)
            ratio = row["busbw_gbps"] / best[1] if row and best else None
            if ratio is not None:
                ratios[c].append(ratio)
            cells_ratio.append(f"{(f'{ratio:.2f}x' if ratio is not None else '-'):>22}")
        label = f"{size // MIB} MiB" if size >= MIB else f"{size} B"
        print(f"{label:>9} " + " ".join(cells) + f" {best[0] if best else '-':>16} " + " ".join(cells_ratio))
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--h2", required=True, help="the h2 executable")
    parser.add_argument("--plugin-path", required=True, help="H2_PLUGIN_PATH for the ranks (cpu-reference)")
    parser.add_argument("--mpi-allreduce", required=True)
    parser.add_argument("--gloo-allreduce", required=True)
    parser.add_argument("--ranks", default="2,4",
                        help="rank counts of the allreduce against Open MPI and Gloo (empty: none)")
    parser.add_argument("--min-bytes", type=int, default=MIB)
    parser.add_argument("--max-bytes", type=int, default=64 * MIB)
    parser.add_argument("--factor", type=int, default=4)
    # nccl-tests' defaults (20 timed, 5 warm-up), and 5 interleaved repeats: with 10 iterations and 3
    # repeats, a 1 MiB allreduce was timed over 3 ms, and the ratios moved by 0.15 between runs.
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--scale-below", type=int, default=16 * MIB,
                        help="sizes below this run --iters x min(8, this / size) timed iterations, in every "
                             "contender: a 1 MiB allreduce takes about 0.5 ms, and 20 of them time a window that "
                             "one scheduling hiccup on an oversubscribed node decides")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bind", choices=["none", "cores"], default="none",
                        help="cores: every contender's ranks bound to cores alike (h2 launch --bind cores; mpirun "
                             "--bind-to core:overload-allowed --map-by core; fi_pingpong under taskset)")
    parser.add_argument("--tcp-congestion", default="",
                        help="comma-separated TCP congestion controls (e.g. cubic) to repeat the tcp;ofi_rxm "
                             "ping-pong under, each in a network namespace of its own (needs root and iproute2; "
                             "skipped with a message otherwise); the system's own always runs")
    parser.add_argument("--second-plugin", default="",
                        help="a second plugin with a collective library (a name, such as ascend with the emulated "
                             "CANN, or a plugin's path): 4 ranks, two on each plugin, run allreduce, reduce-scatter, "
                             "allgather and broadcast hierarchically (each plugin's library inside, DiComm between) "
                             "against DiComm's flat algorithms")
    parser.add_argument("--second-plugin-env", action="append", default=[], metavar="NAME=VALUE",
                        help="environment for the second plugin's ranks (ASCEND_HOME_PATH=the emulated CANN)")
    parser.add_argument("--second-plugin-repeats", type=int, default=3,
                        help="repeats of the two-plugin comparison (four collectives, two contenders each)")
    parser.add_argument("--no-pingpong", action="store_true", help="leave out the ping-pong tables")
    parser.add_argument("--json", help="write every row (medians) here as JSON lines")
    args = parser.parse_args()
    for path in (args.h2, args.mpi_allreduce, args.gloo_allreduce):
        if not os.access(path, os.X_OK):
            sys.exit(f"compare.py: {path} is not an executable")

    contenders = Contenders(args)
    all_rows, summary = [], []
    start = time.monotonic()

    def interleaved(runs, what):
        """{contender: [rows of each repeat]}: the repeats interleaved, so that a noisy stretch of time
        hits every contender alike."""
        repeats = {name: [] for name in runs}
        for repeat in range(args.repeats):
            for name, measure in runs.items():
                print(f"[{time.monotonic() - start:6.0f} s] {what}, {name}, run {repeat + 1}/{args.repeats}",
                      flush=True)
                repeats[name].append(measure())
        return repeats

    for ranks in [int(r) for r in args.ranks.split(",") if r]:
        runs = {
            "dicomm": lambda: contenders.dicomm(ranks),
            "dicomm plugin lib": lambda: contenders.dicomm(ranks, plugin_library=True),
            "mpi vader": lambda: contenders.mpi(ranks, "vader"),
            "mpi ucx sm": lambda: contenders.mpi(ranks, "ucx sm"),
            "gloo ring_chunk": lambda: contenders.gloo(ranks, "ring_chunked"),
            "gloo halv_doubl": lambda: contenders.gloo(ranks, "halving_doubling"),
        }
        results = medians_by_contender(interleaved(runs, f"allreduce, {ranks} ranks"), all_rows)
        ratios = print_table(f"allreduce f32 sum, {ranks} ranks: busbw GB/s (median of {args.repeats})",
                             list(runs), results, ["dicomm", "dicomm plugin lib"])
        for ours in ratios:
            if ratios[ours]:
                summary.append(f"allreduce {ranks} ranks: {ours}/best peer {min(ratios[ours]):.2f}x .. "
                               f"{max(ratios[ours]):.2f}x")

    # Two plugins, two ranks each: hierarchical (H2_DICOMM_VENDOR_COLLECTIVES=auto) against flat, for
    # every collective. The ranks are numbered plugin by plugin, so a hierarchical reduce-scatter and
    # allgather also reorder their blocks.
    if args.second_plugin:
        devices = f"cpu-reference:0,cpu-reference:0,{args.second_plugin}:0,{args.second_plugin}:0"
        extra = dict(item.split("=", 1) for item in args.second_plugin_env)
        saved_repeats, args.repeats = args.repeats, args.second_plugin_repeats
        for op in ("allreduce", "reduce_scatter", "allgather", "broadcast"):
            runs = {"dicomm flat": lambda: contenders.dicomm(4, op, devices=devices, extra_env=extra),
                    "dicomm hierarchical": lambda: contenders.dicomm(4, op, devices=devices, plugin_library=True,
                                                                     extra_env=extra)}
            results = medians_by_contender(interleaved(runs, f"{op}, 2 + 2 ranks on two plugins"), all_rows)
            kind = "f32 sum" if op in ("allreduce", "reduce_scatter") else "f32"
            ratios = print_table(f"{op} {kind}, 2 + 2 ranks on cpu-reference and {args.second_plugin}: busbw GB/s "
                                 f"(median of {args.repeats})", list(runs), results,
                                 ["dicomm hierarchical"])["dicomm hierarchical"]
            if ratios:
                summary.append(f"{op} on cpu-reference and {args.second_plugin}: hierarchical/flat "
                               f"{min(ratios):.2f}x .. {max(ratios):.2f}x")
        args.repeats = saved_repeats

    # DiComm on the same provider as fi_pingpong (asking for a provider keeps DiComm's node transport
    # out), and on shm's table also DiComm's own default between ranks of one node, the node transport.
    def pingpong_table(provider, congestion=""):
        ours = ["dicomm"] + (["dicomm node"] if provider == "shm" else [])
        where = f"{provider}, TCP congestion control {congestion}" if congestion else provider
        repeats = {name: [] for name in ours + ["fi_pingpong"]}
        for repeat in range(args.repeats):
            print(f"[{time.monotonic() - start:6.0f} s] pingpong, {where}, run {repeat + 1}/{args.repeats}",
                  flush=True)
            repeats["dicomm"].append(contenders.dicomm(2, "pingpong", provider))
            if "dicomm node" in repeats:
                repeats["dicomm node"].append(contenders.dicomm(2, "pingpong", node_transport="cma"))
            size, rows = args.min_bytes, []
            while size <= args.max_bytes:
                row = contenders.fi_pingpong(provider, size)
                if row:
                    rows.append(row)
                size *= args.factor
            repeats["fi_pingpong"].append(rows)
        if congestion:
            for row in (r for rows in repeats.values() for repeat in rows for r in repeat):
                row["tcp_congestion"] = congestion
        results = medians_by_contender(repeats, all_rows)
        ratios = print_table(f"ping-pong, {where}: GB/s of one transfer (median of {args.repeats})",
                             list(repeats), results, ours)
        for name, values in ratios.items():
            if values:
                who = "DiComm" if name == "dicomm" else "DiComm's node transport"
                summary.append(f"pingpong {where}: {who}/fi_pingpong {min(values):.2f}x .. {max(values):.2f}x")

    if not args.no_pingpong:
        pingpong_table("shm")
        pingpong_table("tcp;ofi_rxm", tcp_congestion())
    for name in (n for n in args.tcp_congestion.split(",") if n and not args.no_pingpong):
        if name == tcp_congestion():
            continue
        with CongestionNamespace(name) as namespace:
            if namespace.error:
                print(f"\nping-pong, tcp;ofi_rxm, TCP congestion control {name}: skipped, no network namespace "
                      f"for it ({namespace.error})")
                continue
            contenders.netns = namespace.netns
            try:
                pingpong_table("tcp;ofi_rxm", tcp_congestion(namespace.netns))
            finally:
                contenders.netns = None

    print("\n" + "\n".join(summary))
    wrong = sum(row["wrong"] for row in all_rows)
    if args.json:
        with open(args.json, "w") as out:
            for row in all_rows:
                out.write(json.dumps(row) + "\n")
        print(f"rows: {args.json}")
    for name, message in contenders.failures:
        print(f"contender failed: {name}: {message}")
    if wrong:
        print(f"{wrong} wrong elements: a contender computed a wrong result")
    dicomm_failed = any(name.startswith("dicomm") for name, _ in contenders.failures)
    return 1 if wrong or dicomm_failed else 0


if __name__ == "__main__":
    sys.exit(main())
