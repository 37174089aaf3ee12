"""What the host went through while a study's job ran: the kernel's
pressure stall information (/proc/pressure: the share of the wall time in
which some task waited for the CPU, for I/O or for memory), page reclaim
and writeback (/proc/vmstat), and the CPU's iowait (/proc/stat). Taken
before and after a job, the differences say where a slowdown came from
(`shardtrain study ingest`). Where a file is missing (a kernel without
PSI) its figures are absent, never zero.
"""
import os

# /proc/vmstat counters, summed where the kernel splits them by zone or by
# who did the work: pages the kernel scanned to reclaim memory, by kswapd
# and by allocating tasks themselves (direct reclaim stalls the allocator),
# pages dirtied and written back, and allocations that stalled.
VMSTAT = {
    "reclaim_scanned_kswapd": ("pgscan_kswapd",),
    "reclaim_scanned_direct": ("pgscan_direct",),
    "pages_dirtied": ("nr_dirtied",),
    "pages_written": ("nr_written",),
    "allocation_stalls": ("allocstall_dma", "allocstall_dma32", "allocstall_normal", "allocstall_movable",
                          "allocstall_device", "allocstall"),
}


def _pressure(kind):
    """{"some": total us, "full": total us} of /proc/pressure/KIND, or None."""
    try:
        with open(f"/proc/pressure/{kind}") as f:
            lines = f.read().split("\n")
    except OSError:
        return None
    out = {}
    for line in lines:
        fields = line.split()
        if fields and fields[0] in ("some", "full"):
            out[fields[0]] = int(dict(f.split("=") for f in fields[1:])["total"])
    return out


def _vmstat():
    try:
        with open("/proc/vmstat") as f:
            raw = dict(line.split() for line in f if line.strip())
    except OSError:
        return None
    return {name: sum(int(raw.get(k, 0)) for k in keys) for name, keys in VMSTAT.items()}


def _cpu_ticks():
    """(iowait, all) clock ticks of the host's CPUs since boot."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return fields[4], sum(fields)


def snapshot():
    return {"pressure": {k: _pressure(k) for k in ("cpu", "io", "memory")}, "vmstat": _vmstat(),
            "cpu": _cpu_ticks(), "pages": os.sysconf("SC_PAGE_SIZE")}


def delta(before, after, seconds):
    """The host's figures over `seconds` between two snapshots: stall shares
    (0-1) per resource, reclaim and writeback per second (pages scanned,
    MB written), the CPUs' iowait share."""
    out = {}
    for kind in ("cpu", "io", "memory"):
        a, b = before["pressure"][kind], after["pressure"][kind]
        if a and b:
            for level in ("some", "full"):
                if level in a and level in b:
                    out[f"{kind}_{level}"] = (b[level] - a[level]) / 1e6 / seconds
    if before["vmstat"] and after["vmstat"]:
        d = {k: after["vmstat"][k] - before["vmstat"][k] for k in VMSTAT}
        out["reclaim_scanned_per_s"] = (d["reclaim_scanned_kswapd"] + d["reclaim_scanned_direct"]) / seconds
        out["direct_reclaim_scanned_per_s"] = d["reclaim_scanned_direct"] / seconds
        out["allocation_stalls_per_s"] = d["allocation_stalls"] / seconds
        out["written_back_mb_s"] = d["pages_written"] * before["pages"] / 1e6 / seconds
        out["dirtied_mb_s"] = d["pages_dirtied"] * before["pages"] / 1e6 / seconds
    (iowait0, all0), (iowait1, all1) = before["cpu"], after["cpu"]
    if all1 > all0:
        out["iowait"] = (iowait1 - iowait0) / (all1 - all0)
    return out
