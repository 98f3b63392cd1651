# `make install` (cmake --install, PREFIX and DESTDIR) and the tree `make deb` packages
# (docs/design/0028-packaging.md):
#   PREFIX/bin/sluice                     stripped; its RUNPATH is $ORIGIN/../lib/sluice
#   PREFIX/lib/sluice/libduckdb.so        the DuckDB sluice was built with
#   PREFIX/lib/debug/.build-id/xx/y.debug sluice's debug information (gdb finds it by build id)
#   PREFIX/lib/systemd/system/sluice.service
#   SYSCONFDIR/sluice/sluice.yaml         /etc with PREFIX /usr; never overwritten
#   PREFIX/share/doc/sluice/              README.md and the docs a server's user reads
# Paths inside the unit are the install-time prefix's, so `--prefix` at install time works.
include_guard(GLOBAL)

install(TARGETS sluice RUNTIME DESTINATION bin)
install(FILES ${DUCKDB_LIBRARY} DESTINATION lib/sluice
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(FILES README.md docs/config.md docs/install.md docs/pipelines.md docs/queries.md
              docs/sinks.md docs/tables.md docs/cluster.md
        DESTINATION share/doc/sluice)

install(CODE "
  set(_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(_root \"\$ENV{DESTDIR}\")
  if(_prefix STREQUAL \"/usr\")
    set(_etc /etc)
  else()
    set(_etc \"\${_prefix}/etc\")
  endif()
  # sluice's debug information to a file of its own, named by the build id, then stripped.
  set(_bin \"\${_root}\${_prefix}/bin/sluice\")
  execute_process(COMMAND readelf -n \"\${_bin}\" OUTPUT_VARIABLE _notes)
  string(REGEX MATCH \"Build ID: ([0-9a-f]+)\" _ \"\${_notes}\")
  set(_id \"\${CMAKE_MATCH_1}\")
  if(NOT _id)
    message(FATAL_ERROR \"\${_bin} has no build id\")
  endif()
  string(SUBSTRING \"\${_id}\" 0 2 _id_dir)
  string(SUBSTRING \"\${_id}\" 2 -1 _id_rest)
  set(_debug \"\${_root}\${_prefix}/lib/debug/.build-id/\${_id_dir}/\${_id_rest}.debug\")
  file(MAKE_DIRECTORY \"\${_root}\${_prefix}/lib/debug/.build-id/\${_id_dir}\")
  message(STATUS \"Debug information: \${_debug}\")
  execute_process(COMMAND ${CMAKE_OBJCOPY} --only-keep-debug --compress-debug-sections=zlib
                          \"\${_bin}\" \"\${_debug}\" COMMAND_ERROR_IS_FATAL ANY)
  file(CHMOD \"\${_debug}\" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  execute_process(COMMAND ${CMAKE_STRIP} --strip-all \"\${_bin}\" COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${CMAKE_OBJCOPY} --strip-unneeded
                          \"\${_root}\${_prefix}/lib/sluice/libduckdb.so\" COMMAND_ERROR_IS_FATAL ANY)

  # The unit, with this prefix's paths.
  set(SLUICE_BIN \"\${_prefix}/bin/sluice\")
  set(SLUICE_CONFIG \"\${_etc}/sluice/sluice.yaml\")
  set(SLUICE_DOC \"\${_prefix}/share/doc/sluice\")
  configure_file(\"${PROJECT_SOURCE_DIR}/packaging/sluice.service.in\"
                 \"${PROJECT_BINARY_DIR}/packaging/sluice.service\" @ONLY)
  file(INSTALL \"${PROJECT_BINARY_DIR}/packaging/sluice.service\"
       DESTINATION \"\${_prefix}/lib/systemd/system\")

  # The config file: a user's edits are never overwritten; a new default goes beside it.
  if(EXISTS \"\${_root}\${_etc}/sluice/sluice.yaml\")
    file(READ \"\${_root}\${_etc}/sluice/sluice.yaml\" _old)
    file(READ \"${PROJECT_SOURCE_DIR}/packaging/sluice.yaml\" _new)
    if(NOT _old STREQUAL _new)
      message(STATUS \"Kept \${_root}\${_etc}/sluice/sluice.yaml; the new default is sluice.yaml.new\")
      configure_file(\"${PROJECT_SOURCE_DIR}/packaging/sluice.yaml\"
                     \"\${_root}\${_etc}/sluice/sluice.yaml.new\" COPYONLY)
    endif()
  else()
    file(INSTALL \"${PROJECT_SOURCE_DIR}/packaging/sluice.yaml\"
         DESTINATION \"\${_etc}/sluice\"
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endif()
")
