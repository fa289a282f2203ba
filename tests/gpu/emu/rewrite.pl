#!/usr/bin/perl
# CUDA C++ -> host C++ for the CUDA emulator: every kernel launch
#   name<<<grid, block, shmem, stream>>>(args);
# becomes
#   EMU_LAUNCH(name, (grid, block, shmem, stream), args);
# every cudaLaunchKernelEx(config, name, args) becomes
#   EMU_LAUNCH_EX(config, name, args)
# and every declaration of dynamic shared memory
#   extern __shared__ T name[];
# becomes a pointer to the running block's:
#   T *const name = (T *)emu_dynamic_shared();
# Line breaks inside a launch are kept, so the output has the source's line
# count, and a #line directive names the source: compiler messages and
# debuggers point at the .cu file. A file without launches (the backend's
# table, its memory) is copied as it is.
# Usage: rewrite.pl SOURCE.cu OUT.cpp
use strict;
use warnings;
die "usage: rewrite.pl SOURCE.cu OUT.cpp\n" unless @ARGV == 2;
my ($path, $out_path) = @ARGV;
open(my $in, '<', $path) or die "rewrite.pl: $path: $!\n";
my $s = do { local $/; <$in> };
close($in);
$s =~ s/(\w+)<<<(.*?)>>>\((.*?)\);/EMU_LAUNCH($1, ($2), $3);/gs;
$s =~ s/\bcudaLaunchKernelEx\(/EMU_LAUNCH_EX(/g;
$s =~ s/\bextern\s+__shared__\s+([\w ]+?)\s*(\w+)\s*\[\s*\]\s*;/$1 *const $2 = ($1 *)emu_dynamic_shared();/g;
die "rewrite.pl: a launch left unrewritten in $path\n" if $s =~ /<<</;
die "rewrite.pl: shared memory left unrewritten in $path\n" if $s =~ /\bextern\s+__shared__/;
open(my $out, '>', $out_path) or die "rewrite.pl: $out_path: $!\n";
print $out "#line 1 \"$path\"\n$s";
close($out) or die "rewrite.pl: $out_path: $!\n";
