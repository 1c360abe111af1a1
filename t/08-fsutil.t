#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Output files: umask untouched, directory synced after a rename, hard links refused; control
# characters escaped for the terminal (ct_str_escape) (t/unit/test_fsutil.c).
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_fsutil"
