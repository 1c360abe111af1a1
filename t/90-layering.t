#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# One-way layering: Trainer -> loops -> connector -> strategy -> {accelerator, precision, cluster
# environment, checkpoint IO, launcher} -> models -> {nn, data}. Reads every #include "..." in
# engine/, envs/, pmix/ and include/ctrain/ and fails on an include that goes up, or sideways
# between modules of one level. Then the device seam: nothing above the accelerators (loops,
# trainer, strategies) names a device, and the loops and trainer name no model or dataset.
use strict;
use warnings;
use File::Find;
use File::Basename qw(dirname);

chdir(dirname($0) . "/..") or die "cd: $!";

# Higher levels may include lower ones; a module may include itself.
my %level = (
    util => 0,
    registry => 1,
    nn => 2, data => 2, pmix => 2, bind => 2,
    models => 3,
    accelerators => 4, precision => 4, envs => 4, checkpoint_io => 4, launchers => 4,
    strategies => 5,
    connector => 6,
    loops => 7,
    trainer => 8,
    cli => 9,
);

# Public headers belong to the module that implements them.
my %public = (
    'error.h' => 'util', 'util.h' => 'util', 'rankvars.h' => 'util', 'rng.h' => 'util', 'dtype.h' => 'util',
    'registry.h' => 'registry', 'config.h' => 'registry', 'bind.h' => 'bind', 'net.h' => 'bind', 'nn.h' => 'nn', 'data.h' => 'data',
    'datamodule.h' => 'data', 'model.h' => 'models',
    'pmix.h' => 'pmix', 'pmix_server.h' => 'pmix',
    'accelerator.h' => 'accelerators', 'precision.h' => 'precision',
    'environment.h' => 'envs', 'envs.h' => 'envs', 'hostlist.h' => 'envs',
    'checkpoint_io.h' => 'checkpoint_io', 'launcher.h' => 'launchers',
    'strategy.h' => 'strategies', 'connector.h' => 'connector',
    'loops.h' => 'loops', 'trainer.h' => 'trainer', 'engine.h' => 'trainer',
);

# Files whose module is not their folder's: the pmix cluster environment is an environment
# that happens to live beside the PMIx client it uses.
my %file_module = ('pmix/environment.c' => 'envs', 'pmix/environment.h' => 'envs');

sub module_of {
    my ($path) = @_;
    return $file_module{$path} if exists $file_module{$path};
    return $public{$1} // "UNKNOWN:$path" if $path =~ m{^include/ctrain/([^/]+)$};
    return $1 if $path =~ m{^engine/([^/]+)/};
    return 'envs' if $path =~ m{^envs/};
    return 'pmix' if $path =~ m{^pmix/};
    return "UNKNOWN:$path";
}

my @files;
find(sub { push @files, $File::Find::name if /\.(c|h|cu)$/ }, grep { -d } qw(engine envs pmix include/ctrain));
@files = sort @files;

my @bad;
my $edges = 0;
for my $file (@files) {
    my $from = module_of($file);
    open(my $fh, '<', $file) or die "$file: $!";
    while (my $line = <$fh>) {
        next unless $line =~ /^\s*#\s*include\s+"([^"]+)"/;
        my $inc = $1;
        my $target = $inc =~ m{^ctrain/} ? "include/$inc" : $inc;
        my $to = module_of($target);
        $edges++;
        if ($from =~ /^UNKNOWN/ || $to =~ /^UNKNOWN/) {
            push @bad, "$file:$.: includes $inc — module unknown to the layering table ($from -> $to)";
        } elsif ($from ne $to && $level{$to} >= $level{$from}) {
            my $kind = $level{$to} == $level{$from} ? 'sideways' : 'upward';
            push @bad, "$file:$.: $kind include of $inc ($from, level $level{$from} -> $to, level $level{$to})";
        }
    }
    close $fh;
}

# The device seam: the loops, the Trainer and the strategies reach a device only through the
# Accelerator (ct_strategy_model_to_device). No CUDA include, no CT_HAVE_CUDA, no accelerator
# name compared. The NCCL glue is the cuda-only part of ddp and is exempt (ddp.c reaches it
# through the accelerator's device_memory flag).
my %device_exempt = map { $_ => 1 } qw(engine/strategies/ddp_nccl.c engine/strategies/ddp_nccl.h);
# The model seam: the loops and the Trainer name no model and no dataset.
my (@dev, @model);
for my $file (grep { m{^engine/(loops|trainer|strategies)/} } @files) {
    open(my $fh, '<', $file) or die "$file: $!";
    while (my $line = <$fh>) {
        if (!$device_exempt{$file} &&
            ($line =~ /CT_HAVE_CUDA/ || $line =~ /^\s*#\s*include\s*[<"][^>"]*(cuda|cublas|<nccl)/i ||
             $line =~ /"(cuda|gpu)"/)) {
            push @dev, "$file:$.: names a device: $line";
        }
        if ($file !~ m{^engine/strategies/} &&
            $line =~ /\b(ct_mlp\w*|ct_fmnist\w*|ct_dataset\w*|CT_FMNIST\w*)\b|\b784\b/) {
            push @model, "$file:$.: names a model or dataset: $line";
        }
    }
    close $fh;
}

# --- spank/: the plugin as pyxis lays it out (issue 27 item 5) -------------------------------
# Each spank/*.c may include the headers of, and call the ct_spank_* functions of, only the files
# before it in this order: log.c (logging) is the leaf, ctrain.c (the dispatcher on
# spank_context()) the top. State is file-static: no spank/ header declares a variable. A file
# missing from the order fails, so a new file is placed in it on purpose.
my @spank_order = qw(log args options check rendezvous local remote ctrain);

sub strip_comments {
    my ($text) = @_;
    $text =~ s{/\*.*?\*/}{ }gs;
    $text =~ s{//[^\n]*}{}g;
    return $text;
}

# Violations in a set of spank/ sources: name ("remote.c", "remote.h") => text.
sub spank_violations {
    my (%src) = @_;
    my %rank = map { $spank_order[$_] => $_ } 0 .. $#spank_order;
    my (%owner, @bad);
    for my $f (sort keys %src) {
        next unless $f =~ /^(\w+)\.c$/;
        my $unit = $1;
        push @bad, "spank/$f: not in t/90's order of spank/ files (@spank_order)" unless exists $rank{$unit};
        for my $line (split /\n/, strip_comments($src{$f})) {
            $owner{$1} = $unit if $line =~ /^(?!static\b)[a-z][\w\s\*]*?\b(ct_spank_\w+)\s*\([^;]*$/;
        }
    }
    for my $f (sort keys %src) {
        next unless $f =~ /^(\w+)\.[ch]$/;
        my $unit = $1;
        my $text = strip_comments($src{$f});
        push @bad, "spank/$f: declares a variable ($1): state belongs file-static in the file that owns it"
            if $f =~ /\.h$/ && $text =~ /^\s*(extern\b[^;(]*;)/m;
        next unless exists $rank{$unit};
        my %to;
        $to{$1} = "includes spank/$1.h" while $text =~ /#\s*include\s+"spank\/(\w+)\.h"/g;
        while ($text =~ /\b(ct_spank_\w+)\s*\(/g) {
            my $o = $owner{$1};
            $to{$o} //= "calls $1 ($o.c)" if defined $o;
        }
        for my $t (sort keys %to) {
            next if $t eq $unit;
            if (!exists $rank{$t}) {
                push @bad, "spank/$f: $to{$t}, a file not in t/90's order";
            } elsif ($rank{$t} >= $rank{$unit}) {
                push @bad, "spank/$f: $to{$t}, which is not below $unit in the order (@spank_order)";
            }
        }
    }
    return @bad;
}

my %spank_src;
for my $path (glob("spank/*.c"), glob("spank/*.h")) {
    open(my $fh, '<', $path) or die "$path: $!";
    local $/;
    (my $name = $path) =~ s{^spank/}{};
    $spank_src{$name} = <$fh>;
    close $fh;
}
my @spank_bad = spank_violations(%spank_src);
# The check itself must see a circle: log.c calling up into remote.c, args.c including local.h.
my %injected = %spank_src;
$injected{'log.c'} .= "\nvoid ct_spank_injected(void)\n{\n    ct_spank_remote_exit();\n}\n";
$injected{'args.c'} = "#include \"spank/local.h\"\n" . $injected{'args.c'};
my @injected_bad = spank_violations(%injected);
my $caught = (grep { m{^spank/log\.c: calls ct_spank_remote_exit} } @injected_bad) &&
             (grep { m{^spank/args\.c: includes spank/local\.h} } @injected_bad);

print "1..6\n";
print(($edges > 20 ? "ok" : "not ok") . " 1 - read $edges includes in " . scalar(@files) . " files\n");
if (@bad) {
    print "not ok 2 - layering holds\n";
    print "# $_\n" for @bad;
} else {
    print "ok 2 - layering holds: nothing includes upward or sideways\n";
}
print((@dev ? "not ok" : "ok") . " 3 - nothing above the accelerators (loops, trainer, strategies) names a device\n");
print "# $_" for @dev;
print((@model ? "not ok" : "ok") . " 4 - the loops and the Trainer name no model or dataset\n");
print "# $_" for @model;
print((@spank_bad ? "not ok" : "ok") . " 5 - spank/ has no circle: each file includes and calls only files below it (@spank_order)\n");
print "# $_\n" for @spank_bad;
print(($caught && keys(%spank_src) > 8 ? "ok" : "not ok") . " 6 - the spank/ check fails on an injected circle\n");
print "# injected: $_\n" for @injected_bad;
