#!/bin/sh
# Container entrypoint (under tini). For the worker (CPFLEET_CGROUP_SETUP=1) it prepares a
# writable cgroup v2 subtree so the sandbox can put each slot's processes under a memory + pids
# limit; then it execs the command, so Celery receives SIGTERM directly.
#
# Why: on cgroup v2 hosts Docker gives the container its own cgroup namespace but mounts
# /sys/fs/cgroup read-only. With CAP_SYS_ADMIN and AppArmor unconfined (see docker-compose.yml)
# it can be remounted read-write. cgroup v2 also forbids enabling controllers for children of
# a cgroup that holds processes, so every process here moves into a leaf ("init") first, as
# moby's docker-in-docker entrypoint does. Each step is best effort: when one is refused the
# worker still starts, its isolation self-test reports the cgroup layer missing (log line and
# the cpfleet_sandbox_isolation_layer metric), and per-process rlimits still apply.
set -eu

warn() { echo "cpfleet-entrypoint: $*" >&2; }

setup_cgroup() {
    cg=${CPFLEET_CGROUP_ROOT:-/sys/fs/cgroup}  # overridable for tests
    [ -f "$cg/cgroup.controllers" ] || { warn "no cgroup v2 at $cg (v1 host?): the sandbox uses what it finds"; return 0; }
    if ! mkdir -p "$cg/init" 2>/dev/null; then
        mount -o remount,rw "$cg" 2>/dev/null || { warn "$cg is read-only: per-slot cgroup limits off"; return 0; }
        mkdir -p "$cg/init" || return 0
    fi
    # move every process of the container's root cgroup into the leaf
    while read -r pid; do
        echo "$pid" > "$cg/init/cgroup.procs" 2>/dev/null || true
    done < "$cg/cgroup.procs"
    # delegate every available controller (memory and pids are the ones the sandbox uses)
    sed -e 's/ / +/g' -e 's/^/+/' < "$cg/cgroup.controllers" > "$cg/cgroup.subtree_control" 2>/dev/null \
        || warn "could not enable cgroup controllers: per-slot cgroup limits off"
}

if [ "${CPFLEET_CGROUP_SETUP:-0}" = "1" ]; then
    setup_cgroup
fi
exec "$@"
