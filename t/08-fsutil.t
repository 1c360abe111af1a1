#!/bin/sh
# Output files: umask untouched, directory synced after a rename, hard links refused (t/unit/test_fsutil.c).
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_fsutil"
