#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# What the plugin may not do inside slurmstepd, checked in its source (and the binding library it
# links): change the process's environment (setenv, putenv, unsetenv, clearenv: slurmstepd is a
# multithreaded root process, and the change would stay for SLURM itself; only spank_setenv, the
# task's environment), or test a file with access() (the real uid, root there: root_squash NFS
# refuses what the user may read; faccessat(..., AT_EACCESS) tests the user).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
echo "1..2"
hits=$(grep -nE '(^|[^_a-z])(setenv|putenv|unsetenv|clearenv)[[:space:]]*\(' "$ROOT"/spank/*.c)
if [ -z "$hits" ]; then echo "ok 1 - spank/ changes no environment but the task's (spank_setenv)"; else
    echo "not ok 1 - spank/ changes no environment but the task's (spank_setenv)"; echo "$hits" | sed 's/^/#   /'; fi
hits=$(grep -nE '(^|[^_a-z])access[[:space:]]*\(' "$ROOT"/spank/*.c "$ROOT"/engine/bind/*.c)
if [ -z "$hits" ]; then echo "ok 2 - spank/ and engine/bind/ test files as the user (no access())"; else
    echo "not ok 2 - spank/ and engine/bind/ test files as the user (no access())"; echo "$hits" | sed 's/^/#   /'; fi
