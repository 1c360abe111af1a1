#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# `ctrain env --json` on a real SLURM: slurmctld and two slurmd, each on a host of its own (network namespaces)
# (scripts/slurm-cluster), srun -N2 -n4 with and without --mpi=pmix, two steps of one job, the
# flags checked against the step, a salloc shell, and srun --pty with one task (a shell) and with
# four (a step like any other; script(1) gives srun the terminal --pty needs). Every rank's fields are checked. The cluster
# is stopped by pid at exit, also when a check fails or the test is interrupted.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use JSON::PP;

chdir(dirname($0) . "/..") or die "cd: $!";
my $root = abs_path(".");
my $ctrain = "$root/" . ($ENV{CTRAIN_BUILD} // "build") . "/ctrain";

sub skip_all {
    print "1..0 # SKIP $_[0]\n";
    exit 0;
}
skip_all("needs root to start slurmd (run make test as root)") if $> != 0;
for my $b (qw(slurmctld slurmd srun salloc munged)) {
    # In CI (.ci/run) scripts/install-deps --ci installed them: missing there is a failure (t/lib/ci.sh).
    print("Bail out! $b not installed: CI installs it (scripts/install-deps --ci)\n"), exit 1
        if ($ENV{CI} // '') eq 'true' && !grep { -x "$_/$b" } split(/:/, "$ENV{PATH}:/usr/sbin:/sbin");
    skip_all("$b not installed (scripts/install-deps installs slurm-wlm and munge)")
        unless grep { -x "$_/$b" } split(/:/, "$ENV{PATH}:/usr/sbin:/sbin");
}
die "$ctrain is not built (run make)\n" unless -x $ctrain;

my $dir = tempdir("/tmp/ctrain-slurm.XXXXXX");
my $started = 0;
END {
    my $st = $?;
    if ($started) {
        system("$root/scripts/slurm-cluster", "stop", $dir);
        print "# stopped the cluster in $dir\n";
    }
    system("rm", "-rf", $dir) if $dir && -d $dir;
    $? = $st;
}
$SIG{INT} = $SIG{TERM} = $SIG{HUP} = sub { die "interrupted\n" };

$started = 1;
my $rc = system("$root/scripts/slurm-cluster", "start", $dir, "--nodes", "2") >> 8;
if ($rc == 3) {
    $started = 0;
    skip_all("scripts/slurm-cluster cannot run here (see its message above)");
}
die "scripts/slurm-cluster start failed (status $rc); logs in $dir/log\n" if $rc;
delete $ENV{$_} for grep { /^(SLURM_|PMIX_|OMPI_|MASTER_|TORCHELASTIC_|CTRAIN_LAUNCHER_)/ } keys %ENV;
$ENV{SLURM_CONF} = "$dir/slurm.conf";

my $n = 0;
my @plan;
sub ok {
    my ($cond, $name, @diag) = @_;
    $n++;
    print(($cond ? "ok" : "not ok"), " $n - $name\n");
    print map { "#   $_\n" } @diag unless $cond;
    return $cond;
}

sub plain {
    my ($v) = @_;
    return 'null' unless defined $v;
    return $v ? 'true' : 'false' if JSON::PP::is_bool($v);
    return "$v";
}

# The JSON each task wrote to $dir/out/<tag>.<t>, by task.
sub task_outputs {
    my ($tag) = @_;
    my @json;
    for my $f (sort glob("$dir/out/$tag.*")) {
        my ($t) = $f =~ /\.(\d+)$/;
        open(my $fh, '<', $f) or die "$f: $!";
        local $/;
        my $text = <$fh>;
        close($fh);
        $json[$t] = eval { JSON::PP->new->decode($text) } // { _raw => $text };
    }
    return @json;
}

# Run a command under timeout; stdout of task t goes to $dir/out/<tag>.<t>.
sub srun_env {
    my ($tag, @cmd) = @_;
    mkdir "$dir/out";
    unlink glob("$dir/out/$tag.*");
    my $st = system("timeout", "120", @cmd) >> 8;
    return ($st, task_outputs($tag));
}

# Rank 0's host as SLURM's PMIx plugin names it: the node name (n1) in SLURM 22.05, the node's
# NodeHostname (this machine's name, which every emulated node has) in SLURM 24.11.
chomp(my $node_hostname = `hostname`);

# Check every rank of a step of 4 tasks on n1,n2 (ranks 0,1 on n1; 2,3 on n2).
sub check_ranks {
    my ($label, $want_port, $rank_source, @json) = @_;
    my @bad;
    push @bad, "got output from " . scalar(grep { defined } @json) . " task(s), want 4" if @json != 4;
    for my $r (0 .. 3) {
        my $j = $json[$r] or next;
        my %want = (cluster_env => 'slurm', world_size => 4, global_rank => $r, local_rank => $r % 2,
                    node_rank => int($r / 2), num_nodes => 2, local_world_size => 2, main_address => 'n1',
                    equal_tasks_per_node => 'true', slurm_context => 'step', 'validation.ok' => 'true',
                    main_port => $want_port, job_id => $json[0]{job_id});
        for my $k (sort keys %want) {
            my $v = $j;
            $v = $v->{$_} for split /\./, $k;
            next if $k eq 'main_address' && $rank_source eq 'PMIx' && plain($v) eq $node_hostname;
            push @bad, "rank $r: $k is '" . plain($v) . "', want '$want{$k}'" if plain($v) ne plain($want{$k});
        }
        push @bad, "rank $r: sources.global_rank is '" . ($j->{sources}{global_rank} // '') . "', want it to start with '$rank_source'"
            if index($j->{sources}{global_rank} // '', $rank_source) != 0;
        push @bad, "rank $r: output is not JSON: $j->{_raw}" if $j->{_raw};
    }
    return ok(!@bad, $label, @bad);
}

# include/ctrain/envs.h's port rule.
sub port_for { my ($job, $step) = @_; return 15000 + ((($job * 2654435761 + $step * 2246822519) & 0xffffffff) >> 18) }

print "1..10\n";

# 1-2: plain srun.
my ($st, @json) = srun_env("plain", "srun", "-N2", "-n4", "--output=$dir/out/plain.%t", $ctrain, "env", "--json");
ok($st == 0, "srun -N2 -n4 ctrain env --json exits 0", "exit status $st");
my $job = $json[0] ? $json[0]{job_id} // 0 : 0;
check_ranks("srun -N2 -n4: every rank's fields (job $job, step 0)", port_for($job, 0), 'SLURM_PROCID', @json);

# 3: srun --mpi=pmix: the same layout. When the build registers pmix (libctrain's pmix/), it
# enriches slurm and its values, asked from slurmd's PMIx server, must agree with SLURM's.
($st, @json) = srun_env("pmix", "srun", "-N2", "-n4", "--mpi=pmix", "--output=$dir/out/pmix.%t", $ctrain, "env",
                        "--json");
$job = $json[0] ? $json[0]{job_id} // 0 : 0;
my $enriched = plain($json[0] ? $json[0]{enriched_by} : undef);
print "# srun --mpi=pmix: enriched_by is $enriched\n";
check_ranks("srun -N2 -n4 --mpi=pmix: every rank's fields, enriched_by $enriched (exit $st)", port_for($job, 0),
            $enriched eq 'pmix' ? 'PMIx' : 'SLURM_PROCID', @json)
    or print "#   exit status $st\n";

# 4: flags that fit the step.
($st, @json) = srun_env("fit", "srun", "-N2", "-n4", "--output=$dir/out/fit.%t", $ctrain, "env", "--json",
                        "--devices", "2", "--num-nodes", "2");
ok($st == 0 && 4 == grep({ $_ && plain($_->{validation}{ok}) eq 'true' } @json),
   "--devices 2 --num-nodes 2 fit -N2 -n4 on every rank", "exit status $st");

# 5: --devices 4 against 2 tasks per node: every rank refuses with the hint.
($st, @json) = srun_env("misfit", "srun", "-N2", "-n4", "--output=$dir/out/misfit.%t", "--error=/dev/null",
                        $ctrain, "env", "--json", "--devices", "4");
my @hints = map { $_ ? ($_->{validation}{hint} // '') : '' } @json;
ok($st != 0 && 4 == grep({ $_ eq 'use --ntasks-per-node=4, or --devices 2' } @hints),
   "--devices 4 with 2 tasks per node: every rank fails with the hint", "exit status $st", map { "hint: $_" } @hints);

# 6-7: two concurrent steps of one job get different ports, both from the rule.
my $script = "$dir/steps.sh";
open(my $fh, '>', $script) or die "$script: $!";
print $fh "#!/bin/sh\n",
    "srun -N2 -n2 --output=$dir/out/stepA.%t $ctrain env --json &\n",
    "srun -N2 -n2 --output=$dir/out/stepB.%t $ctrain env --json &\n",
    "wait\n";
close($fh);
chmod 0755, $script;
unlink glob("$dir/out/step*");
$st = system("timeout", "120", "salloc", "-N2", "-n4", "--quiet", $script) >> 8;
my @steps;
for my $tag ("stepA", "stepB") {
    for my $f (glob("$dir/out/$tag.*")) {
        open(my $in, '<', $f) or die "$f: $!";
        local $/;
        my $j = eval { JSON::PP->new->decode(scalar <$in>) };
        push @steps, $j if $j;
    }
}
my %port_of_step;
my @bad;
for my $j (@steps) {
    my ($port, $jid) = ($j->{main_port}, $j->{job_id});
    push @bad, "job_id $jid differs" if $jid ne $steps[0]{job_id};
    push @bad, "port $port is neither step 0's nor step 1's" if $port != port_for($jid, 0) && $port != port_for($jid, 1);
    $port_of_step{$port}++;
}
ok($st == 0 && @steps == 4 && !@bad, "two steps of one job: 4 tasks read the same job id", "exit status $st",
   "tasks: " . scalar(@steps), @bad);
ok(keys(%port_of_step) == 2 && !grep({ $_ != 2 } values %port_of_step),
   "two steps of one job: different main ports, the same within a step",
   "ports: " . join(", ", map { "$_ x$port_of_step{$_}" } sort keys %port_of_step));

# 8: a salloc shell is an allocation, not a step: local, with the note.
my $out = `timeout 60 salloc -N1 -n1 --quiet $ctrain env --json 2>&1`;
my $j = eval { JSON::PP->new->decode($out) };
ok($j && $j->{cluster_env} eq 'local' && $j->{slurm_context} eq 'allocation' && $j->{world_size} == 1,
   "salloc shell: cluster_env local, slurm_context allocation", "output: $out");

# 9: srun -N2 -n4 --pty is a step like any other: every task reads it from SLURM (only task 0 has
# the terminal; --pty takes no --output, so each task writes its own file).
sub pty_env {
    my ($tag, $srun_args) = @_;
    unlink glob("$dir/out/$tag.*");
    my $inner = "$ctrain env --json > $dir/out/$tag.\$SLURM_PROCID 2>&1";
    # script copies the terminal's bytes to its stdout: keep them out of the TAP stream.
    open(my $saved, '>&', \*STDOUT) or die "dup stdout: $!";
    open(STDOUT, '>', '/dev/null') or die "/dev/null: $!";
    my $st = system("timeout", "120", "script", "-qec", "srun $srun_args --pty sh -c '$inner'", "/dev/null") >> 8;
    open(STDOUT, '>&', $saved) or die "restore stdout: $!";
    return ($st, task_outputs($tag));
}
($st, @json) = pty_env("pty4", "-N2 -n4");
$job = $json[0] ? $json[0]{job_id} // 0 : 0;
check_ranks("srun -N2 -n4 --pty: every rank's fields from the step (exit $st)", port_for($job, 0), 'SLURM_PROCID',
            @json);

# 10: srun -n1 --pty is a person's shell: local, interactive.
($st, @json) = pty_env("pty1", "-N1 -n1");
$j = $json[0];
ok($st == 0 && $j && ($j->{cluster_env} // '') eq 'local' && ($j->{slurm_context} // '') eq 'interactive',
   "srun -n1 --pty: cluster_env local, slurm_context interactive", "exit status $st",
   "output: " . ($j ? encode_json($j) : 'none'));
