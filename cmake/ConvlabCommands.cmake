# The `convlab` subcommands register here, each beside the library that defines it; the command
# executable (cli/CMakeLists.txt, added last) composes whatever was registered. A part that a
# tree leaves out (the staff-only ones, in the student kit) simply registers nothing.
#
#   convlab_command(<library> <function>)
#     <function> is the fully qualified `void f(CLI::App& app, int& exit_code)` that adds the
#     subcommand; <library> defines it. Subcommands appear in registration order.
include_guard(GLOBAL)

function(convlab_command library function)
  if(NOT function MATCHES "^([A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "convlab_command: '${function}' is not a qualified function name")
  endif()
  set_property(GLOBAL APPEND PROPERTY CONVLAB_COMMAND_LIBRARIES "${library}")
  set_property(GLOBAL APPEND PROPERTY CONVLAB_COMMAND_FUNCTIONS "${function}")
endfunction()
