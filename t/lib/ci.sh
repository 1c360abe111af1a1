# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests that SKIP when a package is missing. In CI (.ci/run exports CI=true)
# scripts/install-deps --ci has installed every such package, so a missing one there is a missing
# install step, not a reason to skip: the test fails instead.
# ci_needs REASON: under CI print "Bail out! REASON ..." and exit 1; elsewhere return (the caller skips).
ci_needs() {
    [ "${CI:-}" = true ] || return 0
    echo "Bail out! $1: CI installs it (scripts/install-deps --ci), so in CI this is a failure, not a skip"
    exit 1
}
