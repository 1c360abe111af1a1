#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# A ctrain built without gloo (make GLOO=0, or no libgloo-dev) links: every function the C++ of
# engine/**/*.cc gives C (extern "C") has its stand-in in the same folder's *_absent.c, which fails
# as a missing library would. (ct_gloo_sendrecv once had none: GLOO=0 builds, the fuzz targets
# among them, failed to link.) A source check: the suite's own build has gloo.
use strict;
use warnings;
use File::Basename qw(dirname basename);

chdir(dirname($0) . "/..") or die "cd: $!";
my @cc = sort glob("engine/*/*.cc");
print "1.." . (scalar(@cc) + 1) . "\n";
print((@cc ? "ok" : "not ok") . " 1 - C++ sources behind a C interface found (" . scalar(@cc) . ")\n");
my $n = 1;
for my $cc (@cc) {
    (my $absent = $cc) =~ s/\.cc$/_absent.c/;
    my (%need, %have, @missing);
    open(my $fh, '<', $cc) or die "$cc: $!";
    local $/;
    my $text = <$fh>;
    close $fh;
    $need{$1} = 1 while $text =~ /extern\s+"C"\s+[\w\s\*]*?\b(ct_\w+)\s*\(/g;
    if (open(my $ah, '<', $absent)) {
        my $a = <$ah>;
        close $ah;
        $have{$1} = 1 while $a =~ /^[a-z][\w\s\*]*?\b(ct_\w+)\s*\([^;]*$/mg;
    }
    @missing = grep { !$have{$_} } sort keys %need;
    $n++;
    print((@missing ? "not ok" : "ok") . " $n - $absent stands in for the " . scalar(keys %need) .
          " C functions of $cc" . (@missing ? ": missing @missing" : "") . "\n");
}
