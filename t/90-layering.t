#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# One-way layering: Trainer -> {loops, callbacks} -> the fit's health checks -> {loggers,
# checkpoint} -> the run and its callback table (engine/run) -> strategy -> connector's plan -> {accelerator, precision, cluster
# environment, checkpoint IO, launcher} -> models -> {nn, data}. The connector only plans
# (libctrain-core); the strategy is created from its plan. Reads every #include "..." in
# engine/, envs/, pmix/ and include/ctrain/ and fails on an include that goes up, or sideways
# between modules of one level. Then the device seam: nothing above the accelerators (checkpoint,
# loops, loggers, trainer, strategies) names a device, and the checkpoint code, the loops, their
# loggers and the trainer name no model or dataset.
use strict;
use warnings;
use File::Find;
use File::Basename qw(dirname);

chdir(dirname($0) . "/..") or die "cd: $!";

# Higher levels may include lower ones; a module may include itself.
my %level = (
    util => 0,
    registry => 1,
    nn => 2, data => 2, pmix => 2, health => 2, store => 2,
    models => 3,
    accelerators => 4, envs => 4, checkpoint_io => 4, launchers => 4,
    # The binding planner reads gres.conf's node names with envs' hostlist; slurmctld's requests
    # (a requeue without a bad node, for the trainer and the plugin) use it too.
    connector => 5, bind => 5, slurm => 5,
    # engine/collectives: one table of collectives (mpi, gloo, nccl components) under every
    # strategy, above what they use (the PMIx client, the TCPStore, the environments' layout).
    collectives => 5,
    strategies => 6,
    # The CUDA module's table (engine/cuda, in libctrain-cuda.so.0): it gathers the cuda accelerator,
    # the models' cuda implementations and NCCL (engine/collectives/nccl_lib.h), so it sits above
    # them; nothing includes it (libctrain finds it with dlsym: engine/accelerators/cuda_module.h).
    cuda => 6.5,
    # engine/run: ct_run, its options and counters (run.h), and its callback table (callbacks.h,
    # the public side include/ctrain/callback.h): what the Trainer hands the loops, typed below the
    # loops, the loggers, the checkpoint code and the fit's health checks, which all read a run.
    run => 7,
    # metrics.csv, progress and TensorBoard (engine/loggers): called after a step or a validation by
    # their callback (engine/callbacks); they read the run (run.h) and write files, and may include
    # nothing of the loops' functions (loops.h), the Trainer or the CLI.
    loggers => 8,
    # engine/checkpoint: the run's checkpoint (ctrain's format, the model of a checkpoint, Hugging
    # Face's layout). ModelCheckpoint (engine/callbacks) and the Trainer call it; it reads the run
    # and saves and loads through the strategy, which writes through checkpoint IO. checkpoint_io (safetensors) stays a level of its own: it is
    # a part the strategy is handed (Lightning's CheckpointIO, planned and registered by name), below
    # the strategy; engine/checkpoint is above the strategy and calls it, so one folder would hold
    # both ends of checkpoint -> strategy -> checkpoint IO.
    checkpoint => 8,   # beside the loggers: neither includes the other
    # The fit's health checks (engine/health/fit: hang forensics, stragglers, preflight, which rank
    # is on which node) run inside a fit on the strategy's collectives: their callbacks hear where
    # the step is and gather a straggler window, and they log through the loggers, so they sit
    # between the two. A module of their own, apart from engine/health's node checks (nodecheck.c, level 2,
    # libctrain-core for the SPANK plugin): the Makefile puts the folder into libctrain.
    'health/fit' => 9,
    # The loops reach everything that watches a fit through the run's callback table alone
    # (engine/run/callbacks.h): the callbacks themselves (engine/callbacks: the loggers, the
    # checkpoints, early stopping, the hang and straggler watchers) sit beside them, above what they
    # call, and neither includes the other; the Trainer attaches them.
    loops => 10, callbacks => 10,
    trainer => 11,
    # ctrain supervise as a library (engine/supervise, issue 51 item 3): it runs the fit's steps
    # through srun and libslurm, requeues through the Trainer's requeue.c and reads the hang records
    # as ctrain diagnose does (engine/health/fit/diagnose.h), so it sits above all of them and
    # below the CLI, whose cmd_supervise.c only reads the flags.
    supervise => 12,
    # The supervisor's event records (engine/events): written by the ranks where they find a node
    # at fault (the strategies' roll call, the fit's health checks), read by the supervisor; they
    # need engine/util only, and sit at the bottom with the leaves.
    events => 2,
    cli => 13,
);

# Public headers belong to the module that implements them.
my %public = (
    'error.h' => 'util', 'util.h' => 'util', 'rng.h' => 'util', 'dtype.h' => 'util',
    'registry.h' => 'registry', 'config.h' => 'registry', 'bind.h' => 'bind', 'net.h' => 'bind', 'gres.h' => 'bind', 'nodecheck.h' => 'health', 'nn.h' => 'nn',
    'datamodule.h' => 'data', 'model.h' => 'models',
    'pmix.h' => 'pmix', 'pmix_server.h' => 'pmix', 'tcpstore.h' => 'store',
    # A precision is plain data, its number formats in its registry row (engine/registry/precisions.c).
    'accelerator.h' => 'accelerators', 'precision.h' => 'registry',
    'environment.h' => 'envs', 'envs.h' => 'envs', 'hostlist.h' => 'envs', 'gres_conf.h' => 'bind',
    'checkpoint_io.h' => 'checkpoint_io', 'launcher.h' => 'launchers',
    'strategy.h' => 'strategies', 'connector.h' => 'connector', 'collective_trace.h' => 'collectives',
    'loops.h' => 'loops', 'trainer.h' => 'trainer', 'engine.h' => 'trainer',
    # A user program's callbacks: the run's table, seen from outside.
    'callback.h' => 'run',
);

# Files whose module is not their folder's: the pmix cluster environment is an environment
# that happens to live beside the PMIx client it uses.
my %file_module = ('pmix/environment.c' => 'envs', 'pmix/environment.h' => 'envs');

sub module_of {
    my ($path) = @_;
    return $file_module{$path} if exists $file_module{$path};
    return $public{$1} // "UNKNOWN:$path" if $path =~ m{^include/ctrain/([^/]+)$};
    # A sub-folder with a level of its own is its own module (engine/health/fit); others
    # (engine/models/gpt) are their folder's.
    return "$1/$2" if $path =~ m{^engine/([^/]+)/([^/]+)/} && exists $level{"$1/$2"};
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

# The device seam: the checkpoint code, the loops (and their loggers), the Trainer and the
# strategies reach a device only through the Accelerator (ct_strategy_model_to_device). No CUDA
# include, no CT_HAVE_CUDA, no accelerator name compared. The NCCL glue lives below them, in
# engine/collectives (ddp reaches it through the accelerator's device_memory flag).
my %device_exempt;
# The model seam: the checkpoint code, the loops (and their loggers) and the Trainer name no model
# and no dataset.
my (@dev, @model);
for my $file (grep { m{^engine/(checkpoint|loops|loggers|trainer|strategies)/} } @files) {
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
my @spank_order = qw(log args nodecheck options check rendezvous gres bind summary srun step remote_gpus remote_net remote_bind
                     remote_nodecheck remote ctrain);

# slurp(FILES): file => its whole text, for the checks that read sources as a whole.
sub slurp {
    my %src;
    for my $file (@_) {
        open(my $fh, '<', $file) or die "$file: $!";
        local $/;
        $src{$file} = <$fh>;
        close $fh;
    }
    return %src;
}

sub strip_comments {
    my ($text) = @_;
    $text =~ s{/\*.*?\*/}{ }gs;
    $text =~ s{//[^\n]*}{}g;
    return $text;
}

# each_line CODE, %src: CODE->(file, line number, line) for every line of every file, by file name,
# block comments blanked but their lines kept (so the numbers are the file's).
sub each_line {
    my ($code, %src) = @_;
    for my $f (sort keys %src) {
        (my $text = $src{$f}) =~ s{/\*(.*?)\*/}{"\n" x ($1 =~ tr/\n//)}gse;
        my $n = 0;
        $code->($f, ++$n, $_) for split /\n/, $text;
    }
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
# The check itself must see a circle: log.c calling up into remote.c, args.c including srun.h.
my %injected = %spank_src;
$injected{'log.c'} .= "\nvoid ct_spank_injected(void)\n{\n    ct_spank_remote_exit();\n}\n";
$injected{'args.c'} = "#include \"spank/srun.h\"\n" . $injected{'args.c'};
my @injected_bad = spank_violations(%injected);
my $caught = (grep { m{^spank/log\.c: calls ct_spank_remote_exit} } @injected_bad) &&
             (grep { m{^spank/args\.c: includes spank/srun\.h} } @injected_bad);

# --- issue 41: components registered where they are written; strategies ask the environment ---
# 13. No component gathered by a hand-sized list: an array of ops, descriptors or environment
#     slots (engine/, envs/, pmix/) is sized by its contents ([] or a size from sizeof or an enum's
#     count), never by a number or a constant written by hand (strategies.c's list[4] lost its
#     terminator at a fourth strategy).
# 14. No getenv of a rank variable in engine/strategies/: the environment (envs/) reads RANK,
#     LOCAL_RANK, CTRAIN_LAUNCHER_RANK, PMIX_RANK, ... and the strategy holds or asks its answer.
# 15. Both checks fail on injected violations.
sub hand_sized_lists {
    my (%src) = @_;
    my @bad;
    for my $f (sort keys %src) {
        my $text = strip_comments($src{$f});
        my %sized = map { $_ => 1 } ($text =~ /^\s*#\s*define\s+(\w+)\s[^\n]*\bsizeof\b/mg);
        for my $line (split /\n/, $text) {
            # A declaration: [static] [const] TYPE [const] [*...] NAME[SIZE]...
            next unless $line =~ /^\s*(?:(?:static|extern|const)\s+)*(?:struct\s+ct_\w+_ops|ct_registry_entry|struct\s+env_slot)\b[\s\*]*(?:const\b[\s\*]*)*(\w+)((?:\s*\[[^\]]*\])+)/;
            my $name = $1;
            for my $size ($2 =~ /\[([^\]]*)\]/g) {
                next if $size !~ /\S/;
                next if $size =~ /\bsizeof\b|\bCT_\w+_N[A-Z]+\b/;
                next if grep { $sized{$_} } ($size =~ /\b([A-Za-z_]\w*)\b/g);
                push @bad, "$f: $name\[$size\]: a component list sized by hand: $line";
            }
        }
    }
    return @bad;
}

sub rank_getenv {
    my (%src) = @_;
    my $rank_var = qr/CT_VAR_\w+|CT_LAUNCHER_ENV_\w+|"(?:[A-Z_]*RANK[A-Z_]*|[A-Z_]*WORLD_SIZE|[A-Z_]*NPROCS?|PMIX_\w+|OMPI_COMM_WORLD_\w+|SLURM_\w+|MASTER_\w+|[A-Z_]*NODEID)"/;
    my @bad;
    for my $f (sort keys %src) {
        my $n = 0;
        for my $line (split /\n/, strip_comments($src{$f})) {
            $n++;
            push @bad, "$f: reads a rank variable itself: $line" if $line =~ /getenv\s*\(\s*(?:$rank_var)\s*[,)]/;
        }
    }
    return @bad;
}

my (%component_src, %strategy_src);
for my $file (grep { m{^(engine|envs|pmix)/} } @files, glob('engine/strategies/*.cc')) {
    open(my $fh, '<', $file) or die "$file: $!";
    local $/;
    my $text = <$fh>;
    close $fh;
    $component_src{$file} = $text;
    $strategy_src{$file} = $text if $file =~ m{^engine/strategies/};
}
my @hand_sized = hand_sized_lists(%component_src);
my @rank_reads = rank_getenv(%strategy_src);
my %inj_lists = (%component_src);
$inj_lists{'engine/strategies/strategies.c'} .= "\nstatic const struct ct_strategy_ops *list[4];\n";
$inj_lists{'engine/registry/registry.c'} .= "\n#define MAX_ENTRIES 64\nstatic ct_registry_entry *entries[MAX_ENTRIES];\n";
my %inj_ranks = (%strategy_src);
$inj_ranks{'engine/strategies/ddp.c'} .= "\nstatic int r(void) { return getenv(CT_VAR_RANK) || getenv(\"PMIX_RANK\"); }\n";
my @inj_hand = hand_sized_lists(%inj_lists);
my @inj_rank = rank_getenv(%inj_ranks);
my $caught41 = (grep { m{strategies\.c: list\[4\]} } @inj_hand) && (grep { m{registry\.c: entries\[MAX_ENTRIES\]} } @inj_hand) &&
               (grep { m{ddp\.c: .*CT_VAR_RANK} } @inj_rank) && keys(%strategy_src) > 5;

print "1..67\n";
print(($edges > 20 ? "ok" : "not ok") . " 1 - read $edges includes in " . scalar(@files) . " files\n");
if (@bad) {
    print "not ok 2 - layering holds\n";
    print "# $_\n" for @bad;
} else {
    print "ok 2 - layering holds: nothing includes upward or sideways\n";
}
print((@dev ? "not ok" : "ok") . " 3 - nothing above the accelerators (checkpoint, loops, loggers, trainer, strategies) names a device\n");
print "# $_" for @dev;
print((@model ? "not ok" : "ok") . " 4 - the checkpoint code, the loops, their loggers and the Trainer name no model or dataset\n");
print "# $_" for @model;

# --- issue 27 (i27c): the connector only plans; components describe themselves ----------------
# 5. The connector (libctrain-core) includes no strategy internals: the strategy is created from
#    its plan by engine/strategies, and nothing under engine/connector includes engine/strategies/.
# 6. No circle among the connector's files: an edge A -> B when A calls a function B defines.
# 7. No component name (what the descriptors register: names and aliases) compared as a string
#    literal (strcmp/strcasecmp) outside the component's own files (those that declare .name =
#    "NAME"): rules read the components' descriptor fields instead.
{
    my @conn = grep { m{^engine/connector/} } @files;
    my @internals;
    for my $file (@conn) {
        open(my $fh, '<', $file) or die "$file: $!";
        while (my $line = <$fh>) {
            push @internals, "$file:$.: $line"
                if $line =~ m{^\s*#\s*include\s+"(engine/strategies/[^"]+|ctrain/strategy\.h)"};
        }
        close $fh;
    }
    print((@internals ? "not ok" : "ok") . " 5 - the connector includes no strategy internals\n");
    print "# $_" for @internals;

    # Functions each connector .c file defines (not static: at column 0, no ';' on the line).
    my (%defines, %text);
    for my $file (grep { /\.c$/ } @conn) {
        open(my $fh, '<', $file) or die "$file: $!";
        local $/;
        $text{$file} = <$fh>;
        close $fh;
        for my $line (split /\n/, $text{$file}) {
            next if $line =~ /^static\b/ || $line =~ /;/ || $line !~ /^[A-Za-z_][\w \*]*?\b(\w+)\s*\(/;
            $defines{$1} = $file;
        }
    }
    my %edges;
    for my $file (keys %text) {
        (my $body = $text{$file}) =~ s{/\*.*?\*/}{}gs;
        for my $fn (keys %defines) {
            next if $defines{$fn} eq $file;
            $edges{$file}{$defines{$fn}} = $fn if $body =~ /\b\Q$fn\E\s*\(/;
        }
    }
    my (@circles, %state);
    my $visit;
    $visit = sub {
        my ($f, @path) = @_;
        $state{$f} = 1;
        for my $g (sort keys %{ $edges{$f} || {} }) {
            if (($state{$g} // 0) == 1) {
                my @loop = (@path, $f);
                shift @loop while @loop && $loop[0] ne $g;
                push @circles, join(' -> ', map { "$_" } @loop, $g) . " ($f calls $edges{$f}{$g})";
            } elsif (!$state{$g}) {
                $visit->($g, @path, $f);
            }
        }
        $state{$f} = 2;
    };
    $visit->($_) for grep { !$state{$_} } sort keys %text;
    print((@circles ? "not ok" : "ok") . " 6 - no circle among the connector's files (" .
          scalar(keys %text) . " files)\n");
    print "# calls in a circle: $_\n" for @circles;

    # The registered names and their own files.
    my (%owners, @compared);
    for my $file (grep { m{^(engine/registry|engine/strategies|engine/accelerators|engine/models|engine/data|engine/checkpoint_io|engine/launchers|envs|pmix)/} } @files) {
        open(my $fh, '<', $file) or die "$file: $!";
        while (my $line = <$fh>) {
            $owners{$1}{$file} = 1 while $line =~ /\.name\s*=\s*"([^"]+)"/g;
            if ($line =~ /\.aliases\s*=\s*\{([^}]*)\}/) {
                my $list = $1;
                $owners{$1}{$file} = 1 while $list =~ /"([^"]+)"/g;
            }
        }
        close $fh;
    }
    my @scan = @files;
    find(sub { push @scan, $File::Find::name if /\.(c|h)$/ }, grep { -d } qw(spank));
    for my $file (@scan) {
        open(my $fh, '<', $file) or die "$file: $!";
        while (my $line = <$fh>) {
            while ($line =~ /\b(?:strcmp|strcasecmp)\s*\(([^;]*)/g) {
                my $args = $1;
                while ($args =~ /"([^"]*)"/g) {
                    push @compared, "$file:$.: compares the name \"$1\": $line"
                        if $owners{$1} && !$owners{$1}{$file};
                }
            }
        }
        close $fh;
    }
    print((@compared || !%owners ? "not ok" : "ok") . " 7 - no component name compared as a string outside its own " .
          "files (" . scalar(keys %owners) . " names)\n");
    print "# $_" for @compared;
    print "# names: ", join(' ', sort keys %owners), "\n" if $ENV{CT_LAYERING_VERBOSE};
}
# --- the installed API and a short Trainer (issue 27, items 1 and 6) -----------------------------
# Only the public headers are installed: `make install` installs $(PUBLIC_HEADERS) (its part
# install-dev, which EasyBuild's module installs too; no glob of
# include/ctrain/), and that list is exactly what a user's model and program include: model.h,
# datamodule.h, config.h, error.h, the headers examples/*.c include, and what those include.
# libctrain-dev ships what `make install` put under /usr/include/ctrain (no header named apart).
my (%installed, $install_rule_ok, @api_bad);
{
    open(my $mk, '<', 'Makefile') or die "Makefile: $!";
    my $text = do { local $/; <$mk> };
    close $mk;
    $text =~ s/\\\n/ /g;
    if ($text =~ /^PUBLIC_HEADERS\s*:?=\s*(.*)$/m) {
        $installed{"$_.h"} = 1 for split ' ', $1;
    } else {
        push @api_bad, "Makefile: no PUBLIC_HEADERS list";
    }
    my ($rule) = $text =~ /^install-dev:[^\n]*\n((?:\t[^\n]*\n)+)/m;
    $rule //= '';
    push @api_bad, "Makefile: the install-dev rule installs include/ctrain/ by a glob" if $rule =~ m{include/ctrain/\*};
    push @api_bad, "Makefile: the install-dev rule does not install \$(PUBLIC_HEADERS)"
        unless $rule =~ /\$\(PUBLIC_HEADERS:%=include\/ctrain\/%\.h\)/;
}
my @entry = qw(model.h datamodule.h config.h error.h);
for my $ex (glob 'examples/*.c') {
    open(my $fh, '<', $ex) or die "$ex: $!";
    while (<$fh>) { push @entry, $1 if /^\s*#\s*include\s+[<"]ctrain\/([^">]+)[">]/ }
    close $fh;
}
my %closure;
while (defined(my $h = shift @entry)) {
    next if $closure{$h}++;
    open(my $fh, '<', "include/ctrain/$h") or do { push @api_bad, "include/ctrain/$h: $!"; next };
    while (<$fh>) { push @entry, $1 if /^\s*#\s*include\s+"ctrain\/([^"]+)"/ }
    close $fh;
}
push @api_bad, "$_ is installed, but no public header or example needs it" for grep { !$closure{$_} } sort keys %installed;
push @api_bad, "$_ is needed by the public API, but not installed" for grep { !$installed{$_} } sort keys %closure;
for my $f (glob 'debian/*.install') {
    open(my $fh, '<', $f) or die "$f: $!";
    while (<$fh>) { push @api_bad, "$f:$.: names a header on its own: $_" if m{include/.*\.h}; }
    close $fh;
}
print((@api_bad ? "not ok" : "ok") . " 8 - only the public API's " . scalar(keys %installed) . " headers are installed\n");
print "# $_\n" for @api_bad;

# trainer.c reads top to bottom (build -> place -> fit -> test): short, a few functions; its parts
# live in their own files (engine/trainer/*.c).
my $trainer = 'engine/trainer/trainer.c';
open(my $tf, '<', $trainer) or die "$trainer: $!";
my @tlines = <$tf>;
close $tf;
my $nfun = grep { /^[a-z][\w\s\*]*\b\w+\(.*[^;]\s*$/ && !/^(if|for|while|switch|return)\b/ } @tlines;
my @short_bad;
push @short_bad, "$trainer: " . scalar(@tlines) . " lines (at most 160)" if @tlines > 160;
push @short_bad, "$trainer: $nfun functions (at most 8)" if $nfun > 8;
print((@short_bad ? "not ok" : "ok") . " 9 - trainer.c is short: " . scalar(@tlines) . " lines, $nfun functions\n");
print "# $_\n" for @short_bad;

# The Trainer reads no variable, not even through envs/'s readers: the SLURM job id and whether
# ctrain supervise started the step are the answer of the cluster environment the connector chose
# (the plan's env.slurm_job_id, env.ctrain_supervised, read by ct_env_detect). It names no model:
# it creates the plan's (its descriptor) from the config the connector parsed (checks 31-32).
# 24. Check 10 fails on the job id read directly again (run.c calling ct_env_slurm_job_id).
sub trainer_reads_env {
    my (%src) = @_;
    my @bad;
    for my $f (sort keys %src) {
        my $n = 0;
        for my $line (split /\n/, $src{$f}) {
            $n++;
            push @bad, "$f:$n: $line" if $line =~ /\bgetenv\s*\(|"SLURM_\w+"|"(mlp|gpt)"|\bct_env_\w+\s*\(|\bct_getenv_process\b/;
        }
    }
    return @bad;
}
my %trainer_text = slurp(grep { m{^engine/trainer/} } @files);
my @trainer_env = trainer_reads_env(%trainer_text);
my %inj_env = %trainer_text;
$inj_env{'engine/trainer/run.c'} .= "\nstatic const char *j(void) { return ct_env_slurm_job_id(ct_getenv_process, NULL); }\n";
my @inj_env = trainer_reads_env(%inj_env);
print((@trainer_env ? "not ok" : "ok") . " 10 - the Trainer reads no variable itself (the environment's answer in the plan) and names no model\n");
print "# $_\n" for @trainer_env;

print((@spank_bad ? "not ok" : "ok") . " 11 - spank/ has no circle: each file includes and calls only files below it (@spank_order)\n");
print "# $_\n" for @spank_bad;
print(($caught && keys(%spank_src) > 8 ? "ok" : "not ok") . " 12 - the spank/ check fails on an injected circle\n");
print "# injected: $_\n" for @injected_bad;

print((@hand_sized ? "not ok" : "ok") . " 13 - no component list sized by hand (" . scalar(keys %component_src) . " files)\n");
print "# $_\n" for @hand_sized;
print((@rank_reads ? "not ok" : "ok") . " 14 - engine/strategies/ reads no rank variable itself: the environment answers\n");
print "# $_\n" for @rank_reads;
print(($caught41 ? "ok" : "not ok") . " 15 - checks 13 and 14 fail on injected violations\n");
print "# injected: $_\n" for @inj_hand, @inj_rank;

# 16. The Trainer reaches the host's threads through the accelerator (ct_strategy_host_threads_setup
#     asks the strategy's accelerator): no engine/trainer/ file includes the cpu accelerator's
#     cpu_threads.h or calls its ct_cpu_threads_* (register.c, which attaches the ops, may include accelerators.h).
# 17. That check fails on an injected include.
sub trainer_accel_includes {
    my (%src) = @_;
    my @bad;
    for my $f (sort keys %src) {
        for my $line (split /\n/, $src{$f}) {
            push @bad, "$f: $line" if $line =~ m{^\s*#\s*include\s+"engine/accelerators/cpu_threads\.h"|\bct_cpu_threads_\w+\s*\(};
        }
    }
    return @bad;
}
my @trainer_accel = trainer_accel_includes(%trainer_text);
my %inj_accel = %trainer_text;
$inj_accel{'engine/trainer/run.c'} .= "\n#include \"engine/accelerators/cpu_threads.h\"\n";
my @inj_accel = trainer_accel_includes(%inj_accel);
print((@trainer_accel ? "not ok" : "ok") . " 16 - the Trainer reaches threads through the accelerator: engine/trainer/ includes no cpu_threads.h, calls no ct_cpu_threads_*\n");
print "# $_\n" for @trainer_accel;
print(((grep { m{^engine/trainer/run\.c: } } @inj_accel) && keys(%trainer_text) > 3 ? "ok" : "not ok")
      . " 17 - check 16 fails on an injected include\n");
print "# injected: $_\n" for @inj_accel;
# --- issue 41 item 7: the loops are one way down ----------------------------------------------
# 18. No circle among engine/loops/'s files: fit loop -> epoch loop -> validation -> evaluation
#     loop -> training step; an edge A -> B when A calls a function B defines (as check 6).
# 19. Check 18 fails on an injected circle (the training step calling the epoch loop).
sub call_circles {
    my (%text) = @_;
    my (%defines, %edges, @circles, %state, $visit);
    for my $file (keys %text) {
        for my $line (split /\n/, $text{$file}) {
            next if $line =~ /^static\b/ || $line =~ /;/ || $line !~ /^[A-Za-z_][\w \*]*?\b(\w+)\s*\(/;
            $defines{$1} = $file;
        }
    }
    for my $file (keys %text) {
        (my $body = $text{$file}) =~ s{/\*.*?\*/}{}gs;
        for my $fn (keys %defines) {
            next if $defines{$fn} eq $file;
            $edges{$file}{$defines{$fn}} = $fn if $body =~ /\b\Q$fn\E\s*\(/;
        }
    }
    $visit = sub {
        my ($f, @path) = @_;
        $state{$f} = 1;
        for my $g (sort keys %{ $edges{$f} || {} }) {
            if (($state{$g} // 0) == 1) {
                my @loop = (@path, $f);
                shift @loop while @loop && $loop[0] ne $g;
                push @circles, join(' -> ', @loop, $g) . " ($f calls $edges{$f}{$g})";
            } elsif (!$state{$g}) {
                $visit->($g, @path, $f);
            }
        }
        $state{$f} = 2;
    };
    $visit->($_) for grep { !$state{$_} } sort keys %text;
    return @circles;
}
{
    my %loops_src = slurp(grep { m{^engine/loops/[^/]+\.c$} } @files);
    my @loop_circles = call_circles(%loops_src);
    print((@loop_circles ? "not ok" : "ok") . " 18 - no circle among engine/loops/'s files (" .
          scalar(keys %loops_src) . " files)\n");
    print "# calls in a circle: $_\n" for @loop_circles;
    my %injected = %loops_src;
    $injected{'engine/loops/step.c'} .= "\nstatic void injected(ct_run *r, ct_error *e) { ct_epoch_loop_run(r, e); }\n";
    my @inj = call_circles(%injected);
    print((@inj && exists $loops_src{'engine/loops/step.c'} ? "ok" : "not ok") .
          " 19 - check 18 fails on an injected circle\n");
    print "# injected: $_\n" for @inj;
}
# --- issue 41 item 7: engine/loops/ holds only loop files ---------------------------------------
# 20. Nothing lives in engine/loops/ but the loops themselves, so that a non-loop concern (a
#     logger, signal handling, checkpoint IO) cannot settle there again: a file or folder not in
#     this list fails. What stays, and why:
#       fit_loop.c    the fit loop: epochs, validation at their end, the callbacks at a stop
#       epoch_loop.c  the epoch loop: optimizer steps, the step boundary where a stop is agreed
#       validate.c    validation in fit: the monitored metric, whether it improved
#       eval_loop.c   the evaluation loop (validate, test, validation in fit)
#       step.c        the training step (forward, micro-steps, gradient readiness, clipping) and
#                     the stop agreement that rides on its gradient exchange
#       loops.h       the loops' functions
#     Gone elsewhere: metrics.csv and TensorBoard (engine/loggers/), catching the stop signals
#     (engine/trainer/stop.c, beside the signal connector), checkpoint files (ctrain's format, the
#     HF import/export, the model's tensors: engine/checkpoint/), ct_run and its callback table
#     (engine/run/), top-k checkpoints and early stopping (engine/callbacks/).
# 21. Check 20 fails on injected non-loop files (a logger and a folder of its own).
my @loop_files = qw(fit_loop.c epoch_loop.c validate.c eval_loop.c step.c loops.h);
sub non_loop_entries {
    my ($allowed, @entries) = @_;
    return map { "engine/loops/$_: not a loop file (t/90's list: @loop_files)" } grep { !$allowed->{$_} } @entries;
}
{
    my @entries;
    find({ no_chdir => 1, wanted => sub {
        return if $_ eq 'engine/loops';
        (my $rel = $_) =~ s{^engine/loops/}{};
        push @entries, -d $_ ? "$rel/" : $rel;
    } }, 'engine/loops');
    my %allowed = map { $_ => 1 } @loop_files;
    my @stray = non_loop_entries(\%allowed, sort @entries);
    print((@stray || !@entries ? "not ok" : "ok") . " 20 - engine/loops/ holds only loop files (" .
          scalar(@entries) . " entries)\n");
    print "# $_\n" for @stray;
    my @inj = non_loop_entries(\%allowed, sort(@entries, 'logger.c', 'proto/', 'proto/tensorboard.proto'));
    print(((grep { m{^engine/loops/logger\.c: } } @inj) && (grep { m{^engine/loops/proto/: } } @inj) &&
           grep({ $_ eq 'step.c' } @entries) ? "ok" : "not ok") . " 21 - check 20 fails on injected non-loop files\n");
    print "# injected: $_\n" for @inj;
}

# --- issue 41 item 4: the connector never holds the strategy ------------------------------------
# 22. Nothing under engine/connector (nor connector.h) holds or frees what was built from its plan:
#     struct ct_connector keeps no pointer slot (the plan only), no connector file names a
#     ct_strategy or frees through a function pointer, and the connector's API has no attach. The
#     Trainer creates the strategy from the plan (ct_strategy_create_from_plan) and frees it.
# 23. Check 22 fails on the attach slot injected back (a void * and its free function).
sub connector_holds {
    my (%src) = @_;
    my @bad;
    for my $f (sort keys %src) {
        my $text = strip_comments($src{$f});
        if ($text =~ /\bstruct\s+ct_connector\s*\{([^}]*)\}/) {
            for my $member (grep { /\S/ } split /;/, $1) {
                $member =~ s/\s+/ /g;
                push @bad, "$f: struct ct_connector holds a pointer: $member;" if $member =~ /\*/;
            }
        }
        my $n = 0;
        for my $line (split /\n/, $text) {
            $n++;
            push @bad, "$f:$n: names the strategy: $line" if $line =~ /\bct_strategy\w*/;
            push @bad, "$f:$n: frees through a pointer: $line" if $line =~ /(?:->|\.)\w*free\w*\s*\(|\(\s*\*\s*\w*free\w*\s*\)/;
            push @bad, "$f:$n: an attach slot: $line" if $line =~ /\bct_connector_attach\w*/;
        }
    }
    return @bad;
}
{
    my %conn_src = slurp(grep { m{^engine/connector/} || $_ eq 'include/ctrain/connector.h' } @files);
    my @holds = connector_holds(%conn_src);
    print((@holds ? "not ok" : "ok") . " 22 - the connector never holds the strategy: no slot, no free of it (" .
          scalar(keys %conn_src) . " files)\n");
    print "# $_\n" for @holds;
    my %inj = %conn_src;
    $inj{'engine/connector/connector_internal.h'} =~
        s/(struct ct_connector \{\n)/$1    void *attached;\n    void (*attached_free)(void *obj);\n/;
    $inj{'engine/connector/connector.c'} .= "\nvoid ct_connector_attach(ct_connector *c, void *obj, void (*free_fn)(void *obj))\n" .
        "{\n    c->attached = obj;\n    c->attached_free = free_fn;\n}\n" .
        "static void drop(ct_connector *c) { c->attached_free(c->attached); }\n";
    my @inj = connector_holds(%inj);
    my $caught = (grep { m{connector_internal\.h: struct ct_connector holds a pointer: .*void \*attached} } @inj) &&
                 (grep { m{connector_internal\.h: struct ct_connector holds a pointer: .*attached_free} } @inj) &&
                 (grep { m{connector\.c:\d+: frees through a pointer} } @inj) &&
                 (grep { m{connector\.c:\d+: an attach slot} } @inj);
    print(($caught && exists $conn_src{'engine/connector/connector_internal.h'} ? "ok" : "not ok") .
          " 23 - check 22 fails on an injected attach slot\n");
    print "# injected: $_\n" for @inj;
}
print(((grep { m{^engine/trainer/run\.c:\d+: .*ct_env_slurm_job_id} } @inj_env) && keys(%trainer_text) > 3 ? "ok" : "not ok") .
      " 24 - check 10 fails on the job id read directly\n");
print "# injected: $_\n" for @inj_env;

# --- issue 41 item 3: a component's name written once ------------------------------------------
# 25. The implementations of strategies, accelerators, launchers and checkpoint IO carry no name of
#     their own (no .name = "..." in engine/strategies, engine/accelerators, engine/launchers,
#     engine/checkpoint_io): each is paired with its descriptor
#     (engine/registry/) by symbol or row and takes or is registered under the descriptor's name.
# 26. Check 25 fails on a name written back into an implementation.
sub impl_names {
    my (%src) = @_;
    my @bad;
    each_line(sub { my ($f, $n, $line) = @_; push @bad, "$f:$n: names itself: $line" if $line =~ /\.name\s*=\s*"/ },
              %src);
    return @bad;
}
{
    my %impl_src = slurp(grep { m{^engine/(strategies|accelerators|launchers|checkpoint_io)/} } @files);
    my @named = impl_names(%impl_src);
    print((@named ? "not ok" : "ok") . " 25 - strategies, accelerators, launchers and checkpoint IO take their descriptor's name (" .
          scalar(keys %impl_src) . " files)\n");
    print "# $_\n" for @named;
    my %inj = %impl_src;
    $inj{'engine/accelerators/cpu.c'} =~ s/(const struct ct_accelerator_ops ct_accelerator_cpu = \{\n)/$1    .name = "cpu",\n/;
    $inj{'engine/launchers/fork.c'} =~ s/(const struct ct_launcher_ops ct_launcher_fork = \{\n)/$1    .name = "fork",\n/;
    my @inj = impl_names(%inj);
    print(((grep { m{^engine/accelerators/cpu\.c:} } @inj) && 
           (grep { m{^engine/launchers/fork\.c:} } @inj) ? "ok" : "not ok") .
          " 26 - check 25 fails on a name written into an implementation\n");
    print "# injected: $_\n" for @inj;
}

# 27. Nothing registers a component under a name written by hand: no ct_registry_set_ops(KIND,
#     "NAME", ...) and no environment slot { "NAME", &ct_env_NAME_ops } in engine/, envs/, pmix/ (the
#     names come from the descriptors; the Makefile gathers the descriptor and environment files,
#     so adding one is adding its files and its test).
# 28. Check 27 fails on a launcher registered by a literal and an environment listed by hand.
sub named_by_hand {
    my (%src) = @_;
    my @bad;
    for my $f (sort keys %src) {
        my $n = 0;
        for my $line (split /\n/, strip_comments($src{$f})) {
            $n++;
            push @bad, "$f:$n: registers under a literal name: $line" if $line =~ /ct_registry_set_ops\s*\([^,]*,\s*"/;
            push @bad, "$f:$n: lists an environment by hand: $line" if $line =~ /\{\s*"\w+"\s*,\s*&ct_env_\w+_ops\s*\}/;
        }
    }
    return @bad;
}
{
    my @by_hand = named_by_hand(%component_src);
    print((@by_hand ? "not ok" : "ok") . " 27 - no component registered under a name written by hand (" .
          scalar(keys %component_src) . " files)\n");
    print "# $_\n" for @by_hand;
    my %inj = %component_src;
    $inj{'engine/trainer/register.c'} .= "\nvoid f(void) { ct_registry_set_ops(CT_REG_LAUNCHER, \"fork\", &ct_launcher_fork); }\n";
    $inj{'envs/detect.c'} .= "\nstatic struct env_slot more[] = { { \"lsf\", &ct_env_lsf_ops } };\n";
    my @inj = named_by_hand(%inj);
    print(((grep { m{^engine/trainer/register\.c:} } @inj) && (grep { m{^envs/detect\.c:} } @inj) ? "ok" : "not ok") .
          " 28 - check 27 fails on a launcher registered by a literal and an environment listed by hand\n");
    print "# injected: $_\n" for @inj;
}

# --- issue 41 items 5 and 6: the cpu GPT's step in files of one concern --------------------------
# 29. The cpu GPT reads as llm.c's train_gpt2.c: its layers (gpt_layers_tmpl.h), the top-down step
#     (gpt_step_tmpl.h), attention's paths and the per-type files that instantiate them
#     (gpt_step_*.c, gpt_attention_*) hold no preprocessor conditional: what differs by storage
#     type is in each type's thin kernels and its table of attention paths, never an #if around two
#     bodies. And no cpu source of engine/models/ is named *kernels*: the element-wise loops are
#     SIMD passes (gpt_passes*.c); GPU kernels are .cu files.
# 30. Check 29 fails on an #if injected into the layers and on a cpu file named gpt_kernels.c.
sub gpt_step_conditionals {
    my (%src) = @_;
    my @bad = map { "$_: a cpu source named kernels (the cpu GPT's element-wise loops are passes: gpt_passes*.c)" }
              grep { m{/[^/]*kernels[^/]*\.(c|h)$} } sort keys %src;
    my %step = map { $_ => $src{$_} }
               grep { m{^engine/models/gpt/(gpt_layers_tmpl\.h|gpt_step_tmpl\.h|gpt_step_\w+\.c|gpt_attention_\w+)$} } keys %src;
    each_line(sub {
        my ($f, $n, $line) = @_;
        push @bad, "$f:$n: a preprocessor conditional in the step: $line" if $line =~ /^\s*#\s*(if|ifdef|ifndef|elif|else)\b/;
    }, %step);
    return @bad;
}
{
    my %gpt_src = slurp(grep { m{^engine/models/} && !/\.cu$/ } @files);
    my @conds = gpt_step_conditionals(%gpt_src);
    my $step_files = grep { m{^engine/models/gpt/(gpt_layers_tmpl\.h|gpt_step_tmpl\.h|gpt_step_\w+\.c)$} } keys %gpt_src;
    print((@conds || $step_files < 5 ? "not ok" : "ok") . " 29 - the cpu GPT's layers and step hold no #if; no cpu file named kernels (" .
          "$step_files step files)\n");
    print "# $_\n" for @conds;
    my %inj = %gpt_src;
    $inj{'engine/models/gpt/gpt_layers_tmpl.h'} .= "\n#if GPT_F32\nstatic int mixed_only;\n#endif\n";
    $inj{'engine/models/gpt/gpt_kernels.c'} = "/* element-wise loops */\n";
    my @inj = gpt_step_conditionals(%inj);
    print(((grep { m{^engine/models/gpt/gpt_layers_tmpl\.h:\d+: a preprocessor conditional.*#if GPT_F32} } @inj) &&
           (grep { m{^engine/models/gpt/gpt_kernels\.c: a cpu source named kernels} } @inj) ? "ok" : "not ok") .
          " 30 - check 29 fails on an injected #if and a cpu file named kernels\n");
    print "# injected: $_\n" for @inj;
}

# --- issue 41 item 2: the model config parsed once, no model named outside its own files -------
# 31. No file outside the models' own (engine/models/: each model's files and their registration,
#     builtin.c) and their descriptors (engine/registry/model_NAME.c) names a model: no string
#     literal that is a built-in model's name ("mlp", "gpt": the descriptors' names)
#     in engine/, envs/, pmix/, spank/ or the public headers, comments aside. The CLI takes the
#     registry's default model, the checkpoint code asks the model's class for its hint, the plan
#     carries the model's descriptor.
# 32. Check 31 fails on a name written back (the CLI's default, the checkpoint's hint).
sub model_literals {
    my ($names, %src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        push @bad, "$f:$n: names model $1: $line" if $line !~ m{^\s*//} && $line =~ /"($names)"/;
    }, %src);
    return @bad;
}
{
    my %reg = slurp(glob('engine/registry/model_*.c'));
    my @names = sort map { /\bct_registry_entry\s+ct_model_\w+_desc\[\]\s*=\s*\{\s*\{\s*\.name\s*=\s*"([^"]+)"/s ? $1 : () } values %reg;
    my $names = join('|', map { quotemeta } @names);
    my @scope = grep { m{^(engine|envs|pmix|include/ctrain)/} && !m{^engine/models/} && !m{^engine/registry/model_\w+\.c$} }
                @files, glob('spank/*.[ch]');
    my %src = slurp(@scope);
    my @named = @names ? model_literals($names, %src) : ("engine/registry/model_*.c: no model descriptors found");
    print((@named ? "not ok" : "ok") . " 31 - no model named outside its own files (" . join(', ', @names) . " in " .
          scalar(keys %src) . " files)\n");
    print "# $_\n" for @named;
    my %inj = %src;
    $inj{'engine/cli/cmd_fit.c'} .= "\nstatic const char *m(const char *x) { return x ? x : \"mlp\"; }\n";
    $inj{'engine/checkpoint/checkpoint.c'} .= "\nstatic int g(const char *x) { return !strncmp(x, \"gpt\", 3); }\n";
    my @inj = @names ? model_literals($names, %inj) : ();
    print(((grep { m{^engine/cli/cmd_fit\.c:\d+: names model mlp} } @inj) &&
           (grep { m{^engine/checkpoint/checkpoint\.c:\d+: names model gpt} } @inj) ? "ok" : "not ok") .
          " 32 - check 31 fails on a model's name written into the CLI and the checkpoint code\n");
    print "# injected: $_\n" for @inj;
}

# --- issue 41 item 2: --init-from through the connector, the model config parsed once ---------
# 33. --model-config text is parsed (ct_config_parse on a model's schema, not a strategy's
#     option_schema) only by the connector (engine/connector/) and where a checkpoint's recorded
#     text is read: engine/checkpoint/, and ct_model_create (engine/models/model.c), which only
#     engine/checkpoint/ calls. And the CLI derives no model config: engine/cli/ calls no
#     function of engine/checkpoint/'s headers named *config* (--init-from's file is the
#     connector's to read) and sets a connector's model_config only in ct_trainer_flags_fold (the
#     --hidden alias).
# 34. Check 33 fails on the old flow written back (model.c parsing the user's text for the file,
#     cmd_fit.c calling the checkpoint code and rewriting --model-config).
sub config_parses {
    my ($ckpt_fns, %src) = @_;
    my (@bad, %in);   # %in: the function each file's walk is in
    each_line(sub {
        my ($f, $n, $line) = @_;
        $in{$f} = $1 if $line =~ /^[a-z][\w\s\*]*?\b(\w+)\s*\(/;
        my $fn = $in{$f} // '';
        if ($line =~ /^\s.*\bct_config_parse\s*\(\s*([^,]*),/ && $1 !~ /option_schema/ && $f !~ m{^engine/(connector|checkpoint)/} &&
            !($f eq 'engine/models/model.c' && $fn eq 'ct_model_create')) {
            push @bad, "$f:$n: parses --model-config text in $fn: $line";
        }
        push @bad, "$f:$n: ct_model_create (a checkpoint's recorded text) called outside engine/checkpoint/: $line"
            if $line =~ /\bct_model_create\s*\(/ && $f !~ m{^engine/(checkpoint|models)/};
        return unless $f =~ m{^engine/cli/};
        push @bad, "$f:$n: derives a model config through the checkpoint code ($1): $line"
            if $ckpt_fns && $line =~ /\b($ckpt_fns)\s*\(/;
        push @bad, "$f:$n: rewrites --model-config in $fn: $line"
            if $line =~ /(?:->|\.)model_config\s*=[^=]/ && !($f eq 'engine/cli/trainer_flags.c' && $fn eq 'ct_trainer_flags_fold');
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^(engine|envs|pmix)/} } @files);
    my %hdr = slurp(glob('engine/checkpoint/*.h'));
    my %fns;
    for my $h (values %hdr) {
        my $text = strip_comments($h);
        $fns{$1} = 1 while $text =~ /\b(ct_\w*config\w*)\s*\(/g;
    }
    my $ckpt_fns = join('|', sort keys %fns);
    my @parses = config_parses($ckpt_fns, %src);
    print((@parses || !exists $src{'engine/connector/validate.c'} ? "not ok" : "ok") .
          " 33 - --model-config parsed only by the connector and for a checkpoint's recorded text; the CLI derives no model config (" .
          scalar(keys %src) . " files)\n");
    print "# $_\n" for @parses;
    my %inj = %src;
    $inj{'engine/models/model.c'} .= "\nint ct_model_hf_config(const char *name, const char *user_config, ct_error *err)\n{\n" .
        "    ct_config cfg;\n\n    return ct_config_parse(e->config, \"--model-config\", name, user_config, &cfg, err);\n}\n";
    $inj{'engine/cli/cmd_fit.c'} .= "\nstatic int init_from_config(ct_connector_flags *cf, char *buf, ct_error *err)\n{\n" .
        "    if (ct_hf_model_config(cf->model, cf->model_config, cf->init_from, buf, 1024, err))\n        return 1;\n" .
        "    cf->model_config = buf;\n    return 0;\n}\n";
    my @inj = config_parses($ckpt_fns || 'ct_hf_model_config', %inj);
    print(((grep { m{^engine/models/model\.c:\d+: parses --model-config text in ct_model_hf_config} } @inj) &&
           (grep { m{^engine/cli/cmd_fit\.c:\d+: derives a model config through the checkpoint code \(ct_hf_model_config\)} } @inj) &&
           (grep { m{^engine/cli/cmd_fit\.c:\d+: rewrites --model-config in init_from_config} } @inj) ? "ok" : "not ok") .
          " 34 - check 33 fails on the old flow written back (model.c's parse, cmd_fit.c's rewrite)\n");
    print "# injected: $_\n" for @inj;
}

# 35. A precision is one row: its number formats (a struct ct_precision_ops) are written in its row
#     in engine/registry/precisions.c and nowhere else in engine/, envs/, pmix/, spank/ (no second
#     table to keep in step, no enum naming the rows).
# 36. Check 35 fails on a precision's formats written into a strategy.
sub precision_formats {
    my (%src) = @_;
    my @bad;
    delete $src{'engine/registry/precisions.c'};
    each_line(sub {
        my ($f, $n, $line) = @_;
        push @bad, "$f:$n: a precision's formats outside its row: $line"
            if $line =~ /struct\s+ct_precision_ops\s*(\w+\s*(\[[^]]*\])?\s*=|\)\s*\{)/ ||
               $line =~ /(?<![\w)\]])\.(param_dtype|gemm_dtype|loss_scaling)\s*=[^=]/ || $line =~ /\bCT_PRECISION_\w+\b/;
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^(engine|envs|pmix)/} } @files, glob('spank/*.[ch]'));
    my @bad = precision_formats(%src);
    print((@bad ? "not ok" : "ok") . " 35 - a precision's number formats are written in its row only (" .
          scalar(keys %src) . " files)\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/strategies/create.c'} .= "\nstatic const struct ct_precision_ops p16 = {\n    .param_dtype = CT_DTYPE_F16 };\n";
    my @inj = precision_formats(%inj);
    print(((grep { m{^engine/strategies/create\.c:} } @inj) == 2 ? "ok" : "not ok") .
          " 36 - check 35 fails on a precision's formats written into a strategy\n");
    print "# injected: $_\n" for @inj;
}

# 37. Files are opened through engine/util/fsutil.h only (issue 48 item 1): what ctrain reads from a
#     path is a regular file opened without blocking (ct_fs_open_input, ct_fs_read_input), what it
#     writes a fresh exclusive temp renamed into place or a file checked as its own
#     (ct_fs_create_temp, ct_fs_write_atomic, ct_fs_open_output). No other open, openat, fopen,
#     creat, mkstemp, mkostemp or freopen in engine/, envs/, pmix/, except a directory (O_DIRECTORY),
#     a literal path under /proc, /sys or /dev, and the functions below, each with its reason.
# 38. Check 37 fails on the hang record's old writer (open of a fixed temp name) written back.
my %opens_allowed = (
    'engine/launchers/proc_supervisor.c is_stopped' => '/proc/PID/stat of a rank',
    'engine/health/nodecheck.c process_name'   => 'PROC/PID/comm (the /proc root a test may replace)',
    'engine/health/nodecheck.c hca_active'     => 'SYSFS/class/infiniband/*/ports/*/state',
    'engine/health/nodecheck.c mem_available_mb' => 'PROC/meminfo',
    'engine/loggers/logger.c trim_rows'        => '/proc/self/fd/N: the descriptor ct_fs_open_output checked, read back',
    'engine/loggers/tensorboard.c cut_file'    => '/proc/self/fd/N: the descriptor ct_fs_open_output checked, read back',
    'engine/data/datamodule.c id_file'         => 'the data identity: O_NONBLOCK, fstat, a FIFO or device makes it unidentifiable',
    'pmix/server.c read_proc'                  => '/proc/PID/task/TID/{stat,wchan} of a rank',
);
sub file_opens {
    my (%src) = @_;
    my (@bad, %in);
    delete $src{'engine/util/fsutil.c'};
    each_line(sub {
        my ($f, $n, $line) = @_;
        $in{$f} = $1 if $line =~ /^[a-z][\w\s\*]*?\b(\w+)\s*\(/;
        my $fn = $in{$f} // '';
        return unless $line =~ /(?<![\w>.])(open|openat|fopen|creat|mkstemp|mkostemp|mkstemps|freopen)\s*\(/;
        return if $line =~ /^[a-z]/;    # a definition (ct_idx_open(...) is not open(...))
        return if $line =~ /O_DIRECTORY/ || $line =~ /\b$1\s*\(\s*"\/(proc|sys|dev)\//;
        return if exists $opens_allowed{"$f $fn"};
        push @bad, "$f:$n: $1 outside engine/util/fsutil.h's helpers in $fn: $line";
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^(engine|envs|pmix)/.*\.(c|cc)$} } @files, glob('engine/*/*.cc'));
    my @bad = file_opens(%src);
    my @unused = grep { my ($f, $fn) = split / /; !exists $src{$f} || $src{$f} !~ /\b\Q$fn\E\s*\(/ } sort keys %opens_allowed;
    print((@bad || @unused ? "not ok" : "ok") . " 37 - files are opened through engine/util/fsutil.h's helpers only (" .
          scalar(keys %src) . " files, " . scalar(keys %opens_allowed) . " functions allowed with their reasons)\n");
    print "# $_\n" for @bad;
    print "# allowed, but no such function: $_\n" for @unused;
    my %inj = %src;
    $inj{'engine/health/fit/hang.c'} .= "\nstatic int dump_tmp(const char *tmp)\n{\n" .
        "    return open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);\n}\n";
    my @inj = file_opens(%inj);
    print(((grep { m{^engine/health/fit/hang\.c:\d+: open outside .* in dump_tmp} } @inj) == 1 ? "ok" : "not ok") .
          " 38 - check 37 fails on the hang record's old writer written back\n");
    print "# injected: $_\n" for @inj;
}

# --- issue 51 item 1: the loops reach what watches a fit through the callback table alone -----
# 39. engine/loops/ includes no header of the loggers, the checkpoint code, the fit's health checks
#     or the callbacks themselves (engine/loggers, engine/checkpoint, engine/health/fit,
#     engine/callbacks) and calls no function those headers declare: the run's table
#     (engine/run/callbacks.h) is the one way out. No getenv in the loops either (a test's hook is
#     a callback, read once when the Trainer attaches it). And no engine/ file is placed in a
#     module by hand (%file_module): the layering holds without exceptions.
# 40. Check 39 fails on the old calls written back (step.c's hang phase, its test hook, the
#     header).
my $watcher_dirs = qr{^engine/(loggers|checkpoint|health/fit|callbacks)/};
my %watcher_fns;
{
    my %hdr = slurp(grep { m{$watcher_dirs} && /\.h$/ } @files);
    for my $h (values %hdr) {
        my $text = strip_comments($h);
        $watcher_fns{$1} = 1 while $text =~ /^[a-z][\w\s\*]*?\b(ct_\w+)\s*\(/mg;
    }
}
sub loops_reach_watchers {
    my ($fns, %src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        return if $line =~ m{^\s*//};
        push @bad, "$f:$n: includes a watcher's header: $line" if $line =~ /^\s*#\s*include\s+"(engine\/[^"]+)"/ && $1 =~ $watcher_dirs;
        while ($line =~ /\b(ct_\w+)\s*\(/g) {
            push @bad, "$f:$n: calls $1 (not through the callback table): $line" if $fns->{$1};
        }
        push @bad, "$f:$n: reads the environment in a loop: $line" if $line =~ /\bgetenv\s*\(/;
    }, %src);
    return @bad;
}
{
    my %loops_src = slurp(grep { m{^engine/loops/} } @files);
    my @bad = loops_reach_watchers(\%watcher_fns, %loops_src);
    push @bad, "t/90's %file_module places $_ by hand" for grep { m{^engine/} } sort keys %file_module;
    print((@bad || keys(%watcher_fns) < 10 ? "not ok" : "ok") . " 39 - the loops reach the loggers, checkpoints and watchers " .
          "through the callback table only (" . scalar(keys %loops_src) . " files, " . scalar(keys %watcher_fns) .
          " functions of theirs)\n");
    print "# $_\n" for @bad;
    my %inj = %loops_src;
    $inj{'engine/loops/step.c'} .= "\n#include \"engine/health/fit/hang.h\"\nstatic void data(ct_run *run)\n{\n" .
        "    ct_hang_enter(CT_PHASE_DATA);\n    if (getenv(\"CTRAIN_TEST_DATA_STALL\"))\n        sleep(60);\n}\n";
    my @inj = loops_reach_watchers(\%watcher_fns, %inj);
    print(((grep { m{^engine/loops/step\.c:\d+: includes a watcher's header} } @inj) &&
           (grep { m{^engine/loops/step\.c:\d+: calls ct_hang_enter} } @inj) &&
           (grep { m{^engine/loops/step\.c:\d+: reads the environment} } @inj) ? "ok" : "not ok") .
          " 40 - check 39 fails on the hang phase, the test hook and the header written back into step.c\n");
    print "# injected: $_\n" for @inj;
}

# 41. No circle among the files of the fit's health checks and of ctrain supervise (engine/health/fit,
#     engine/supervise): an edge A -> B when A calls a function B defines (as check 18). hang.c
#     prints diagnose.c's diagnosis after a timeout; the phases both use are phase.c's, below both
#     (hang.c <-> diagnose.c was the tree's one circle, issue 51).
# 42. Check 41 fails on the circle written back (diagnose.c calling into hang.c).
# 43. ctrain supervise decides from records, not from the ranks' words: no file of engine/supervise
#     or engine/cli/cmd_supervise.c names a phrase the ranks print for people ("did not arrive", the
#     straggler's stop line), outside comments and the help text; fails on the old scan written back.
{
    my %src = slurp(grep { m{^engine/(health/fit|supervise)/[^/]+\.c$} } @files);
    my @circles = call_circles(%src);
    print((@circles ? "not ok" : "ok") . " 41 - no circle among engine/health/fit's and engine/supervise's files (" .
          scalar(keys %src) . " files)\n");
    print "# calls in a circle: $_\n" for @circles;
    my %inj = %src;
    $inj{'engine/health/fit/diagnose.c'} .= "\nstatic void injected(void) { ct_hang_dump(\"signal\"); }\n";
    my @inj = call_circles(%inj);
    print(((grep { /diagnose\.c/ && /hang\.c/ } @inj) && exists $src{'engine/health/fit/hang.c'} ? "ok" : "not ok") .
          " 42 - check 41 fails on the circle written back (diagnose.c calling hang.c)\n");
    print "# injected: $_\n" for @inj;
}
sub rank_phrases {
    my (%src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        return if $f =~ /cmd_supervise\.c$/ && $line =~ /^\s*"/;    # the help text says what records say
        push @bad, "$f:$n: reads a rank's printed words: $line"
            if $line =~ /\b(strstr|strncmp|strcmp|sscanf|memcmp|strcasestr)\s*\(.*("[^"]*(did not arrive|is behind|straggler: node)|CT_LINE_STRAGGLER_STOPS)/;
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/supervise/} || $_ eq 'engine/cli/cmd_supervise.c' } @files);
    my @bad = rank_phrases(%src);
    my %inj = %src;
    $inj{'engine/supervise/decide.c'} .= "\nstatic void scan_arrive(struct ct_sv *s, const char *line)\n{\n" .
        "    const char *p = strstr(line, \"did not arrive (on \");\n}\n";
    my @inj = rank_phrases(%inj);
    print((!@bad && keys(%src) > 5 && (grep { m{^engine/supervise/decide\.c:\d+: } } @inj) ? "ok" : "not ok") .
          " 43 - ctrain supervise names no phrase of the ranks' output (" . scalar(keys %src) . " files; fails on the old scan written back)\n");
    print "# $_\n" for @bad;
}

# --- one collectives layer under every strategy (issue 51 item 2) --------------------------------
# ddp and ddp_sharded keep the buckets and their overlap and call engine/collectives' table: no
# line of their code (comments and message strings aside) names a library (mpi, gloo, nccl, MPI_,
# CT_HAVE_*, their headers), and ddp.c stays at most 600 lines.
sub backend_branches {
    my (%src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        (my $code = $line) =~ s/"(?:[^"\\]|\\.)*"/""/g;
        $code =~ s{//.*}{};
        push @bad, "$f:$n: names a collectives library: $line"
            if $code =~ /\b(mpi|gloo|nccl)\w*\b|\bMPI_|\bCT_HAVE_|\bct_(gloo|nccl)_/i || $line =~ /^\s*#\s*include\s*[<"](mpi|gloo|nccl)/;
    }, %src);
    for my $f (grep { m{/ddp\.c$} } sort keys %src) {
        my $lines = () = $src{$f} =~ /\n/g;
        push @bad, "$f: $lines lines (at most 600: the buckets and their overlap only)" if $lines > 600;
    }
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/strategies/ddp\w*\.[ch]$} } @files);
    my @bad = backend_branches(%src);
    print((@bad || !exists $src{'engine/strategies/ddp.c'} ? "not ok" : "ok") . " 44 - ddp and ddp_sharded name no " .
          "collectives library (" . scalar(keys %src) . " files; ddp.c " . (() = ($src{'engine/strategies/ddp.c'} // '') =~ /\n/g) .
          " lines): they call engine/collectives' table\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/strategies/ddp.c'} = "#include <mpi.h>\n" . ("\n" x 600) . "    if (d->gloo)\n        return 0;\n";
    my @inj = backend_branches(%inj);
    print((@inj == 3 ? "ok" : "not ok") . " 45 - check 44 fails on an MPI include, a gloo branch and a ddp.c of 600 lines more\n");
    print "# injected: $_\n" for @inj;
}

# --- each function declared once (issue 51, smaller items) ---------------------------------------
# A function of ctrain's (ct_*) has one prototype among the headers of engine/, envs/, pmix/ and
# include/ctrain: two copies drift apart unseen (ct_nccl_* were declared both in nccl_lib.h and in
# the CUDA module's header). A file-static or a macro is not a prototype; a function pointer member
# (`(*name)(`) is not one either.
sub twice_declared {
    my (%src) = @_;
    my (%where, @bad);
    for my $f (sort grep { /\.h$/ } keys %src) {
        my $text = strip_comments($src{$f});
        $text =~ s/^\s*#[^\n]*(?:\\\n[^\n]*)*//mg;
        while ($text =~ /^[A-Za-z_][\w \t*]*?\b(ct_\w+)\s*\(/mg) {
            push @{$where{$1}}, $f;
        }
    }
    for my $name (sort keys %where) {
        my @at = @{$where{$name}};
        push @bad, "$name: declared in " . join(', ', @at) if @at > 1;
    }
    return @bad;
}
{
    my %src = slurp(grep { /\.h$/ } @files);
    my @bad = twice_declared(%src);
    print((@bad ? "not ok" : "ok") . " 46 - every ct_* function is declared in one header (" . scalar(keys %src) . " headers)\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/accelerators/cuda_module.h'} .= "\nint ct_nccl_wait(ct_nccl *n, ct_error *err);\n";
    my @inj = twice_declared(%inj);
    print((@inj == 1 && $inj[0] =~ /^ct_nccl_wait: /? "ok" : "not ok") .
          " 47 - check 46 fails on ct_nccl_wait declared again in cuda_module.h\n");
    print "# injected: $_\n" for @inj;
}

# --- no CLI file over 300 lines (issue 51) --------------------------------------------------------
# A command's file parses its flags and calls the library; what grows past 300 lines is a library's
# (ctrain generate's token draw went to engine/nn/sample.c; the Trainer's flags to its table,
# engine/trainer/flags.c).
sub long_cli_files {
    my (%src) = @_;
    my @bad;
    for my $f (sort keys %src) {
        my $lines = () = $src{$f} =~ /\n/g;
        push @bad, "$f: $lines lines (at most 300)" if $lines > 300;
    }
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/cli/[^/]+\.c$} } @files);
    my @bad = long_cli_files(%src);
    print((@bad || keys(%src) < 5 ? "not ok" : "ok") . " 48 - no CLI file over 300 lines (" . scalar(keys %src) .
          " files)\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/cli/cmd_generate.c'} .= "\n" x 30;
    my @inj = long_cli_files(%inj);
    print((@inj == 1 ? "ok" : "not ok") . " 49 - check 48 fails on cmd_generate.c at 30 lines more\n");
    print "# injected: $_\n" for @inj;
}

# --- a model on a CUDA device: the seam's side written once (issue 51, smaller items) --------------
# engine/models/cuda_model.c holds the model ops of every model on a CUDA device; a model's
# *_cuda_model.c gives only its device table (struct ct_cuda_model_dev) and never a ct_model_ops of
# its own (gpt_cuda_model.c and mlp_cuda_model.c were near copies of one another), and the
# optimizers' element updates on a device are engine/nn/cuda_optim.cuh's (no .cu writes AdamW's
# moment update itself).
sub device_copies {
    my (%src) = @_;
    my @bad;
    for my $f (sort keys %src) {
        my $code = strip_comments($src{$f});
        push @bad, "$f: a struct ct_model_ops of its own (cuda_model.c's serves)"
            if $f =~ m{_cuda_model\.c$} && $code =~ /\bstruct\s+ct_model_ops\b/;
        push @bad, "$f: AdamW's moment update written out (engine/nn/cuda_optim.cuh's ct_cuda_adamw_update)"
            if $f =~ /\.cu$/ && $code =~ /\(1\.0f\s*-\s*b1\)/;
    }
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/models/\w+_cuda_model\.c$} || m{^engine/models/.*\.cu$} } @files);
    my @bad = device_copies(%src);
    print((@bad || keys(%src) < 4 ? "not ok" : "ok") . " 50 - the models on a CUDA device share cuda_model.c and " .
          "cuda_optim.cuh (" . scalar(keys %src) . " files)\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/models/mlp_cuda_model.c'} .= "\nstatic const struct ct_model_ops cuda_ops = { 0 };\n";
    $inj{'engine/models/mlp/mlp_cuda.cu'} .= "\n        m[i] = b1 * m[i] + (1.0f - b1) * gi;\n";
    my @inj = device_copies(%inj);
    print((@inj == 2 ? "ok" : "not ok") . " 51 - check 50 fails on a ct_model_ops in mlp_cuda_model.c and AdamW written " .
          "out in mlp_cuda.cu\n");
    print "# injected: $_\n" for @inj;
}

# --- checkpoints typed once, restored one way down, written in the background by a wrapper (issue 51 item 5)
# 52. A checkpoint's metadata is written and read by one field table (engine/checkpoint/meta.c: key,
#     type, default, what must match): no header of engine/checkpoint or checkpoint_io.h declares a
#     function that reads or writes one entry by its key (const char *key), and no file of engine/,
#     envs/ or pmix/ but meta.c and engine/checkpoint_io/ (which serialises the entries whole, naming
#     none) touches a checkpoint's entries (meta[], n_meta). Every key the table names is written
#     once there.
# 53. Check 52 fails on the old accessors written back (format.h's ct_ckpt_meta_get, checkpoint.c's
#     ct_ckpt_meta_add, the Trainer's ct_run_checkpoint_meta).
# 54. No save decides by a file's name whether it goes to the background: engine/checkpoint,
#     engine/callbacks, engine/strategies and engine/checkpoint_io compare no path with a checkpoint's
#     file name ("last.safetensors", "best.safetensors"), the strategy has one save (no
#     ..._save_checkpoint_async) and no thread of its own for checkpoints: the background writer is a
#     wrapper of the checkpoint IO (engine/checkpoint_io/async.c, Lightning's AsyncCheckpointIO).
# 55. Check 54 fails on the old choice written back (checkpoint.c's is_last, the strategy's _async save).
# 56. A restore runs checkpoint -> strategy -> checkpoint IO once, one way down: from
#     ct_ckpt_connector_restore through engine/trainer's functions, one call into engine/checkpoint's
#     API (it reads the metadata once and checks it whole); and nothing below engine/checkpoint
#     (the strategies, the collectives, checkpoint IO) calls a function engine/checkpoint defines.
# 57. Check 56 fails on the old restore written back (the auto job's metadata read, the loads, the
#     --deterministic check's reads) and on a strategy calling back up.
sub ckpt_meta_access {
    my (%src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        return if $f eq 'engine/checkpoint/meta.c';
        push @bad, "$f:$n: declares a metadata accessor by key: $line"
            if $f =~ m{^(engine/checkpoint/[^/]+|include/ctrain/checkpoint_io)\.h$} &&
               $line =~ /^[a-z][\w\s\*]*\b(ct_\w+)\s*\(.*\bconst\s+char\s*\*\s*key\b/;
        push @bad, "$f:$n: touches a checkpoint's metadata entries outside meta.c: $line"
            if $f !~ m{^engine/checkpoint_io/} && $f !~ m{^include/} &&
               ($line =~ /(?:->|\.)meta\s*\[|(?:->|\.)n_meta\b/ || $line =~ /\bct_ckpt_meta_(?:get|add)\s*\(/);
        push @bad, "$f:$n: reads a checkpoint's metadata by key: $line"
            if $line =~ /\bct_\w*checkpoint_meta\s*\(/ && $line !~ /^[a-z]/;
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^(engine|envs|pmix)/} || m{^include/ctrain/checkpoint_io\.h$} } @files);
    my @bad = ckpt_meta_access(%src);
    my $table = $src{'engine/checkpoint/meta.c'} // '';
    my @keys = $table =~ /^\s*\[CT_CKPT_F_\w+\]\s*=\s*\{\s*"(\w+)"/mg;
    my %seen;
    push @bad, "engine/checkpoint/meta.c: the table names $_ twice" for grep { $seen{$_}++ == 1 } @keys;
    push @bad, "engine/checkpoint/meta.c: no field table (rows [CT_CKPT_F_...] = { \"key\", ... })" if @keys < 20;
    print((@bad ? "not ok" : "ok") . " 52 - checkpoint metadata is written and read by meta.c's table alone (" .
          scalar(@keys) . " keys, " . scalar(keys %src) . " files)\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/checkpoint/format.h'} .= "\nconst char *ct_ckpt_meta_get(const ct_ckpt *c, const char *key);\n";
    $inj{'engine/checkpoint/checkpoint.c'} .= "\nstatic void add(ct_ckpt *c) { ct_ckpt_meta_add(c, \"epoch\", \"%d\", 1); }\n";
    $inj{'engine/trainer/checkpoint_connector.c'} .= "\nstatic int w(ct_run *run, char *b) {\n" .
        "    return ct_run_checkpoint_meta(run, \"p\", \"slurm_job_id\", b, 64, NULL);\n}\n";
    my @inj = ckpt_meta_access(%inj);
    print(((grep { m{^engine/checkpoint/format\.h:\d+: declares} } @inj) &&
           (grep { m{^engine/checkpoint/checkpoint\.c:\d+: touches} } @inj) &&
           (grep { m{^engine/trainer/checkpoint_connector\.c:\d+: reads} } @inj) ? "ok" : "not ok") .
          " 53 - check 52 fails on the old accessors written back\n");
    print "# injected: $_\n" for @inj;
}
sub async_by_name {
    my (%src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        return if $line =~ m{^\s*//};
        push @bad, "$f:$n: compares a path with a checkpoint's file name: $line"
            if $line =~ /\b(?:strcmp|strncmp|strcasecmp|strstr|memcmp|fnmatch)\s*\(.*"(?:[^"]*\/)?(?:last|best)(?:\.safetensors)?"/;
        push @bad, "$f:$n: a second save for the background: $line" if $line =~ /\bct_strategy_save_checkpoint_async\b/;
        push @bad, "$f:$n: a checkpoint thread outside checkpoint IO: $line"
            if $f =~ m{^engine/strategies/} && $line =~ /\bpthread_create\s*\(/;
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/(checkpoint|callbacks|strategies|checkpoint_io)/} || $_ eq 'include/ctrain/strategy.h' } @files);
    my @bad = async_by_name(%src);
    push @bad, "engine/checkpoint_io/async.c: no asynchronous wrapper of the checkpoint IO"
        unless ($src{'engine/checkpoint_io/async.c'} // '') =~ /->inner->save\s*\(/;
    print((@bad ? "not ok" : "ok") . " 54 - no save decides by a file's name whether it goes to the background: " .
          "the checkpoint IO's wrapper writes it (" . scalar(keys %src) . " files)\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/checkpoint/checkpoint.c'} .= "\nstatic int is_last(const char *path)\n{\n    const char *base = strrchr(path, '/');\n\n" .
        "    return !strcmp(base ? base + 1 : path, \"last.safetensors\");\n}\n";
    $inj{'include/ctrain/strategy.h'} .= "\nint ct_strategy_save_checkpoint_async(ct_strategy *s, const char *path, const ct_ckpt *ckpt, ct_error *err);\n";
    $inj{'engine/strategies/async_ckpt.c'} = "static int start(struct w *a)\n{\n    return pthread_create(&a->t, NULL, main, a);\n}\n";
    my @inj = async_by_name(%inj);
    print((@inj == 3 ? "ok" : "not ok") . " 55 - check 54 fails on is_last, the _async save and a strategy's writer thread written back\n");
    print "# injected: $_\n" for @inj;
}
# The functions each file defines (not static ones only: every definition at column 0), and each
# function's body (comments stripped).
sub fn_bodies {
    my (%src) = @_;
    my (%body, %file);
    for my $f (sort keys %src) {
        my $text = strip_comments($src{$f});
        while ($text =~ /^(?:static\s+)?[a-z][\w\s\*]*?\b(\w+)\s*\(([^;{]*?)\)\s*\n\{\n(.*?)^\}/msg) {
            $body{$1} = $3;
            $file{$1} = $f;
        }
    }
    return (\%body, \%file);
}
sub restore_entries {
    my ($api, %src) = @_;
    my ($body, $file) = fn_bodies(%src);
    my (%seen, @sites);
    my @pending = ('ct_ckpt_connector_restore');
    while (defined(my $fn = shift @pending)) {
        next if $seen{$fn}++ || !exists $body->{$fn};
        while ($body->{$fn} =~ /\b(\w+)\s*\(/g) {
            my $callee = $1;
            if ($api->{$callee}) {
                push @sites, "$file->{$fn}: $fn calls $callee";
            } elsif (exists $body->{$callee}) {
                push @pending, $callee;
            }
        }
    }
    return @sites;
}
sub calls_up {
    my ($defined, %src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        while ($line =~ /\b(ct_\w+)\s*\(/g) {
            push @bad, "$f:$n: calls $1 (engine/checkpoint, a level above): $line" if $defined->{$1} && $line !~ /^[a-z]/;
        }
    }, %src);
    return @bad;
}
{
    my %ckpt = slurp(grep { m{^engine/checkpoint/} } @files);
    my (%api, %defined);
    for my $f (grep { /\.h$/ } keys %ckpt) {
        my $text = strip_comments($ckpt{$f});
        $api{$1} = 1 while $text =~ /^[a-z][\w\s\*]*?\b(ct_\w+)\s*\(/mg;
    }
    my ($cbody) = fn_bodies(%ckpt);
    $defined{$_} = 1 for grep { /^ct_/ } keys %$cbody;
    my %trainer = slurp(grep { m{^engine/trainer/[^/]+\.c$} } @files);
    my @sites = restore_entries(\%api, %trainer);
    my %below = slurp(grep { m{^engine/(strategies|collectives|checkpoint_io|models|nn|accelerators|launchers|envs|registry|util)/} } @files);
    my @up = calls_up(\%defined, %below);
    my @bad = (@up, @sites == 1 ? () : map({ "a restore enters engine/checkpoint again: $_" } @sites));
    push @bad, "no call from ct_ckpt_connector_restore into engine/checkpoint found" unless @sites;
    print((@bad ? "not ok" : "ok") . " 56 - a restore runs checkpoint -> strategy -> checkpoint IO once, one way down (" .
          join('; ', @sites) . ")\n");
    print "# $_\n" for @bad;
    my %inj = %trainer;
    $inj{'engine/trainer/checkpoint_connector.c'} =~ s/(int ct_ckpt_connector_restore\([^)]*\)\n\{\n)/$1    ct_run_restore_checkpoint(run, "a", NULL, err);\n/;
    $inj{'engine/trainer/deterministic.c'} = "int ct_deterministic_check_resume(ct_run *run, const char *path, ct_error *err)\n{\n" .
        "    return ct_run_restore_checkpoint(run, path, NULL, err);\n}\n";
    $inj{'engine/trainer/checkpoint_connector.c'} =~ s/(int ct_ckpt_connector_restore\([^)]*\)\n\{\n)/$1    ct_deterministic_check_resume(run, "a", err);\n/;
    my @inj = restore_entries(\%api, %inj);
    my %inj_below = %below;
    $inj_below{"engine/strategies/strategy.c"} .= "\nstatic void up(ct_run *r)\n{\n    ct_run_checkpoint_free(r);\n}\n";
    my @inj_up = calls_up(\%defined, %inj_below);
    print((@inj >= 3 && (grep { m{deterministic\.c} } @inj) && (grep { m{^engine/strategies/strategy\.c:\d+: calls ct_run_checkpoint_free} } @inj_up)
           ? "ok" : "not ok") . " 57 - check 56 fails on the old restore's extra entries and on a strategy calling back up\n");
    print "# injected: $_\n" for @inj, @inj_up;
}

# --- typed once (issue 51 item 4) -----------------------------------------------------------------
# An exit status comes from the error's outcome (enum ct_outcome, ct_error_exit), never from its id:
# no file of the CLI compares an error id's text.
sub id_compares {
    my (%src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        push @bad, "$f:$n: compares an error id: $line"
            if $line =~ /\b(strcmp|strncmp|strstr|memcmp)\s*\(\s*[\w.>-]*\b(err|error|e)\s*(\.|->)\s*id\b/;
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/cli/} } @files);
    my @bad = id_compares(%src);
    print((@bad || !exists $src{'engine/cli/cmd_fit.c'} ? "not ok" : "ok") . " 58 - no CLI file chooses an exit " .
          "status from an error id's text (" . scalar(keys %src) . " files): ct_error_exit reads the outcome\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/cli/cmd_fit.c'} .= "\n    if (rc && !strcmp(err.id, \"fit-loss-nonfinite\"))\n        return 3;\n";
    my @inj = id_compares(%inj);
    print((@inj == 1 ? "ok" : "not ok") . " 59 - check 58 fails on cmd_fit's old id compare written back\n");
    print "# injected: $_\n" for @inj;
}

# The plan holds its parts as descriptors (issue 51 item 4), as it holds the model and the data
# module: ct_plan has no name field for the accelerator, strategy, precision, launcher or checkpoint
# IO, and outside the catalogue (engine/connector, engine/registry) nothing looks one of them up by
# name (a variant's base aside: the registry's own link).
sub plan_names {
    my (%src) = @_;
    my @bad;
    if (($src{'include/ctrain/connector.h'} // '') =~ /typedef struct ct_plan \{(.*?)\} ct_plan;/s) {
        my $body = $1;
        push @bad, "include/ctrain/connector.h: ct_plan holds the $1 as a name"
            while $body =~ /\bchar\s+(accelerator|strategy|precision|launcher|checkpoint_io)\s*\[/g;
    } else {
        push @bad, "include/ctrain/connector.h: no struct ct_plan";
    }
    each_line(sub {
        my ($f, $n, $line) = @_;
        return if $f =~ m{^engine/(connector|registry)/} || $f =~ m{^include/};
        push @bad, "$f:$n: looks a plan part up by name: $line"
            if ($line =~ /\bct_registry_find\s*\(\s*(CT_REG_(STRATEGY|ACCELERATOR|PRECISION|LAUNCHER|CHECKPOINT_IO)|kind)\s*,(?!\s*[\w.]*(->|\.)base\b)/) ||
               $line =~ /\bct_registry_accel_bit\s*\(/;
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/} || $_ eq 'include/ctrain/connector.h' } @files);
    my @bad = plan_names(%src);
    print((@bad ? "not ok" : "ok") . " 60 - the plan holds descriptors, not names: nothing outside the catalogue " .
          "looks a strategy, accelerator, precision, launcher or checkpoint IO up by name\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'include/ctrain/connector.h'} =~ s/(typedef struct ct_plan \{)/$1\n    char accelerator[32];/;
    $inj{'engine/strategies/create.c'} .= "\n    const ct_registry_entry *e = ct_registry_find(kind, name);\n";
    $inj{'engine/strategies/strategy.c'} .= "\n    const ct_registry_entry *e = ct_registry_find(CT_REG_STRATEGY, s->name);\n";
    my @inj = plan_names(%inj);
    print((@inj == 3 ? "ok" : "not ok") . " 61 - check 60 fails on a name in the plan and the old look-ups written back\n");
    print "# injected: $_\n" for @inj;
}

# A strategy's options are typed once, into the plan (issue 51 item 4): one ct_config_parse on a
# strategy's option schema in the tree (the connector's ct_connector_strategy_defaults); the
# strategy reads the plan's strategy_config.
sub option_parses {
    my (%src) = @_;
    my @found;
    each_line(sub {
        my ($f, $n, $line) = @_;
        push @found, "$f:$n: $line" if $line =~ /\bct_config_parse\s*\([^;]*option_schema/;
    }, %src);
    return @found;
}
{
    my %src = slurp(grep { m{^engine/} } @files);
    my @found = option_parses(%src);
    print((@found == 1 && $found[0] =~ m{^engine/connector/} ? "ok" : "not ok") . " 62 - strategy options are " .
          "parsed once, in the connector (" . scalar(@found) . " parse)\n");
    print "# $_\n" for @found;
    my %inj = %src;
    $inj{'engine/strategies/strategy.c'} .= "\n    return ct_config_parse(e ? e->option_schema : NULL, \"--strategy\", s->name, s->options, out, err);\n";
    my @inj = option_parses(%inj);
    print((@inj == 2 ? "ok" : "not ok") . " 63 - check 62 fails on strategy.c's parse by name written back\n");
}

# The collective timeout is the plan's, set once at the strategy's creation (issue 51 item 4): no
# setter after creation, and only create.c assigns a strategy's collective_timeout_s.
sub timeout_sets {
    my (%src) = @_;
    my @bad;
    each_line(sub {
        my ($f, $n, $line) = @_;
        push @bad, "$f:$n: sets the collective timeout after creation: $line"
            if $line =~ /\bct_strategy_set_collective_timeout\b/ ||
               ($line =~ /(?<!plan)->\s*collective_timeout_s\s*=[^=]/ && $f ne 'engine/strategies/create.c');
    }, %src);
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/} || m{^include/ctrain/} } @files);
    my @bad = timeout_sets(%src);
    print((@bad ? "not ok" : "ok") . " 64 - the collective timeout is set once, from the plan, when the strategy is created\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/trainer/trainer.c'} .= "\n    ct_strategy_set_collective_timeout(s, job->cfg->collective_timeout);\n";
    $inj{'engine/strategies/strategy.c'} .= "\n    s->collective_timeout_s = seconds;\n";
    my @inj = timeout_sets(%inj);
    print((@inj == 2 ? "ok" : "not ok") . " 65 - check 64 fails on the setter and its calls written back\n");
    print "# injected: $_\n" for @inj;
}

# The Trainer's flags come from one table (issue 51 item 4: engine/trainer/flags.c, each row a
# ct_config_key and its field): the CLI and the Trainer compare no flag name to a literal (--help
# aside) and no choice's value to a literal name (they ask the table's choices), the optimizer's
# name is read once, and engine/cli/trainer_flags.c stays at most 300 lines.
sub flag_strings {
    my (%src) = @_;
    my @bad;
    my $parses = 0;
    each_line(sub {
        my ($f, $n, $line) = @_;
        push @bad, "$f:$n: compares a flag name: $line" if $line =~ /\bstrn?cmp\s*\([^;]*"--(?!help")[a-z]/;
        push @bad, "$f:$n: compares a choice by name: $line"
            if $line =~ /\bstrn?cmp\s*\(\s*cfg\s*->\s*(optimizer|lr_schedule|on_straggler|gradient_clip_algorithm|mode)\b/;
        $parses++ if $line =~ /\bct_optim_parse_kind\s*\(/;
    }, %src);
    push @bad, "engine/trainer: ct_optim_parse_kind called $parses times (once: the optimizer's maker)" if $parses != 1;
    my $lines = () = ($src{'engine/cli/trainer_flags.c'} // '') =~ /\n/g;
    push @bad, "engine/cli/trainer_flags.c: $lines lines (at most 300)" if $lines > 300;
    return @bad;
}
{
    my %src = slurp(grep { m{^engine/trainer/} || $_ eq 'engine/cli/trainer_flags.c' } @files);
    my @bad = flag_strings(%src);
    print((@bad || !exists $src{'engine/trainer/flags.c'} ? "not ok" : "ok") . " 66 - the Trainer's flags are parsed, " .
          "checked and recorded from one table (trainer_flags.c " . (() = ($src{'engine/cli/trainer_flags.c'} // '') =~ /\n/g) .
          " lines)\n");
    print "# $_\n" for @bad;
    my %inj = %src;
    $inj{'engine/cli/trainer_flags.c'} .= ("\n" x 300) . "    if (!strcmp(f->name, \"--max-epochs\")) cfg->max_epochs = (int)l;\n";
    $inj{'engine/trainer/config.c'} .= "\n    if (strcmp(cfg->lr_schedule, \"cosine\") && strcmp(cfg->lr_schedule, \"constant\")) {\n" .
        "    if (ct_optim_parse_kind(cfg->optimizer, &kind)) {\n";
    my @inj = flag_strings(%inj);
    print((@inj == 4 ? "ok" : "not ok") . " 67 - check 66 fails on the old flag chain, choice compares and second optimizer parse written back\n");
    print "# injected: $_\n" for @inj;
}
