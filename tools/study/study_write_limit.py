"""A cgroup that limits how fast its processes write to one disk: the
kernel's own throttle (cgroup v2 io.max wbps, or v1's
blkio.throttle.write_bps_device), for `shardtrain study ingest
--writer-io-max`: a mitigation that needs nothing from the writer, unlike
`shardtrain stage --rate-mb-s`. Needs root. v1's throttle sees the writes
a process submits itself (O_DIRECT, or writeback it starts, as `shardtrain
stage` does with sync_file_range); writeback the kernel's flusher does for
it is not charged to the cgroup there.
"""
import os

V2 = "/sys/fs/cgroup"
V1 = "/sys/fs/cgroup/blkio"


def whole_disk(path):
    """"MAJ:MIN" of the disk (not the partition) holding `path`."""
    dev = os.stat(path).st_dev
    node = f"{os.major(dev)}:{os.minor(dev)}"
    sys_dir = f"/sys/dev/block/{node}"
    if os.path.exists(os.path.join(sys_dir, "partition")):
        with open(os.path.join(sys_dir, "..", "dev")) as f:
            return f.read().strip()
    if not os.path.exists(sys_dir):
        raise ValueError(f"{path} is not on a block device ({node}: no {sys_dir})")
    return node


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


class WriteLimit:
    """A fresh cgroup whose processes write at most `mb_s` MB/s to the disk
    under `path`; enter() moves the calling process into it (a Popen
    preexec_fn), close() removes it once its processes are gone."""

    def __init__(self, path, mb_s):
        device, bps = whole_disk(path), int(mb_s * 1e6)
        name = f"shardtrain-write-limit-{os.getpid()}"
        controllers = ""
        if os.path.exists(os.path.join(V2, "cgroup.controllers")):
            with open(os.path.join(V2, "cgroup.controllers")) as f:
                controllers = f.read()
        try:
            if "io" in controllers.split():
                self.dir = os.path.join(V2, name)
                os.makedirs(self.dir, exist_ok=True)
                _write(os.path.join(self.dir, "io.max"), f"{device} wbps={bps}")
            elif os.path.isdir(V1):
                self.dir = os.path.join(V1, name)
                os.makedirs(self.dir, exist_ok=True)
                _write(os.path.join(self.dir, "blkio.throttle.write_bps_device"), f"{device} {bps}")
            else:
                raise ValueError(f"no cgroup I/O controller here (neither io in {V2}/cgroup.controllers nor {V1})")
        except OSError as e:
            raise ValueError(f"cannot make a cgroup limiting writes to {device} ({e.strerror}: {e.filename}; "
                             "root is needed)") from e
        self.device, self.mb_s = device, mb_s

    def enter(self):
        _write(os.path.join(self.dir, "cgroup.procs"), str(os.getpid()))

    def close(self):
        try:
            os.rmdir(self.dir)
        except OSError:
            pass  # a process still in it: the kernel keeps it; nothing else to undo
