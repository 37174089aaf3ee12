"""The chaos soak (docs/reliability.md, "The chaos soak"): one GPT training
run on 4 ranks over 2 emulated nodes, hit by faults drawn at random, each
interruption followed by a restart with --resume auto; at the end its
parameters and optimizer state must equal an uninterrupted run's, bit for
bit. Started by scripts/chaos.sh (root, Debian's python3 with h5py).

Every fault, its detection and recovery go to <dir>/faults.jsonl; the table
by kind is printed at the end (and written to <dir>/table.md).
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ST = os.environ.get("CHAOS_BIN", os.path.join(REPO, "build", "bin", "shardtrain"))
EMU = os.path.join(REPO, "launch", "emunodes")
MEMLIMIT = os.path.join(REPO, "launch", "memlimit")

# Faults that end the job, and what its last line must say.
ENDING = {
    "kill9": r"(exited on signal 9|Killed|process rank \d)",
    "kill_in_checkpoint": r"(exited on signal 9|Killed|process rank \d)",
    "corrupt_checkpoint": r"(exited on signal 9|Killed|process rank \d)",
    "sigterm": r"preempted",
    "sigusr1": r"preempted",
    "link_cut": r"watchdog: .* not complete after .*never arrived",
    "disk_full": r"(No space left on device|ENOSPC|is full)",
    "memory_limit": r"^memlimit: the out-of-memory killer ended",
    "corrupt_data": r"(checksum|corrupt)",
}
# Faults that only slow the job down: it must keep going.
DELAYING = {"slow_rank", "link_1mbit", "link_10mbit_minute", "peer_cache_removed"}
KINDS = list(ENDING) + sorted(DELAYING)
# Faults that end the job within seconds (1.6-5.5 s measured; docs/reliability.md),
# and when one that has not is probed (Soak.probe): every ending kind but the
# cut link, which takes comm.timeout_s. A full disk ends the job at the next
# checkpoint, so its probe waits as long again as --every steps take.
PROMPT = set(ENDING) - {"link_cut"}
PROMPT_S = 12
# x86-64 numbers of the system calls a waiting thread is in (probe).
SYSCALLS = {"0": "read", "1": "write", "7": "poll", "23": "select", "24": "sched_yield", "35": "nanosleep",
            "61": "wait4", "202": "futex", "230": "clock_nanosleep", "232": "epoll_wait", "270": "pselect6",
            "271": "ppoll", "281": "epoll_pwait", "running": "user space"}
DESCRIPTION = {
    "kill9": "kill -9 of a random rank",
    "kill_in_checkpoint": "kill -9 of a random rank while a checkpoint is written",
    "corrupt_checkpoint": "the newest checkpoint damaged (a byte flipped), then kill -9",
    "sigterm": "SIGTERM to every rank (as Slurm preempts)",
    "sigusr1": "SIGUSR1 to mpirun (forwarded to the ranks)",
    "link_cut": "a node's link set down",
    "disk_full": "the run directory's file system filled",
    "memory_limit": "the job's memory limit lowered below its use",
    "corrupt_data": "bytes of a node's cached training shard flipped",
    "slow_rank": "a rank slowed 10x for 20 s (SIGSTOP 90 ms / SIGCONT 10 ms)",
    "link_1mbit": "every link at 1 Mbit/s for 60 s",
    "link_10mbit_minute": "every link at 10 Mbit/s for 60 s",
    "peer_cache_removed": "a node's peer-cache directory removed",
}


def log(msg):
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


class Soak:
    def __init__(self, a):
        self.a = a
        self.dir = os.path.abspath(a.dir)
        self.prefix = f"cs{os.getpid() % 100000}x"
        self.data = os.path.join(self.dir, "data")
        self.node_local = os.path.join(self.dir, "node-local")
        self.fs = os.path.join(self.dir, "run-fs")  # a tmpfs: the disk that fills
        self.run = os.path.join(self.fs, "run")
        self.ref = os.path.join(self.dir, "reference")
        self.records = []
        self.segment = 0
        self.retried = 0  # starts that hung and were tried again
        self.job = None
        self.out = None
        self.kinds = [k for k in KINDS if k not in a.skip]
        self.step_s = 0.0  # the uninterrupted run's seconds per step (reference)

    # --- set-up ---------------------------------------------------------------
    def setup(self):
        os.makedirs(self.dir, exist_ok=True)
        src = os.path.join(REPO, "data", "kjv")
        if not os.path.exists(os.path.join(self.data, "train", "manifest.json")):
            if os.path.exists(os.path.join(src, "train", "manifest.json")):
                shutil.copytree(src, self.data, dirs_exist_ok=True)
            else:
                sh(ST, "prep", "text", "--out", self.data, "--block-size", "64")
        shutil.rmtree(self.node_local + ".nodes", ignore_errors=True)
        os.makedirs(self.fs, exist_ok=True)
        if subprocess.run(["mountpoint", "-q", self.fs]).returncode != 0:
            sh("mount", "-t", "tmpfs", "-o", f"size={self.a.fs_mib}m", "tmpfs", self.fs)
        shutil.rmtree(self.run, ignore_errors=True)
        sh(EMU, "gc")
        sh(EMU, "up", "2", "--prefix", self.prefix, "--owner-pid", str(os.getpid()))
        self.memlimit = subprocess.run([MEMLIMIT, "--limit", "4G", "--check"], capture_output=True).returncode == 0
        if not self.memlimit and "memory_limit" in self.kinds:
            log("no memory cgroup here: the memory_limit fault is left out")
            self.kinds.remove("memory_limit")

    def teardown(self):
        subprocess.run([EMU, "down", "--prefix", self.prefix], capture_output=True)
        subprocess.run(["umount", "-l", self.fs], capture_output=True)

    def train_args(self, run_dir):
        d = self.data
        sets = {
            "data.train": f"{d}/train", "data.test": f"{d}/test", "data.loader": "stream",
            "io.peer_cache.dir": f"{self.node_local}/pc", "train.max_steps": self.a.steps, "train.epochs": 1000,
            "checkpoint.every_steps": self.a.every, "checkpoint.keep": 3, "checkpoint.on_signal": "true",
            "comm.timeout_s": self.a.timeout, "target.value": 0,
        }
        args = [ST, "train", os.path.join(REPO, "examples", "gpt_kjv.toml")]
        sets.update(dict(kv.split("=", 1) for kv in self.a.set))
        for k, v in sets.items():
            args += ["--set", f"{k}={v}"]
        return args + ["--run-dir", run_dir]

    def launch(self, run_dir, out_path, resume=True):
        cmd = [EMU, "run", "--prefix", self.prefix, "-n", "4", "--per-node", "2", "--node-local", self.node_local,
               "--"] + self.train_args(run_dir) + (["--resume", "auto"] if resume else [])
        if self.memlimit:
            cmd = [MEMLIMIT, "--limit", "4G", "--"] + cmd
        env = dict(os.environ, SHARDRUN_ABORT_GRACE_S="10")
        self.out = out_path
        with open(out_path, "w") as f:
            # Its own session: a fault never reaches this script.
            return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)

    # --- the job's state ------------------------------------------------------------
    def ranks(self):
        """{rank: pid} of the running job's ranks."""
        found = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                if not cmd or os.path.basename(cmd[0]) != b"shardtrain" or self.run.encode() not in cmd:
                    continue
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            for e in env:
                if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(e.split(b"=")[1])] = int(pid)
        return found

    def mpirun_pid(self):
        r = subprocess.run(["pgrep", "-f", f"^mpirun .*/{self.prefix}/hostfile"], capture_output=True, text=True)
        pids = r.stdout.split()
        return int(pids[0]) if pids else None

    def step_now(self):
        """The newest step in the run's step records (rank 0's file; flushed as it goes)."""
        path = os.path.join(self.run, "telemetry", "rank-00000.jsonl")
        try:
            with open(path, "rb") as f:
                f.seek(max(0, os.path.getsize(path) - 8192))
                lines = f.read().decode(errors="replace").splitlines()
            for line in reversed(lines):
                try:
                    return json.loads(line)["step"] + 1
                except (ValueError, KeyError):
                    continue
        except OSError:
            pass
        return None

    def checkpoints(self):
        d = os.path.join(self.run, "checkpoints")
        try:
            return sorted(f for f in os.listdir(d) if re.fullmatch(r"step-\d{8}\.h5", f))
        except OSError:
            return []

    def output(self):
        try:
            return open(self.out, errors="replace").read()
        except OSError:
            return ""

    def wait_training(self, since_lines, limit):
        """Seconds until the job prints a [train] line past `since_lines` lines, or None."""
        t0 = time.time()
        while time.time() - t0 < limit:
            lines = self.output().splitlines()[since_lines:]
            if any(l.startswith("[train]") for l in lines):
                return time.time() - t0
            if self.job.poll() is not None:
                return None
            time.sleep(0.2)
        return None

    def wait_end(self, limit):
        try:
            return self.job.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return None

    def probe(self, n, why):
        """What a job that should have ended is doing: each rank's threads
        (state, wait channel, system call, the top of the kernel stack) and
        each node's TCP sockets (queues, timers), whole in probe-NNN.txt.
        Returns its path and the gist (a line per rank and per node)."""
        def read(path):
            try:
                return open(path, errors="replace").read().strip()
            except OSError as e:
                return f"({e.strerror})"
        lines, gist = [f"probe: {why}"], []
        for rank, pid in sorted(self.ranks().items()):
            lines.append(f"rank {rank} (pid {pid}):")
            try:
                tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
            except OSError as e:
                gist.append(f"rank {rank}: ({e.strerror})")
                continue
            waits = {}
            for tid in tids:
                t = f"/proc/{pid}/task/{tid}"
                stat = read(f"{t}/stat")
                state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
                call = read(f"{t}/syscall").split(" ")[0]
                call = SYSCALLS.get(call, call)
                stack = [l.split()[-1] for l in read(f"{t}/stack").splitlines()[:4] if l.split()]
                lines.append(f"  thread {tid} {read(f'{t}/comm')}: state {state}, wchan {read(f'{t}/wchan')}, "
                             f"syscall {call}, kernel stack {' < '.join(stack)}")
                key = f"{state} in {call}"
                waits[key] = waits.get(key, 0) + 1
            gist.append(f"rank {rank}: {len(tids)} threads: " +
                        ", ".join(f"{c} {k}" for k, c in sorted(waits.items(), key=lambda kv: -kv[1])))
            stacks = self.stacks(pid)
            if stacks:
                lines += ["  " + l for l in stacks[0]]
                gist.append(f"rank {rank}'s threads in shardtrain's code: " + stacks[1])
        for i in range(2):
            r = subprocess.run(["ip", "netns", "exec", f"{self.prefix}{i}", "ss", "-tnoi"], capture_output=True,
                               text=True)
            out = (r.stdout + r.stderr).splitlines()
            lines.append(f"node {i}'s TCP sockets:")
            lines += ["  " + l for l in out]
            rows = [l.split() for l in out if l[:1].isalpha() and not l.startswith("State")]
            queued = [f"{f[3]}->{f[4]} recv-q {f[1]} send-q {f[2]}" for f in rows
                      if len(f) >= 5 and (f[1] != "0" or f[2] != "0")]
            gist.append(f"node {i}: {len(rows)} TCP sockets, {len(queued)} with bytes queued" +
                        (": " + "; ".join(queued[:6]) if queued else ""))
        path = os.path.join(self.dir, f"probe-{n:03d}.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        log(f"#{n}: {why}: probed ({path}):")
        for line in gist:
            log("      " + line)
        return {"path": path, "gist": gist}

    @staticmethod
    def stacks(pid):
        """Every thread's stack by gdb (scripts/install-deps.sh installs it):
        (the lines, the gist: each thread's two innermost frames of
        shardtrain's own code, identical ones counted), or None without gdb."""
        if shutil.which("gdb") is None:
            return None
        try:
            r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                                "-ex", "thread apply all bt 24"], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return [f"gdb -p {pid}: no answer within 60 s"], "(gdb did not answer)"
        out = [l for l in r.stdout.splitlines() if l.startswith(("Thread ", "#"))]
        threads, current = [], None
        for l in out:
            if l.startswith("Thread "):
                name = re.search(r'"([^"]*)"\)', l)
                current = [name.group(1) if name else "?", []]
                threads.append(current)
            elif current is not None:
                fn = re.search(r"\b(shardtrain::[\w:<>~]+)", l.replace("(anonymous namespace)::", ""))
                if fn and len(current[1]) < 2:
                    current[1].append(fn.group(1).replace("shardtrain::", ""))
        counts = {}
        for name, frames in threads:
            key = (f"{name}: " if name != "shardtrain" else "") + (" < ".join(frames) or "(outside it)")
            counts[key] = counts.get(key, 0) + 1
        gist = "; ".join(f"{c}x {k}" if c > 1 else k for k, c in sorted(counts.items(), key=lambda kv: kv[1]))
        return out, gist

    def kill_nodes_processes(self):
        for i in range(2):
            r = subprocess.run(["ip", "netns", "pids", f"{self.prefix}{i}"], capture_output=True, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass

    def kill_job(self):
        try:
            os.killpg(self.job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.kill_nodes_processes()  # the daemons (daemonized, in the nodes' namespaces)
        # memlimit, killed too, could not remove its cgroup (named by its pid).
        for root, dirs, _ in os.walk("/sys/fs/cgroup"):
            if f"shardtrain-memlimit-{self.job.pid}" in dirs:
                time.sleep(0.5)
                try:
                    os.rmdir(os.path.join(root, f"shardtrain-memlimit-{self.job.pid}"))
                except OSError:
                    pass
            if root.count("/") > 6:
                dirs[:] = []
        for pid in self.ranks().values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.job.wait()

    # --- faults -----------------------------------------------------------------
    def shape(self, rate=None):
        cmd = [EMU, "up", "2", "--prefix", self.prefix, "--owner-pid", str(os.getpid())] + (["--rate", rate] if rate else [])
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            time.sleep(1)  # once more: tc can refuse while a link's queue drains
            sh(*cmd)

    def flip_bytes(self, path, count, rng, lo=0.1, hi=0.9):
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            for _ in range(count):
                at = rng.randrange(int(size * lo), int(size * hi))
                f.seek(at)
                b = f.read(1)
                f.seek(at)
                f.write(bytes([b[0] ^ 0x5A]))

    def inject(self, kind, rng):
        """Does the fault; returns (what it hit, seconds it lasted while the job ran)."""
        ranks = self.ranks()
        victim = rng.randrange(4)
        node = rng.randrange(2)
        if kind == "kill9":
            os.kill(ranks[victim], signal.SIGKILL)
            return f"rank {victim}"
        if kind == "kill_in_checkpoint":
            # The next checkpoint's temporary file, whichever step it is (the
            # step records lag the job by up to 31 steps).
            ckdir = os.path.join(self.run, "checkpoints")
            def tmps():
                return {f for f in os.listdir(ckdir) if re.fullmatch(r"step-\d{8}\.h5\.tmp", f)}
            stale = tmps()  # a killed write's leftover is no write in progress
            deadline, tmp = time.time() + 120, None
            while tmp is None and time.time() < deadline and self.job.poll() is None:
                new = tmps() - stale
                tmp = min(new) if new else None
                if tmp is None:
                    time.sleep(0.001)
            self.t_fault = time.time()
            os.kill(ranks[victim], signal.SIGKILL)
            self.wait_end(60)
            if tmp is None:
                return f"rank {victim}: no checkpoint write seen within 120 s, killed all the same"
            done = os.path.exists(os.path.join(ckdir, tmp[: -len(".tmp")]))
            return f"rank {victim}, {tmp} {'already complete: missed' if done else 'cut short'}"
        if kind == "corrupt_checkpoint":
            newest = self.checkpoints()[-1]
            self.flip_bytes(os.path.join(self.run, "checkpoints", newest), 1, rng)
            os.kill(ranks[victim], signal.SIGKILL)
            return f"{newest}, then rank {victim}"
        if kind == "sigterm":
            for pid in ranks.values():
                os.kill(pid, signal.SIGTERM)
            return "every rank"
        if kind == "sigusr1":
            os.kill(self.mpirun_pid(), signal.SIGUSR1)
            return "mpirun"
        if kind == "link_cut":
            sh("ip", "link", "set", f"{self.prefix}-v{node}", "down")
            return f"node {node}"
        if kind == "disk_full":
            free = shutil.disk_usage(self.fs).free
            filler = os.path.join(self.fs, "filler")
            if subprocess.run(["fallocate", "-l", str(free), filler], capture_output=True).returncode != 0:
                sh("fallocate", "-l", str(max(0, free - (64 << 10))), filler)
            return f"{free >> 20} MiB filled"
        if kind == "memory_limit":
            return self.lower_memory_limit(ranks)
        if kind == "corrupt_data":
            cached = os.path.join(self.node_local + ".nodes", f"{self.prefix}0", "pc", "part-00000.h5")
            self.flip_bytes(cached, 256, rng, 0.2, 0.8)
            return "node 0's copy of part-00000.h5, 256 bytes"
        if kind == "slow_rank":
            pid, until = ranks[victim], time.time() + 20
            while time.time() < until and self.job.poll() is None:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    time.sleep(0.09)
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.01)
                except ProcessLookupError:
                    break
            return f"rank {victim}"
        if kind in ("link_1mbit", "link_10mbit_minute"):
            rate, hold = ("1mbit", 60) if kind == "link_1mbit" else ("10mbit", 60)
            before = self.step_now() or 0
            self.shape(rate)
            until = time.time() + hold
            while time.time() < until and self.job.poll() is None:
                time.sleep(0.5)
            self.shape()
            return f"{(self.step_now() or 0) - before} steps done at {rate}"
        if kind == "peer_cache_removed":
            d = os.path.join(self.node_local + ".nodes", f"{self.prefix}{node}", "pc")
            shutil.rmtree(d, ignore_errors=True)
            return f"node {node}'s {d}"
        raise ValueError(kind)

    def lower_memory_limit(self, ranks):
        """Lowers the job's memory limit to 16 MiB above the anonymous memory
        it uses, then starts a process in its cgroup that allocates 256 MiB
        (and that the OOM killer spares), as another tenant of the node
        would: the killer ends a rank. The margin is over anonymous memory
        only: the page cache charged to the job (its data, its checkpoints,
        the ranks' code) is reclaimed and faulted back in, and with a limit
        64 MiB above the whole charge the allocation crawled through that
        reclaim while the job trained on (57-88 s before the killer acted,
        2026-12-05, once the ranks stopped mapping cuBLAS). cgroup v1
        refuses a limit below the use (EBUSY), hence the hog. The hog ends
        with the job's last rank."""
        lines = open(f"/proc/{ranks[0]}/cgroup").read().splitlines()
        v1 = [l.split(":", 2)[2] for l in lines if l.split(":")[1] == "memory"]
        if v1:
            base, limit, anon_key = f"/sys/fs/cgroup/memory{v1[0]}", "memory.limit_in_bytes", "total_rss"
        else:
            base = "/sys/fs/cgroup" + [l.split(":", 2)[2] for l in lines if l.startswith("0::")][0]
            limit, anon_key = "memory.max", "anon"
        stat = dict(l.split() for l in open(f"{base}/memory.stat") if len(l.split()) == 2)
        anon = int(stat.get(anon_key, stat.get("rss", 0)))  # v1 without hierarchy: rss
        with open(f"{base}/{limit}", "w") as f:
            f.write(str(anon + (16 << 20)))
        pids = " ".join(str(p) for p in ranks.values())
        hog = (f"import os, time\nopen('{base}/cgroup.procs', 'w').write(str(os.getpid()))\n"
               "open('/proc/self/oom_score_adj', 'w').write('-1000')\n"
               "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
               f"while any(os.path.exists(f'/proc/{{p}}') for p in '{pids}'.split()): time.sleep(0.1)\n")
        subprocess.Popen([sys.executable, "-c", hog], start_new_session=True)
        return f"limit {(anon >> 20) + 16} MiB ({anon >> 20} MiB anonymous in use), then 256 MiB allocated beside the ranks"

    def recreate_nodes(self):
        """The emulated nodes made afresh (their node-local directories stay):
        after a link came back, the next mpirun once waited for ever for the
        daemon of the node that had been cut off."""
        self.kill_nodes_processes()
        subprocess.run([EMU, "down", "--prefix", self.prefix], capture_output=True)
        for attempt in range(10):  # the cut-off node's processes may still be ending
            r = subprocess.run([EMU, "up", "2", "--prefix", self.prefix, "--owner-pid", str(os.getpid())],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return
            log(f"emunodes up: {r.stderr.strip()[:300]} (attempt {attempt + 1})")
            time.sleep(2)
        raise RuntimeError("the emulated nodes could not be made again")

    def repair(self, kind):
        if kind == "link_cut":
            for i in range(2):
                subprocess.run(["ip", "link", "set", f"{self.prefix}-v{i}", "up"], capture_output=True)
            self.recreate_nodes()
        if kind == "disk_full" and os.path.exists(os.path.join(self.fs, "filler")):
            os.remove(os.path.join(self.fs, "filler"))

    # --- the soak ----------------------------------------------------------------
    def reference(self):
        final = os.path.join(self.ref, "checkpoints", f"step-{self.a.steps:08d}.h5")
        key_path, key = os.path.join(self.dir, "reference.args"), " ".join(self.train_args(self.ref))
        if os.path.exists(final) and os.path.exists(key_path) and open(key_path).read() == key:
            log(f"reference: {final} is there (an earlier soak's, with the same arguments)")
        else:
            shutil.rmtree(self.ref, ignore_errors=True)
            log(f"reference: {self.a.steps} steps uninterrupted (4 ranks, 2 emulated nodes)")
            t0 = time.time()
            self.job = self.launch(self.ref, os.path.join(self.dir, "reference.txt"), resume=False)
            rc = self.job.wait()
            if rc != 0 or not os.path.exists(final):
                sys.exit(f"chaos: the reference run failed (exit {rc}): {self.output()[-2000:]}")
            with open(key_path, "w") as f:
                f.write(key)
            log(f"reference: done in {time.time() - t0:.0f} s")
        result = json.load(open(os.path.join(self.ref, "result.json")))
        self.step_s = result["train_time_s"] / result["steps"]

    def start_segment(self, retry=True):
        """Starts the job again; the seconds until it trains, or None. A start
        that has not trained within 150 s (mpirun waiting for a daemon) is
        ended and tried once more on nodes made afresh (self.retried)."""
        self.segment += 1
        out = os.path.join(self.dir, f"segment-{self.segment:03d}.txt")
        t0 = time.time()
        self.job = self.launch(self.run, out)
        t = self.wait_training(0, 150)
        if t is None and retry and self.job.poll() is None:
            log(f"segment {self.segment}: not training after 150 s; ended, and started again on nodes made afresh")
            self.kill_job()
            self.recreate_nodes()
            self.retried += 1
            t = self.start_segment(retry=False)
            return None if t is None else time.time() - t0
        return t

    def soak(self, plan):
        log(f"soak: {self.a.steps} steps, a checkpoint every {self.a.every}, comm.timeout_s {self.a.timeout}")
        t_soak = time.time()
        self.start_segment()
        n = 0
        for kind, wait_s, seed in plan:
            if self.job.poll() is not None:
                break
            time.sleep(wait_s)
            if self.job.poll() is not None:
                break
            if kind == "corrupt_checkpoint" and len(self.checkpoints()) < 2:
                kind = "kill9"  # one checkpoint only: damaging it leaves nothing to resume from
            if kind == "corrupt_data" and self.step_now() is None:
                continue
            n += 1
            rng = random.Random(seed)
            rec = {"n": n, "kind": kind, "segment": self.segment, "step": self.step_now()}
            lines_before = len(self.output().splitlines())
            self.t_fault = time.time()
            try:
                rec["target"] = self.inject(kind, rng)
            except (KeyError, OSError, subprocess.CalledProcessError, TypeError, IndexError, AttributeError) as e:
                log(f"#{n} {kind} could not be injected ({e!r} {getattr(e, 'stderr', '') or ''}): drawn again")
                if kind.startswith("link_"):
                    self.shape()  # no shaping left half applied
                n -= 1
                continue
            t0 = self.t_fault
            rec["t"] = round(t0 - t_soak, 1)
            if kind in DELAYING:
                alive = self.job.poll() is None
                rec.update(ended=not alive, ok=alive, detection_s=None, recovery_s=None, redone=0)
                if not alive:
                    rec["last"] = self.last_line()
                self.note(rec)
                if not alive:
                    break
                continue
            limit = {"link_cut": self.a.timeout + 45, "sigterm": 60, "sigusr1": 60}.get(kind, 120)
            rc = None
            if kind in PROMPT:
                # These end the job within seconds: one still running at
                # PROMPT_S is stuck somewhere, and what its ranks are doing
                # then is the evidence (the watchdog ends it later).
                prompt_s = PROMPT_S + (self.a.every * self.step_s if kind == "disk_full" else 0.0)
                rc = self.wait_end(max(0.0, t0 + prompt_s - time.time()))
                if rc is None:
                    rec["probe"] = self.probe(n, f"#{n} {kind}: the job still runs {prompt_s:.0f} s after the fault")
            if rc is None:
                rc = self.wait_end(max(0.0, t0 + limit - time.time()))
            if rc is None:
                rec.update(ok=False, hang=True, last=f"no end within {limit} s")
                self.kill_job()
                rc = self.job.returncode
            rec["detection_s"] = round(time.time() - t0, 1)
            rec["exit"] = rc
            rec["last"] = self.last_line()
            rec["step_reached"] = self.step_now()
            if rc == 0 and re.match(r"\[done\] completed: ", rec["last"]):
                # The job was past its last step already (the step records
                # lag it by up to 31 steps): nothing was left to interrupt.
                log(f"#{n} {kind} came after the run's last step: the run completed; not counted")
                n -= 1
                break
            cause = re.search(ENDING[kind], rec["last"], re.M) is not None
            expect_exit = 75 if kind in ("sigterm", "sigusr1") else None
            rec.setdefault("ok", rc != 0 and cause and (expect_exit is None or rc == expect_exit))
            rec["cause_named"] = cause
            self.repair(kind)
            t1 = time.time()
            retried = self.retried
            started = self.start_segment()
            rec["start_retried"] = self.retried > retried
            rec["recovery_s"] = round(time.time() - t1, 1) if started is not None else None
            resumed = re.search(r"^\[resume\] \S+: step (\d+)", self.output(), re.M)
            rec["resumed_from"] = int(resumed.group(1)) if resumed else 0
            rec["skipped"] = re.findall(r"^\[resume\] skipped: (\S+):", self.output(), re.M)
            if kind == "corrupt_checkpoint":
                rec["ok"] = rec["ok"] and bool(rec["skipped"])
            if rec["step_reached"] is not None:
                rec["redone"] = max(0, rec["step_reached"] - rec["resumed_from"])
            if started is None:
                rec["ok"] = False
                rec["restart"] = self.output()[-1500:]
            self.note(rec)
            if started is None:
                break
            if n >= self.a.faults and time.time() - t_soak >= 60 * self.a.minutes:
                break
        # The last segment trains to the end.
        rc = self.wait_end(3 * 3600)
        self.soak_s = time.time() - t_soak
        log(f"soak: {n} faults; the last segment ended with {rc} after {self.soak_s / 60:.1f} min in all")
        return rc, n

    def last_line(self):
        lines = [l for l in self.output().splitlines() if l.strip()]
        return lines[-1] if lines else ""

    def note(self, rec):
        self.records.append(rec)
        with open(os.path.join(self.dir, "faults.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
        status = "ok " if rec.get("ok") else "BAD"
        extra = ""
        if rec.get("detection_s") is not None:
            extra = (f" ended after {rec['detection_s']} s (exit {rec.get('exit')}), back training after "
                     f"{rec.get('recovery_s')} s from step {rec.get('resumed_from')}, {rec.get('redone', '?')} steps redone")
        log(f"{status} #{rec['n']} {rec['kind']} ({rec.get('target')}) at step {rec.get('step')}:{extra}")
        if rec.get("last"):
            log(f"      last line: {rec['last'][:200]}")

    # --- the verdict ----------------------------------------------------------------
    def compare(self):
        import h5py
        import numpy as np
        name = f"step-{self.a.steps:08d}.h5"
        a = h5py.File(os.path.join(self.ref, "checkpoints", name), "r")
        b = h5py.File(os.path.join(self.run, "checkpoints", name), "r")
        names = ["params"] + ["optimizer/" + k for k in a["optimizer"]]
        differ = [n for n in names if not np.array_equal(a[n][:], b[n][:])]
        return names, differ

    def table(self):
        rows = []
        for kind in KINDS:
            recs = [r for r in self.records if r["kind"] == kind]
            if not recs:
                continue
            det = [r["detection_s"] for r in recs if r.get("detection_s") is not None]
            rec_s = [r["recovery_s"] for r in recs if r.get("recovery_s") is not None]
            redo = [r.get("redone", 0) for r in recs if r.get("redone") is not None]

            def span(v, unit=""):
                if not v:
                    return "-"
                return f"{statistics.median(v):g}{unit} ({min(v):g}-{max(v):g})" if len(v) > 1 else f"{v[0]:g}{unit}"
            ok = sum(1 for r in recs if r.get("ok"))
            rows.append(f"| {DESCRIPTION[kind]} | {len(recs)} | {ok} of {len(recs)} | {span(det, ' s')} | "
                        f"{span(rec_s, ' s')} | {span(redo)} |")
        head = ("| fault | count | as expected | job ended after (median, range) | back training after | "
                "steps redone |\n| --- | --- | --- | --- | --- | --- |")
        lines = ["", "| fault | the job's last line (the first such fault) |", "| --- | --- |"]
        for kind in KINDS:
            last = next((r.get("last") for r in self.records if r["kind"] == kind and r.get("last")), None)
            if last:
                lines.append(f"| {kind} | `{last[:220]}` |")
        return head + "\n" + "\n".join(rows) + "\n" + "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", default="/tmp/shardtrain-chaos")
    p.add_argument("--seed", type=int, default=None, help="the draw's seed (default: from the clock; printed)")
    p.add_argument("--faults", type=int, default=50, help="at least this many faults")
    p.add_argument("--minutes", type=float, default=30, help="and at least this long")
    p.add_argument("--steps", type=int, default=12000, help="train.max_steps of the run")
    p.add_argument("--every", type=int, default=200, help="checkpoint.every_steps")
    p.add_argument("--timeout", type=float, default=90,
                   help="comm.timeout_s (above a step at 1 Mbit/s: no false alarm)")
    p.add_argument("--wait", type=float, nargs=2, default=[4, 15], help="seconds of training before a fault: min max")
    p.add_argument("--skip", default="", help="kinds left out, comma-separated")
    p.add_argument("--only", default="", help="only these kinds, comma-separated")
    p.add_argument("--fs-mib", type=int, default=768, help="the run directory's tmpfs")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the trained job's, over the soak's own (repeatable), e.g. "
                        "comm.allreduce_algorithm=mpi")
    a = p.parse_args()
    if any("=" not in kv for kv in a.set):
        sys.exit(f"chaos: --set takes KEY=VALUE, not {[kv for kv in a.set if '=' not in kv]}")
    a.skip = [k for k in a.skip.split(",") if k]
    if a.only:
        a.skip = [k for k in KINDS if k not in a.only.split(",")]
    unknown = [k for k in a.skip + (a.only.split(",") if a.only else []) if k not in KINDS]
    if unknown:
        sys.exit(f"chaos: unknown fault kind(s) {unknown}; kinds: {', '.join(KINDS)}")
    seed = a.seed if a.seed is not None else int(time.time()) % 1000000
    log(f"seed {seed} (the same draw again: --seed {seed})")
    s = Soak(a)
    s.setup()
    # The whole draw up front, so that the seed alone fixes it (more than
    # asked for: faults go on until the time is reached too).
    rng = random.Random(seed)
    # Rounds of every kind in a shuffled order: each kind comes up, in an
    # order and at moments the seed decides.
    kinds = []
    while len(kinds) < 4 * a.faults:
        kinds += rng.sample(s.kinds, len(s.kinds))
    plan = [(k, round(rng.uniform(*a.wait), 1), rng.randrange(1 << 30)) for k in kinds]
    log("draw: " + " ".join(k for k, _, _ in plan[: a.faults]) + " ...")
    try:
        s.reference()
        rc, n = s.soak(plan)
        problems = []
        if rc != 0:
            problems.append(f"the last segment ended with exit {rc}: {s.last_line()}")
        if n < a.faults:
            problems.append(f"{n} faults, fewer than {a.faults} (the run ended first: raise --steps)")
        bad = [r for r in s.records if not r.get("ok")]
        if bad:
            problems.append(f"{len(bad)} fault(s) not handled as expected: " +
                            ", ".join(f"#{r['n']} {r['kind']}" for r in bad))
        result = json.load(open(os.path.join(s.run, "result.json")))
        reference = json.load(open(os.path.join(s.ref, "result.json")))
        same_loss = result.get("final", {}).get("test_loss") == reference.get("final", {}).get("test_loss")
        names, differ = s.compare() if rc == 0 else ([], ["(no final checkpoint)"])
        if differ:
            problems.append(f"final state differs from the uninterrupted run's in {differ}")
        ref_evals = {json.loads(l)["step"]: json.loads(l)["test_loss"] for l in open(os.path.join(s.ref, "metrics.jsonl"))}
        got_evals = {json.loads(l)["step"]: json.loads(l)["test_loss"] for l in open(os.path.join(s.run, "metrics.jsonl"))}
        lost = [st for st, v in ref_evals.items() if got_evals.get(st) != v]
        if lost:
            problems.append(f"evaluations missing or different at steps {lost}")
        if not same_loss:
            problems.append(f"final test_loss {result.get('final')} against {reference.get('final')}")
        crashes = []
        for name in sorted(os.listdir(s.dir)):
            if name.startswith("segment-"):
                text = open(os.path.join(s.dir, name), errors="replace").read()
                if re.search(r"Segmentation fault|core dumped|Aborted|terminate called|Assertion", text):
                    crashes.append(name)
        if crashes:
            problems.append(f"a crash in {crashes}")
        table = s.table()
        summary = (f"seed {seed}: {n} faults in {s.soak_s / 60:.1f} min, {s.segment} job starts "
                   f"({s.retried} of them a second try after a start that hung); "
                   f"{len(ref_evals) - len(lost)} of {len(ref_evals)} evaluations as the uninterrupted run's; "
                   f"result.json {result.get('status')}, {result.get('steps')} steps; final "
                   f"{', '.join(names)} {'bit-identical to' if not differ else 'DIFFERENT from'} the uninterrupted "
                   f"run's; final test_loss {result.get('final', {}).get('test_loss')} "
                   f"(uninterrupted: {reference.get('final', {}).get('test_loss')})")
        with open(os.path.join(s.dir, "table.md"), "w") as f:
            f.write(summary + "\n\n" + table + "\n")
        print(table)
        log(summary)
        if problems:
            for pr in problems:
                log("FAIL " + pr)
            sys.exit(1)
        log("PASS")
    finally:
        if s.job and s.job.poll() is None:
            s.kill_job()
        s.teardown()


if __name__ == "__main__":
    main()
