# The dependencies gexec's headers need; shared with gexecConfig.cmake so that an
# installed gexec finds exactly what the build tree found.
include(CMakeFindDependencyMacro)
find_dependency(Boost 1.81 CONFIG COMPONENTS json)
find_dependency(dlpack CONFIG)
find_dependency(Threads)
