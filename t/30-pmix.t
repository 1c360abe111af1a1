#!/bin/sh
exec "$(dirname "$0")/../build/t/test_pmix"
