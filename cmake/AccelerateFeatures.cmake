# Tri-state feature switches (AUTO / ON / OFF) and the configure summary.
#
#   accelerate_feature(HDF5 "parallel HDF5 checkpoints")
#     declares the cache variable ACCELERATE_WITH_HDF5 (default AUTO).
#   accelerate_feature_resolve(HDF5 <found> "<why not>" "<what to install>")
#     turns it into ACCELERATE_HAVE_HDF5 (0/1). ON with a missing dependency
#     stops the configuration with the install hint; AUTO falls back to off
#     and records why, so the summary never hides a disabled feature.

set(_ACCELERATE_FEATURES "" CACHE INTERNAL "")

function(accelerate_feature name doc)
  set(ACCELERATE_WITH_${name} AUTO CACHE STRING "${doc} (AUTO, ON or OFF)")
  set_property(CACHE ACCELERATE_WITH_${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${ACCELERATE_WITH_${name}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR
      "ACCELERATE_WITH_${name}='${ACCELERATE_WITH_${name}}' is not one of AUTO, ON, OFF.")
  endif()
  set(_ACCELERATE_FEATURES "${_ACCELERATE_FEATURES};${name}" CACHE INTERNAL "")
  set(_ACCELERATE_DOC_${name} "${doc}" CACHE INTERNAL "")
endfunction()

# True when the user did not switch the feature off, i.e. it is worth looking for.
macro(accelerate_feature_wanted name out)
  string(TOUPPER "${ACCELERATE_WITH_${name}}" _want)
  if(_want STREQUAL "OFF")
    set(${out} FALSE)
  else()
    set(${out} TRUE)
  endif()
endmacro()

function(accelerate_feature_resolve name found why_not install_hint)
  string(TOUPPER "${ACCELERATE_WITH_${name}}" want)
  if(want STREQUAL "OFF")
    set(have 0)
    set(reason "disabled with -DACCELERATE_WITH_${name}=OFF")
  elseif(found)
    set(have 1)
    set(reason "${why_not}")
  elseif(want STREQUAL "ON")
    message(FATAL_ERROR
      "ACCELERATE_WITH_${name}=ON but ${why_not}.\n"
      "Install it (${install_hint}) or configure with -DACCELERATE_WITH_${name}=AUTO/OFF.")
  else()
    set(have 0)
    set(reason "${why_not}; install ${install_hint} to enable")
  endif()
  set(ACCELERATE_HAVE_${name} ${have} PARENT_SCOPE)
  set(_ACCELERATE_REASON_${name} "${reason}" CACHE INTERNAL "")
  set(_ACCELERATE_HAVE_${name} ${have} CACHE INTERNAL "")
endfunction()

function(accelerate_feature_summary)
  message(STATUS "")
  message(STATUS "Accelerate-HPC ${PROJECT_VERSION} features:")
  foreach(name IN LISTS _ACCELERATE_FEATURES)
    if(NOT name)
      continue()
    endif()
    if(_ACCELERATE_HAVE_${name})
      set(state "ON ")
    else()
      set(state "OFF")
    endif()
    string(LENGTH "${name}" len)
    math(EXPR pad "11 - ${len}")
    set(spaces "")
    if(pad GREATER 0)
      string(REPEAT " " ${pad} spaces)
    endif()
    message(STATUS "  ${name}${spaces} ${state}  ${_ACCELERATE_DOC_${name}}: ${_ACCELERATE_REASON_${name}}")
  endforeach()
  message(STATUS "")
endfunction()
