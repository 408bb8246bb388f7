// Where chip processes run under `ttemu launch --cpu-bind blocks` (docs/fabric.md#cpu-binding).
// A host's chips are put in an order whose contiguous runs are compact blocks of their meshes,
// so that cutting the order into as many runs as the host has CPUs (process::cpu_share) puts
// neighbours on one CPU and leaves few links between CPUs: a chip that wakes a neighbour on its
// own CPU costs a context switch, one on another CPU an interprocessor interrupt as well.
#pragma once

#include <vector>

#include "emulator/control/system.hpp"

namespace ttemu::control {

// `nodes` (node indices of `sys`) in locality order: a mesh at a time (by mesh id), and inside a
// mesh by recursive halving along its longest side among the chips of the half (columns before
// rows before layers on a tie). On a 4x8 mesh the first 16 are columns 0-3, and each run of 8
// is a 4x2 block. Every node once; the result does not depend on the order of `nodes`.
std::vector<int> locality_order(const System& sys, std::vector<int> nodes);

}  // namespace ttemu::control
