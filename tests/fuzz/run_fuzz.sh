#!/usr/bin/env bash
# Builds the frame fuzzer with clang (libFuzzer + ASan + UBSan) and runs it briefly.
#   run_fuzz.sh SOURCE_DIR BUILD_DIR SECONDS
set -euo pipefail
src=$1 out=$2 secs=${3:-20}
mkdir -p "$out"
bin=$out/frame_fuzz
if [[ ! -x $bin || -n $(find "$src/emulator/link" "$src/tests/fuzz" -newer "$bin" -name '*.[ch]pp' | head -1) ]]; then
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$src" "$src/tests/fuzz/frame_fuzz.cpp" "$src/emulator/link/frame.cpp" \
    "$src/emulator/link/tt_link.cpp" "$src/emulator/link/fault_injector.cpp" -lisal -o "$bin"
fi
corpus=$out/corpus
mkdir -p "$corpus"
exec "$bin" -max_total_time="$secs" -seed=1 -print_final_stats=1 "$corpus"
