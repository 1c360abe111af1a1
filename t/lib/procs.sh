# SPDX-License-Identifier: BSD-3-Clause
# Shared by tests that check what they started has ended (sourced; defines functions only).

# all_gone PID...: none of them exists any more
all_gone() {    # a zombie is gone: dead, waiting for a parent (init here) that reaps it
    for p in "$@"; do
        kill -0 "$p" 2>/dev/null && [ "$(sed 's/^.*) \([A-Za-z]\) .*$/\1/' "/proc/$p/stat" 2>/dev/null)" != Z ] &&
            return 1
    done
    return 0
}
