#!/bin/sh
# Container entrypoint (under tini). It raises the open-files limit, and for the worker
# (CPFLEET_CGROUP_SETUP=1) makes the container's cgroups writable so the sandbox can put each
# slot's processes under a memory + pids limit; then it execs the command, so Celery receives
# SIGTERM directly.
#
# Why the cgroup step: Docker mounts the container's cgroups read-only.
# - cgroup v2 (one unified hierarchy, the container's own cgroup namespace): with CAP_SYS_ADMIN
#   and AppArmor unconfined (see docker-compose.yml) /sys/fs/cgroup can be remounted read-write.
#   v2 forbids enabling controllers for children of a cgroup that holds processes, so every
#   process here moves into a leaf ("init") first, as moby's docker-in-docker entrypoint does.
# - cgroup v1 (one hierarchy per controller under a tmpfs): the container's memory and pids
#   hierarchies are bind mounts of its own cgroup directory; a plain remount is refused (the
#   superblock is shared, "busy") but a bind remount read-write works. v1 has no rule against
#   processes in inner cgroups, so nothing moves. The sandbox looks for v1 first
#   (sandbox/cgroups.py), so this does too.
# Either way the worker (root in the container) can then write its container's cgroup files;
# test programs never can (an unprivileged uid, no capabilities, no mount of /sys in the sandbox).
# Each step is best effort: when one is refused the worker still starts, its isolation
# self-test reports the cgroup layer missing (log line, cpfleet_sandbox_isolation_layer metric),
# and CPFLEET_REQUIRE_ISOLATION decides whether it may judge.
#
# Open files: the soft limit is raised to CPFLEET_NOFILE (default 65536) or to the hard limit
# when that is lower, so it never fails where the host's limit is lower (setting a hard limit
# above the host's, as `ulimits:` does, makes the container fail to start there).
set -eu

warn() { echo "cpfleet-entrypoint: $*" >&2; }

# make the mount at $1 writable: remount, then (a bind mount of a cgroup directory) bind remount
make_writable() {
    mount -o remount,rw "$1" 2>/dev/null || mount -o remount,bind,rw "$1" 2>/dev/null
}

setup_cgroup_v1() {
    for controller in memory pids; do
        dir="$cg/$controller"
        if ! mkdir -p "$dir/cpfleet" 2>/dev/null; then
            make_writable "$dir" && mkdir -p "$dir/cpfleet" 2>/dev/null \
                || { warn "$dir is read-only (cgroup v1): per-slot cgroup limits off"; return 0; }
        fi
    done
    echo "cpfleet-entrypoint: cgroup v1 memory and pids hierarchies writable" >&2
}

setup_cgroup_v2() {
    if ! mkdir -p "$cg/init" 2>/dev/null; then
        make_writable "$cg" || { warn "$cg is read-only (cgroup v2): per-slot cgroup limits off"; return 0; }
        mkdir -p "$cg/init" || return 0
    fi
    # move every process of the container's root cgroup into the leaf
    while read -r pid; do
        echo "$pid" > "$cg/init/cgroup.procs" 2>/dev/null || true
    done < "$cg/cgroup.procs"
    # delegate every available controller (memory and pids are the ones the sandbox uses)
    controllers=$(sed -e 's/^ *//' -e 's/ *$//' < "$cg/cgroup.controllers")
    if [ -z "$controllers" ]; then
        warn "no cgroup v2 controller is delegated to $cg: per-slot cgroup limits off"
        return 0
    fi
    echo "$controllers" | sed -e 's/  */ +/g' -e 's/^/+/' > "$cg/cgroup.subtree_control" 2>/dev/null \
        || { warn "could not enable cgroup controllers: per-slot cgroup limits off"; return 0; }
    echo "cpfleet-entrypoint: cgroup v2 controllers delegated ($controllers)" >&2
}

setup_cgroup() {
    cg=${CPFLEET_CGROUP_ROOT:-/sys/fs/cgroup}  # overridable for tests
    if [ -f "$cg/memory/memory.limit_in_bytes" ] && [ -d "$cg/pids" ]; then
        setup_cgroup_v1
    elif [ -f "$cg/cgroup.controllers" ]; then
        setup_cgroup_v2
    else
        warn "no cgroup v1 memory/pids or v2 hierarchy at $cg: per-slot cgroup limits off"
    fi
}

raise_nofile() {
    want=${CPFLEET_NOFILE:-65536}
    case "$want" in '' | *[!0-9]*) warn "CPFLEET_NOFILE=$want is not a number: open-files limit unchanged"; return 0 ;; esac
    hard=$(ulimit -H -n)
    if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then
        warn "open-files hard limit $hard is below CPFLEET_NOFILE=$want: using $hard"
        want=$hard
    fi
    ulimit -S -n "$want" 2>/dev/null || warn "could not raise the open-files limit to $want"
}

raise_nofile
if [ "${CPFLEET_CGROUP_SETUP:-0}" = "1" ]; then
    setup_cgroup
fi
exec "$@"
