#!/usr/bin/env python3
"""Freezes (SIGSTOP) or kills (SIGKILL) one rank of the training job at
random moments and checks that no other rank outlives the job's timeout.

Each point launches jobs/train under Open MPI's mpirun with --enable-recovery
(so the launcher never ends the job for us: only the library's own deadlines
can), waits a random delay, stops or kills a random rank, and then requires:

  * every other rank has exited within ACCELERATE_TIMEOUT + margin of the
    fault (a survivor still alive then is a hang: the point fails, with the
    survivor's stack where gdb is at hand);
  * some survivor reported the fault (a timeout naming the rank, the
    watchdog's report of a blocked call, or the abort), never a crash of
    its own;
  * the newest committed checkpoint verifies (accelerate-hpc inspect checks
    its manifest and every checksum).

The delays are spread over a clean run's length, measured first, so the
points land in start-up, steps, saves, rotations, evaluation and exit; a
third of the points resume from a checkpoint, so loads are hit too. The
seed is printed: `--seed S` replays the same points.

usage: fault_campaign.py --train BIN --inspect ACCELERATE_HPC --mpiexec MPIEXEC
                         [--ranks N] [--points P] [--seed S] [--timeout T]
                         [--margin M] [--work DIR] [-- extra mpiexec flags]
Exit status: 0 when every point passed, 1 otherwise, 77 (skip) when the
launcher cannot leave survivors running (not Open MPI).
"""

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def rank_pids(launcher_pid, ranks):
    """Rank -> pid of the launcher's children that carry an Open MPI rank."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if parent != launcher_pid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as env:
                for item in env.read().split(b"\0"):
                    if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                        found[int(item.split(b"=", 1)[1])] = int(entry)
        except (OSError, ValueError, IndexError):
            continue
    return found if len(found) == ranks else None


def alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stack_of(pid):
    if shutil.which("gdb") is None:
        return "(gdb not found: no stack)"
    try:
        out = subprocess.run(["gdb", "-batch", "-p", str(pid), "-ex", "thread apply all bt 12"],
                             capture_output=True, text=True, timeout=60).stdout
    except (subprocess.TimeoutExpired, OSError) as error:
        return f"(gdb failed: {error})"
    return "\n".join(line for line in out.splitlines() if line.startswith(("#", "Thread")))


def newest_checkpoint(project):
    root = os.path.join(project, "checkpoints")
    if not os.path.isdir(root):
        return None
    numbered = []
    for name in os.listdir(root):
        prefix, _, number = name.rpartition("_")
        if prefix == "checkpoint" and number.isdigit():
            numbered.append((int(number), name))
    return os.path.join(root, max(numbered)[1]) if numbered else None


class Campaign:
    def __init__(self, args):
        self.args = args
        self.env = dict(os.environ, ACCELERATE_TIMEOUT=str(args.timeout))
        self.launch = [args.mpiexec, "-n", str(args.ranks), "--enable-recovery", *args.mpiexec_flags]

    def train_command(self, project, resume):
        command = [self.args.train, "--project-dir", project, "--epochs", str(self.args.epochs),
                   "--checkpoint-every", "5", "--total-limit", "2", "--batch-size", "32"]
        return command + (["--resume"] if resume else [])

    def run_clean(self, project, max_steps=None):
        start = time.monotonic()
        limit = ["--max-steps", str(max_steps)] if max_steps is not None else []
        result = subprocess.run(self.launch + self.train_command(project, False) + limit, env=self.env,
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        # --enable-recovery makes mpirun exit 0 whatever its ranks did: the job's own last line decides.
        if result.returncode != 0 or "train: done" not in result.stdout:
            sys.exit(f"fault_campaign: the clean run failed (exit {result.returncode}):\n"
                     f"{result.stdout}{result.stderr}")
        return time.monotonic() - start

    def point(self, index, rng, seeded_project, duration):
        args = self.args
        project = os.path.join(args.work, f"point_{index}")
        resume = rng.random() < 1 / 3
        if resume:
            shutil.copytree(seeded_project, project)
        else:
            os.makedirs(project)
        stop = rng.random() < 2 / 3
        victim = rng.randrange(args.ranks)
        delay = rng.uniform(0.0, duration * 1.05)
        what = (f"point {index}: {'SIGSTOP' if stop else 'SIGKILL'} rank {victim} after {delay:.2f} s"
                f"{' of a resumed run' if resume else ''}")
        log = open(os.path.join(project, "output.txt"), "w+")
        started = time.monotonic()
        job = subprocess.Popen(self.launch + self.train_command(project, resume), env=self.env,
                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
        pids = None
        while pids is None and job.poll() is None and time.monotonic() - started < 30:
            pids = rank_pids(job.pid, args.ranks)
            if pids is None:
                time.sleep(0.005)
        failure = None
        faulted = False
        if pids is None:
            failure = "the ranks never appeared" if job.poll() is None else None
        else:
            time.sleep(max(0.0, started + delay - time.monotonic()))
            if alive(pids[victim]) and job.poll() is None:
                os.kill(pids[victim], signal.SIGSTOP if stop else signal.SIGKILL)
                faulted = True
            fault_time = time.monotonic()
            limit = fault_time + args.timeout + args.margin
            survivors = [pid for rank, pid in pids.items() if rank != victim]
            while time.monotonic() < limit and any(alive(pid) for pid in survivors):
                time.sleep(0.05)
            left = [rank for rank, pid in pids.items() if rank != victim and alive(pid)]
            if left:
                stacks = "\n".join(f"--- rank {rank}:\n{stack_of(pids[rank])}" for rank in left)
                failure = (f"rank(s) {left} still alive {args.timeout + args.margin:.0f} s after the fault "
                           f"(timeout {args.timeout} s + margin {args.margin} s)\n{stacks}")
            outlived = max(0.0, time.monotonic() - fault_time)
        for pid in (pids or {}).values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
        log.seek(0)
        output = log.read()
        log.close()
        # The survivors must have said why they left (or finished the job, when the fault came
        # during the victim's own exit); a crash of theirs is a failure.
        if failure is None and faulted and not any(
                report in output
                for report in ("never arrived", "did not return within", "aborting the job", "train: done")):
            failure = "the survivors ended without a report of the fault (a crash of their own?)"
        if failure is None and not faulted and "train: done" not in output:
            failure = "the job ended before the fault, but not by finishing"
        newest = newest_checkpoint(project)
        if failure is None and newest is not None:
            check = subprocess.run([args.inspect, "inspect", newest], capture_output=True, text=True, timeout=120,
                                   env=self.env)
            if check.returncode != 0 or "complete (manifest valid)" not in check.stdout:
                failure = f"the newest checkpoint {newest} does not verify:\n{check.stdout}{check.stderr}"
        if failure is not None:
            tail = "\n".join(output.splitlines()[-40:])
            print(f"FAIL {what}: {failure}\n--- the job's output, last 40 lines:\n{tail}", flush=True)
            return False, faulted
        if not faulted:
            print(f"ok   {what}: the job had ended before the fault", flush=True)
        else:
            named = "names the rank" if f"never arrived: {victim}" in output else "watchdog/launcher report"
            print(f"ok   {what}: survivors gone after {outlived:.1f} s ({named}); "
                  f"newest checkpoint {os.path.basename(newest) if newest else 'none'} verified", flush=True)
        shutil.rmtree(project, ignore_errors=True)
        return True, faulted


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", required=True)
    parser.add_argument("--inspect", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=int, default=4, help="ACCELERATE_TIMEOUT of the job, seconds")
    parser.add_argument("--margin", type=float, default=14.0, help="seconds a survivor may take beyond the timeout")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--work", default=None)
    parser.add_argument("mpiexec_flags", nargs="*")
    args = parser.parse_args()

    version = subprocess.run([args.mpiexec, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" not in version and "OpenRTE" not in version:
        print("ACCELERATE_TEST_SKIPPED: only Open MPI's mpirun (--enable-recovery) leaves the survivors of a "
              "stopped or killed rank running")
        return 77
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    print(f"fault_campaign: seed {seed} ({args.points} points, {args.ranks} ranks, timeout {args.timeout} s, "
          f"margin {args.margin} s); replay with --seed {seed}", flush=True)
    rng = random.Random(seed)
    own_work = args.work is None
    args.work = args.work or tempfile.mkdtemp(prefix="accelerate-faults.")
    try:
        campaign = Campaign(args)
        duration = campaign.run_clean(os.path.join(args.work, "clean"))
        print(f"fault_campaign: a clean run takes {duration:.1f} s", flush=True)
        # The resumed points start from a checkpoint part-way through.
        seeded = os.path.join(args.work, "seeded")
        campaign.run_clean(seeded, max_steps=40)
        passed = faulted = 0
        for index in range(args.points):
            ok, hit = campaign.point(index, rng, seeded, duration)
            passed += ok
            faulted += hit
        print(f"fault_campaign: {passed}/{args.points} points passed ({faulted} faults injected while the job "
              f"ran), seed {seed}")
        return 0 if passed == args.points else 1
    finally:
        if own_work:
            shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
