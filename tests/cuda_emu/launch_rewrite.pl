#!/usr/bin/perl
# launch_rewrite.pl IN OUT - rewrites CUDA's launch syntax k<<<cfg>>>(args)
# in a kernels/cuda .cu file into emu_launch(emu_cfg(cfg), k, args), the
# form cuda_emu.h compiles as host C++. Writes OUT only when it changed.
use strict;
use warnings;
my ($in, $out) = @ARGV;
die "usage: launch_rewrite.pl IN OUT\n" unless defined $out;
open(my $f, '<', $in) or die "launch_rewrite.pl: cannot read $in: $!\n";
local $/;
my $src = <$f>;
close($f);
$src =~ s/(\w+)<<<(.*?)>>>\(/emu_launch(emu_cfg($2), $1, /gs;
my $text = "#line 1 \"$in\"\n" . $src;
open(my $o, '>', "$out.tmp") or die "launch_rewrite.pl: cannot write $out.tmp: $!\n";
print $o $text;
close($o) or die "launch_rewrite.pl: cannot write $out.tmp: $!\n";
rename("$out.tmp", $out) or die "launch_rewrite.pl: cannot rename to $out: $!\n";
