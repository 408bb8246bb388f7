#!/usr/bin/env bash
# Builds one libFuzzer target with clang (libFuzzer + ASan + UBSan) and runs it briefly.
#   run_fuzz.sh SOURCE_DIR BUILD_DIR SECONDS [TARGET]
# TARGET: frame (the frame parser and a TT-link end; the default), control (the launcher's
# control-socket request handler, launcher/control_requests.cpp, against a stub system) or
# fault_plan (the fault plan parser, emulator/link/fault_plan.cpp).
set -euo pipefail
src=$1 out=$2 secs=${3:-20} target=${4:-frame}
case $target in
  frame)
    sources=("$src/tests/fuzz/frame_fuzz.cpp" "$src/emulator/link/frame.cpp" "$src/emulator/link/tt_link.cpp" "$src/emulator/link/planted_defect.cpp"
             "$src/emulator/link/fault_injector.cpp")
    libs=(-lisal) watch=("$src/emulator/link") flags=() seeds=() ;;
  control)
    sources=("$src/tests/fuzz/control_fuzz.cpp" "$src/launcher/control_requests.cpp")
    libs=(-lfmt) watch=("$src/launcher" "$src/emulator/common")
    flags=(-dict="$src/tests/fuzz/control.dict" -max_len=4096) seeds=("$src/tests/fuzz/control_seeds") ;;
  fault_plan)
    sources=("$src/tests/fuzz/fault_plan_fuzz.cpp" "$src/emulator/link/fault_plan.cpp" "$src/emulator/routing/address.cpp")
    libs=(-lyaml-cpp -lfmt) watch=("$src/emulator/link" "$src/emulator/common" "$src/emulator/routing")
    flags=(-max_len=2048) seeds=("$src/tests/fuzz/fault_plan_seeds") ;;
  *) echo "run_fuzz.sh: unknown target '$target' (frame, control, fault_plan)" >&2; exit 2 ;;
esac
mkdir -p "$out"
bin=$out/${target}_fuzz
if [[ ! -x $bin || -n $(find "${watch[@]}" "$src/tests/fuzz" -newer "$bin" -name '*.[ch]pp' | head -1) ]]; then
  clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I"$src" "${sources[@]}" "${libs[@]}" -o "$bin"
fi
corpus=$out/${target}_corpus
mkdir -p "$corpus"
exec "$bin" -max_total_time="$secs" -seed=1 -print_final_stats=1 "${flags[@]}" "$corpus" "${seeds[@]}"
