# Families (lib/Families) and block features (lib/Blocks) are found by the
# build, one folder each, so that adding one is adding a folder. This is
# that search, written once.
#
#   sluice_find_folders(<sources-var> BASE <dir> FILES <glob> MACRO <name>
#                       OUTPUT <file> [REQUIRED])
#
# For each folder directly under BASE: its files matching FILES are
# appended to <sources-var>, and a line `MACRO(folder)` to OUTPUT (in the
# current binary dir; rewritten only when it changes, so that nothing
# rebuilds for an unchanged list), which the registry includes. With
# REQUIRED, a folder without such a file is an error; without it, the
# folder is passed over.
function(sluice_find_folders sources_var)
  cmake_parse_arguments(ARG "REQUIRED" "BASE;FILES;MACRO;OUTPUT" "" ${ARGN})
  file(GLOB dirs LIST_DIRECTORIES true CONFIGURE_DEPENDS ${ARG_BASE}/*)
  set(sources ${${sources_var}})
  set(list "")
  foreach(dir IN LISTS dirs)
    if(NOT IS_DIRECTORY ${dir})
      continue()
    endif()
    get_filename_component(name ${dir} NAME)
    file(GLOB found CONFIGURE_DEPENDS ${dir}/${ARG_FILES})
    if(NOT found)
      if(ARG_REQUIRED)
        message(FATAL_ERROR "${dir} holds no ${ARG_FILES}: each folder there "
                "defines what ${ARG_MACRO}(${name}) names")
      endif()
      continue()
    endif()
    list(APPEND sources ${found})
    string(APPEND list "${ARG_MACRO}(${name})\n")
  endforeach()
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/${ARG_OUTPUT}
       CONTENT "${list}")
  set(${sources_var} ${sources} PARENT_SCOPE)
endfunction()
