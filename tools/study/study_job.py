"""Running one job of a study (a point, a calibration run) so that it can
be ended as a whole: its own session, SIGTERM to the group, SIGKILL
END_GRACE_S later; a timeout or Ctrl-C ends it the same way."""
import os
import signal
import subprocess
import time

# Long enough for mpirun to pass SIGTERM on and clean up after ranks that
# end; a job ended here has failed or been interrupted, so a training rank
# that would first finish its step (a checkpoint on SIGTERM) saves nothing
# the study reads, and a rank stuck in a collective on a slow link never
# ends by itself.
END_GRACE_S = 5


def start(cmd, out):
    """The job, in a session of its own (so that Ctrl-C does not reach it by itself)."""
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def end(proc):
    """SIGTERM to the job's process group, SIGKILL END_GRACE_S later."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=END_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def wait(proc, timeout):
    """The job's exit code, or None when it did not end within `timeout`
    seconds (it is ended then)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        end(proc)
        return None
    except BaseException:
        end(proc)
        raise


def run(cmd, output_path, timeout):
    """(seconds, exit code or None on timeout); the command line and its
    output go to output_path."""
    start_s = time.monotonic()
    with open(output_path, "w") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        rc = wait(start(cmd, out), timeout)
    return time.monotonic() - start_s, rc


def last_error(output_path):
    """The line that says why a job failed: its last shardtrain error, else its last line."""
    try:
        with open(output_path, errors="replace") as f:
            lines = [line.rstrip() for line in f if line.strip()]
    except OSError:
        return "no output"
    for line in reversed(lines):
        if line.startswith(("shardtrain: error", "shardtrain: watchdog", "supervise:", "bench comm:")):
            return line
    return lines[-1] if lines else "no output"
