#!/usr/bin/env python3
"""Sluice under a real SLURM: a controller (slurmctld), a node daemon
(slurmd) and munge, started on this host for the test, and the jobs a
cluster user runs through them (docs/sluice-run.md, "Under a scheduler").

    scheduler.py TOOLS WORK [--keep]

TOOLS holds sluice-compile, sluice-run and sluice-launch; WORK is an empty
directory for the plans, jobs and logs. Prints one line per check; a
check that fails prints FAIL with what it saw, and the exit status is 1.
The daemons are stopped whatever happens (--keep leaves them running, for
a look with squeue/scontrol; SLURM_CONF is printed).

The cluster: one node (this host, all its CPUs) in two partitions, "low"
(the default) and "high", whose jobs preempt low's -- requeued, after a
grace time in which the job's tasks have SIGTERM -- as a site that
preempts does (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE).

The checks:
  1. inside an allocation (salloc), sluice-launch both ways -- mpirun, and
     srun --mpi=pmix (--srun) -- trains to the losses a plain mpirun run
     gives;
  2. the example job script (examples/slurm/train.sbatch, the one docs/
     sluice-run.md shows) preempted by a high-priority job: the ranks save
     at the grace time's SIGTERM, the job is requeued, resumes from the
     checkpoint and trains to the same total --steps; every step's loss
     equals an uninterrupted run's, bit for bit;
  3. the same for scancel --signal=TERM;
  4. the same for a requeue with no grace (scontrol requeue: srun kills
     the ranks at once): the run resumes from the last --save-every
     checkpoint and redoes the steps after it, with the same losses;
  5. a time limit with --signal=TERM@S: the ranks save and exit before
     the limit's SIGKILL, and the requeued job resumes from that step.
"""

import argparse
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

DAEMONS = ["munged", "slurmctld", "slurmd"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and slurmd in a private directory, on free ports."""

    def __init__(self, keep):
        # Short: munge's socket path must fit in 108 bytes.
        self.dir = tempfile.mkdtemp(prefix="sluice-slurm.", dir="/tmp")
        self.keep = keep
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        # The submitting shell's SLURM_* (a test run inside a job) would
        # point srun and sbatch at another cluster's job.
        for name in list(self.env):
            if name.startswith("SLURM_") and name != "SLURM_CONF":
                del self.env[name]
        self.node = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1

    def path(self, name):
        return os.path.join(self.dir, name)

    def start(self):
        d = self.dir
        os.chmod(d, 0o755)
        # TmpFS: srun's PMIx plugin keeps a directory a job there, named by
        # the job's id, which one started by another cluster (a test run
        # before) would collide with; job ids start anywhere for the same
        # reason.
        for sub in ["state", "spool", "munge", "tmp"]:
            os.makedirs(self.path(sub), mode=0o755, exist_ok=True)
        with open(self.path("munge.key"), "wb") as key:
            key.write(os.urandom(1024))
        os.chmod(self.path("munge.key"), 0o600)
        sock = self.path("munge/munge.socket")
        subprocess.run(
            ["munged", "--force", "--key-file", self.path("munge.key"),
             "--socket", sock, "--pid-file", self.path("munged.pid"),
             "--log-file", self.path("munged.log"),
             "--seed-file", self.path("munge/seed")], check=True)
        conf = f"""\
ClusterName=sluicetest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock},cred_expire=10
StateSaveLocation={self.path("state")}
TmpFS={self.path("tmp")}
FirstJobId={random.randrange(1000, 1000000)}
SlurmdSpoolDir={self.path("spool")}
SlurmctldPidFile={self.path("slurmctld.pid")}
SlurmdPidFile={self.path("slurmd.pid")}
SlurmctldLogFile={self.path("slurmctld.log")}
SlurmdLogFile={self.path("slurmd.log")}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
KillWait=15
MinJobAge=600
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=low Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=60
PartitionName=high Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
"""
        with open(self.conf, "w") as f:
            f.write(conf)
        subprocess.run(["slurmctld", "-i", "-f", self.conf], check=True,
                       env=self.env)
        subprocess.run(["slurmd", "-N", self.node, "-f", self.conf],
                       check=True, env=self.env)
        self.wait_idle(60)

    def run(self, *args, **kw):
        return subprocess.run(list(args), env=self.env, text=True,
                              capture_output=True, **kw)

    def state(self):
        out = self.run("sinfo", "-h", "-o", "%T", "-p", "low").stdout
        return out.strip()

    def wait_idle(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            if self.state() == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the node is '{self.state()}', not idle, after "
                           f"{seconds} s (logs in {self.dir})")

    def job(self, job_id):
        """scontrol's fields of a job: JobState, Restarts, ExitCode, ..."""
        out = self.run("scontrol", "show", "job", "-o", str(job_id)).stdout
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def stop(self):
        if self.keep:
            print(f"cluster left running: SLURM_CONF={self.conf}")
            return
        # Every job ended first: a job's slurmstepd and processes outlive
        # the daemons that started them.
        self.run("scancel", "--full", "--signal=KILL", "--state=RUNNING")
        self.run("scancel", "--state=PENDING")
        end = time.time() + 30
        while time.time() < end and self.run(
                "squeue", "-h", "-t", "all").stdout.strip():
            time.sleep(0.5)
        for pid_file in ["slurmd.pid", "slurmctld.pid", "munged.pid"]:
            try:
                with open(self.path(pid_file)) as f:
                    os.kill(int(f.read().strip()), 15)
            except (OSError, ValueError):
                pass
        time.sleep(1)
        # Whatever is left of them: every process slurmd started carries
        # this cluster's SLURM_CONF.
        mark = f"SLURM_CONF={self.conf}".encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        os.kill(int(pid), 9)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


STEP = re.compile(r"^step (\d+): loss (\S+)", re.M)


def losses(text):
    """Every 'step N: loss X' line, in order: [(N, X), ...]."""
    return [(int(n), x) for n, x in STEP.findall(text)]


def compare(name, got, straight, steps):
    """Every step's loss in the (interrupted, requeued) job's output equals
    the uninterrupted run's -- a step done twice, both times -- and every
    step of 1..steps is there."""
    reference = dict(losses(straight))
    seen = set()
    for n, x in losses(got):
        if reference.get(n) != x:
            return fail(name, f"step {n}: loss {x}, uninterrupted "
                              f"{reference.get(n)}")
        seen.add(n)
    missing = sorted(set(range(1, steps + 1)) - seen)
    if missing:
        return fail(name, f"steps never trained: {missing[:10]}")
    return True


failures = []


def fail(name, why):
    print(f"FAIL {name}: {why}")
    failures.append(name)
    return False


def wait_for(predicate, seconds, what):
    end = time.time() + seconds
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {seconds} s waiting for {what}")


def rank_pid(job, rank):
    """The pid of `job`'s sluice-run rank `rank`, from its environment."""
    want = {f"SLURM_JOB_ID={job}", f"SLURM_PROCID={rank}"}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"sluice-run" not in f.read().split(b"\0")[0]:
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = set(f.read().decode(errors="replace").split("\0"))
        except OSError:
            continue
        if want <= env:
            return int(pid)
    raise RuntimeError(f"no rank {rank} of job {job} is running")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tools")
    parser.add_argument("work")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    tools = os.path.abspath(args.tools)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.normpath(
        os.path.join(here, "..", "..", "examples", "slurm", "train.sbatch"))

    os.environ["PATH"] = tools + os.pathsep + os.environ["PATH"]
    if os.geteuid() == 0:
        os.environ["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        os.environ["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    inputs = os.path.join(here, "..", "Inputs")
    plan = os.path.join(work, "plan.json")
    subprocess.run(["sluice-compile", os.path.join(inputs, "tiny-train.mlir"),
                    "--pp", "2", "--microbatches", "4", "--schedule", "1f1b",
                    "-o", plan], check=True, stdout=subprocess.DEVNULL)

    def straight(steps, extra=()):
        """The uninterrupted run: mpirun, no scheduler."""
        out = subprocess.run(
            ["mpirun", "--oversubscribe", "-np", "2", "sluice-run", plan,
             "--steps", str(steps), *extra],
            text=True, capture_output=True, check=True).stdout
        return out

    cluster = Cluster(args.keep)
    try:
        cluster.start()
        version = cluster.run("sinfo", "--version").stdout.split()[-1]
        print(f"slurm {version}: slurmctld, slurmd and munged on this host "
              f"({cluster.cpus} CPUs)")
        checks(cluster, work, plan, script, straight)
    except (RuntimeError, subprocess.CalledProcessError,
            subprocess.TimeoutExpired) as e:
        fail("cluster", str(e))
        for log in ["slurmctld.log", "slurmd.log"]:
            sys.stdout.write(f"--- {log} (last lines)\n")
            sys.stdout.write("".join(read(cluster.path(log))
                                     .splitlines(True)[-15:]))
    finally:
        cluster.stop()
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


def checks(cluster, work, plan, script, straight):
    steps = 20
    reference = straight(steps)

    # 1. Inside an allocation, both launch paths.
    for how, flags in [("mpirun", []), ("srun --mpi=pmix", ["--srun"])]:
        r = cluster.run("salloc", "-n", "2", "sluice-launch", *flags,
                        "-np", "2", "sluice-run", plan, "--steps",
                        str(steps), cwd=work, timeout=120)
        if r.returncode != 0:
            fail(f"salloc + sluice-launch ({how})",
                 f"exit {r.returncode}: {r.stderr.strip()[-400:]}")
        elif compare(f"salloc + sluice-launch ({how})", r.stdout, reference,
                     steps):
            print(f"salloc -n 2 sluice-launch ({how}): {steps} steps, "
                  f"losses equal mpirun's")
        cluster.wait_idle(60)

    # A rank that hangs (--fail-hang: it stops at an instruction and waits
    # for good): its peer ends after --comm-timeout naming the wait, and
    # srun ends the step (sluice-launch's --kill-on-bad-exit) instead of
    # leaving the hung rank to the time limit.
    start = time.time()
    r = cluster.run("salloc", "-n", "2", "sluice-launch", "--srun", "-np", "2",
                    "sluice-run", plan, "--steps", "2", "--fail-rank", "1",
                    "--fail-at-instruction", "3", "--fail-hang",
                    "--comm-timeout", "3", cwd=work, timeout=300)
    took = time.time() - start
    named = re.search(r"sluice-run: error: rank 0: no progress for 3 s",
                      r.stdout + r.stderr)
    if r.returncode == 0 or not named or took > 60:
        fail("hung rank", f"exit {r.returncode} after {took:.0f} s:\n"
                          f"{(r.stdout + r.stderr)[-800:]}")
    else:
        print("a hung rank under srun: its peer names the wait after "
              "--comm-timeout and the step ends within a minute")
    cluster.wait_idle(60)

    # 2-4: the example script, interrupted three ways, to the same steps.
    total = 3000
    reference = straight(total, ["--log-every", "1"])

    def submit(name, *options, sluice=()):
        ckpt = os.path.join(work, name + "-ckpt")
        env = dict(cluster.env, SLUICE_CKPT=ckpt)
        r = subprocess.run(
            ["sbatch", "--parsable", "--ntasks=2",
             f"--output={work}/{name}-%j.out", *options, script, plan,
             *sluice], env=env, text=True, capture_output=True, cwd=work)
        if r.returncode != 0:
            raise RuntimeError(f"sbatch: {r.stderr.strip()}")
        job = r.stdout.strip().split(";")[0]
        return job, f"{work}/{name}-{job}.out"

    def saved(name, step):
        """The job's checkpoint holds `step` or later. (Not its output:
        srun passes the ranks' lines on in bursts, seconds late.)"""
        def check():
            try:
                with open(os.path.join(work, name + "-ckpt",
                                       "checkpoint.json")) as f:
                    return json.load(f)["step"] >= step
            except (OSError, ValueError, KeyError):
                return False
        return check

    def finished(job, out, starts):
        """The job ran to completion after `starts` starts."""
        def done():
            fields = cluster.job(job)
            return fields.get("JobState") in (
                "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") and fields
        fields = wait_for(done, 240, f"job {job} to end")
        text = read(out)
        if fields["JobState"] != "COMPLETED":
            return fail(out, f"job {job} ended {fields['JobState']} "
                             f"(exit {fields.get('ExitCode')}):\n{text[-800:]}")
        if fields.get("Restarts") != str(starts - 1):
            return fail(out, f"job {job} started {fields.get('Restarts')} "
                             f"times more, not {starts - 1}:\n{text[-800:]}")
        return text

    def stopped_at(text):
        m = re.search(r"stopped by SIGTERM after step (\d+) of (\d+): "
                      r"resume with the same command and --load", text)
        return int(m.group(1)) if m else None

    def resumed_at(text):
        m = re.search(r"resumed from \S+ at step (\d+)", text)
        return int(m.group(1)) if m else None

    def stopped_and_resumed(name, label, interrupt, extra_check=None):
        """The example script, stopped by `interrupt(job)` once it saved
        step 100: it saves where it stopped, requeues itself, resumes from
        that step and trains to `total` with the uninterrupted losses."""
        job, out = submit(name, sluice=["--steps", str(total),
                                        "--save-every", "100"])
        wait_for(saved(name, 100), 120, "the job's step 100")
        interrupt(job)
        text = finished(job, out, 2)
        if text:
            at, back = stopped_at(text), resumed_at(text)
            if at is None or back != at:
                fail(label, f"stopped at {at}, resumed at {back}:\n"
                            f"{text[-800:]}")
            elif extra_check and not extra_check():
                pass
            elif compare(label, text, reference, total):
                print(f"{label}: saved after step N, requeued, resumed from "
                      f"step N, trained to {total}; {total} losses equal an "
                      f"uninterrupted run's")
        cluster.wait_idle(60)

    # 2. Preemption: a high-priority job needs the node's CPUs.
    high = []

    def preempt(job):
        r = cluster.run("sbatch", "--parsable", "-p", "high",
                        f"--ntasks={cluster.cpus}",
                        f"--output={work}/high-%j.out",
                        "--wrap", "echo the high-priority job ran", cwd=work)
        high.append(r.stdout.strip())

    def high_ran():
        ran = read(f"{work}/high-{high[0]}.out")
        return "the high-priority job ran" in ran or fail(
            "preemption", f"the preempting job did not run: {ran!r}")
    stopped_and_resumed("preempted", "preempted (grace time's SIGTERM)",
                        preempt, high_ran)

    # 3. scancel --signal=TERM.
    stopped_and_resumed("scancelled", "scancel --signal=TERM",
                        lambda job: cluster.run("scancel", "--signal=TERM",
                                                job))

    # 4. scontrol requeue of a running job: SLURM ends it as scancel does
    # -- SIGTERM to every process, srun's among them, which answers with
    # SIGKILL to the ranks -- and queues it again. Whether the ranks' save
    # beats srun's SIGKILL is a race: the requeued job resumes from a
    # whole checkpoint either way, the stop's or the last --save-every's.
    job, out = submit("requeued",
                      sluice=["--steps", str(total), "--save-every", "200"])
    wait_for(saved("requeued", 400), 120, "the job's step 400")
    cluster.run("scontrol", "requeue", job)
    text = finished(job, out, 2)
    if text:
        at, back = stopped_at(text), resumed_at(text)
        if back is None or (back != at and back % 200 != 0):
            fail("requeue", f"stopped at {at}, resumed at {back}:\n"
                            f"{text[-800:]}")
        elif compare("scontrol requeue", text, reference, total):
            how = "its stop's checkpoint" if back == at else \
                "the last --save-every checkpoint"
            print(f"scontrol requeue: resumed from a whole checkpoint "
                  f"({how}), trained to {total}; {total} losses equal an "
                  f"uninterrupted run's")
    cluster.wait_idle(60)

    # 4b. A rank killed without a word (the out-of-memory killer, a lost
    # node): srun names it and ends the step; the job fails (137, not
    # requeued by the script: a failure wants a look), nothing claims a
    # save; requeued by hand, it resumes from the last --save-every
    # checkpoint and redoes the steps after it.
    job, out = submit("killed",
                      sluice=["--steps", str(total), "--save-every", "200"])
    wait_for(saved("killed", 400), 120, "the job's step 400")
    victim = rank_pid(job, 1)
    os.kill(victim, 9)
    fields = wait_for(lambda: (lambda f: f.get("JobState") in
                               ("FAILED", "COMPLETED", "CANCELLED") and f)(
                          cluster.job(job)), 120, f"job {job} to end")
    text = read(out)
    if fields["JobState"] != "FAILED" or \
            not re.search(r"srun: error: \S+: task 1: Killed", text) or \
            "then saving" in text:
        fail("killed rank", f"job {job} ended {fields['JobState']} "
                            f"(exit {fields.get('ExitCode')}):\n{text[-800:]}")
    else:
        print(f"a rank killed (kill -9): srun names task 1, the job fails "
              f"(exit {fields.get('ExitCode')}), no rank promises a save")
        cluster.run("scontrol", "requeue", job)
        text = finished(job, out, 2)
        if text:
            back = resumed_at(text)
            last = max((n for n, _ in losses(text.split("start 1:")[0])),
                       default=0)
            if back is None or back % 200 != 0 or back > last:
                fail("killed rank", f"resumed at {back} after step {last}:"
                                    f"\n{text[-800:]}")
            elif compare("killed rank", text, reference, total):
                print(f"  requeued by hand: resumed from the last "
                      f"--save-every checkpoint, redid the steps after it, "
                      f"trained to {total}; {total} losses equal an "
                      f"uninterrupted run's")
    cluster.wait_idle(60)

    # 5. The time limit: 2 minutes, SIGTERM 60 s before it. SLURM checks
    # its timers every 30 s or so and sends the signal up to that much
    # early (the first check within 30 s of the time asked): here 20-70 s
    # into the job, its ranks loaded.
    job, out = submit("timelimit", "--time=2", "--signal=TERM@60",
                      sluice=["--steps", "10000000", "--log-every", "100"])
    wait_for(lambda: "start 1:" in read(out), 200,
             "the job to stop and start again")
    wait_for(lambda: resumed_at(read(out)), 60, "the resumed run's header")
    text = read(out)
    cluster.run("scancel", job)
    at, back = stopped_at(text), resumed_at(text)
    first = text.split("start 1:")[0]
    if at is None or back != at:
        fail("time limit", f"stopped at {at}, resumed at {back}:\n"
                           f"{text[-800:]}")
    elif "TIME LIMIT" in first or "saved checkpoint" not in first:
        fail("time limit", f"not saved before the limit:\n{first[-800:]}")
    else:
        print("time limit (--signal=TERM@60): saved after step N before the "
              "limit, requeued, resumed from step N")


if __name__ == "__main__":
    sys.exit(main())
