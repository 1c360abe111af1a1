#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# Real variable sets through `ctrain env --json`, field by field.
#
# Each t/fixtures/env/*.env holds the variables of one process (NAME=value lines, most captured on
# the SLURM test cluster or under mpirun; the header says where each comes from) and its cases:
#
#   # case: [NAME=value ...] [flags ...] => key=value key~substring key>number ... [exit=N]
#
# The process runs with exactly the fixture's variables (plus the case's NAME=value overrides),
# from the repository root. Keys are JSON paths with dots (validation.id, sources.world_size);
# values compare as JSON scalars written plainly (true, false, null, 4, n1).
use strict;
use warnings;
use File::Basename qw(dirname);
use JSON::PP;

chdir(dirname($0) . "/..") or die "cd: $!";
my $ctrain = ($ENV{CTRAIN_BUILD} // "build") . "/ctrain";

# Split a case line into tokens, keeping "double quoted" tokens whole.
sub tokens {
    my ($s) = @_;
    my @t;
    while ($s =~ /\G\s*(?:"([^"]*)"|(\S+))/gc) {
        push @t, defined $1 ? $1 : $2;
    }
    return @t;
}

sub read_fixture {
    my ($file) = @_;
    my (%vars, @cases);
    open(my $fh, '<', $file) or die "$file: $!";
    while (my $line = <$fh>) {
        chomp $line;
        if ($line =~ /^#\s*case:\s*(.*?)\s*=>\s*(.*)$/) {
            my ($left, $right) = ($1, $2);
            my (%env, @args);
            for my $t (tokens($left)) {
                if ($t =~ /^([A-Z_][A-Z0-9_]*)=(.*)$/) { $env{$1} = $2 } else { push @args, $t }
            }
            push @cases, { env => \%env, args => \@args, expect => [tokens($right)], text => "$left => $right" };
        } elsif ($line =~ /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/) {
            $vars{$1} = $2;
        } elsif ($line !~ /^\s*(#|$)/) {
            die "$file: cannot read line: $line\n";
        }
    }
    close($fh);
    return (\%vars, \@cases);
}

sub plain {
    my ($v) = @_;
    return 'null' unless defined $v;
    return $v ? 'true' : 'false' if JSON::PP::is_bool($v);
    return ref($v) ? encode_json($v) : "$v";
}

sub lookup {
    my ($json, $path) = @_;
    my $v = $json;
    for my $k (split /\./, $path) {
        return (0, undef) unless ref($v) eq 'HASH' && exists $v->{$k};
        $v = $v->{$k};
    }
    return (1, $v);
}

# Run ctrain env with exactly these variables; return (exit status, stdout, stderr).
sub run_env {
    my ($vars, $args) = @_;
    my $errfile = "/tmp/ctrain-env-fixture.$$.err";
    my $pid = open(my $out, '-|');
    die "fork: $!" unless defined $pid;
    if (!$pid) {
        %ENV = %$vars;
        open(STDERR, '>', $errfile) or die "$errfile: $!";
        exec($ctrain, 'env', '--json', @$args) or die "exec $ctrain: $!";
    }
    local $/;
    my $stdout = <$out> // '';
    close($out);
    my $status = $? >> 8;
    open(my $e, '<', $errfile) or die "$errfile: $!";
    my $stderr = <$e> // '';
    close($e);
    unlink $errfile;
    return ($status, $stdout, $stderr);
}

sub check_case {
    my ($vars, $case) = @_;
    my %env = (%$vars, %{ $case->{env} });
    my ($status, $stdout, $stderr) = run_env(\%env, $case->{args});
    my @bad;
    my $want_exit = 0;
    my $json;
    my @expect = grep { !/^exit=/ } @{ $case->{expect} };
    ($want_exit) = map { /^exit=(\d+)$/ ? $1 : () } @{ $case->{expect} };
    $want_exit //= 0;
    push @bad, "exit status $status, want $want_exit" if $status != $want_exit;
    push @bad, "no error message on stderr" if $want_exit && $stderr !~ /^ctrain: error: /m;
    if (@expect) {
        $json = eval { JSON::PP->new->decode($stdout) };
        return ("output is not JSON: $@\n$stdout$stderr") unless $json;
    }
    for my $e (@expect) {
        my ($key, $op, $want) = $e =~ /^([\w.-]+)(=|~|>)(.*)$/ or return ("bad expectation '$e'");
        my ($found, $v) = lookup($json, $key);
        my $got = plain($v);
        if (!$found) {
            push @bad, "$key missing";
        } elsif ($op eq '=' && $got ne $want) {
            push @bad, "$key is '$got', want '$want'";
        } elsif ($op eq '~' && index($got, $want) < 0) {
            push @bad, "$key is '$got', want it to contain '$want'";
        } elsif ($op eq '>' && !($got =~ /^\d+$/ && $got > $want)) {
            push @bad, "$key is '$got', want a number above $want";
        }
    }
    push @bad, "stderr: $stderr" if @bad && $stderr ne '';
    return @bad;
}

my @files = sort glob("t/fixtures/env/*.env");
my @work;
for my $file (@files) {
    my ($vars, $cases) = read_fixture($file);
    die "$file: no '# case:' line\n" unless @$cases;
    push @work, map { [$file, $vars, $_] } @$cases;
}

if (!-x $ctrain) {
    print "1..0 # SKIP $ctrain is not built (run make)\n";
    exit 0;
}
print "1..", scalar(@work), "\n";
my $n = 0;
for my $w (@work) {
    my ($file, $vars, $case) = @$w;
    my @bad = check_case($vars, $case);
    $n++;
    (my $name = $file) =~ s{.*/}{};
    print((@bad ? "not ok" : "ok"), " $n - $name: $case->{text}\n");
    print map { "#   $_\n" } map { split /\n/ } @bad;
}
