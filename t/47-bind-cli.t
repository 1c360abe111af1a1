#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# ctrain bind: the JSON an admin (and the SPANK plugin's tests) read, and bad input.
use strict;
use warnings;
use JSON::PP;
use File::Basename qw(dirname);

my $root = dirname(__FILE__) . "/..";
my $ctrain = "$root/" . ($ENV{CTRAIN_BUILD} // "build") . "/ctrain";
my $topo = "$root/t/fixtures/topologies";
my $n = 0;
my $failed = 0;
sub ok { my ($c, $name) = @_; $n++; print(($c ? "ok" : "not ok") . " $n - $name\n"); $failed ||= !$c; }

print "1..8\n";
my $out = `$ctrain bind --topology $topo/nvidia-dgx2.xml --tasks 4 --json`;
ok($? == 0, "ctrain bind --topology dgx2 --tasks 4 --json exits 0");
my $plan = eval { decode_json($out) } // {};
my @t = @{ $plan->{tasks} // [] };
ok(@t == 4, "four tasks in the JSON");
ok(!grep({ my $x = $_; grep { !exists $x->{$_} } qw(local_rank cpus gpus cuda_visible_devices nic threads reason) } @t),
   "every task has local_rank, cpus, gpus, cuda_visible_devices, nic, threads, reason");
ok(join(",", @{ $t[1]{gpus} }) eq "nvml4,nvml5,nvml6,nvml7" && !defined $t[1]{nic},
   "task 1: GPUs nvml4..7 (PCI order), nic null (the DGX-2 file has no NIC)");

$out = `$ctrain bind --topology $topo/32em64t-2n8c2t-pci-wholeio.xml --tasks 2 --json`;
$plan = eval { decode_json($out) } // {};
my $t1 = $plan->{tasks}[1] // {};
ok(($t1->{nic} // "") eq "mlx5_0" && ($t1->{cuda_visible_devices} // "") eq "0" && @{ $t1->{cpus} // [] } == 16,
   "dual socket: task 1 gets cuda0 (CUDA index 0), mlx5_0 and socket 1's 16 PUs");

my $err = `$ctrain bind --topology $topo/nvidia-dgx2.xml --tasks 2 --gpus 16 2>&1`;
ok(($? >> 8) == 2 && $err =~ /^ctrain: error: GPU '16'/m && $err =~ /^ctrain: hint: this node has 16 GPUs/m,
   "an unknown GPU: exit 2, named, with a hint");
$err = `$ctrain bind --topology /nonexistent.xml --tasks 2 2>&1`;
ok($? != 0 && $err =~ m{ctrain: error: topology file '/nonexistent.xml'}, "a missing topology file is named");
$err = `$ctrain bind --tasks 0 2>&1`;
ok(($? >> 8) == 2 && $err =~ /--tasks '0'/, "--tasks 0 is refused with exit 2");
exit $failed;
