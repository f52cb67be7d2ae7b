#!/bin/sh
# tests/fuzz/seeds.sh: seed corpora for the fuzz harnesses, made from small
# valid files: IDX and CIFAR files written here, the experiment INI files, a
# safetensors file, the shipped model descriptions (with their parameters set
# after a NUL byte) and one with every layer kind and key, format texts (every
# built-in format with parameters, a plugin (never loaded) and [format NAME]
# sections), and the trace and checkpoint of a 1-epoch adapt-train run
# on the IDX files (./adapt-train of the build directory, when built).
#   tests/fuzz/seeds.sh OUTDIR          (run from the build directory)
set -eu
out=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$out"
mkdir -p "$out/idx" "$out/cifar" "$out/safetensors" "$out/ini" "$out/trace" "$out/data" \
  "$out/format" "$out/model"

# be32 N: four big-endian bytes
# byte N: one byte of value N (0..255)
byte() { printf "\\$(printf %03o "$1")"; }
be32() {
  byte $(($1 >> 24 & 255)); byte $(($1 >> 16 & 255)); byte $(($1 >> 8 & 255)); byte $(($1 & 255))
}
# bytes N C: N bytes of value C (octal)
bytes() { head -c "$1" /dev/zero | tr '\0' "\\$2"; }

idx_pair() { # dir tag n
  { be32 2051; be32 "$3"; be32 28; be32 28; bytes $(($3 * 784)) 123; } > "$1/$2-images-idx3-ubyte"
  { be32 2049; be32 "$3"; i=0; while [ $i -lt "$3" ]; do byte $((i % 10)); i=$((i + 1)); done; } \
    > "$1/$2-labels-idx1-ubyte"
}
idx_pair "$out/idx" small 2
gzip -9 -c "$out/idx/small-images-idx3-ubyte" > "$out/idx/small-images.gz"
gzip -9 -c "$out/idx/small-labels-idx1-ubyte" > "$out/idx/small-labels.gz"

# CIFAR-10: two records (label byte + 3072 pixels), as a batch and an archive;
# CIFAR-100: two records with coarse and fine labels
mkdir -p "$out/c/cifar-10-batches-bin" "$out/c/cifar-100-binary"
{ printf '\003'; bytes 3072 101; printf '\007'; bytes 3072 141; } \
  > "$out/c/cifar-10-batches-bin/test_batch.bin"
{ printf '\001\021'; bytes 3072 101; printf '\002\042'; bytes 3072 141; } \
  > "$out/c/cifar-100-binary/test.bin"
cp "$out/c/cifar-10-batches-bin/test_batch.bin" "$out/cifar/test_batch.bin"
(cd "$out/c" && tar -czf "$out/cifar/c10.tar.gz" cifar-10-batches-bin &&
 tar -czf "$out/cifar/c100.tar.gz" cifar-100-binary)
rm -rf "$out/c"

# safetensors: an F32 vector, an I64 scalar and metadata
h='{"__metadata__":{"format":"adapt-sim checkpoint 1","epoch":"1"},'
h=$h'"a.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
h=$h'"a.num_batches_tracked":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}'
while [ $((${#h} % 8)) -ne 0 ]; do h="$h "; done
{ byte $((${#h} & 255)); byte $((${#h} >> 8 & 255)); bytes 6 000
  printf %s "$h"; printf '\000\000\200\077\000\000\000\300'; printf '\005'; bytes 7 000; } \
  > "$out/safetensors/small.safetensors"

cp "$src"/experiments/configs/*.ini "$out/ini/"

# format texts (fuzz_format: the first line; the rest an INI file with [format NAME] sections)
i=0
for f in fixed 'fixed(8,4)' 'fixed(32,31)' 'fixed(1,0)' 'fixed(5,9)' 'fixed(16,0)' bfp 'bfp(8)' \
  'bfp(2)' 'bfp(32)' muppet 'muppet(12)' 'muppet(2)' fp16 bf16 e4m3 e5m2 'float(5,10)' \
  'float(8,23)' 'float(2,1)' 'float(4,3,nan=fn)' 'float(5,2,ovf=inf)' 'float(2,1,nan=none)' \
  'float(4,3,bias=8,nan=fn,sub=0,ovf=sat)' 'float(5,2,bias=-20,nan=fn,ovf=inf)' \
  'float(6,4,bias=127)' 'float(7,20,bias=40,ovf=inf)' ' float ( 3 , 2 , sub = 0 ) ' \
  mxfp8_e4m3 mxfp8_e5m2 mxfp6_e2m3 mxfp6_e3m2 mxfp4 mxint8 'plugin(/nonexistent/rule.so:rule)'; do
  printf '%s' "$f" > "$out/format/text$i"
  i=$((i + 1))
done
printf 'myfp8\n[format myfp8]\nkind = float\nexp_bits = 4\nman_bits = 3\nbias = 8\n'\
'subnormals = true\noverflow = saturate\nnan = fn\n' > "$out/format/section_float"
printf 'q8\n[format q8]\nkind = fixed\nwl = 8\nfl = 5\n' > "$out/format/section_fixed"
printf 'wide\n[format wide]\nkind = float\nexp_bits = 8\nman_bits = 2\nsubnormals = false\n'\
'overflow = inf\n[format tiny]\nkind = float\nexp_bits = 2\nman_bits = 1\nnan = none\n' \
  > "$out/format/sections"
{ echo e4m3_b11; cat "$src/experiments/configs/fmnist_lenet5_custom_format.ini"; } \
  > "$out/format/custom_format_ini"

# model descriptions: the text, then optionally a NUL byte and the model arguments
cp "$src"/models/*.model "$out/model/"
with_args() { # file args
  { cat "$src/models/$1.model"; printf '\000%s' "$2"; } > "$out/model/$1-$2"
}
with_args resnet depth=32
with_args resnet depth=8
with_args vgg depth=11
with_args mlp hidden=100
with_args alexnet_cifar channels=1
cat > "$out/model/every_kind.model" <<'MODEL'
# every layer kind and key
model every_kind
param width = 4
input 3 12 12
let w2 = width * 2
conv2d stem out=w2 k=3 stride=1 pad=1 bias=1 in_channels=3 groups=1 dilation=1
batchnorm2d bn eps=1e-3 momentum=0.2
relu r0
label trunk
conv2d dw out=w2 k=3 pad=2 dilation=2 groups=w2 bias=0
relu6 r6
conv2d pw out=width k=1
hardswish hs
sigmoid sg in=trunk
tanh th
gelu ge approximate=tanh
gelu ge2 in=hs approximate=none
maxpool2d mp in=ge2 k=3 stride=2 pad=1
avgpool2d ap in=th k=3 stride=2 pad=1 count_include_pad=0
conv2d sq in=ap out=width k=1
add sum in=mp,sq
concat cat in=sum,mp,sq
dropout dr p=0.25
repeat i = 0..1
  if i == 0
    conv2d blk{i} out=8 k=1
  else
    conv2d blk{i}.b out=8 k=1
  end
end
require width % 2 == 0 "width must be even"
avgpool2d gap global=1
flatten fl
linear fc out=classes bias=1 in_features=8
loss softmax_xent
MODEL
{ cat "$out/model/every_kind.model"; printf '\000width=6'; } > "$out/model/every_kind-width=6"

# a short run: trace (cut to a few records) and checkpoint
if [ -x ./adapt-train ]; then
  idx_pair "$out/data" train 60
  idx_pair "$out/data" t10k 20
  cat > "$out/run.ini" <<INI
[run]
seed = 1
threads = 1
[data]
dataset = fashion-mnist
path = $out/data
val_size = 10
[model]
name = lenet5
[train]
epochs = 1
batch = 25
[policy]
name = adapt
INI
  ./adapt-train --config "$out/run.ini" --out "$out/run" --quiet > /dev/null
  head -n 3 "$out/run/trace.jsonl" > "$out/trace/short.jsonl"
  cp "$out/run/trace.jsonl" "$out/trace/run.jsonl"
  cp "$out/run/config.ini" "$out/ini/run.ini"
  rm -rf "$out/run" "$out/run.ini"
fi
rm -rf "$out/data"
