# The compiler's libraries form a layered graph: each library's sources
# include only the headers of libraries it links (directly or through
# them), and no library links itself back. Checked at configure time so
# that a dependency that links "by accident of object order" fails the
# configure instead (issue 13).
#
# A library sluice/<Dir>/... header belongs to Sluice<Dir>; its sources
# are lib/<Dir>/*.cpp and include/sluice/<Dir>/*.h.

# The Sluice* libraries `target` links, transitively, into `out`; a
# library reached again while on the path is a cycle.
function(_sluice_link_closure target path out)
  if(target IN_LIST path)
    list(APPEND path ${target})
    string(REPLACE ";" " -> " cycle "${path}")
    message(FATAL_ERROR "library cycle: ${cycle}")
  endif()
  list(APPEND path ${target})
  get_target_property(links ${target} LINK_LIBRARIES)
  set(closure)
  if(links)
    foreach(link IN LISTS links)
      if(link MATCHES "^Sluice[A-Za-z]+$" AND TARGET ${link})
        list(APPEND closure ${link})
        _sluice_link_closure(${link} "${path}" below)
        list(APPEND closure ${below})
      endif()
    endforeach()
  endif()
  list(REMOVE_DUPLICATES closure)
  set(${out} ${closure} PARENT_SCOPE)
endfunction()

function(sluice_check_layering)
  foreach(dir IN LISTS ARGN)
    set(library Sluice${dir})
    _sluice_link_closure(${library} "" closure)
    file(GLOB_RECURSE sources ${PROJECT_SOURCE_DIR}/lib/${dir}/*.cpp
                      ${PROJECT_SOURCE_DIR}/include/sluice/${dir}/*.h)
    foreach(source IN LISTS sources)
      file(STRINGS ${source} includes
           REGEX "^#include \"sluice/[A-Za-z]+/")
      foreach(line IN LISTS includes)
        string(REGEX MATCH "sluice/([A-Za-z]+)/" _ "${line}")
        set(used Sluice${CMAKE_MATCH_1})
        if(NOT used STREQUAL library AND NOT used IN_LIST closure)
          file(RELATIVE_PATH where ${PROJECT_SOURCE_DIR} ${source})
          message(FATAL_ERROR
            "${where} includes ${line} but ${library} does not link "
            "${used}: add it to ${library}'s link line, or move the code "
            "to a library both link")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()

# Libraries that must not link MLIR (the IR-free layers): none of them, nor
# any Sluice library they link, may list an MLIR library or the dialect.
function(sluice_check_ir_free)
  foreach(library IN LISTS ARGN)
    _sluice_link_closure(${library} "" closure)
    foreach(target IN ITEMS ${library} ${closure})
      get_target_property(links ${target} LINK_LIBRARIES)
      foreach(link IN LISTS links)
        if(link MATCHES "^MLIR|^SluiceDialect$|libMLIR")
          message(FATAL_ERROR "${library} must link no MLIR, but ${target} "
                              "links ${link}")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
