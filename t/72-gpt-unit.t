#!/bin/sh
exec "$(dirname "$0")/../${CTRAIN_BUILD:-build}/t/test_gpt"
