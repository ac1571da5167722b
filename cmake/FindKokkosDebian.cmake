# FindKokkosDebian: Kokkos core by header and library.
#
# Debian ships Kokkos inside Trilinos (headers in include/trilinos, library
# libtrilinos_kokkoscore) and its KokkosConfig.cmake points at a directory
# that does not exist, so find_package(Kokkos CONFIG) cannot be trusted
# there. A working upstream/Spack Kokkos config is preferred when present.
# Provides Kokkos::kokkos, KokkosDebian_FOUND, KokkosDebian_VERSION.

if(NOT TARGET Kokkos::kokkos)
  find_package(Kokkos CONFIG QUIET)
  if(TARGET Kokkos::kokkos)
    get_target_property(_kk_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
    foreach(dir IN LISTS _kk_inc)
      if(NOT dir MATCHES "\\$<" AND NOT EXISTS "${dir}")
        set(_kokkos_config_broken TRUE)
      endif()
    endforeach()
  endif()
endif()

if(TARGET Kokkos::kokkos AND NOT _kokkos_config_broken)
  set(KokkosDebian_VERSION "${Kokkos_VERSION}")
  set(KOKKOS_INCLUDE_DIR "")
  set(KOKKOS_CORE_LIBRARY "Kokkos::kokkos")
else()
  find_path(KOKKOS_INCLUDE_DIR Kokkos_Core.hpp
    HINTS ${Kokkos_ROOT} $ENV{Kokkos_ROOT} ${KOKKOS_ROOT}
    PATH_SUFFIXES include include/trilinos include/kokkos)
  find_library(KOKKOS_CORE_LIBRARY NAMES kokkoscore trilinos_kokkoscore
    HINTS ${Kokkos_ROOT} $ENV{Kokkos_ROOT} ${KOKKOS_ROOT} PATH_SUFFIXES lib lib64)
  if(KOKKOS_INCLUDE_DIR AND EXISTS "${KOKKOS_INCLUDE_DIR}/KokkosCore_config.h")
    file(STRINGS "${KOKKOS_INCLUDE_DIR}/KokkosCore_config.h" _kk_ver REGEX "^#define KOKKOS_VERSION ")
    string(REGEX MATCH "([0-9]+)" _kk_code "${_kk_ver}")
    if(_kk_code)
      math(EXPR _major "${_kk_code} / 10000")
      math(EXPR _minor "${_kk_code} / 100 % 100")
      math(EXPR _patch "${_kk_code} % 100")
      set(KokkosDebian_VERSION "${_major}.${_minor}.${_patch}")
    endif()
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(KokkosDebian
  REQUIRED_VARS KOKKOS_CORE_LIBRARY
  VERSION_VAR KokkosDebian_VERSION)

if(KokkosDebian_FOUND AND NOT TARGET Kokkos::kokkos)
  add_library(Kokkos::kokkos UNKNOWN IMPORTED)
  # SYSTEM: Debian's Kokkos 3.4 headers emit deprecation warnings under C++20.
  set_target_properties(Kokkos::kokkos PROPERTIES
    IMPORTED_LOCATION "${KOKKOS_CORE_LIBRARY}"
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${KOKKOS_INCLUDE_DIR}"
    INTERFACE_INCLUDE_DIRECTORIES "${KOKKOS_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
elseif(KokkosDebian_FOUND AND _kokkos_config_broken)
  # The broken config created Kokkos::kokkos with its missing directory:
  # point that target at what was found instead.
  set_target_properties(Kokkos::kokkos PROPERTIES
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${KOKKOS_INCLUDE_DIR}"
    INTERFACE_INCLUDE_DIRECTORIES "${KOKKOS_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${KOKKOS_CORE_LIBRARY};${CMAKE_DL_LIBS}")
endif()
mark_as_advanced(KOKKOS_INCLUDE_DIR KOKKOS_CORE_LIBRARY)
