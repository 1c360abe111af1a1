#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# One-way layering: Trainer -> loops -> strategy -> connector's plan -> {accelerator, precision,
# cluster environment, checkpoint IO, launcher} -> models -> {nn, data}. The connector only plans
# (libctrain-core); the strategy is created from its plan. Reads every #include "..." in
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
    connector => 5,
    strategies => 6,
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

print "1..4\n";
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
