#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# The licence: LICENSE is BSD-3-Clause, debian/copyright says so, and every source file of the tree
# (C, CUDA, headers, scripts, tests, makefiles, sbatch templates, RPM spec, easyconfigs) carries an SPDX line in its first
# three lines. A file that is not ctrain's own names its own licence there (e.g. Apache-2.0).
use strict;
use warnings;
use File::Find;
use File::Basename qw(dirname);

chdir(dirname($0) . "/..") or die "cd: $!";

# Source files: by extension, or an executable script under scripts/ or t/ (a shebang).
sub is_source {
    my ($path) = @_;
    return 1 if $path =~ /\.(c|h|cu|py|sh|t|pl|sbatch|map|proto|spec|eb|toml)$/;
    return 1 if $path =~ m{(^|/)(Makefile|rules)$};
    return 0 if $path =~ /\.[A-Za-z0-9]+$/;    # data with an extension (fixtures, docs)
    open(my $fh, '<', $path) or return 0;
    my $first = <$fh> // '';
    close $fh;
    return $first =~ /^#!/;
}

my @files;
find({ no_chdir => 1, wanted => sub {
    if (-d $_ && m{^\./(build[^/]*|\.git|t/fixtures|t/fuzz/corpus)$}) { $File::Find::prune = 1; return; }
    push @files, substr($_, 2) if -f $_ && is_source(substr($_, 2));
} }, '.');
@files = sort @files;

my @missing;
for my $file (@files) {
    open(my $fh, '<', $file) or die "$file: $!";
    my $head = '';
    for (1 .. 3) { my $l = <$fh>; last unless defined $l; $head .= $l; }
    close $fh;
    push @missing, $file unless $head =~ /SPDX-License-Identifier: [A-Za-z0-9.-]+/;
}

open(my $lf, '<', 'LICENSE') or die "LICENSE: $!";
my $licence = do { local $/; <$lf> };
open(my $cf, '<', 'debian/copyright') or die "debian/copyright: $!";
my $copyright = do { local $/; <$cf> };

print "1..3\n";
print(($licence =~ /^BSD 3-Clause License/ && $licence =~ /Neither the name of the copyright holder/
       ? "ok" : "not ok") . " 1 - LICENSE is the BSD 3-Clause licence\n");
print(($copyright =~ /^Files: \*\n(?:.*\n)*?License: BSD-3-clause$/m ? "ok" : "not ok")
      . " 2 - debian/copyright licenses the tree as BSD-3-clause\n");
print((@missing || @files < 100 ? "not ok" : "ok") . " 3 - " . scalar(@files)
      . " source files carry an SPDX-License-Identifier line\n");
print "# no SPDX line in the first three lines: $_\n" for @missing;
