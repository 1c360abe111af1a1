#!/bin/sh
CT_TOPOLOGIES="$(dirname "$0")/fixtures/topologies" exec "$(dirname "$0")/../build/t/test_bind"
