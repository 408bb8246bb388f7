# The layer map of docs/architecture.md, checked: each folder may include only from the folders
# listed for it (those below it). An include from anywhere else (upward, or sideways into a
# sibling) fails the test, naming the file and the include.
#
#   cmake -DROOT=<source dir> -P tests/check_layers.cmake
cmake_minimum_required(VERSION 3.20)
set(layers
  "emulator/common:"
  "emulator/job:emulator/common"
  "emulator/transport:emulator/common"
  "emulator/routing:emulator/common,emulator/transport"
  "emulator/control:emulator/common,emulator/transport,emulator/routing"
  "emulator/wire:emulator/common"
  "emulator/link:emulator/common,emulator/transport,emulator/routing,emulator/wire"
  "emulator/session:emulator/common,emulator/transport,emulator/routing"
  "emulator/chip:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/wire,emulator/link,emulator/session"
  "emulator/node:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/wire,emulator/link,emulator/session,emulator/chip"
  "emulator/sim:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/control,emulator/wire,emulator/link,emulator/session,emulator/chip,emulator/node"
  "emulator/process:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/wire,emulator/link,emulator/session,emulator/chip,emulator/node"
  "libfabric_tt:emulator/common,emulator/job,emulator/routing,emulator/chip"
  "tools/viz:emulator/common,emulator/transport,emulator/routing,emulator/control"
  "launcher:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/control,emulator/wire,emulator/link,emulator/session,emulator/chip,emulator/node,emulator/process,tools/viz"
  "tools/bench:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/control,emulator/wire,emulator/link,emulator/session,emulator/chip,emulator/node,emulator/process,libfabric_tt,launcher"
  "tools/traffic:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/control,emulator/wire,emulator/link,emulator/session,emulator/chip,emulator/node,emulator/sim,emulator/process,tools/viz,launcher,libfabric_tt"
  "tools/campaign:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/control,emulator/wire,emulator/link,tools/viz,launcher"
  "cli:emulator/common,emulator/job,emulator/transport,emulator/routing,emulator/control,emulator/wire,emulator/link,emulator/session,emulator/chip,emulator/node,emulator/sim,emulator/process,tools/viz,launcher,libfabric_tt,tools/traffic,tools/campaign"
)
set(checked_prefixes emulator libfabric_tt launcher tools cli)
set(failures "")
set(files_checked 0)
foreach(entry IN LISTS layers)
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 folder)
  list(LENGTH parts n)
  set(allowed "${folder}")
  if(n GREATER 1)
    list(GET parts 1 below)
    string(REPLACE "," ";" below "${below}")
    list(APPEND allowed ${below})
  endif()
  file(GLOB_RECURSE sources "${ROOT}/${folder}/*.cpp" "${ROOT}/${folder}/*.hpp" "${ROOT}/${folder}/*.h")
  foreach(source IN LISTS sources)
    math(EXPR files_checked "${files_checked} + 1")
    file(STRINGS "${source}" includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" path "${line}")
      string(REGEX MATCH "^[a-z_]+" top "${path}")
      if(NOT top IN_LIST checked_prefixes)
        continue()  # a system or library header
      endif()
      set(ok FALSE)
      foreach(a IN LISTS allowed)
        string(FIND "${path}" "${a}/" at)
        if(at EQUAL 0)
          set(ok TRUE)
        endif()
      endforeach()
      if(NOT ok)
        file(RELATIVE_PATH rel "${ROOT}" "${source}")
        string(APPEND failures "  ${rel} includes ${path}: ${folder}/ may include only ${allowed}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(files_checked LESS 50)
  message(FATAL_ERROR "only ${files_checked} files found under ${ROOT}: is ROOT the source directory?")
endif()
if(failures)
  message(FATAL_ERROR "includes against the layer map (docs/architecture.md):\n${failures}")
endif()
message(STATUS "${files_checked} files follow the layer map")
